"""The Status panel of a real deployment, in a real browser.

No Pulumi CLI or AWS here, so the deployment's engine is the test double of the Automation API
engine (tests/web/support.py), and its stack outputs point at a fake Kubernetes API on loopback that
speaks the real paths and formats (tests/fakes/kube_api.py). Everything between the browser and that
API is real: the web app on a real HTTP server, the live status read through the Kubernetes API, the
verify run after Deploy and on "Verify now", the page's script that refreshes the panel.
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


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (install Debian's chromium: scripts/ensure-chromium)")
    pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
    from werkzeug.serving import make_server

    from tests.fakes.kube_api import FakeKubeApi
    from webui import close_app, create_app
    from webui.engines.offline import OfflineEngine
    from webui.engines.select import EngineSet

    kube = FakeKubeApi("healthy").start()
    engine = FakeEngine()
    engine.live = kube.outputs()
    settings = settings_for(Path(tmp_path_factory.mktemp("raypd-home")))
    app = create_app(settings, engines=EngineSet(engine, {engine.name: engine,
                                                          "offline": OfflineEngine(settings)}))
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        yield {"base": base, "kube": kube}
    finally:
        server.shutdown()
        close_app(app)
        kube.stop()


def test_status_panel_shows_the_live_cluster_and_verify_now_reruns_the_checks(live):
    from playwright.sync_api import expect, sync_playwright

    base = live["base"]
    _api(base, "POST", "/deployments", {"name": "live", "config": {}})
    job = _api(base, "POST", "/deployments/live/up")["job"]
    deadline = time.monotonic() + 60
    while _api(base, "GET", f"/jobs/{job}")["status"] in ("queued", "running"):
        assert time.monotonic() < deadline, "the deploy job did not end"
        time.sleep(0.2)

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
        page.goto(base + "/deployments/live")
        page.fill("#token", TOKEN)
        page.click("button[type=submit]")
        expect(page).to_have_url(re.compile(r"/deployments/live"))

        panel = page.locator("#live-status")
        expect(panel).to_contain_text("RayService ray-llm: Ready", timeout=20_000)
        expect(panel).to_contain_text("Serve application llm: RUNNING")
        expect(panel).to_contain_text("Prefill:qwen3_5-9b")
        expect(panel.locator("table >> nth=1")).to_contain_text("us-east-2a")  # the GPU nodes
        expect(panel).to_contain_text("ray-llm")
        report = page.locator("#verify-report")
        expect(report).to_have_attribute("data-ok", "1")
        expect(report.locator('tr[data-check="kv-transfer"]')).to_contain_text("pass")
        page.screenshot(path=str(ARTIFACTS / "12-status-live.png"), full_page=True)

        before = len(live["kube"].requests)
        page.click("#verify-now")
        expect(page).to_have_url(re.compile(r"/deployments/live\?job="))
        expect(page.locator("#job-count")).to_contain_text("10 / 10 checks", timeout=60_000)
        expect(page.locator("#verify-report")).to_have_attribute("data-ok", "1", timeout=30_000)
        assert len(live["kube"].requests) > before  # the checks really asked the cluster again
        page.screenshot(path=str(ARTIFACTS / "13-status-after-verify.png"), full_page=True)
        assert errors == []
        browser.close()
