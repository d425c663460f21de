"""serve.benchmark.summary and workload: pure numbers checked against values computed by hand."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest

from serve.benchmark.loadgen import poisson_arrivals
from serve.benchmark.summary import goodput, percentile, stats, summarize, tpot_ms
from serve.benchmark.workload import WorkloadError, file_workload, synthetic_workload


def record(index: int, ttft: Optional[float], e2e: float, tokens: Optional[int], *, ok: bool = True,
           itl: Optional[list[float]] = None, sent: float = 0.0, prompt: int = 10,
           kind: Optional[str] = None) -> dict[str, Any]:
    return {"index": index, "sent_s": sent, "end_s": sent + e2e / 1000, "ttft_ms": ttft, "e2e_ms": e2e,
            "itl_ms": itl or [], "completion_tokens": tokens, "prompt_tokens": prompt if ok else None,
            "ok": ok, "error_kind": kind}


def test_percentile_interpolates_linearly_between_closest_ranks() -> None:
    values = [40.0, 10.0, 30.0, 20.0]  # sorted 10 20 30 40, n-1 = 3
    assert percentile(values, 50) == pytest.approx(25.0)  # rank 1.5
    assert percentile(values, 90) == pytest.approx(37.0)  # rank 2.7: 30 + 0.7 * 10
    assert percentile(values, 99) == pytest.approx(39.7)  # rank 2.97
    assert percentile(values, 0) == 10.0 and percentile(values, 100) == 40.0
    assert percentile([5.0], 99) == 5.0
    assert percentile([], 50) is None
    assert stats([]) == {"mean": None, "p50": None, "p90": None, "p95": None, "p99": None}
    s = stats([float(v) for v in range(1, 11)])  # 1..10, n-1 = 9
    assert s["mean"] == pytest.approx(5.5)
    assert s["p50"] == pytest.approx(5.5) and s["p90"] == pytest.approx(9.1) and s["p95"] == pytest.approx(9.55)


def test_tpot_is_decode_time_per_token_after_the_first() -> None:
    assert tpot_ms(record(0, 100.0, 1100.0, 11)) == pytest.approx(100.0)
    assert tpot_ms(record(0, 100.0, 100.0, 1)) is None  # one token: no decode phase
    assert tpot_ms(record(0, None, 100.0, None, ok=False)) is None


def test_summary_counts_failures_and_attains_slo_over_all_sent_requests() -> None:
    records = [
        record(0, 100.0, 1100.0, 11, itl=[90.0, 110.0], sent=0.0),  # TTFT 100, TPOT 100: meets both
        record(1, 300.0, 1300.0, 11, itl=[100.0], sent=1.0),  # TTFT 300 misses the TTFT SLO
        record(2, 150.0, 2150.0, 11, sent=2.0),  # TPOT 200 misses the TPOT SLO
        record(3, 50.0, 50.0, 1, sent=3.0),  # one token: only TTFT applies, meets
        record(4, None, 30000.0, None, ok=False, sent=0.5, kind="timeout"),
        record(5, None, 1.0, None, ok=False, sent=0.6, kind="http"),
    ]
    s = summarize(records, slo_ttft_ms=200.0, slo_tpot_ms=150.0, usd_per_hour=36.0)
    assert s["requests"] == {"sent": 6, "completed": 4, "failed": 2}
    assert s["errors"] == {"http": 1, "timeout": 1}
    assert s["slo"] == {"ttft_ms": 200.0, "tpot_ms": 150.0, "attained": pytest.approx(2 / 6)}
    assert s["ttft_ms"]["mean"] == pytest.approx(150.0)  # completed only: 100 300 150 50
    assert s["ttft_ms"]["p50"] == pytest.approx(125.0)
    assert s["tpot_ms"]["p50"] == pytest.approx(100.0)  # 100 100 200
    assert s["itl_ms"]["mean"] == pytest.approx(100.0)
    wall = 30.5  # the timeout: sent at 0.5, ended at 30.5; first send at 0
    assert s["wall_s"] == pytest.approx(wall)
    assert s["request_rate"] == pytest.approx(4 / wall)
    assert s["output_tokens_per_s"] == pytest.approx(34 / wall)
    assert s["input_tokens_per_s"] == pytest.approx(40 / wall)
    assert s["usd_per_million_output_tokens"] == pytest.approx(36.0 / 3600 / (34 / wall) * 1e6)
    assert summarize(records)["slo"] == {"ttft_ms": None, "tpot_ms": None, "attained": None}
    assert summarize(records)["usd_per_million_output_tokens"] is None


def test_goodput_is_the_highest_rate_with_90_percent_attainment() -> None:
    def at(attained: Optional[float]) -> dict[str, Any]:
        return {"slo": {"attained": attained}}

    sweep = [(1.0, at(1.0)), (2.0, at(0.95)), (4.0, at(0.9)), (8.0, at(0.5))]
    assert goodput(sweep)["rate"] == 4.0
    assert goodput([(1.0, at(0.89))])["rate"] is None
    assert goodput([(1.0, at(None))])["rate"] is None
    assert goodput(sweep)["attained_by_rate"] == {"1": 1.0, "2": 0.95, "4": 0.9, "8": 0.5}


def test_poisson_arrivals_have_the_asked_rate_and_exponential_gaps() -> None:
    offsets = poisson_arrivals(50.0, 20_000, seed=7)
    gaps = [b - a for a, b in zip(offsets, offsets[1:], strict=False)]
    mean = sum(gaps) / len(gaps)
    sd = (sum((g - mean) ** 2 for g in gaps) / len(gaps)) ** 0.5
    assert 1 / mean == pytest.approx(50.0, rel=0.05)
    assert sd / mean == pytest.approx(1.0, abs=0.05)  # exponential: coefficient of variation 1
    assert sum(g < mean for g in gaps) / len(gaps) == pytest.approx(1 - 1 / 2.718281828, abs=0.02)
    assert poisson_arrivals(50.0, 10, seed=7) == offsets[:10]  # seeded: reproducible


def test_synthetic_workload_lengths_prefix_and_distributions() -> None:
    fixed = synthetic_workload(5, 100, 20, seed=1)
    assert [s.input_tokens for s in fixed] == [100] * 5 and {s.max_tokens for s in fixed} == {20}
    assert synthetic_workload(5, 100, 20, seed=1) == fixed
    shared = synthetic_workload(3, 100, 20, shared_prefix_tokens=80)
    assert len({tuple(s.prompt.split()[:80]) for s in shared}) == 1
    assert len({s.prompt for s in shared}) == 3
    uniform = synthetic_workload(200, 100, 20, input_dist="uniform", output_dist="normal")
    assert all(50 <= s.input_tokens <= 150 for s in uniform)
    assert len({s.max_tokens for s in uniform}) > 5


def test_prompt_file_is_cycled_and_validated(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"prompt": "one two three"}\n\n{"prompt": "four", "max_tokens": 7}\n')
    specs = file_workload(path, 5, 32)
    assert [(s.prompt, s.input_tokens, s.max_tokens) for s in specs[:3]] == [
        ("one two three", 3, 32), ("four", 1, 7), ("one two three", 3, 32)]
    path.write_text('{"prompt": "ok"}\n{"text": "no prompt"}\n')
    with pytest.raises(WorkloadError, match="line 2"):
        file_workload(path, 1, 32)
    path.write_text("")
    with pytest.raises(WorkloadError, match="no prompts"):
        file_workload(path, 1, 32)
