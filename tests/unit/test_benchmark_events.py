"""The benchmark's event stream (serve/benchmark/events.py): progress lines on an injected clock,
the result written and read back exactly, and a reader that refuses a log that is not a whole run."""

from __future__ import annotations

import base64
import gzip
import io
import json
import random
from pathlib import Path
from typing import Any

import pytest

from serve.benchmark.__main__ import main
from serve.benchmark.events import (
    PART_CHARS,
    EventsError,
    ProgressReporter,
    last_progress,
    read_result,
    write_result,
)
from tests.fakes.openai_server import OpenAIServer


class Clock:
    def __init__(self, now: float = 100.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def _record(index: int, ok: bool = True, ttft_ms: Any = None) -> dict[str, Any]:
    return {"index": index, "ok": ok, "ttft_ms": ttft_ms}


# ---- progress ----

def test_progress_lines_count_rate_over_the_window_and_the_median_of_ok_ttfts_only():
    lines: list[str] = []
    clock = Clock(90.0)  # started 10 s before the first answer: every rate is over the 5 s window
    reporter = ProgressReporter(lines.append, total=6, clock=clock, every_s=1.0)

    def finish(at: float, record: dict[str, Any]) -> None:
        clock.now = at
        reporter(record)

    finish(100.0, _record(0, True, 10.0))    # the first one is always reported
    finish(100.3, _record(1, False, 999.0))  # a failure's TTFT never counts
    finish(100.6, _record(2, True, 30.0))
    finish(101.0, _record(3, True, 20.0))    # a second after the last line
    finish(106.5, _record(4, True, None))    # ok without a TTFT: counted as done, not in the median
    finish(106.6, _record(5, True, 40.0))    # within the interval, but the last request: reported
    events = [json.loads(line) for line in lines]
    assert events == [
        {"event": "progress", "done": 1, "total": 6, "rate": 0.2, "p50_ttft_ms": 10.0, "subrun": 1, "subruns": 1},
        {"event": "progress", "done": 4, "total": 6, "rate": 0.8, "p50_ttft_ms": 20.0, "subrun": 1, "subruns": 1},
        # 5.5 s after 101.0: only the requests of the last 5 s make the rate
        {"event": "progress", "done": 5, "total": 6, "rate": 0.2, "p50_ttft_ms": 20.0, "subrun": 1, "subruns": 1},
        {"event": "progress", "done": 6, "total": 6, "rate": 0.4, "p50_ttft_ms": 25.0, "subrun": 1, "subruns": 1},
    ]


def test_early_in_a_subrun_the_rate_is_over_the_time_since_it_started_but_at_least_a_second():
    lines: list[str] = []
    clock = Clock(0.0)
    reporter = ProgressReporter(lines.append, total=100, subruns=2, clock=clock, every_s=0.0)
    reporter.start_subrun(1)
    clock.now = 0.5
    reporter(_record(0, True, 1.0))  # half a second in: over one second, not over five (nor half)
    clock.now = 2.5
    reporter(_record(1, True, 1.0))  # two answers in 2.5 s
    clock.now = 20.0
    reporter.start_subrun(2)  # the next rate of a sweep: the first rate's answers do not count
    clock.now = 22.0
    reporter(_record(0, True, 1.0))
    assert [json.loads(line)["rate"] for line in lines] == [1.0, 0.8, 0.5]


def test_progress_writes_at_most_one_line_per_interval():
    lines: list[str] = []
    clock = Clock(0.0)
    reporter = ProgressReporter(lines.append, total=1000, clock=clock, every_s=1.0)
    for index in range(100):  # ten requests a second for ten seconds
        clock.now = index * 0.1
        reporter(_record(index, True, 5.0))
    dones = [json.loads(line)["done"] for line in lines]
    assert dones == [1, 11, 21, 31, 41, 51, 61, 71, 81, 91]
    reporter.flush()  # the run's own last word, whatever the interval
    assert json.loads(lines[-1])["done"] == 100 and len(lines) == 11


def test_after_the_first_minute_progress_comes_every_five_seconds():
    lines: list[str] = []
    clock = Clock(0.0)
    reporter = ProgressReporter(lines.append, total=10_000, clock=clock, every_s=1.0)
    for index in range(1200):  # ten requests a second for two minutes
        clock.now = index * 0.1
        reporter(_record(index, True, 5.0))
    times = [json.loads(line)["done"] / 10 for line in lines]
    assert len([t for t in times if t < 60]) == 60  # once a second at first
    assert len([t for t in times if t >= 60]) == 12  # then once every 5 s


def test_a_new_subrun_has_its_own_median_and_says_which_it_is():
    lines: list[str] = []
    clock = Clock(0.0)
    reporter = ProgressReporter(lines.append, total=4, subruns=2, clock=clock, every_s=0.0)
    reporter.start_subrun(1)
    reporter(_record(0, True, 100.0))
    reporter(_record(1, True, 300.0))
    reporter.start_subrun(2)
    reporter(_record(0, True, 7.0))
    last = json.loads(lines[-1])
    assert (last["subrun"], last["subruns"], last["done"], last["p50_ttft_ms"]) == (2, 2, 3, 7.0)


def test_no_ok_ttft_yet_is_none_not_zero():
    lines: list[str] = []
    reporter = ProgressReporter(lines.append, total=3, clock=Clock())
    reporter(_record(0, False, None))
    assert json.loads(lines[0])["p50_ttft_ms"] is None


# ---- the result, written and read back ----

def _written(summary: dict[str, Any], records: list[dict[str, Any]], code: int = 0) -> str:
    out = io.StringIO()
    write_result(out, summary, records, code)
    return out.getvalue()


SUMMARY = {"requests": {"sent": 3, "completed": 2, "failed": 1}, "ttft_ms": {"p50": 12.5, "p99": None},
           "errors": {"http": 1}, "load": {"rate": 2.0}, "workload": {"model": "qwen3.5-9b"}}


def test_the_summary_and_records_come_back_exactly():
    records = [{"index": 0, "ok": True, "ttft_ms": 12.25, "itl_ms": [1.0, 2.5], "error": None},
               {"index": 1, "ok": True, "ttft_ms": 12.75, "itl_ms": [], "error": None},
               {"index": 2, "ok": False, "ttft_ms": None, "status": 500, "error": "injected failure"}]
    text = _written(SUMMARY, records, 0)
    lines = [json.loads(line) for line in text.splitlines()]
    assert [line["event"] for line in lines] == ["summary", "records", "end"]
    result = read_result(text)
    assert result.summary == SUMMARY and result.records == records and result.code == 0


def test_a_large_record_set_travels_in_several_parts_and_comes_back_whole():
    rng = random.Random(7)  # random text barely compresses: many parts
    records = [{"index": i, "ok": rng.random() > 0.1, "ttft_ms": rng.random() * 500,
                "error": "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(60))}
               for i in range(3000)]
    text = _written(SUMMARY, records, 0)
    parts = [json.loads(line) for line in text.splitlines() if '"records"' in line]
    assert len(parts) >= 5 and {p["parts"] for p in parts} == {len(parts)}
    assert [p["part"] for p in parts] == list(range(1, len(parts) + 1))
    assert all(len(p["data"]) <= PART_CHARS for p in parts)
    assert max(len(line) for line in text.splitlines()) < PART_CHARS + 100  # no line a runtime would split
    assert read_result(text).records == records


def test_unicode_and_control_characters_in_error_texts_survive():
    nasty = "naïve — 日本語 😀 \x00\x07\x1b[31m\r\n\t\u2028\u2029 \"quoted\" \\ back\ud800slash"
    records = [{"index": 0, "ok": False, "error": nasty}, {"index": 1, "ok": False, "error": nasty[::-1]}]
    summary = {**SUMMARY, "errors": {nasty: 2}}
    text = _written(summary, records, 0)
    assert len(text.splitlines()) == 3  # the newlines and line separators stayed inside their strings
    result = read_result(text)
    assert result.records == records and result.summary == summary


def test_no_records_and_the_exit_code_come_back():
    result = read_result(_written(SUMMARY, [], 1))
    assert result.records == [] and result.code == 1


def test_lines_that_are_not_events_are_ignored_wherever_they_are():
    records = [{"index": i, "error": "x" * (i % 50), "seed": random.Random(i).random()} for i in range(1500)]
    lines = _written(SUMMARY, records, 0).splitlines()
    assert sum('"records"' in line for line in lines) >= 2
    noisy = ["DeprecationWarning: something a library printed",
             json.dumps({"event": "progress", "done": 1500, "total": 1500, "rate": 1.0, "p50_ttft_ms": 3.0,
                         "subrun": 1, "subruns": 1}),
             lines[0], lines[1],
             "WARNING asyncio: Unclosed client session",  # between two parts
             '{"level": "warning", "msg": "a JSON line that is no event"}',
             "{not json at all",
             *lines[2:-1], "   ", lines[-1], "Traceback? no: a line after the end"]
    result = read_result("\n".join(noisy))
    assert result.records == records and result.summary == SUMMARY


# ---- a log that is not a whole run ----

def _lines(count: int = 1500) -> list[str]:
    records = [{"index": i, "seed": random.Random(i).random()} for i in range(count)]
    return _written(SUMMARY, records, 0).splitlines()


def test_a_log_without_its_end_marker_is_refused():
    with pytest.raises(EventsError, match="no end marker"):
        read_result("\n".join(_lines()[:-1]))


def test_a_log_without_its_summary_is_refused():
    with pytest.raises(EventsError, match="no summary"):
        read_result("\n".join(_lines()[1:]))


def test_a_missing_part_is_refused_with_how_many_are_missing():
    lines = _lines()
    parts = [i for i, line in enumerate(lines) if '"records"' in line]
    assert len(parts) >= 3
    del lines[parts[1]]
    with pytest.raises(EventsError, match=f"lacks 1 of {len(parts)} parts"):
        read_result("\n".join(lines))


def test_no_records_at_all_is_refused():
    lines = [line for line in _lines() if '"records"' not in line]
    with pytest.raises(EventsError, match="no request records"):
        read_result("\n".join(lines))


def _with_data(lines: list[str], data: str) -> list[str]:
    """The records re-split into parts carrying `data` (as the writer would cut it)."""
    chunks = [data[i:i + PART_CHARS] for i in range(0, len(data), PART_CHARS)]
    parts = [json.dumps({"event": "records", "part": n, "parts": len(chunks), "data": chunk})
             for n, chunk in enumerate(chunks, start=1)]
    return [lines[0], *parts, lines[-1]]


def _data(lines: list[str]) -> str:
    return "".join(json.loads(line)["data"] for line in lines if '"records"' in line)


def test_data_that_is_not_base64_is_refused():
    lines = _lines()
    data = _data(lines)
    with pytest.raises(EventsError, match="do not decode"):
        read_result("\n".join(_with_data(lines, data[:100] + "!" + data[101:])))
    with pytest.raises(EventsError, match="do not decode"):
        read_result("\n".join(_with_data(lines, data[:-3])))  # cut: the padding no longer adds up


def test_records_whose_checksum_does_not_match_are_refused():
    lines = _lines()
    compressed = bytearray(base64.b64decode(_data(lines)))
    compressed[-8] ^= 0xFF  # the gzip trailer's CRC32
    with pytest.raises(EventsError, match="do not decode"):
        read_result("\n".join(_with_data(lines, base64.b64encode(bytes(compressed)).decode("ascii"))))


def test_valid_base64_of_a_corrupt_gzip_stream_is_refused():
    """A corrupt deflate stream raises zlib.error (neither ValueError nor OSError): EventsError too."""
    lines = _lines()
    compressed = bytearray(base64.b64decode(_data(lines)))
    assert compressed[:2] == b"\x1f\x8b" and compressed[3] == 0  # gzip, no optional header fields
    compressed[10] |= 0b110  # the first deflate block's type: 3, which is reserved
    with pytest.raises(EventsError, match="do not decode"):
        read_result("\n".join(_with_data(lines, base64.b64encode(bytes(compressed)).decode("ascii"))))


def test_records_that_are_not_json_objects_are_refused():
    lines = _lines()
    for payload in (b"not json\n", b"[1, 2]\n"):
        data = base64.b64encode(gzip.compress(payload)).decode("ascii")
        with pytest.raises(EventsError, match="not JSON"):
            read_result("\n".join(_with_data(lines, data)))


# ---- the newest progress in a log tail ----

def test_last_progress_is_the_newest_complete_progress_line():
    def progress(done: int) -> str:
        return json.dumps({"event": "progress", "done": done, "total": 50, "rate": 2.0, "p50_ttft_ms": 1.0,
                           "subrun": 1, "subruns": 1})

    tail = "\n".join(["s\u00e9ance warning", progress(10), "a warning", progress(20),
                      '{"event": "progress", "done": 3'])  # a line cut by the tail (or still being written)
    assert last_progress(tail) == json.loads(progress(20))
    assert last_progress("\n".join([progress(20), *_lines(10)])) == json.loads(progress(20))
    assert last_progress("nothing yet\n") is None and last_progress("") is None


# ---- the real CLI writes what the reader reads ----

def test_the_cli_with_events_prints_only_events_that_carry_its_own_files(tmp_path: Path, capsys):
    out = tmp_path / "run"
    with OpenAIServer("m", output_tokens=4) as server:
        code = main(["run", "--endpoint", server.base_url, "--model", "m", "--concurrency", "2",
                     "--requests", "6", "--input-tokens", "8", "--output-tokens", "4", "--out", str(out),
                     "--events"])
    stdout = capsys.readouterr().out
    assert code == 0
    events = [json.loads(line)["event"] for line in stdout.splitlines()]  # every line is an event
    assert events[0] == "progress" and events[-1] == "end" and "summary" in events
    result = read_result(stdout)
    assert result.summary == json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert result.records == [json.loads(line) for line in
                              (out / "requests.jsonl").read_text(encoding="utf-8").splitlines()]
    assert last_progress(stdout)["done"] == 6  # type: ignore[index]
