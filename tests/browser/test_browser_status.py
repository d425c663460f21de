"""The Status panel of a real deployment, in a real browser.

No Pulumi CLI or AWS here, so the deployment's engine is the test double of the Automation API
engine (tests/web/support.py), and its stack outputs point at a fake Kubernetes API on loopback that
speaks the real paths and formats (tests/fakes/kube_api.py). Everything between the browser and that
API is real: the web app on a real HTTP server, the live status read through the Kubernetes API, the
verify run after Deploy and on "Verify now", the page's script that refreshes the panel.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import pytest

from components.config.checks import VERIFY_IDS
from tests.browser.live_app import api, need_a_browser, serving, wait_for
from tests.browser.test_browser_flow import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, patient_context
from tests.patience import JOB_PATIENCE_S
from tests.prometheus_server import need_prometheus, prometheus_with_captures
from tests.web.support import TOKEN, FakeEngine

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The stand-in cluster with a real Prometheus behind its Prometheus Service: it scrapes the
    stand-in's worker pods (what verify's metrics-flowing reads) and the real captured engine pages
    (tests/unit/prom_captures.py) under this stack's Serve deployment names, decode's after a KV
    load that failed, so the SLO strip has real numbers and one real alert fires."""
    need_a_browser()
    need_prometheus()
    from tests.fakes.kube_api import FakeKubeApi

    with FakeKubeApi("healthy") as kube, prometheus_with_captures(kube, tmp_path_factory.mktemp("prometheus")):
        engine = FakeEngine()
        engine.live = kube.outputs()
        with serving(Path(tmp_path_factory.mktemp("raypd-home")), engine) as (base, _):
            yield {"base": base, "kube": kube}


def test_status_panel_shows_the_live_cluster_and_verify_now_reruns_the_checks(live):
    from playwright.sync_api import expect, sync_playwright

    base = live["base"]
    api(base, "POST", "/deployments", {"name": "live", "config": {}})
    wait_for(base, api(base, "POST", "/deployments/live/up")["job"])

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        page = patient_context(browser, 900).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
        page.goto(base + "/deployments/live")
        page.fill("#token", TOKEN)
        page.click("button[type=submit]")
        expect(page).to_have_url(re.compile(r"/deployments/live"))

        panel = page.locator("#live-status")
        expect(panel).to_contain_text("RayService ray-llm: Ready")
        expect(panel).to_contain_text("Serve application llm: RUNNING")
        expect(panel).to_contain_text("Prefill:qwen3_5-9b")
        expect(panel.locator("table", has=page.locator("th", has_text="GPU node"))).to_contain_text("us-east-2a")
        expect(panel).to_contain_text("ray-llm")
        # The last verify shows once: with the job that made it, or in the Status panel.
        report = page.locator("#verify-report, #job-verify-report")
        expect(report).to_have_attribute("data-ok", "1")
        expect(report.locator('tr[data-check="kv-transfer"]')).to_contain_text("pass")
        expect(report.locator('tr[data-check="metrics-flowing"]')).to_contain_text("pass")

        # The SLO strip and the alerts, live from Prometheus through the Kubernetes API proxy.
        strip = panel.locator("#slo-strip")
        expect(strip.locator('[data-key="ttft_p95"] .slo-value')).to_have_text(re.compile(r"^\d+(\.\d+)? m?s$"))
        expect(strip.locator('[data-key="requests_per_s"] .slo-value')).to_have_text(re.compile(r"/s$"))
        expect(strip.locator('[data-key="ttft_p95"]')).to_contain_text("SLO 2.50 s")
        alerts = panel.locator("#alerts-firing")
        expect(alerts.locator('tr[data-alert="RaypdNixlTransferFailed"]')).to_contain_text("firing")
        expect(alerts.locator('tr[data-alert="RaypdNixlTransferFailed"]')).to_contain_text(
            "docs/troubleshooting.md#alert-nixl-transfers-failed")
        link = panel.locator("#dashboard-links a").first
        expect(link).to_have_attribute("href", "http://127.0.0.1:3000/d/raypd-live?orgId=1&from=now-1h&to=now")
        expect(panel.locator("#dashboard-links code")).to_contain_text("port-forward svc/raypd-grafana 3000:80")
        page.screenshot(path=str(ARTIFACTS / "12-status-live.png"), full_page=True)

        before = len(live["kube"].requests)
        page.click("#verify-now")
        expect(page).to_have_url(re.compile(r"/deployments/live\?job="))
        total = len(VERIFY_IDS)
        expect(page.locator("#job-count")).to_contain_text(f"{total} / {total} checks", timeout=JOB_PATIENCE_S * 1000)
        expect(page.locator("#job-verify-report")).to_have_attribute("data-ok", "1")
        assert len(live["kube"].requests) > before  # the checks really asked the cluster again
        page.screenshot(path=str(ARTIFACTS / "13-status-after-verify.png"), full_page=True)
        assert errors == []
        browser.close()
