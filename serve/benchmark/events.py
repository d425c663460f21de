"""The benchmark's event stream (`run --events`): how a run in a pod reports to a program outside.

A run inside the cluster has one channel out that needs no volume, no exec and no extra
permissions: its stdout, which the Kubernetes API returns as the pod's log. With `--events` every
stdout line is one JSON object, written here and read back here (one module owns both sides):

    {"event": "progress", "done": 120, "total": 400, "rate": 3.9, "p50_ttft_ms": 212.4, "subrun": 1, "subruns": 2}
    {"event": "summary", "summary": {...Contract 6 summary.json...}}
    {"event": "records", "part": 1, "parts": 3, "data": "<base64 of gzip(requests.jsonl)>"}
    {"event": "end", "code": 0}

`rate` is requests completed per second over the last RATE_WINDOW_S seconds of this sub-run (a
sweep's rate), or since it started when that is shorter; `p50_ttft_ms` is over the requests
completed so far in this sub-run. The records travel gzip-compressed and base64 in
parts of at most PART_CHARS characters, so no log line is long enough for a container runtime to
split it. Lines that are not events (a warning a library printed) are ignored by the reader.

Every line is standard JSON both ways (serve.benchmark.runfiles): a NaN or an infinity is refused
when written and when read, so what a pod sends cannot put one into summary.json here.
Standard library only: this file runs in the serving image (it is one of job.RUN_FILES).
"""

from __future__ import annotations

import base64
import gzip
import io
import time
import zlib
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Mapping, Optional, Sequence

from serve.benchmark.runfiles import dumps, loads

PROGRESS_EVERY_S = 1.0
# After the first minute, one line every 5 s: a 4-hour run's progress stays a few hundred KB of log.
SLOWER_AFTER_S, SLOWER_EVERY_S = 60.0, 5.0
RATE_WINDOW_S = 5.0
PART_CHARS = 8000
MAX_RECORDS_BYTES = 256 * 1024 * 1024  # decompressed: a bound against a hostile or broken log


class EventsError(ValueError):
    """A log that does not carry a complete run (cut short, a part missing, not gzip)."""


def _median(values: Sequence[float]) -> Optional[float]:
    if not values:
        return None
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


class ProgressReporter:
    """Counts finished requests and writes a progress event at most every PROGRESS_EVERY_S (every
    SLOWER_EVERY_S after the first SLOWER_AFTER_S).

    Called from the load generator's event loop once per finished request, so it only appends
    and compares clocks; the median is computed when a line is written.
    """

    def __init__(self, write: Callable[[str], None], total: int, subruns: int = 1,
                 clock: Callable[[], float] = time.monotonic, every_s: float = PROGRESS_EVERY_S):
        self._write, self._clock, self._every = write, clock, every_s
        self.total, self.subruns = total, subruns
        self.done = 0
        self.subrun = 1
        self._ttfts: list[float] = []
        self._finished_at: list[float] = []
        self._started = self._began = clock()
        self._last_line = float("-inf")

    def start_subrun(self, number: int) -> None:
        """A new rate of a sweep: its rate and median start afresh."""
        self.subrun = number
        self._ttfts = []
        self._finished_at = []
        self._started = self._clock()

    def __call__(self, record: Mapping[str, Any]) -> None:
        now = self._clock()
        self.done += 1
        self._finished_at.append(now)
        if record.get("ok") and isinstance(record.get("ttft_ms"), (int, float)):
            self._ttfts.append(float(record["ttft_ms"]))
        every = self._every if now - self._began < SLOWER_AFTER_S else max(self._every, SLOWER_EVERY_S)
        if now - self._last_line >= every or self.done == self.total:
            self.flush(now)

    def snapshot(self, now: Optional[float] = None) -> dict[str, Any]:
        now = self._clock() if now is None else now
        recent = [t for t in self._finished_at[-10_000:] if now - t <= RATE_WINDOW_S]
        # Over the window, or over the time since the (sub-)run started when that is shorter.
        span = min(RATE_WINDOW_S, max(now - self._started, 1.0))
        median = _median(self._ttfts)
        return {"event": "progress", "done": self.done, "total": self.total,
                "rate": round(len(recent) / span, 3),
                "p50_ttft_ms": None if median is None else round(median, 2),
                "subrun": self.subrun, "subruns": self.subruns}

    def flush(self, now: Optional[float] = None) -> None:
        snapshot = self.snapshot(now)
        self._last_line = self._clock() if now is None else now
        self._write(dumps(snapshot))


