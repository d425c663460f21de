"""The Benchmark tab and API: a benchmark of a running deployment is a job with live progress, its
run is kept (summary and every record) and drawn, runs of different deployments are compared, and
an offline plan is told plainly that there is nothing to measure.

The in-cluster part is replaced here by `run_fn` (its own tests run the real Job against a fake
Kubernetes API: tests/web/test_benchmark_in_cluster.py); everything else is the app's real path.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable
from urllib.parse import quote

import pytest
from sqlalchemy.exc import OperationalError

from components.config import catalogue
from components.config.checks import Report
from serve.benchmark.events import RunResult
from serve.benchmark.incluster import BenchmarkCancelled, BenchmarkFailed
from serve.benchmark.summary import goodput, summarize
from tests.patience import PATIENCE_S
from tests.web.support import AUTH, create, extract_csrf, field_error, login, text_of, wait_for_job

KUBECONFIG_SECRET = "apiVersion: v1\nusers: [{name: u, user: {token: kube-bench-secret-5151}}]\n"


def _records(count: int, ttft_ms: float, tpot_ms: float, rate: float) -> list[dict[str, Any]]:
    """Records as the load generator writes them: `count` requests at `rate`, 5 tokens each."""
    out = []
    for i in range(count):
        sent = i / rate
        e2e = ttft_ms + 4 * tpot_ms
        out.append({"index": i, "scheduled_s": sent, "sent_s": sent, "end_s": sent + e2e / 1000,
                    "ttft_ms": ttft_ms, "itl_ms": [tpot_ms] * 4, "e2e_ms": e2e, "prompt_tokens": 40,
                    "completion_tokens": 5, "input_tokens_requested": 32, "max_tokens": 5, "status": 200,
                    "ok": True, "error_kind": None, "error": None})
    return out


def fake_run(ttft_ms: float, tpot_ms: float, calls: list[dict[str, Any]]) -> Callable[..., RunResult]:
    """A run_fn that reports progress like the Job does and answers with a real summary."""

    def run(outputs, kubeconfig, name, args, seconds, on_progress, cancelled) -> RunResult:
        calls.append({"outputs": outputs, "name": name, "args": args, "seconds": seconds})
        rates = [float(r) for r in args[args.index("--rate") + 1].split(",")]
        requests = int(args[args.index("--requests") + 1])
        slo: dict[str, float] = {}
        if "--usd-per-hour" in args:  # as `run` prices its output tokens
            slo["usd_per_hour"] = float(args[args.index("--usd-per-hour") + 1])
        if "--slo-ttft-ms" in args:
            slo |= {"slo_ttft_ms": float(args[args.index("--slo-ttft-ms") + 1]),
                    "slo_tpot_ms": float(args[args.index("--slo-tpot-ms") + 1])}
        total = requests * len(rates)
        for done in (total // 2, total):
            on_progress({"event": "progress", "done": done, "total": total, "rate": rates[0],
                         "p50_ttft_ms": ttft_ms, "subrun": 1, "subruns": len(rates)})
        sweep, everything = [], []
        for rate in rates:
            recs = _records(requests, ttft_ms * rate, tpot_ms, rate)  # slower as the rate grows
            sweep.append((rate, summarize(recs, **slo)))
            everything += [{**r, "rate": rate} for r in recs]
        summary = summarize(everything, **slo)
        summary["load"] = {"rates": rates} if len(rates) > 1 else {"rate": rates[0]}
        summary["workload"] = {"api": "chat", "input_tokens": 1024, "output_tokens": 256, "preset": "chat"}
        if len(rates) > 1:
            summary["goodput"] = goodput(sweep)
            summary["sweep"] = [{"rate": r, "requests": s["requests"], "slo": s["slo"],
                                 "request_rate": s["request_rate"], "ttft_ms": s["ttft_ms"],
                                 "tpot_ms": s["tpot_ms"]} for r, s in sweep]
        return RunResult(summary, everything)

    return run


@pytest.fixture
def live(fake_app, fake_engine):
    """A "deployed" real deployment named `live`, and the app's benchmark service."""
    state = fake_app.extensions["raypd"]
    state.service.checker.verify_fn = lambda outputs, kubeconfig: Report.of("verify", [])
    fake_engine.live = {"modelId": "qwen3.5-9b", "kubeconfig": KUBECONFIG_SECRET, "namespace": "inference"}
    client = fake_app.test_client()
    create(client, "live")
    up = client.post("/api/v1/deployments/live/up", headers=AUTH)
    assert wait_for_job(client, up.get_json()["job"])["status"] == "succeeded"
    return client, state


