"""`compare` on run directories it cannot trust: exit 2, one line naming the file, line and key, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from serve.benchmark.__main__ import main
from serve.benchmark.runfiles import loads

ROOT = Path(__file__).resolve().parents[2]
EMPTY = {k: None for k in ("mean", "p50", "p90", "p95", "p99")}
SUMMARY: dict[str, Any] = {
    "requests": {"sent": 2, "completed": 2, "failed": 0}, "ttft_ms": {**EMPTY, "p50": 10.0, "p90": 12.0},
    "itl_ms": EMPTY, "tpot_ms": EMPTY, "e2e_ms": EMPTY, "request_rate": 1.0, "input_tokens_per_s": 5.0,
    "output_tokens_per_s": 4.0, "slo": {"ttft_ms": None, "tpot_ms": None, "attained": None},
    "usd_per_million_output_tokens": None, "load": {"concurrency": 1},
    "workload": {"api": "chat", "input_tokens": 20, "output_tokens": 4, "preset": None},
}
RECORD = {"index": 0, "ok": True, "ttft_ms": 10.0, "e2e_ms": 40.0, "itl_ms": [10.0, 10.0, 10.0],
          "prompt_tokens": 24, "completion_tokens": 4, "error_kind": None}
FAILED = {"index": 1, "ok": False, "ttft_ms": None, "e2e_ms": 3.0, "itl_ms": [], "prompt_tokens": None,
          "completion_tokens": None, "error_kind": "http"}
DIGITS_5000 = "9" * 5000


def write(directory: Path, summary: str, records: str) -> Path:
    directory.mkdir()
    (directory / "summary.json").write_text(summary, encoding="utf-8")
    (directory / "requests.jsonl").write_text(records, encoding="utf-8")
    return directory


def good_records(*lines: str) -> str:
    return "\n".join([json.dumps(RECORD), json.dumps(FAILED), *lines]) + "\n"


def summary_with(path: str, value: str) -> str:
    """SUMMARY's JSON with the value at dotted `path` replaced by raw JSON text (NaN, 5000 digits...)."""
    document = json.loads(json.dumps(SUMMARY))
    *parents, last = path.split(".")
    place = document
    for key in parents:
        place = place[key]
    place[last] = "@@VALUE@@"
    return json.dumps(document).replace('"@@VALUE@@"', value)


RECORD_CASES = [
    ("{not json", "line 3: not standard JSON"),
    ("[1, 2]", "line 3: must be a JSON object (one request's record), got list"),
    ('"a string"', "line 3: must be a JSON object"),
    ('{"ok": "yes"}', "line 3: ok must be true or false, got 'yes'"),
    ('{"ok": true, "ttft_ms": "fast", "e2e_ms": 1}', "line 3: ttft_ms must be a non-negative number, got 'fast'"),
    ('{"ok": true, "ttft_ms": 1}', "line 3: lacks e2e_ms"),
    ('{"ok": true, "ttft_ms": NaN, "e2e_ms": 1}', "line 3: not standard JSON: NaN is not standard JSON"),
    ('{"ok": true, "ttft_ms": -Infinity, "e2e_ms": 1}', "line 3: not standard JSON: -Infinity"),
    ('{"ok": true, "ttft_ms": 1e400, "e2e_ms": 1}', "line 3: not standard JSON: the number 1e400 is out of range"),
    ('{"ok": true, "ttft_ms": -5, "e2e_ms": 1}', "line 3: ttft_ms must be a non-negative number, got -5"),
    ('{"ok": true, "ttft_ms": 1, "e2e_ms": 2, "completion_tokens": 2.5}',
     "line 3: completion_tokens must be a non-negative integer or null, got 2.5"),
    ('{"ok": true, "ttft_ms": 1, "e2e_ms": 2, "completion_tokens": ' + DIGITS_5000 + "}",
     "line 3: not standard JSON: an integer of 5000 digits"),
    ('{"ok": true, "ttft_ms": 1, "e2e_ms": 2, "itl_ms": [1, "x"]}', "line 3: itl_ms[1] must be a non-negative number"),
    ('{"ok": true, "ttft_ms": 1, "e2e_ms": 2, "itl_ms": {"a": 1}}', "line 3: itl_ms must be a list of numbers"),
    ("[" * 100_000 + "]" * 100_000, "line 3: not standard JSON: nested too deeply"),
    ('{"ok": "\\n\\ud800$(rm -rf /)\\u001b[31m"}', "line 3: ok must be true or false, got '\\n\\ud800$(rm -rf /)"),
]


