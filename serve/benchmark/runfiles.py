"""A run directory's files (Contract 6: requests.jsonl and summary.json): written and read back here.

Both sides hold to standard JSON (RFC 8259): Python's json writes NaN and Infinity by default,
which no other JSON reader accepts and which once reached summary.json from an endpoint's
miscounted tokens, so `dumps` refuses them and `loads` refuses them back (with numbers that only
parse to infinity, like 1e400, and integers too long to be a count, like a 5000-digit one).

`read_run` also checks the shapes `compare` computes with, so a hand-edited, truncated or hostile
file is one line naming the file, the line and the key (a CompareError: exit 2), never a traceback
from deep inside a plot. Standard library only at import (one of job.RUN_FILES: `run` writes with
it); reading a run uses the project's safe reader, imported when a run is read.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from serve.benchmark.summary import CompareError

MAX_RECORDS_BYTES = 512 * 1024 * 1024
MAX_SUMMARY_BYTES = 64 * 1024 * 1024
MAX_INT_DIGITS = 100  # far beyond any count, seed or index a run writes; float() of it is finite
STATS = ("mean", "p50", "p90", "p95", "p99")
_SHOWN = 40


def dumps(document: Any, indent: Optional[int] = None) -> str:
    """Standard JSON only: a NaN or an infinity anywhere is a ValueError, not `NaN` in a file."""
    return json.dumps(document, indent=indent, allow_nan=False)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not standard JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:_SHOWN]} is out of range")
    return value


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {digits} digits")
    return int(text)


def loads(text: str) -> Any:
    """Standard JSON with finite numbers and integers of at most MAX_INT_DIGITS digits; ValueError otherwise."""
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite, parse_int=_bounded_int)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def write_run(directory: Path, records: Sequence[Mapping[str, Any]], summary: Mapping[str, Any]) -> None:
    """DIR/requests.jsonl (one record a line) and DIR/summary.json."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "requests.jsonl", "w", encoding="utf-8") as handle:
        for record in records:
            handle.write(dumps(record) + "\n")
    (directory / "summary.json").write_text(dumps(summary, indent=2) + "\n", encoding="utf-8")


