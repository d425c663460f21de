"""The forms' Autoscaling fieldsets in a real browser (Debian chromium through Playwright) against
`python -m webui` with the offline engine (the server and page of test_browser_flow.py), issue 30 §3:
the new-deployment form's decode group is filled and the stack launched; the change form shows the
deployed block, a new maxReplicas previews "in place, no engine restarts", and emptying the group
turns autoscaling off. A bad bound comes back next to its field. Any console error fails it.
"""

from __future__ import annotations

import re

import pytest

from tests.browser.test_browser_flow import JOB_WAIT_MS, _logged_in, page, server, shot  # noqa: F401 - page, server: fixtures

pytestmark = [pytest.mark.browser, pytest.mark.slow]
DECODE = "#f-raypd-decode-autoscaling-"
KEYS = ("minReplicas", "maxReplicas", "targetOngoingRequests", "upscaleDelaySeconds", "downscaleDelaySeconds")


def test_the_autoscaling_fieldset_round_trips_through_launch_change_and_clear(server, page):  # noqa: F811 - fixtures
    from playwright.sync_api import expect

    base = server["base"]
    _logged_in(page, base)
    page.goto(base + "/deployments/new")
    group = page.locator("#decode-autoscaling")
    expect(group.locator("legend")).to_have_text("Autoscaling")
    expect(group.locator('a[href="/docs/scaling.md"]')).to_have_count(1)
    # The colocated phase's group hides with its section until that mode is chosen.
    expect(page.locator("#colocated-autoscaling")).to_be_hidden()
    page.select_option("#f-raypd-mode", "colocated")
    expect(page.locator("#colocated-autoscaling")).to_be_visible()
    expect(group).to_be_hidden()
    page.select_option("#f-raypd-mode", "disaggregated")

    # A bound outside the rules: the spec's error lands next to the field it names.
    page.fill("#f-name", "autoscaled")
    page.fill(DECODE + "minReplicas", "3")
    page.fill(DECODE + "maxReplicas", "2")
    page.fill(DECODE + "targetOngoingRequests", "8")
    page.click("#preview-button")
    expect(page.locator(DECODE + "minReplicas-error")).to_contain_text("minReplicas 3 is above maxReplicas 2")
    shot(page, "30-autoscaling-form-error")

    page.fill(DECODE + "minReplicas", "1")
    page.fill(DECODE + "maxReplicas", "4")
    page.click("#preview-button")
    expect(page.locator("h1")).to_contain_text("Preview: autoscaled")
    page.click("#launch-button")
    expect(page.locator("#job-percent")).to_have_text("100%", timeout=JOB_WAIT_MS)
    expect(page.locator("h1 .badge").first).to_have_text("planned (offline)")

    # The change form holds the deployed block; a new bound previews in place.
    page.click("#change-settings")
    expect(page.locator(DECODE + "maxReplicas")).to_have_value("4")
    expect(page.locator(DECODE + "targetOngoingRequests")).to_have_value("8")
    expect(page.locator("#f-raypd-prefill-autoscaling-maxReplicas")).to_have_value("")
    page.fill(DECODE + "maxReplicas", "6")
    page.click("#save-change")
    expect(page).to_have_url(re.compile(r"/deployments/autoscaled\?job="))
    expect(page.locator("#job-percent")).to_have_text("100%", timeout=JOB_WAIT_MS)
    page.reload()
    expect(page.locator("#effects")).to_contain_text("decode: maxReplicas 4 -> 6: in place, no engine restarts")
    expect(page.locator("#chosen-strategy")).to_contain_text("no downtime, no extra nodes")
    row = page.locator('#pending-changes tr[data-key="raypd:decode.autoscaling.maxReplicas"] td')
    expect(row.nth(2)).to_have_text("6")
    shot(page, "31-autoscaling-bound-in-place")

    # Every field of the group emptied: autoscaling off (null in the merge patch), a fixed count.
    page.click("#change-settings")
    for key in KEYS:
        page.fill(DECODE + key, "")
    page.click("#save-change")
    expect(page.locator("#job-percent")).to_have_text("100%", timeout=JOB_WAIT_MS)
    page.reload()
    expect(page.locator("#effects")).to_contain_text("autoscaling is turned off for decode")
    page.goto(base + "/deployments/autoscaled/change")
    expect(page.locator(DECODE + "maxReplicas")).to_have_value("")
    shot(page, "32-autoscaling-off")
    assert page.console_errors == []