@pytest.mark.parametrize("line, message", RECORD_CASES, ids=[m[8:48] for _, m in RECORD_CASES])
def test_a_malformed_record_exits_2_naming_the_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             line: str, message: str) -> None:
    good = write(tmp_path / "good", json.dumps(SUMMARY), good_records())
    bad = write(tmp_path / "bad", json.dumps(SUMMARY), good_records(line))
    assert main(["compare", str(good), str(bad), "--out", str(tmp_path / "report")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"benchmark: {bad / 'requests.jsonl'} {message}"), err
    assert not (tmp_path / "report").exists()  # nothing half-written


SUMMARY_CASES = [
    ("[1, 2, 3]", "must be a JSON object (a Contract 6 summary), got list"),
    ("{}", "lacks requests"),
    ("{broken", "not standard JSON: Expecting property name enclosed in double quotes: line 1 column 2"),
    (json.dumps({k: v for k, v in SUMMARY.items() if k != "ttft_ms"}), "lacks ttft_ms"),
    (json.dumps({**SUMMARY, "ttft_ms": {"p50": 1}}), "lacks ttft_ms.mean"),
    (summary_with("ttft_ms.p90", '"slow"'), "ttft_ms.p90 must be a non-negative number or null, got 'slow'"),
    (summary_with("ttft_ms.p90", "NaN"), "not standard JSON: NaN is not standard JSON"),
    (summary_with("output_tokens_per_s", "Infinity"), "not standard JSON: Infinity is not standard JSON"),
    (summary_with("input_tokens_per_s", "-3.5"), "input_tokens_per_s must be a non-negative number, got -3.5"),
    (summary_with("requests.completed", DIGITS_5000), "not standard JSON: an integer of 5000 digits"),
    (summary_with("requests.completed", "1.5"), "requests.completed must be a non-negative integer, got 1.5"),
    (summary_with("slo.attained", "2"), "slo.attained must be a non-negative number at most 1 or null, got 2"),
    (summary_with("usd_per_million_output_tokens", "true"), "usd_per_million_output_tokens must be a non-negative"),
    (summary_with("load", '{"rate": "fast"}'), "load.rate must be a non-negative number, got 'fast'"),
    (summary_with("load", '{"rates": [1, null]}'), "load.rates[1] must be a non-negative number, got None"),
    (summary_with("load", '{"concurrency": -1}'), "load.concurrency must be a non-negative integer, got -1"),
    (summary_with("workload", '{"api": 7}'), "workload.api must be a string or null, got 7"),
    (summary_with("workload", "[]"), "workload must be an object, got []"),
    (json.dumps({**SUMMARY, "goodput": {"rate": "x"}}), "goodput.rate must be a non-negative number or null"),
    (json.dumps({**SUMMARY, "sweep": {"rate": 1}}), "sweep must be a list"),
    (json.dumps({**SUMMARY, "sweep": [{"rate": 1, "ttft_ms": EMPTY}]}), "lacks sweep[0].tpot_ms"),
    (summary_with("ttft_ms.p99", "1" + "0" * 99), "ttft_ms.p99"),  # 100 digits parse, but not a latency
]


@pytest.mark.parametrize("text, message", SUMMARY_CASES, ids=[m[:40] for _, m in SUMMARY_CASES])
def test_a_malformed_summary_exits_2_naming_the_file_and_key(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             text: str, message: str) -> None:
    good = write(tmp_path / "good", json.dumps(SUMMARY), good_records())
    bad = write(tmp_path / "bad", text, good_records())
    code = main(["compare", str(good), str(bad), "--out", str(tmp_path / "report")])
    err = capsys.readouterr().err
    if message == "ttft_ms.p99":  # a huge but finite latency is a number: compare shows it, it does not crash
        assert code == 0, err
        return
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"benchmark: {bad / 'summary.json'}: {message}"), err


def test_well_formed_runs_still_compare_and_what_run_writes_reads_back(tmp_path: Path) -> None:
    a = write(tmp_path / "a", json.dumps(SUMMARY), good_records())
    b = write(tmp_path / "b", json.dumps({**SUMMARY, "goodput": {"rate": None}, "sweep": []}), good_records())
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "report")]) == 0
    assert (tmp_path / "report" / "report.html").exists()
    assert loads('{"a": [1, 2.5, null, true, "\\u2028"]}') == {"a": [1, 2.5, None, True, "\u2028"]}


def test_the_module_entry_point_prints_one_line_for_a_5000_digit_integer(tmp_path: Path) -> None:
    good = write(tmp_path / "good", json.dumps(SUMMARY), good_records())
    bad = write(tmp_path / "bad", json.dumps(SUMMARY), good_records('{"ok": true, "ttft_ms": ' + DIGITS_5000 + "}"))
    result = subprocess.run([sys.executable, "-m", "serve.benchmark", "compare", str(good), str(bad), "--out",
                             str(tmp_path / "r")], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 2, result.stderr
    expected = f"benchmark: {bad / 'requests.jsonl'} line 3: not standard JSON: an integer of 5000 digits\n"
    assert result.stderr == expected
