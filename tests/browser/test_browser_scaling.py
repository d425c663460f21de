"""The Scaling panel of a real deployment, in a real browser (issue 30 §3, §4).

As tests/browser/test_browser_status.py: the deployment's engine is the Automation API engine's test
double, its outputs point at the Kubernetes stand-in (tests/fakes/kube_api.py), and a real
Prometheus scrapes the stand-in's worker pods. The stack autoscales decode (1..3, target 8); Serve is
scaling it up from 1 to 2 (its status and its controller log say so), prefill runs 2 requests and
decode 7, so decode's signal is 5 (2 of its 7 wait on prefill). The stand-in lists decode's
STARTING replica and exports its Serve series (not yet any engine series), as Ray does, so Deploy's
verify passes without waiting out metrics-flowing.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.browser.live_app import api, need_a_browser, serving, wait_for
from tests.browser.test_browser_flow import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, patient_context
from tests.patience import until
from tests.prometheus_server import answers, need_prometheus, prometheus_scraping
from tests.web.support import TOKEN, FakeEngine

pytestmark = [pytest.mark.browser, pytest.mark.slow]
AUTOSCALED = {"raypd:decode": {"replicas": 1, "autoscaling": {
    "minReplicas": 1, "maxReplicas": 3, "targetOngoingRequests": 8}}}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    need_a_browser()
    need_prometheus()
    from tests.fakes.kube_api import FakeKubeApi

    with FakeKubeApi("healthy", config=AUTOSCALED) as kube:
        decode = kube.deployment_names["decode"]
        kube.serve_load = {"prefill": 2, "decode": 7}
        kube.serve_overrides = {decode: {"status": "UPSCALING", "status_trigger": "AUTOSCALING",
                                         "message": "Upscaling from 1 to 2 replicas.", "target_num_replicas": 2,
                                         "replica_states": ["RUNNING", "STARTING"]}}
        kube.scaling_log = [f"INFO 2026-12-06 12:00:01,234 controller 1200 -- Upscaling Deployment(name='{decode}', "
                            "app='llm') from 1 to 2 replicas. Current ongoing requests: 9.20, current running "
                            "replicas: 1."]
        with prometheus_scraping(kube, tmp_path_factory.mktemp("prometheus")) as base:
            until(lambda: answers(base, "sum(ray_serve_replica_processing_queries) == 9"),
                  "both phases' running requests scraped")
            engine = FakeEngine()
            engine.live = kube.outputs()
            with serving(Path(tmp_path_factory.mktemp("raypd-home")), engine) as (app_base, _):
                yield {"base": app_base, "kube": kube}


def test_scaling_panel_shows_each_phase_its_signal_and_the_last_decision(live):
    from playwright.sync_api import expect, sync_playwright

    base = live["base"]
    api(base, "POST", "/deployments", {"name": "scaled", "config": AUTOSCALED})
    asked = time.monotonic()
    up = wait_for(base, api(base, "POST", "/deployments/scaled/up")["job"])
    print(f"up job: {time.monotonic() - asked:.1f} s")  # on an idle machine: well within PATIENCE_S
    # Deploy's verify passes on a deployment scaling up: the STARTING replica has its phase (Ray
    # Serve's series from its start on) and served nothing yet, which metrics-flowing counts, not
    # waits for (its full wait was 75 s of this test while the stand-in exported no replica it listed).
    checks = {c["id"]: c for c in up["reports"]["verify"]["checks"]}
    assert up["status"] == "succeeded" and up["reports"]["verify"]["ok"] is True, \
        {cid: c["detail"] for cid, c in checks.items() if c["status"] == "fail"}
    assert checks["metrics-flowing"]["status"] == "pass", checks["metrics-flowing"]
    assert "decode 1 of 2" in checks["metrics-flowing"]["detail"], checks["metrics-flowing"]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        page = patient_context(browser, 900).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
        page.goto(base + "/deployments/scaled")
        page.fill("#token", TOKEN)
        page.click("button[type=submit]")
        expect(page).to_have_url(re.compile(r"/deployments/scaled"))

        panel = page.locator("#scaling")
        expect(panel).to_contain_text("Scaling")
        rows = panel.locator("#scaling-phases tbody tr")
        expect(rows).to_have_count(2)
        decode = panel.locator('#scaling-phases tr[data-phase="decode"] td')
        expect(decode.nth(0)).to_have_text("decode")
        expect(decode.nth(1)).to_have_text("1 (+1 starting)")
        expect(decode.nth(2)).to_have_text("2")
        expect(decode.nth(3)).to_have_text("1")
        expect(decode.nth(4)).to_have_text("3")
        expect(decode.nth(5)).to_contain_text("decode minus prefill")
        expect(decode.nth(6)).to_have_text("5.0 requests (5.0 per replica, target 8)")
        expect(decode.nth(7)).to_contain_text("UPSCALING · AUTOSCALING · Upscaling from 1 to 2 replicas.")
        prefill = panel.locator('#scaling-phases tr[data-phase="prefill"] td')
        expect(prefill.nth(0)).to_have_text("prefill (fixed)")
        expect(prefill.nth(6)).to_have_text("2.0 requests (2.0 per replica)")
        decision = panel.locator('#scaling-decisions tr[data-phase="decode"]')
        expect(decision).to_have_count(1)
        expect(decision).to_contain_text("1 → 2")
        expect(decision).to_contain_text("Current ongoing requests: 9.20")
        expect(panel.locator("#scaling-decisions")).to_contain_text(
            "From Serve controller log (/serve/controller_1200.log).")
        expect(panel).to_contain_text("signal: Prometheus, now")
        page.screenshot(path=str(ARTIFACTS / "14-status-scaling.png"), full_page=True)
        assert errors == []
        browser.close()