def _benchmark(client, name: str, body: dict[str, Any]) -> dict[str, Any]:
    response = client.post(f"/api/v1/deployments/{name}/benchmarks", json=body, headers=AUTH)
    assert response.status_code == 202, response.get_json()
    return wait_for_job(client, response.get_json()["job"])


def test_an_offline_plan_is_told_there_is_nothing_to_measure(client):
    create(client, "plan")
    login(client)
    page = text_of(client.get("/deployments/plan/benchmark"))
    assert 'id="benchmark-unavailable"' in page and "nothing is serving" in page
    assert 'id="run-benchmark" disabled' in page
    refused = client.post("/api/v1/deployments/plan/benchmarks", json={"rates": [1]}, headers=AUTH)
    assert refused.status_code == 409 and refused.get_json()["errors"][0]["field"] == "deployment"
    csrf = extract_csrf(page)
    posted = client.post("/deployments/plan/benchmark", data={"csrf_token": csrf, "rates": "1"})
    assert posted.status_code == 302
    assert "nothing is serving" in text_of(client.get(posted.headers["Location"]))
    assert [j for j in client.get("/api/v1/deployments/plan", headers=AUTH).get_json()["jobs"]
            if j["operation"] == "benchmark"] == []


def test_a_benchmark_job_reports_progress_keeps_the_run_and_leaves_the_deployment_as_it_was(live):
    client, state = live
    calls: list[dict[str, Any]] = []
    state.benchmarks.benchmarker.run_fn = fake_run(50.0, 10.0, calls)
    job = _benchmark(client, "live", {"rates": [1, 2], "requests": 20, "sloTtftMs": 80, "sloTpotMs": 20})
    assert job["status"] == "succeeded" and job["operation"] == "benchmark"
    assert job["progress"] == {"done": 40, "total": 40}
    args = calls[0]["args"]
    assert args[args.index("--rate") + 1] == "1,2" and args[args.index("--slo-ttft-ms") + 1] == "80"
    assert "--usd-per-hour" in args  # the deployment's estimated cost, for USD per million tokens
    assert calls[0]["name"].startswith("raypd-bench-") and calls[0]["outputs"]["namespace"] == "inference"
    events = client.get(f"/api/v1/jobs/{job['id']}/events", headers=AUTH).get_data(as_text=True)
    messages = [json.loads(line[6:]).get("message", "") for line in events.splitlines() if line.startswith("data: ")]
    assert "20/40 requests · 1.0 req/s now · p50 TTFT 50 ms · rate 1 of 2" in messages
    assert any(m.startswith("benchmark: 40 requests (chat preset, rates 1, 2 req/s) from a Job") for m in messages)
    opening = next(json.loads(line[6:]) for line in events.splitlines() if '"kind": "benchmark"' in line
                   or '"kind":"benchmark"' in line)
    assert (opening["done"], opening["total"]) == (0, 40)  # the bar knows its length before the pod starts
    assert state.service.get("live")["status"] == "deployed"

    run = client.get(f"/api/v1/benchmarks/{job['id']}", headers=AUTH).get_json()
    assert run["deployment"] == "live" and run["settings"]["mode"] == "disaggregated"
    assert run["summary"]["goodput"]["rate"] == 1.0  # at 2 req/s TTFT is 100 ms > the 80 ms SLO
    usd = run["settings"]["usdPerHour"]
    assert usd > 0 and run["settings"]["region"] == "us-east-2"  # what the cost is estimated for
    assert run["summary"]["usd_per_million_output_tokens"] == pytest.approx(
        usd / 3600 / run["summary"]["output_tokens_per_s"] * 1e6)
    lines = client.get(run["requestsUrl"], headers=AUTH).get_data(as_text=True).splitlines()
    assert len(lines) == 40 and json.loads(lines[0])["ttft_ms"] == 50.0
    everyone = client.get("/api/v1/benchmarks", headers=AUTH).get_json()["runs"]
    assert [r["id"] for r in everyone] == [job["id"]]

    anonymous = client.get(f"/benchmarks/plots/ttft_cdf.png?runs={job['id']}")
    assert anonymous.status_code == 302 and "/login" in anonymous.headers["Location"]  # pages need a login
    login(client)
    page = text_of(client.get(f"/deployments/live/benchmark?job={job['id']}"))
    assert 'id="results-table"' in page and "TTFT p50 ms" in page
    for plot in ("ttft_cdf", "tpot_cdf", "percentiles_vs_rate"):
        assert f'id="plot-{plot}"' in page
    image = client.get(f"/benchmarks/plots/percentiles_vs_rate.png?runs={job['id']}")
    assert image.status_code == 200 and image.mimetype == "image/png" and image.data[:8] == b"\x89PNG\r\n\x1a\n"
    assert client.get("/benchmarks/plots/nope.png?runs=" + job["id"]).status_code == 404
    assert client.get("/benchmarks/plots/ttft_cdf.png?runs=missing").status_code == 404