def progress_words(progress: Mapping[str, Any]) -> str:
    """"120/400 requests · 3.9 req/s now · p50 TTFT 212 ms · rate 1 of 2": a progress event for people."""
    words = [f"{int(progress.get('done') or 0)}/{int(progress.get('total') or 0)} requests"]
    rate, p50, subruns = progress.get("rate"), progress.get("p50_ttft_ms"), progress.get("subruns")
    if isinstance(rate, (int, float)):
        words.append(f"{rate:.1f} req/s now")
    if isinstance(p50, (int, float)):
        words.append(f"p50 TTFT {p50:.0f} ms")
    if isinstance(subruns, int) and subruns > 1:
        words.append(f"rate {progress.get('subrun')} of {subruns}")
    return " · ".join(words)


def write_result(out: IO[str], summary: Mapping[str, Any], records: Sequence[Mapping[str, Any]], code: int) -> None:
    """The summary, the records in parts, and the end marker (the last line of a complete run)."""
    out.write(dumps({"event": "summary", "summary": summary}) + "\n")
    jsonl = "".join(dumps(record) + "\n" for record in records).encode("utf-8")
    data = base64.b64encode(gzip.compress(jsonl, compresslevel=6)).decode("ascii")
    parts = [data[i:i + PART_CHARS] for i in range(0, len(data), PART_CHARS)] or [""]
    for number, part in enumerate(parts, start=1):
        out.write(dumps({"event": "records", "part": number, "parts": len(parts), "data": part}) + "\n")
    out.write(dumps({"event": "end", "code": code}) + "\n")
    out.flush()


def _events(text: str) -> list[dict[str, Any]]:
    found = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            document = loads(line)
        except ValueError:
            continue
        if isinstance(document, dict) and isinstance(document.get("event"), str):
            found.append(document)
    return found


def last_progress(text: str) -> Optional[dict[str, Any]]:
    """The newest progress event in a (tail of a) log, or None."""
    progress = [e for e in _events(text) if e["event"] == "progress"]
    return progress[-1] if progress else None


@dataclass
class RunResult:
    """What a finished run sent back: its summary, every request's record, its exit code."""

    summary: dict[str, Any]
    records: list[dict[str, Any]] = field(default_factory=list)
    code: int = 0


def read_result(text: str) -> RunResult:
    """The run's result from its whole log; EventsError names what is missing."""
    events = _events(text)
    ends = [e for e in events if e["event"] == "end"]
    summaries = [e for e in events if e["event"] == "summary" and isinstance(e.get("summary"), dict)]
    if not ends:
        raise EventsError("the benchmark's log has no end marker: the run was cut short or its log was lost")
    if not summaries:
        raise EventsError("the benchmark's log has no summary")
    parts = [e for e in events if e["event"] == "records"]
    expected = parts[0].get("parts") if parts else None
    if not isinstance(expected, int) or expected < 1:
        raise EventsError("the benchmark's log has no request records")
    by_number = {e.get("part"): e["data"] for e in parts if isinstance(e.get("data"), str)}
    missing = [n for n in range(1, expected + 1) if n not in by_number]
    if missing:
        raise EventsError(f"the benchmark's log lacks {len(missing)} of {expected} parts of the request records "
                          "(was the log rotated? run fewer requests)")
    try:
        compressed = base64.b64decode("".join(by_number[n] for n in range(1, expected + 1)), validate=True)
        with gzip.GzipFile(fileobj=io.BytesIO(compressed)) as stream:
            jsonl = stream.read(MAX_RECORDS_BYTES + 1)
    except (ValueError, OSError, EOFError, zlib.error) as exc:
        raise EventsError(f"the benchmark's request records do not decode: {exc}") from None
    if len(jsonl) > MAX_RECORDS_BYTES:
        raise EventsError(f"the benchmark's request records are larger than {MAX_RECORDS_BYTES} bytes")
    try:
        records = [loads(line) for line in jsonl.decode("utf-8").splitlines() if line.strip()]
    except ValueError as exc:
        raise EventsError(f"the benchmark's request records are not JSON lines: {exc}") from None
    if not all(isinstance(r, dict) for r in records):
        raise EventsError("the benchmark's request records are not JSON objects")
    code = ends[-1].get("code")
    return RunResult(summaries[-1]["summary"], records, code if isinstance(code, int) else 1)

