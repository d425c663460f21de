"""The whole web flow in a real browser (Debian chromium through Playwright), against a real server.

`python -m webui` runs as a subprocess on a free loopback port with a temp RAYPD_HOME and the
offline engine, as a user would start it. Screenshots of every page land in test-artifacts/
(gitignored). Console errors fail the test: a Content-Security-Policy violation shows up there.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.patience import JOB_PATIENCE_S, PATIENCE_S
from tests.required_tools import need_chromium

CHROMIUM = Path("/usr/bin/chromium")
# Waits for a job to end (tests/patience.py says why they are longer); checks of a page already shown keep
# the default.
JOB_WAIT_MS = JOB_PATIENCE_S * 1000
PROJECT = Path(__file__).resolve().parents[2]
ARTIFACTS = PROJECT / "test-artifacts" / "browser"
TOKEN = "browser-test-token-0123456789"
HF_TOKEN = "hf_BrowserSecretToken0123456789xyz"
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run",
]

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def patient_context(browser: Any, height: int = 900) -> Any:
    """A browser context whose clicks and fills wait PATIENCE_S, not Playwright's 30 s, and whose
    navigations wait JOB_PATIENCE_S: a preview's form POST runs an offline plan before its page comes
    back, which took over a minute on CI's busy 2-core machine (tests/patience.py)."""
    context = browser.new_context(viewport={"width": 1280, "height": height})
    context.set_default_timeout(PATIENCE_S * 1000)
    context.set_default_navigation_timeout(JOB_PATIENCE_S * 1000)
    return context


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    need_chromium(CHROMIUM)
    home = tmp_path_factory.mktemp("raypd-home")
    port = _free_port()
    env = {**os.environ, "RAYPD_HOME": str(home), "RAYPD_ENGINE": "offline", "RAYPD_TOKEN": TOKEN}
    process = subprocess.Popen(
        [sys.executable, "-m", "webui", "--port", str(port)], cwd=PROJECT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    base = f"http://127.0.0.1:{port}"
    banner = process.stdout.readline() if process.stdout else ""
    deadline = time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=1) as response:
                if response.status == 200:
                    break
        except OSError:
            time.sleep(0.1)
    else:
        process.kill()
        pytest.fail("the web app did not start")
    yield {"base": base, "banner": banner, "home": str(home)}
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="module")
def page(server: dict[str, str]):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        context = patient_context(browser)
        tab = context.new_page()
        # Script errors and CSP violations; a 400 page (the form with errors) is not one.
        tab.console_errors = []  # type: ignore[attr-defined]
        tab.on("console", lambda msg: msg.type == "error" and not msg.text.startswith("Failed to load resource")
               and tab.console_errors.append(msg.text))
        tab.on("pageerror", lambda exc: tab.console_errors.append(str(exc)))
        tab.on("dialog", lambda dialog: dialog.accept())
        yield tab
        context.close()
        browser.close()


def shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_server_prints_its_url_and_token_source(server):
    assert server["banner"].startswith(f"raypd web app on {server['base']}/")