@pytest.mark.slow
def test_runs_of_two_deployments_are_compared_with_a_verdict(live, fake_engine):
    client, state = live
    create(client, "baseline", {"raypd:mode": "colocated"})
    up = client.post("/api/v1/deployments/baseline/up", headers=AUTH)
    assert wait_for_job(client, up.get_json()["job"])["status"] == "succeeded"
    state.benchmarks.benchmarker.run_fn = fake_run(40.0, 10.0, [])
    fast = _benchmark(client, "live", {"rates": [1, 2, 4], "requests": 10, "sloTtftMs": 100, "sloTpotMs": 20})
    state.benchmarks.benchmarker.run_fn = fake_run(60.0, 10.0, [])
    slow = _benchmark(client, "baseline", {"rates": [1, 2, 4], "requests": 10, "sloTtftMs": 100, "sloTpotMs": 20})
    login(client)
    page = text_of(client.get(f"/deployments/live/benchmark?runs={fast['id']}&runs={slow['id']}"))
    assert 'id="own-runs"' in page and 'id="other-runs"' in page  # the baseline's run is offered too
    verdict = page[page.index('id="verdict-1">') + len('id="verdict-1">'):]
    verdict = verdict[:verdict.index("</p>")]
    # live meets 100 ms up to 2 req/s (40, 80, 160 ms); baseline only at 1 (60, 120, 240 ms)
    assert verdict.startswith(f"live (disaggregated) #{fast['id'][:6]} meets the SLOs for 90% of requests at 2x "
                              f"the rate of baseline (colocated) #{slow['id'][:6]} (2 vs 1 req/s)")
    image = client.get(f"/benchmarks/plots/ttft_cdf.png?runs={fast['id']}&runs={slow['id']}")
    assert image.status_code == 200 and image.data[:4] == b"\x89PNG"


