"""serve.benchmark.loadgen against a local streaming OpenAI server with injected latencies and failures."""

from __future__ import annotations

import asyncio
import statistics
import sys
from typing import Any, Iterator

import pytest

from serve.benchmark.loadgen import LoadConfig, run_load
from serve.benchmark.workload import synthetic_workload
from tests.fakes.openai_server import OpenAIServer

MODEL = "bench-model"


@pytest.fixture(autouse=True)
def fast_thread_switches() -> Iterator[None]:
    """The fake server's threads share the GIL with the client: with the default 5 ms switch interval a
    waking server thread can wait milliseconds for it, which is the test set-up's latency, not the
    client's. Switch every 0.2 ms while these tests run."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)
    yield
    sys.setswitchinterval(previous)


def run(config: LoadConfig, count: int, output_tokens: int = 16) -> list[dict[str, Any]]:
    return asyncio.run(run_load(config, synthetic_workload(count, 20, output_tokens)))


def close(measured: float, injected: float) -> bool:
    return abs(measured - injected) <= max(2.0, 0.05 * injected)


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_measured_ttft_and_itl_agree_with_the_injected_values(api: str) -> None:
    with OpenAIServer(MODEL, ttft_s=0.08, itl_s=0.02, output_tokens=64) as server:
        # Two connections, ten requests: the median request reuses a warm connection (the first on each
        # connection also pays for the TCP connect, which is part of a client's TTFT but not injected).
        records = run(LoadConfig(server.base_url, MODEL, api=api, concurrency=2), 10, output_tokens=12)
    assert all(r["ok"] for r in records), records
    assert all(r["completion_tokens"] == 12 and r["prompt_tokens"] for r in records)
    assert close(statistics.median(r["ttft_ms"] for r in records), 80.0)
    itl = [gap for r in records for gap in r["itl_ms"]]
    assert len(itl) == 10 * 11
    assert close(statistics.median(itl), 20.0)
    assert close(statistics.median(r["e2e_ms"] for r in records), 80.0 + 11 * 20.0)
    bodies = [body for method, _, body in server.requests if method == "POST"]
    assert all(b["stream"] and b["stream_options"] == {"include_usage": True} and b["max_tokens"] == 12
               for b in bodies)


def test_open_loop_sends_on_schedule_whatever_the_answers_take() -> None:
    # 1 s answers at 100 req/s: a closed loop would fall behind; open loop keeps the schedule.
    with OpenAIServer(MODEL, ttft_s=0.5, itl_s=0.1, output_tokens=6) as server:
        records = run(LoadConfig(server.url, MODEL, rate=100.0, seed=3), 200, output_tokens=6)
    assert len(records) == 200 and all(r["ok"] for r in records)
    lateness = [r["sent_s"] - r["scheduled_s"] for r in records]
    assert statistics.median(lateness) < 0.005
    # A closed loop would be seconds behind by the end. What can still happen here is a stall of the
    # whole process (a busy 2-core VM, a neighbour test's thread): it delays only the sends inside it.
    assert sum(late > 0.05 for late in lateness) <= 0.15 * len(lateness) and max(lateness) < 1.0
    sent = sorted(r["sent_s"] for r in records)
    schedule = sorted(r["scheduled_s"] for r in records)
    assert (len(sent) - 1) / (sent[-1] - sent[0]) == pytest.approx((len(schedule) - 1) / schedule[-1], rel=0.05)
    assert max(r["e2e_ms"] for r in records) < 2000


def test_errors_and_timeouts_are_counted_never_dropped() -> None:
    with OpenAIServer(MODEL, output_tokens=4, failure_rate=0.3, seed=5) as server:
        records = run(LoadConfig(server.url, MODEL, concurrency=5), 40, output_tokens=4)
    failed = [r for r in records if not r["ok"]]
    assert len(records) == 40 and 4 <= len(failed) <= 20
    assert all(r["error_kind"] == "http" and r["status"] == 500 and "injected" in r["error"] for r in failed)
    with OpenAIServer(MODEL, hang_s=1.0) as server:
        records = run(LoadConfig(server.url, MODEL, concurrency=3, timeout_s=0.2), 3)
    assert [r["error_kind"] for r in records] == ["timeout"] * 3
    assert all(150 < r["e2e_ms"] < 600 for r in records)
    with OpenAIServer("another-model") as server:
        records = run(LoadConfig(server.url, MODEL, concurrency=1), 2)
    assert [(r["status"], r["error_kind"]) for r in records] == [(404, "http")] * 2


def test_duration_stops_sending() -> None:
    with OpenAIServer(MODEL, output_tokens=2) as server:
        records = run(LoadConfig(server.url, MODEL, rate=50.0, duration_s=0.3), 1000, output_tokens=2)
    assert 5 < len(records) < 40
    assert all(r["scheduled_s"] <= 0.3 for r in records)


def test_fixed_concurrency_keeps_n_in_flight_and_stops_at_the_duration() -> None:
    with OpenAIServer(MODEL, ttft_s=0.05, output_tokens=2) as server:
        records = run(LoadConfig(server.url, MODEL, concurrency=3, duration_s=0.4), 1000, output_tokens=2)
    # each request takes ~50 ms and 3 are in flight: about 3 * 0.4 / 0.05 = 24 requests, then it stops
    assert 12 <= len(records) <= 30 and all(r["ok"] for r in records)
    assert [r["index"] for r in records] == list(range(len(records)))