def test_launch_watch_and_tear_down_in_a_browser(server, page):
    from playwright.sync_api import expect

    base = server["base"]
    page.goto(base + "/")
    expect(page).to_have_url(re.compile(r"/login"))
    shot(page, "01-login")
    page.fill("#token", TOKEN)
    page.click("button[type=submit]")
    expect(page.locator("h1")).to_have_text("Deployments")
    expect(page.locator("#engine-banner")).to_contain_text("nothing is created in AWS")
    shot(page, "02-list-empty")

    # A bad value: the server names the field, next to it.
    page.click("text=New deployment >> nth=0")
    expect(page.locator("h1")).to_have_text("New deployment")
    shot(page, "03-new-form")
    page.fill("#f-name", "browser-demo")
    page.fill("#f-raypd-prefill-tensorParallelSize", "2")
    page.click("#preview-button")
    error = page.locator("#f-raypd-prefill-tensorParallelSize-error")
    expect(error).to_contain_text("g6.8xlarge has 1")
    shot(page, "04-new-form-error")

    # Fix it, add a token, preview.
    page.fill("#f-raypd-prefill-tensorParallelSize", "1")
    page.fill("#f-raypd-decode-replicas", "2")
    page.fill("#f-raypd-hfToken", HF_TOKEN)
    page.click("#preview-button")
    expect(page.locator("h1")).to_contain_text("Preview: browser-demo")
    expect(page.locator("#rayservice-yaml")).to_contain_text("kind: RayService")
    expect(page.locator("svg.arch")).to_contain_text("KV cache")
    expect(page.locator("body")).to_contain_text("offline plan: nothing was created in AWS")
    shot(page, "05-preview")
    assert HF_TOKEN not in page.content()

    # Launch and watch the progress bar reach 100%.
    page.click("#launch-button")
    expect(page).to_have_url(re.compile(r"/deployments/browser-demo\?job="))
    # (The CSP forbids eval, so the wait is a locator expectation, not wait_for_function.)
    expect(page.locator("#job-percent")).to_have_text("100%", timeout=JOB_WAIT_MS)
    expect(page.locator("h1 .badge").first).to_have_text("planned (offline)")
    expect(page.locator("#job-percent")).to_have_text("100%", timeout=JOB_WAIT_MS)
    expect(page.locator("#outputs")).to_contain_text("portForwardCommand")
    expect(page.locator("#outputs")).to_contain_text("[secret]")
    expect(page.locator("#port-forward")).to_contain_text("port-forward svc/ray-llm-serve-svc 8000:8000")
    expect(page.locator("#curl-example")).to_contain_text("/v1/chat/completions")
    page.click("text=Show the rendered")
    expect(page.locator("#rayservice-yaml")).to_contain_text("kind: RayService")
    shot(page, "06-deployment")
    assert HF_TOKEN not in page.content()

    # The list shows it.
    page.goto(base + "/")
    row = page.locator('tr[data-name="browser-demo"]')
    expect(row).to_contain_text("planned (offline)")
    expect(row).to_contain_text("offline")
    shot(page, "07-list")

    # Tear down: the button waits for the exact name.
    row.locator("a").click()
    button = page.locator("#teardown-button")
    page.fill("#confirm-name", "browser-dem")
    expect(button).to_be_disabled()
    page.fill("#confirm-name", "browser-demo")
    expect(button).to_be_enabled()
    shot(page, "08-teardown-confirm")
    button.click()
    expect(page).to_have_url(re.compile(r"/\?removed=browser-demo"))
    expect(page.locator("#removed-notice")).to_contain_text("browser-demo")
    expect(page.locator('tr[data-name="browser-demo"]')).to_have_count(0)
    shot(page, "09-list-after-teardown")

    assert page.console_errors == []  # no CSP violation, no script error


def test_a_page_that_watched_a_job_end_says_so_before_it_reloads(server, page):
    """Issue 29 §2: after the end, Cancel stayed, "Event log (3)" sat above 15 lines and the title's
    badge kept the running status (a finished tear-down's read "destroying"). The page's timers are
    paused (Playwright's clock), so it stays as the end left it instead of reloading 1.2 s later:
    what a user sees in that moment."""
    from datetime import datetime, timedelta, timezone

    from playwright.sync_api import expect

    base = server["base"]
    # Its own context of the module's browser: the clock is the context's, the other tests keep theirs.
    context = patient_context(page.context.browser)
    try:
        tab = context.new_page()
        tab.on("dialog", lambda dialog: dialog.accept())
        now = datetime.now(timezone.utc)
        tab.clock.install(time=now)
        _logged_in(tab, base)
        tab.goto(base + "/deployments/new")
        tab.fill("#f-name", "watched")
        tab.click("#preview-button")
        expect(tab.locator("#launch-button")).to_be_enabled()
        tab.clock.pause_at(datetime.now(timezone.utc) + timedelta(hours=1))  # no timer fires now: no reload
        tab.click("#launch-button")
        expect(tab).to_have_url(re.compile(r"/deployments/watched\?job="))
        expect(tab.locator("#job .job-head .badge")).to_have_text("succeeded")
        expect(tab.locator("#cancel-job")).to_have_count(0)
        lines = tab.locator("#event-log li").count()
        assert lines > 15
        expect(tab.locator("#event-count")).to_have_text(str(lines))
        # The title's badge: where the job left the deployment, read when it ended. (A tear-down's
        # "destroyed" is the same code; offline it ends before its page can watch it.)
        expect(tab.locator("h1 .badge[data-status]").first).to_have_text("planned (offline)")
        shot(tab, "06b-job-ended")
        tab.clock.resume()
        expect(tab.locator("#job[data-ended]")).to_have_count(0)  # and then it reloads
    finally:
        context.close()


def _logged_in(page, base: str) -> None:
    page.goto(base + "/")
    if "/login" in page.url:
        page.fill("#token", TOKEN)
        page.click("button[type=submit]")