def _shown(value: Any) -> str:
    text = ascii(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


class _Shape:
    """Checks one document's values by key path; `problem` raises naming the place."""

    def __init__(self, place: str):
        self.place = place

    def problem(self, key: str, wanted: str, value: Any) -> CompareError:
        return CompareError(f"{self.place}: {key} must be {wanted}, got {_shown(value)}")

    def number(self, document: Mapping[str, Any], key: str, name: str, *, optional: bool = True,
               most: Optional[float] = None, present: bool = True) -> None:
        """document[key] is a non-negative number (at most `most`); null too when `optional`;
        the key may be missing only when not `present` (compare reads the summary's keys as given)."""
        if present and key not in document:
            raise CompareError(f"{self.place}: lacks {name}")
        if optional and document.get(key) is None:
            return
        self.value(document.get(key), name, optional=optional, most=most)

    def value(self, value: Any, name: str, *, optional: bool = False, most: Optional[float] = None) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (
                most is not None and value > most):
            wanted = "a non-negative number" + (f" at most {most:g}" if most is not None else "")
            raise self.problem(name, wanted + (" or null" if optional else ""), value)

    def count(self, document: Mapping[str, Any], key: str, name: str, *, optional: bool = False) -> None:
        value = document.get(key)
        if value is None and optional:
            return
        if key not in document:
            raise CompareError(f"{self.place}: lacks {name}")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.problem(name, "a non-negative integer" + (" or null" if optional else ""), value)

    def mapping(self, document: Mapping[str, Any], key: str, name: str, *, optional: bool = False
                ) -> Optional[Mapping[str, Any]]:
        value = document.get(key)
        if value is None and optional:
            return None
        if key not in document:
            raise CompareError(f"{self.place}: lacks {name}")
        if not isinstance(value, dict):
            raise self.problem(name, "an object", value)
        return value

    def stats(self, document: Mapping[str, Any], key: str, name: str) -> None:
        values = self.mapping(document, key, name)
        assert values is not None
        for stat in STATS:
            self.number(values, stat, f"{name}.{stat}")


def check_summary(summary: Any, place: str) -> dict[str, Any]:
    """The Contract 6 summary `compare` reads (and the sweep, goodput, load, workload it may have)."""
    shape = _Shape(place)
    if not isinstance(summary, dict):
        raise CompareError(f"{place}: must be a JSON object (a Contract 6 summary), got {type(summary).__name__}")
    requests = shape.mapping(summary, "requests", "requests")
    assert requests is not None
    for key in ("sent", "completed", "failed"):
        shape.count(requests, key, f"requests.{key}")
    for key in ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"):
        shape.stats(summary, key, key)
    for key in ("request_rate", "input_tokens_per_s", "output_tokens_per_s"):
        shape.number(summary, key, key, optional=False)
    shape.number(summary, "usd_per_million_output_tokens", "usd_per_million_output_tokens")
    slo = shape.mapping(summary, "slo", "slo")
    assert slo is not None
    shape.number(slo, "ttft_ms", "slo.ttft_ms")
    shape.number(slo, "tpot_ms", "slo.tpot_ms")
    shape.number(slo, "attained", "slo.attained", most=1.0)
    goodput = shape.mapping(summary, "goodput", "goodput", optional=True)
    if goodput is not None:
        shape.number(goodput, "rate", "goodput.rate")
    sweep = summary.get("sweep")
    if sweep is not None:
        if not isinstance(sweep, list):
            raise shape.problem("sweep", "a list", sweep)
        for number, point in enumerate(sweep):
            if not isinstance(point, dict):
                raise shape.problem(f"sweep[{number}]", "an object", point)
            shape.number(point, "rate", f"sweep[{number}].rate", optional=False)
            shape.stats(point, "ttft_ms", f"sweep[{number}].ttft_ms")
            shape.stats(point, "tpot_ms", f"sweep[{number}].tpot_ms")
    _check_conditions(shape, summary)
    return summary


def _check_conditions(shape: _Shape, summary: Mapping[str, Any]) -> None:
    """`load` and `workload`, which the verdict puts into words."""
    load = shape.mapping(summary, "load", "load", optional=True) or {}
    if "rate" in load:
        shape.number(load, "rate", "load.rate", optional=False)
    if "rates" in load:
        rates = load["rates"]
        if not isinstance(rates, list) or not rates:
            raise shape.problem("load.rates", "a non-empty list of numbers", rates)
        for number, rate in enumerate(rates):
            shape.value(rate, f"load.rates[{number}]")
    if "concurrency" in load:
        shape.count(load, "concurrency", "load.concurrency")
    workload = shape.mapping(summary, "workload", "workload", optional=True) or {}
    for key in ("input_tokens", "output_tokens"):
        shape.count(workload, key, f"workload.{key}", optional=True)
    for key in ("api", "preset"):
        value = workload.get(key)
        if value is not None and not isinstance(value, str):
            raise shape.problem(f"workload.{key}", "a string or null", value)


def check_record(record: Any, place: str) -> dict[str, Any]:
    """One requests.jsonl record, as far as `compare` uses it: ok, its latencies and its token count."""
    shape = _Shape(place)
    if not isinstance(record, dict):
        raise CompareError(f"{place}: must be a JSON object (one request's record), got {type(record).__name__}")
    if not isinstance(record.get("ok"), bool):
        raise shape.problem("ok", "true or false", record.get("ok"))
    for key in ("ttft_ms", "e2e_ms"):  # a completed request has both; a failed one may have neither
        shape.number(record, key, key, optional=not record["ok"], present=record["ok"])
    for key in ("prompt_tokens", "completion_tokens"):
        shape.count(record, key, key, optional=True)
    gaps = record.get("itl_ms")
    if gaps is not None:
        if not isinstance(gaps, list):
            raise shape.problem("itl_ms", "a list of numbers", gaps)
        for number, gap in enumerate(gaps):
            shape.value(gap, f"itl_ms[{number}]")
    return record


def _read_run_file(path: Path, max_bytes: int, directory: Path) -> str:
    """One file of a run, read as every file a raypd CLI reads (components.config.safe_documents:
    a regular file, bounded: a FIFO named summary.json hung `compare`)."""
    # Imported here: this module is one of job.RUN_FILES (a pod running `run` writes with it, and
    # has no raypd checkout); only `compare`, outside any pod, reads a run back.
    from components.config.safe_documents import FileRefused, read_text_file

    try:
        return read_text_file(path, max_bytes)
    except FileRefused as exc:
        if exc.missing:
            raise CompareError(f"{directory} is not a benchmark run directory: {exc.about(path.name)}") from None
        raise CompareError(exc.about(str(path))) from None


def read_run(directory: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """summary.json and requests.jsonl of one run directory, checked; CompareError names file and line."""
    summary_path, records_path = directory / "summary.json", directory / "requests.jsonl"
    summary_text = _read_run_file(summary_path, MAX_SUMMARY_BYTES, directory)
    records_text = _read_run_file(records_path, MAX_RECORDS_BYTES, directory)
    try:
        summary = check_summary(loads(summary_text), str(summary_path))
    except CompareError:
        raise
    except ValueError as exc:
        raise CompareError(f"{summary_path}: not standard JSON: {exc}") from None
    records = []
    # split("\n"), not splitlines(): a JSON string may hold a raw U+2028, which is not a line end here.
    for number, line in enumerate(records_text.split("\n"), start=1):
        if not line.strip():
            continue
        place = f"{records_path} line {number}"
        try:
            document = loads(line)
        except ValueError as exc:
            raise CompareError(f"{place}: not standard JSON: {exc}") from None
        records.append(check_record(document, place))
    return summary, records
