"""An endpoint that miscounts its tokens: the benchmark never turns its numbers into results.

The fake server (tests/fakes/openai_server.py) answers with the usage object replaced, as a
miscounting server or proxy would send it (Python's json writes NaN and Infinity as such). Every
such answer must be a failed request with a reason, and every file a run writes standard JSON.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from serve.benchmark.__main__ import main
from serve.benchmark.events import EventsError, read_result
from serve.benchmark.loadgen import LoadConfig, run_load
from serve.benchmark.runfiles import dumps
from serve.benchmark.summary import finite_ratio, summarize
from serve.benchmark.workload import synthetic_workload
from tests.fakes.openai_server import OpenAIServer
from tests.patience import PATIENCE_S

MODEL = "bench-model"
OUTPUT_TOKENS = 4


def standard_json(text: str) -> Any:
    """json.loads that refuses NaN, Infinity and numbers that overflow to them (RFC 8259 JSON)."""
    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} in a file the benchmark wrote")

    def finite(text: str) -> float:
        value = float(text)
        assert math.isfinite(value), f"{text} in a file the benchmark wrote"
        return value

    return json.loads(text, parse_constant=refuse, parse_float=finite)


def replaced(key: str, value: Any) -> Callable[[dict[str, int]], Any]:
    return lambda usage: {**usage, key: value}


def without(key: str) -> Callable[[dict[str, int]], Any]:
    return lambda usage: {k: v for k, v in usage.items() if k != key}


HOSTILE = [
    (replaced("prompt_tokens", -25), "prompt_tokens -25, a negative count"),
    (replaced("completion_tokens", -1), "completion_tokens -1, a negative count"),
    (replaced("completion_tokens", 4.0), "completion_tokens 4.0, not an integer"),
    (replaced("prompt_tokens", 10 ** 30), "prompt_tokens 1000000000000000000000000000000, more than"),
    (replaced("completion_tokens", float("nan")), "completion_tokens nan, not an integer"),
    (replaced("prompt_tokens", float("inf")), "prompt_tokens inf, not an integer"),
    (replaced("completion_tokens", "NaN"), "completion_tokens 'NaN', not an integer"),
    (replaced("prompt_tokens", "Infinity"), "prompt_tokens 'Infinity', not an integer"),
    (replaced("completion_tokens", True), "completion_tokens True, not an integer"),
    (replaced("completion_tokens", None), "completion_tokens None, not an integer"),
    (without("completion_tokens"), "usage lacks completion_tokens"),
    (without("prompt_tokens"), "usage lacks prompt_tokens"),
    (lambda usage: [usage], "usage is [{"),
    (lambda usage: "12 tokens", "usage is '12 tokens', not an object"),
    (replaced("completion_tokens", 0), "completion_tokens 0, fewer than the 4 content chunks"),
    (replaced("completion_tokens", 3), "completion_tokens 3, fewer than the 4 content chunks"),
    (replaced("completion_tokens", OUTPUT_TOKENS + 1), f"completion_tokens 5, more than the {OUTPUT_TOKENS} possible"),
    (replaced("completion_tokens", "\n\ud800$(reboot)"), "completion_tokens '\\n\\ud800$(reboot)', not an integer"),
]


def load(server: OpenAIServer, count: int = 3, api: str = "chat") -> list[dict[str, Any]]:
    # A connect that a loaded machine's scheduler delays is not what these tests are about.
    config = LoadConfig(server.url, MODEL, api=api, concurrency=2, connect_timeout_s=PATIENCE_S)
    return asyncio.run(run_load(config, synthetic_workload(count, 20, OUTPUT_TOKENS)))


@pytest.mark.slow
@pytest.mark.parametrize("usage, reason", HOSTILE, ids=[reason[:40] for _, reason in HOSTILE])
def test_usage_that_cannot_be_right_fails_the_request_with_the_reason(usage: Callable[[dict[str, int]], Any],
                                                                     reason: str) -> None:
    with OpenAIServer(MODEL, output_tokens=OUTPUT_TOKENS, usage=usage) as server:
        records = load(server)
    assert [(r["ok"], r["error_kind"]) for r in records] == [(False, "usage")] * 3, records
    assert all(reason in r["error"] and "\n" not in r["error"] for r in records), records[0]["error"]
    # Nothing of the bad usage is kept as a number; the records are standard JSON.
    assert all(r["prompt_tokens"] is None and r["completion_tokens"] is None for r in records)
    standard_json(dumps(records))


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_plausible_usage_is_taken_and_absent_usage_counts_the_chunks(api: str) -> None:
    with OpenAIServer(MODEL, output_tokens=OUTPUT_TOKENS) as server:
        records = load(server, api=api)
    assert all(r["ok"] and r["completion_tokens"] == OUTPUT_TOKENS and r["prompt_tokens"] > 0 for r in records)
    assert all("usage_source" not in r for r in records)
    # A chunk may carry several tokens: more tokens than chunks (up to max_tokens) is a real answer.
    with OpenAIServer(MODEL, output_tokens=2, usage=replaced("completion_tokens", OUTPUT_TOKENS)) as server:
        records = load(server, api=api)
    assert all(r["ok"] and r["completion_tokens"] == OUTPUT_TOKENS for r in records), records
    # vLLM's "usage": null (a server that ignores include_usage): the chunks are counted, and it says so.
    with OpenAIServer(MODEL, output_tokens=OUTPUT_TOKENS, usage=lambda usage: None) as server:
        records = load(server, api=api)
    assert all(r["ok"] and r["completion_tokens"] == OUTPUT_TOKENS and r["usage_source"] == "chunks"
               for r in records)


def every_other(bad: Callable[[dict[str, int]], Any]) -> Callable[[dict[str, int]], Any]:
    """Half the answers miscounted (handler threads share the counter)."""
    counter, lock = itertools.count(), threading.Lock()

    def usage(true: dict[str, int]) -> Any:
        with lock:
            odd = next(counter) % 2
        return bad(true) if odd else true
    return usage


def test_a_run_against_a_miscounting_endpoint_writes_standard_json_and_counts_usage_errors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runs = []
    for name, bad in (("minus", replaced("prompt_tokens", -10 ** 6)),
                      ("notnumber", replaced("completion_tokens", float("nan"))),
                      ("overflow", replaced("prompt_tokens", float("inf")))):
        out = tmp_path / name
        with OpenAIServer(MODEL, output_tokens=OUTPUT_TOKENS, usage=every_other(bad)) as server:
            code = main(["run", "--endpoint", server.url, "--model", MODEL, "--concurrency", "2", "--requests", "10",
                         "--input-tokens", "20", "--output-tokens", str(OUTPUT_TOKENS), "--usd-per-hour", "3",
                         "--slo-ttft-ms", "5000", "--slo-tpot-ms", "5000", "--out", str(out), "--json"])
        assert code == 0
        summary = standard_json((out / "summary.json").read_text())
        records = [standard_json(line) for line in (out / "requests.jsonl").read_text().splitlines()]
        assert summary["requests"] == {"sent": 10, "completed": 5, "failed": 5}
        assert summary["errors"] == {"usage": 5}
        assert sum(r["error_kind"] == "usage" for r in records) == 5
        assert summary["input_tokens_per_s"] > 0 and summary["output_tokens_per_s"] > 0
        assert summary["slo"]["attained"] == pytest.approx(0.5)
        assert math.isfinite(summary["usd_per_million_output_tokens"])
        runs.append(str(out))
        capsys.readouterr()
    assert main(["compare", *runs, "--out", str(tmp_path / "report")]) == 0
    printed = capsys.readouterr().out
    assert not re.search(r"(?i)\bnan|\binf|infinity", printed), printed


def test_summary_of_records_from_anywhere_has_no_negative_rate_and_no_infinity() -> None:
    """Records read back from an older run or a pod: counts that are not counts add nothing."""
    def record(**fields: Any) -> dict[str, Any]:
        return {"ok": True, "sent_s": 0.0, "end_s": 2.0, "ttft_ms": 10.0, "e2e_ms": 100.0, "itl_ms": [],
                **fields}

    records = [record(prompt_tokens=-500, completion_tokens=4), record(prompt_tokens=10, completion_tokens=1e-320),
               record(prompt_tokens=float("nan"), completion_tokens=float("inf")),
               record(prompt_tokens=True, completion_tokens="8")]
    summary = summarize(records, usd_per_hour=10.0)
    assert summary["input_tokens_per_s"] == pytest.approx(10 / 2)
    assert summary["output_tokens_per_s"] == pytest.approx(4 / 2)
    standard_json(dumps(summary))
    # No output tokens at all: the cost per token is null, not Infinity.
    nothing = summarize([record(prompt_tokens=10, completion_tokens=-3)], usd_per_hour=10.0)
    assert nothing["output_tokens_per_s"] == 0.0 and nothing["usd_per_million_output_tokens"] is None
    standard_json(dumps(nothing))
    assert finite_ratio(1.0, 0.0) is None and finite_ratio(1.0, None) is None
    assert finite_ratio(1e308, 1e-308) is None and finite_ratio(10 ** 400, 3) is None
    assert finite_ratio(3.0, 2.0) == 1.5


def test_writing_a_run_refuses_nan_instead_of_writing_it() -> None:
    for value in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError):
            dumps({"x": value})


def test_a_pods_log_with_nan_in_its_records_is_refused_not_copied(tmp_path: Path) -> None:
    import base64
    import gzip

    data = base64.b64encode(gzip.compress(b'{"ok": true, "ttft_ms": NaN}\n')).decode("ascii")
    log = "\n".join([json.dumps({"event": "summary", "summary": {"requests": {}}}),
                     json.dumps({"event": "records", "part": 1, "parts": 1, "data": data}),
                     json.dumps({"event": "end", "code": 0})])
    with pytest.raises(EventsError, match="not JSON lines: NaN is not standard JSON"):
        read_result(log)
    infinite = log.replace('"requests": {}', '"requests": {}, "request_rate": Infinity')
    with pytest.raises(EventsError, match="no summary"):  # the summary line is not standard JSON: not an event
        read_result(infinite)