def test_failed_preflight_blocks_launch_until_forced_then_verify_from_status(server, page):
    from playwright.sync_api import expect

    base = server["base"]
    _logged_in(page, base)
    page.goto(base + "/deployments/new")
    page.fill("#f-name", "too-big")
    page.fill("#f-raypd-model-id", "qwen3-32b")
    page.fill("#f-raypd-model-source", "Qwen/Qwen3-32B")
    page.click("#preview-button")
    report = page.locator("#preflight-report")
    expect(report).to_have_attribute("data-ok", "0")
    expect(report.locator('tr[data-check="gpu-memory-fit"]')).to_contain_text("fail")
    expect(report.locator('tr[data-check="gpu-memory-fit"]')).to_contain_text("Fix:")
    expect(report.locator('tr[data-check="aws-credentials"]')).to_contain_text("skip")
    launch = page.locator("#launch-button")
    expect(launch).to_be_disabled()  # until "Launch anyway" is ticked
    shot(page, "10-preview-preflight-failed")
    page.check("#force-launch")
    expect(launch).to_be_enabled()
    launch.click()
    expect(page).to_have_url(re.compile(r"/deployments/too-big\?job="))
    expect(page.locator("#job-percent")).to_have_text("100%", timeout=JOB_WAIT_MS)
    expect(page.locator("#event-log")).to_contain_text("launching despite a failed preflight (force)")

    # The Status panel: offline has nothing live; Verify reports every check as skipped.
    status = page.locator("#status")
    expect(status.locator("#live-status")).to_contain_text("nothing was created in AWS")
    # The launch's preflight shows once, with its job; the Status panel points there (issue 29 §2).
    expect(page.locator("#job-preflight-report")).to_have_attribute("data-ok", "0")
    expect(status.locator("#preflight-report-above")).to_contain_text("failed")
    page.click("#verify-now")
    expect(page).to_have_url(re.compile(r"/deployments/too-big\?job="))
    expect(page.locator("#job-count")).to_contain_text("checks", timeout=JOB_WAIT_MS)
    expect(page.locator("#job-verify-report")).to_have_count(1)
    expect(page.locator('#job-verify-report tr[data-check="kv-transfer"]')).to_contain_text("skip")
    expect(status.locator("#verify-report-above")).to_have_count(1)
    expect(status.locator("#preflight-report")).to_have_attribute("data-ok", "0")
    shot(page, "11-status-verify-offline")
    assert page.console_errors == []


def test_change_settings_preview_the_difference_then_deploy(server, page):
    from playwright.sync_api import expect

    base = server["base"]
    _logged_in(page, base)
    page.goto(base + "/deployments/new")
    page.fill("#f-name", "grow")
    page.click("#preview-button")
    page.click("#launch-button")
    expect(page.locator("#job-percent")).to_have_text("100%", timeout=JOB_WAIT_MS)
    expect(page.locator("h1 .badge").first).to_have_text("planned (offline)")

    page.click("#change-settings")
    expect(page.locator("h1")).to_contain_text("Change settings: grow")
    expect(page.locator("#f-raypd-decode-replicas")).to_have_value("1")
    page.fill("#f-raypd-decode-replicas", "3")
    page.click("#save-change")
    expect(page).to_have_url(re.compile(r"/deployments/grow\?job="))
    expect(page.locator("#job-percent")).to_have_text("100%", timeout=JOB_WAIT_MS)
    from components.config.spec import DeploymentSpec
    from components.plan.topology import estimate_cost

    def usd(config: dict) -> str:
        return f"${estimate_cost(DeploymentSpec.from_config(config, 'grow')).usd_per_hour:,.2f}/h"

    changes = page.locator("#pending-changes")
    expect(changes).to_contain_text("raypd:decode.replicas")
    expect(changes).to_contain_text(usd({}))  # the reference now ...
    expect(changes.locator("#new-cost")).to_contain_text(usd({"raypd:decode": {"replicas": 3}}))
    expect(page.locator("#job-changes")).to_contain_text("What this update would do")
    expect(page.locator("#job-changes")).to_contain_text("update")
    shot(page, "14-change-preview")

    page.click("#op-up")
    expect(page.locator("#job-percent")).to_have_text("100%", timeout=JOB_WAIT_MS)
    expect(page.locator("#pending-changes")).to_have_count(0)
    shot(page, "15-change-deployed")
    assert page.console_errors == []


def test_home_holds_no_token_after_the_browser_flow(server):
    for path in Path(server["home"]).rglob("*"):
        if path.is_file():
            assert HF_TOKEN.encode() not in path.read_bytes(), path
