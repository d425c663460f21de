"""serve/resilience/run.py against the OpenAI stand-in: a fault that makes the server fail for a
while; the load stops once the recovery is settled, and the report's numbers are the records'."""

from __future__ import annotations

import threading
from typing import Optional

import pytest

from serve.benchmark.loadgen import poisson_arrivals
from serve.kv_evidence import KvReading
from serve.resilience.golden import Workload
from serve.resilience.report import Settings, build_report
from serve.resilience.run import BASELINE_REQUESTS, FaultRefused, measure
from tests.fakes.openai_server import OpenAIServer

OUTAGE_S = 1.0


class Target:
    def describe(self) -> str:
        return "the stand-in"

    def ready(self) -> Optional[bool]:
        return True

    def kv_reading(self) -> Optional[KvReading]:
        return None


class Outage:
    """Every request fails with HTTP 500 for OUTAGE_S after the fault."""

    name = "outage"

    def __init__(self, server: OpenAIServer):
        self.server = server

    def choose(self) -> str:
        return "the stand-in"

    def inject(self) -> str:
        self.server.failure_rate = 1.0
        threading.Timer(OUTAGE_S, lambda: setattr(self.server, "failure_rate", 0.0)).start()
        return f"500s for {OUTAGE_S:g} s"

    def restore(self) -> None:
        self.server.failure_rate = 0.0


@pytest.mark.slow  # over 4 s: a real load, or a process of its own
def test_the_load_stops_once_recovered_and_the_report_counts_the_records() -> None:
    with OpenAIServer("m", output_tokens=4) as server:
        settings = Settings(rate=20.0, duration_s=120.0, fault_at_s=1.0, timeout_s=30.0, settle_s=2.0, bucket_s=1.0)
        measured = measure(server.url, "m", Outage(server), Target(), settings,
                           Workload(prompts=3, input_tokens=5, max_tokens=4), ready_every_s=0.2)
    report = build_report(measured, settings)
    records = sorted(measured.records, key=lambda r: r["sent_s"])
    assert records[-1]["sent_s"] < 60.0  # it stopped long before the 120 s cap (bounded below at the end)
    failed = [r for r in records if not r["ok"]]
    assert failed and all(r["status"] == 500 for r in failed)
    assert report["requests"]["failed-before-first-token"] == len(failed)
    assert report["requests"]["sent"] == len(records) and report["requests"]["wrong"] == 0
    last_bad = max(r["sent_s"] for r in failed)
    first_good = min(r["sent_s"] for r in records if r["sent_s"] > last_bad)
    assert report["recovery"]["recovered"]
    assert report["recovery"]["timeToRecoverS"] == first_good - measured.fault_s
    # it stopped sending soon after the recovery had lasted settle_s, long before the 120 s cap
    assert records[-1]["sent_s"] < 60.0
    assert records[-1]["sent_s"] - first_good >= settings.settle_s
    assert report["ready"] and all(sample["ready"] for sample in report["ready"])


@pytest.mark.slow  # a few seconds of real load
def test_on_a_slow_deployment_the_fault_waits_for_a_pre_fault_rate() -> None:
    """Every answer takes longer than `fault_at_s` (a CI machine at load 20 took over 30 s per request,
    and the run had nothing to recover to): the fault waits until BASELINE_REQUESTS have ended."""
    with OpenAIServer("m", output_tokens=4, ttft_s=1.5) as server:
        settings = Settings(rate=4.0, duration_s=120.0, fault_at_s=0.5, timeout_s=30.0, settle_s=2.0, bucket_s=1.0)
        measured = measure(server.url, "m", Outage(server), Target(), settings,
                           Workload(prompts=3, input_tokens=5, max_tokens=4), ready_every_s=0.2)
    report = build_report(measured, settings)
    assert measured.fault_s >= 1.5  # not at 0.5 s: no request had ended then
    assert report["requests"]["beforeFault"]["ok"] >= BASELINE_REQUESTS
    assert report["recovery"]["baselineGoodShare"] == 1.0 and report["recovery"]["recovered"]


def test_a_load_with_too_few_answers_refuses_the_fault_and_injects_nothing() -> None:
    """A load that ends with fewer than BASELINE_REQUESTS requests ended never gets its fault (it
    would come after the load, measuring nothing): a clear refusal instead of a report of nothing."""
    injected: list[str] = []

    class Counting(Outage):
        def inject(self) -> str:
            injected.append("fault")
            return super().inject()

    settings = Settings(rate=2.0, duration_s=1.0, fault_at_s=0.5, timeout_s=30.0, settle_s=1.0, bucket_s=1.0)
    arrivals = poisson_arrivals(settings.rate, 10, 0)  # the load generator's seeded schedule
    assert sum(t < settings.duration_s for t in arrivals) < BASELINE_REQUESTS
    with OpenAIServer("m", output_tokens=4) as server:
        with pytest.raises(FaultRefused, match="nothing was injected"):
            measure(server.url, "m", Counting(server), Target(), settings,
                    Workload(prompts=3, input_tokens=5, max_tokens=4), ready_every_s=0.2)
    assert injected == []
