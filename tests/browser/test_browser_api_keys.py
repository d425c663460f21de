"""API keys in a real browser: create a key on the deployment page, see it once (gone after a
reload), find it in the list with its creation time, revoke it and see it gone; the Kubernetes
stand-in's Secret (what the gateway reads) reflects every step.

As in test_browser_status.py, the deployment's engine is the Automation API engine's test double
and its outputs point at the Kubernetes stand-in on loopback; everything between the browser and
that API is real (the web app on a real HTTP server, its JSON API read by the page's script, the
forms with their CSRF tokens, the session cookie).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

import pytest

from components.render.endpoint_names import FIRST_KEY_NAME
from tests.browser.live_app import api, need_a_browser, serving, wait_for
from tests.browser.test_browser_flow import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, patient_context
from tests.web.keys_support import ENDPOINT_URL, EndpointEngine, quiet_checks, seed_keys
from tests.web.support import TOKEN

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    need_a_browser()
    from tests.fakes.kube_api import FakeKubeApi

    with FakeKubeApi("healthy") as kube:
        secret = seed_keys(kube)
        with serving(Path(tmp_path_factory.mktemp("raypd-home")), EndpointEngine(kube)) as (base, app):
            quiet_checks(app)
            yield {"base": base, "kube": kube, "secret": secret, "ns": kube.spec.namespace}


def test_create_a_key_see_it_once_then_revoke_it(live):
    from playwright.sync_api import expect, sync_playwright

    base, kube = live["base"], live["kube"]

    def keys_in_cluster() -> dict[str, str]:
        return kube.secret_data(live["ns"], live["secret"])

    api(base, "POST", "/deployments", {"name": "keys", "config": {}})
    wait_for(base, api(base, "POST", "/deployments/keys/up")["job"])

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        page = patient_context(browser, 900).new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda msg: msg.type == "error" and errors.append(msg.text))
        page.on("dialog", lambda dialog: dialog.accept())  # the revoke button asks first
        page.goto(base + "/deployments/keys")
        page.fill("#token", TOKEN)
        page.click("button[type=submit]")
        expect(page).to_have_url(re.compile(r"/deployments/keys"))

        box = page.locator("#api-keys")
        expect(box.locator(f'tr[data-key="{FIRST_KEY_NAME}"]')).to_contain_text("2026-12-01T12:00:00Z")
        expect(page.locator("#external-url")).to_have_text(ENDPOINT_URL)
        expect(page.locator("#external-curl")).to_contain_text("$RAYPD_API_KEY")

        page.fill("#api-key-name", "browser")
        page.click("#api-key-create-button")
        expect(page).to_have_url(re.compile(r"/deployments/keys#api-keys$"))
        shown = page.locator("#new-api-key-value")
        expect(shown).to_be_visible()
        key = shown.input_value()
        assert keys_in_cluster().get("browser") == key and key.startswith("rpd_")  # the gateway's Secret has it
        row = box.locator('tr[data-key="browser"]')
        expect(row).to_be_visible()
        expect(row.locator("td >> nth=1")).to_have_text(re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"))
        assert key not in row.inner_text()
        page.screenshot(path=str(ARTIFACTS / "14-api-key-created.png"), full_page=True)

        page.reload()
        expect(box.locator('tr[data-key="browser"]')).to_be_visible()
        expect(page.locator("#new-api-key")).to_have_count(0)  # shown once: gone after a reload
        assert key not in page.content()

        row = box.locator('tr[data-key="browser"]')
        row.locator('button[data-revoke="browser"]').click()
        expect(page.locator(".flash")).to_contain_text("API key browser revoked")
        expect(box.locator(f'tr[data-key="{FIRST_KEY_NAME}"]')).to_be_visible()
        expect(box.locator('tr[data-key="browser"]')).to_have_count(0)
        assert "browser" not in keys_in_cluster() and FIRST_KEY_NAME in keys_in_cluster()
        page.screenshot(path=str(ARTIFACTS / "15-api-key-revoked.png"), full_page=True)
        assert errors == []
        browser.close()
