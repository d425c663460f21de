"""The Benchmark tab in a real browser, with the benchmark really run as a Kubernetes Job.

As in test_browser_status: no Pulumi CLI or AWS here, so the deployment's engine is the test
double of the Automation API engine and its outputs point at the fake Kubernetes API on loopback
(tests/fakes/kube_api.py). That fake runs a created Job's container command for real (the
ConfigMap's files on the PYTHONPATH), so the load generator sends real streamed requests to a
local OpenAI-compatible server (tests/fakes/openai_server.py) and the web app reads its progress
and results back from the pod log. Everything between the browser and those servers is real.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.browser.live_app import api, need_a_browser, serving, wait_for
from tests.browser.test_browser_flow import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, patient_context
from tests.patience import JOB_PATIENCE_S
from tests.web.support import TOKEN, FakeEngine

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    need_a_browser()
    from components.config.checks import Report
    from tests.fakes.kube_api import FakeKubeApi
    from tests.fakes.openai_server import OpenAIServer

    with FakeKubeApi("healthy") as kube, \
            OpenAIServer("qwen3.5-9b", ttft_s=0.03, itl_s=0.004, output_tokens=12) as openai:
        engine = FakeEngine()
        engine.live = {**kube.outputs(), "openaiBaseUrl": openai.base_url}
        with serving(Path(tmp_path_factory.mktemp("raypd-home")), engine) as (base, app):
            app.extensions["raypd"].service.checker.verify_fn = lambda outputs, kubeconfig: Report.of("verify", [])
            yield {"base": base, "kube": kube, "openai": openai}


def test_benchmark_tab_runs_a_sweep_in_the_cluster_shows_progress_plots_and_compares(live):
    from playwright.sync_api import expect, sync_playwright

    base = live["base"]
    api(base, "POST", "/deployments", {"name": "live", "config": {}})
    assert wait_for(base, api(base, "POST", "/deployments/live/up")["job"])["status"] == "succeeded"
    api(base, "POST", "/deployments", {"name": "plan", "config": {}})  # never deployed

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        page = patient_context(browser, 1000).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
        page.goto(base + "/deployments/plan/benchmark")
        page.fill("#token", TOKEN)
        page.click("button[type=submit]")
        expect(page.locator("#benchmark-unavailable")).to_contain_text("not deployed")
        expect(page.locator("#run-benchmark")).to_be_disabled()

        page.goto(base + "/deployments/live")
        page.click("#tab-benchmark")
        expect(page).to_have_url(re.compile(r"/deployments/live/benchmark$"))
        expect(page.locator("#no-runs")).to_be_visible()
        page.fill("#f-rates", "20, 40")
        page.fill("#f-requests", "40")
        page.fill("#f-inputTokens", "32")
        page.fill("#f-outputTokens", "12")
        page.fill("#f-sloTtftMs", "500")
        page.fill("#f-sloTpotMs", "50")
        page.click("#run-benchmark")
        expect(page).to_have_url(re.compile(r"/deployments/live/benchmark\?job="))
        expect(page.locator("#bench-live")).to_contain_text("req/s now")
        expect(page.locator("#bench-live")).to_contain_text("p50 TTFT")
        expect(page.locator("#benchmark-unavailable")).to_have_count(0)  # running, still deployed
        page.screenshot(path=str(ARTIFACTS / "14-benchmark-running.png"), full_page=True)
        # The job ends, the page reloads itself and shows the run.
        expect(page.locator("#results-table")).to_be_visible(timeout=JOB_PATIENCE_S * 1000)
        expect(page.locator("#job-count")).to_contain_text("80 / 80 requests")
        expect(page.locator("#results-table")).to_contain_text("requests completed")
        for plot in ("ttft_cdf", "tpot_cdf", "percentiles_vs_rate"):
            image = page.locator(f"#plot-{plot}")
            image.scroll_into_view_if_needed()
            page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=image.element_handle())
        row = page.locator("#own-runs tbody tr")
        expect(row).to_have_count(1)
        expect(row).to_contain_text("80 / 80")
        page.screenshot(path=str(ARTIFACTS / "15-benchmark-results.png"), full_page=True)

        # A second run (the form starts from the last run's settings), then both side by side.
        expect(page.locator("#f-outputTokens")).to_have_value("12")
        expect(page.locator("#f-rates")).to_have_value("20, 40")
        page.fill("#f-rates", "30")
        page.fill("#f-requests", "20")
        page.click("#run-benchmark")
        expect(page).to_have_url(re.compile(r"/deployments/live/benchmark\?job="))
        # the page reloads itself when the job ends; a click racing that reload was lost (CI): wait for
        # the job through the API, then open the tab afresh
        second = page.url.split("job=")[1].split("&")[0]
        assert wait_for(base, second)["status"] == "succeeded"
        page.goto(base + "/deployments/live/benchmark")
        expect(page.locator("#own-runs tbody tr")).to_have_count(2)
        for box in page.locator("#own-runs input[name=runs]").all():
            box.check()
        page.click("#compare-runs")
        expect(page.locator("#results h2")).to_have_text("Comparison")
        expect(page.locator("#verdict-1")).to_contain_text("live (disaggregated)")
        expect(page.locator("#results-table thead th")).to_have_count(3)
        for plot in ("ttft_cdf", "tpot_cdf", "percentiles_vs_rate"):  # one is a sweep: the rate plot too
            page.wait_for_function("img => img.complete && img.naturalWidth > 0",
                                   arg=page.locator(f"#plot-{plot}").element_handle())
        page.screenshot(path=str(ARTIFACTS / "16-benchmark-compare.png"), full_page=True)
        assert errors == []
        browser.close()

    runs = api(base, "GET", "/deployments/live/benchmarks")["runs"]
    assert [r["summary"]["requests"]["sent"] for r in runs] == [20, 80]
    assert all(r["summary"]["requests"]["failed"] == 0 for r in runs)
    assert live["kube"].objects() == {"configmaps": [], "jobs": [], "pods": []}  # nothing left in the cluster