def test_form_mistakes_are_named_and_nothing_starts(live):
    client, state = live
    calls: list[dict[str, Any]] = []
    state.benchmarks.benchmarker.run_fn = fake_run(50.0, 10.0, calls)
    login(client)
    csrf = extract_csrf(text_of(client.get("/deployments/live/benchmark")))
    hostile = ["\ud800", "1\x00", "$(rm -rf /)", "1; reboot", "9" * 5000, "-1", "nan", "1,1"]
    for text in hostile:  # form-encoded as a browser would (a lone surrogate as its UTF-8-ish bytes)
        body = f"csrf_token={quote(csrf)}&rates={quote(text, errors='surrogatepass')}"
        response = client.post("/deployments/live/benchmark", data=body,
                               content_type="application/x-www-form-urlencoded")
        assert response.status_code == 400, text[:20]
        assert field_error(text_of(response), "f-rates"), text[:20]
    huge = client.post("/deployments/live/benchmark", data={"csrf_token": csrf, "rates": "9" * 2_000_000})
    assert huge.status_code == 413  # the body limit, before any parsing
    response = client.post("/deployments/live/benchmark", data={
        "csrf_token": csrf, "rates": "2", "sloTtftMs": "100", "requests": "$(id)", "preset": "<script>"})
    page = text_of(response)
    assert response.status_code == 400 and "whole number" in field_error(page, "f-requests")
    assert "<script>" not in response.get_data(as_text=True)
    response = client.post("/deployments/live/benchmark", data={"csrf_token": csrf, "rates": "2", "sloTtftMs": "100"})
    assert "go together" in field_error(text_of(response), "f-sloTpotMs")
    assert calls == [] and not [j for j in state.service.get("live")["jobs"] if j["operation"] == "benchmark"]
    bad = client.post("/api/v1/deployments/live/benchmarks", json={"rates": [1], "requests": 10**9}, headers=AUTH)
    assert bad.status_code == 400 and bad.get_json()["errors"][0]["field"] == "requests"

    response = client.post("/deployments/live/benchmark", data={"csrf_token": csrf, "rates": "3", "requests": "6",
                                                                 "ignoreEos": "on"})
    assert response.status_code == 302 and "job=" in response.headers["Location"]
    job = wait_for_job(client, response.headers["Location"].rsplit("job=", 1)[1])
    assert job["status"] == "succeeded" and calls[0]["args"][calls[0]["args"].index("--requests") + 1] == "6"
    assert "--ignore-eos" in calls[0]["args"]  # the box as the browser sends it
    page = text_of(client.get("/deployments/live/benchmark"))
    assert 'name="ignoreEos" value="on" checked' in page  # the next run starts from this one's settings


def test_cancel_stops_the_run_and_a_failure_says_why(live):
    client, state = live
    started = threading.Event()

    def waits(outputs, kubeconfig, name, args, seconds, on_progress, cancelled) -> RunResult:
        started.set()
        while not cancelled():
            threading.Event().wait(0.02)
        raise BenchmarkCancelled()

    state.benchmarks.benchmarker.run_fn = waits
    job_id = client.post("/api/v1/deployments/live/benchmarks", json={"rates": [1]}, headers=AUTH).get_json()["job"]
    assert started.wait(PATIENCE_S)
    busy = client.post("/api/v1/deployments/live/up", headers=AUTH)
    assert busy.status_code == 409 and busy.get_json()["job"] == job_id  # a benchmark holds the deployment
    client.post(f"/api/v1/jobs/{job_id}/cancel", headers=AUTH)
    assert wait_for_job(client, job_id)["status"] == "cancelled"
    assert state.service.get("live")["status"] == "deployed"

    def fails(*_: Any) -> RunResult:
        raise BenchmarkFailed("the benchmark pod cannot start: InvalidImageName: bad image")

    state.benchmarks.benchmarker.run_fn = fails
    job = _benchmark(client, "live", {"rates": [1]})
    assert job["status"] == "failed" and job["error"].endswith("InvalidImageName: bad image")
    assert state.service.get("live")["status"] == "deployed"
    assert client.get("/api/v1/deployments/live/benchmarks", headers=AUTH).get_json() == {"runs": []}


