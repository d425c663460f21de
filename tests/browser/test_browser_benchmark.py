"""The Benchmark tab in a real browser, with the benchmark really run as a Kubernetes Job.

As in test_browser_status: no Pulumi CLI or AWS here, so the deployment's engine is the test
double of the Automation API engine and its outputs point at the fake Kubernetes API on loopback
(tests/fakes/kube_api.py). That fake runs a created Job's container command for real (the
ConfigMap's files on the PYTHONPATH), so the load generator sends real streamed requests to a
local OpenAI-compatible server (tests/fakes/openai_server.py) and the web app reads its progress
and results back from the pod log. Everything between the browser and those servers is real.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.browser.test_browser_flow import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS
from tests.web.support import TOKEN, FakeEngine, settings_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _api(base: str, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(base + "/api/v1" + path, data=data, method=method, headers={
        "Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _wait(base: str, job: str, timeout: float = 90.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        found = _api(base, "GET", f"/jobs/{job}")
        if found["status"] not in ("queued", "running"):
            return found
        assert time.monotonic() < deadline, f"job {job} did not end"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium: scripts/ensure-chromium)")
    pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    from werkzeug.serving import make_server

    from tests.fakes.kube_api import FakeKubeApi
    from tests.fakes.openai_server import OpenAIServer
    from webui import close_app, create_app
    from webui.engines.offline import OfflineEngine
    from webui.engines.select import EngineSet

    kube = FakeKubeApi("healthy").start()
    openai = OpenAIServer("qwen3.5-9b", ttft_s=0.03, itl_s=0.004, output_tokens=12).start()
    engine = FakeEngine()
    engine.live = {**kube.outputs(), "openaiBaseUrl": openai.base_url}
    settings = settings_for(Path(tmp_path_factory.mktemp("raypd-home")))
    app = create_app(settings, engines=EngineSet(engine, {engine.name: engine,
                                                          "offline": OfflineEngine(settings)}))
    app.extensions["raypd"].service.checker.verify_fn = lambda outputs, kubeconfig: _empty_verify()
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        yield {"base": base, "kube": kube, "openai": openai}
    finally:
        server.shutdown()
        close_app(app)
        openai.stop()
        kube.stop()


def _empty_verify() -> Any:
    from components.checks import Report

    return Report.of("verify", [])


def test_benchmark_tab_runs_a_sweep_in_the_cluster_shows_progress_plots_and_compares(live):
    from playwright.sync_api import expect, sync_playwright

    base = live["base"]
    _api(base, "POST", "/deployments", {"name": "live", "config": {}})
    assert _wait(base, _api(base, "POST", "/deployments/live/up")["job"])["status"] == "succeeded"
    _api(base, "POST", "/deployments", {"name": "plan", "config": {}})  # never deployed

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1280, "height": 1000}).new_page()
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
        page.fill("#bench-rates", "20, 40")
        page.fill("#bench-requests", "40")
        page.fill("#bench-inputTokens", "32")
        page.fill("#bench-outputTokens", "12")
        page.fill("#bench-sloTtftMs", "500")
        page.fill("#bench-sloTpotMs", "50")
        page.click("#run-benchmark")
        expect(page).to_have_url(re.compile(r"/deployments/live/benchmark\?job="))
        expect(page.locator("#bench-live")).to_contain_text("req/s now", timeout=60_000)
        expect(page.locator("#bench-live")).to_contain_text("p50 TTFT")
        expect(page.locator("#benchmark-unavailable")).to_have_count(0)  # running, still deployed
        page.screenshot(path=str(ARTIFACTS / "14-benchmark-running.png"), full_page=True)
        # The job ends, the page reloads itself and shows the run.
        expect(page.locator("#results-table")).to_be_visible(timeout=90_000)
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
        expect(page.locator("#bench-outputTokens")).to_have_value("12")
        expect(page.locator("#bench-rates")).to_have_value("20, 40")
        page.fill("#bench-rates", "30")
        page.fill("#bench-requests", "20")
        page.click("#run-benchmark")
        expect(page.locator("#own-runs tbody tr")).to_have_count(2, timeout=90_000)
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

    runs = _api(base, "GET", "/deployments/live/benchmarks")["runs"]
    assert [r["summary"]["requests"]["sent"] for r in runs] == [20, 80]
    assert all(r["summary"]["requests"]["failed"] == 0 for r in runs)
    assert live["kube"].objects() == {"configmaps": [], "jobs": [], "pods": []}  # nothing left in the cluster