def test_results_the_store_refuses_fail_the_job_instead_of_vanishing(live, monkeypatch):
    client, state = live
    state.benchmarks.benchmarker.run_fn = fake_run(50.0, 10.0, [])

    def full_disk(*_: Any, **__: Any) -> None:
        raise OperationalError("INSERT", {}, Exception("database or disk is full"))

    monkeypatch.setattr(state.store, "save_benchmark", full_disk)
    job = _benchmark(client, "live", {"rates": [1], "requests": 4})
    assert job["status"] == "failed"
    assert job["error"] == "the benchmark finished but its results could not be stored (database or disk is full)"


def test_hostile_query_parameters_get_a_page_not_a_traceback(live):
    client, _ = live
    login(client)
    for query in ("runs=%3Cscript%3Ealert(1)%3C/script%3E", "runs=%ED%A0%80", "job=%00%1b[31m", "runs=" + "a" * 5000,
                  "runs=$(id)&runs=;reboot", "job=../../etc/passwd"):
        page = client.get(f"/deployments/live/benchmark?{query}")
        assert page.status_code == 200, query
        body = page.get_data(as_text=True)
        assert "<script>alert" not in body and "Traceback" not in body
    for query in ("runs=%3Cscript%3E", "runs=" + "&runs=".join(str(i) for i in range(50)), ""):
        image = client.get(f"/benchmarks/plots/ttft_cdf.png?{query}")
        assert image.status_code == 404 and "<script>" not in image.get_data(as_text=True)
    assert client.get("/benchmarks/plots/..%2F..%2Fetc%2Fpasswd?runs=x").status_code == 404
    assert client.get("/api/v1/benchmarks/%3Cscript%3E", headers=AUTH).status_code == 404


@pytest.mark.slow
def test_the_tab_names_the_price_basis_of_every_cost_and_a_stack_in_eu_west_1_is_told_it_is_not_its_own(
        live, fake_engine):
    client, state = live
    create(client, "europe", {"aws:region": "eu-west-1", "raypd:mode": "colocated"})
    up = client.post("/api/v1/deployments/europe/up", headers=AUTH)
    assert wait_for_job(client, up.get_json()["job"])["status"] == "succeeded"
    state.benchmarks.benchmarker.run_fn = fake_run(40.0, 10.0, [])
    ohio = _benchmark(client, "live", {"rates": [1], "requests": 10})
    europe = _benchmark(client, "europe", {"rates": [1], "requests": 10})
    ohio_basis, europe_basis = catalogue.price_basis("us-east-2"), catalogue.price_basis("eu-west-1")
    login(client)

    alone = text_of(client.get(f"/deployments/europe/benchmark?runs={europe['id']}"))
    assert f'id="results-price-basis-1">USD / M output tokens: from the {europe_basis}.' in alone
    assert "this is not eu-west-1's" in europe_basis  # (the catalogue's words, which the page shows)
    assert f'id="own-runs-price-basis-1">USD / M output tokens: from the {europe_basis}.' in alone
    assert f'title="{europe_basis}"' in alone  # on the run's own cost cell too

    both = text_of(client.get(f"/deployments/europe/benchmark?runs={europe['id']}&runs={ohio['id']}"))
    europe_label, ohio_label = f"europe (colocated) #{europe['id'][:6]}", f"live (disaggregated) #{ohio['id'][:6]}"
    assert f"USD / M output tokens of {europe_label}: from the {europe_basis}." in both
    assert f"USD / M output tokens of {ohio_label}: from the {ohio_basis}." in both
    verdict = both[both.index('id="verdict-1">'):]
    verdict = verdict[:verdict.index("</p>")]
    assert (f"{europe_label}'s from the {europe_basis}, {ohio_label}'s from the "
            f"{ohio_basis}") in verdict
    assert f'id="other-runs-price-basis-1">USD / M output tokens: from the {ohio_basis}.' in both
