"""Pending changes in a real browser (Debian chromium through Playwright) against `python -m webui`
with the offline engine (the server and page of test_browser_flow.py): a planned deployment's decode
replicas go 1 -> 2, and the preview says it happens in place with no restart of the running
engines, at the cost shown; the list and the page keep showing what was planned with a "pending
changes" mark; a model setting then offers both strategies with their extra cost and its price basis, and choosing zero
downtime previews again with it; Discard (its confirm accepted) puts the planned settings back and
the mark goes away. Any console error (a CSP violation included) fails it.
"""

from __future__ import annotations

import re

import pytest

from components.config.catalogue import price_basis
from components.config.spec import DeploymentSpec
from components.plan.topology import estimate_cost
from tests.browser.test_browser_flow import JOB_WAIT_MS, _logged_in, page, server, shot  # noqa: F401 - page, server: fixtures

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _usd(config: dict) -> str:
    return f"${estimate_cost(DeploymentSpec.from_config(config, 'x')).usd_per_hour:,.2f}/h"


def test_a_pending_change_is_marked_and_discarded_in_a_browser(server, page):  # noqa: F811 - fixtures
    from playwright.sync_api import expect

    base = server["base"]
    planned, grown = _usd({}), _usd({"raypd:decode": {"replicas": 2}})
    basis = price_basis(DeploymentSpec.from_config({}, "x").region)  # what the form's region is priced at
    _logged_in(page, base)
    page.goto(base + "/deployments/new")
    page.fill("#f-name", "pend")
    page.click("#preview-button")
    page.click("#launch-button")
    expect(page.locator("#job-percent")).to_have_text("100%", timeout=JOB_WAIT_MS)
    expect(page.locator("h1 .badge").first).to_have_text("planned (offline)")
    page.reload()
    expect(page.locator("#deployed-line")).to_contain_text("decode: 1 replica ")
    expect(page.locator("#deployed-line .pending-mark")).to_have_count(0)

    # decode replicas 1 -> 2: saved (and previewed), not planned.
    page.click("#change-settings")
    expect(page.locator("#f-raypd-decode-replicas")).to_have_value("1")
    page.fill("#f-raypd-decode-replicas", "2")
    page.click("#save-change")
    expect(page).to_have_url(re.compile(r"/deployments/pend\?job="))
    expect(page.locator("#job-percent")).to_have_text("100%", timeout=JOB_WAIT_MS)
    page.reload()
    line = page.locator("#deployed-line")
    expect(line).to_contain_text("Planned (offline): ")
    expect(line).to_contain_text("decode: 1 replica ")
    expect(line).to_contain_text(planned)
    expect(line.locator(".pending-mark")).to_have_text("pending changes")
    panel = page.locator("#pending-changes")
    expect(panel.locator('tr[data-key="raypd:decode.replicas"]')).to_contain_text("1")
    expect(panel.locator('tr[data-key="raypd:decode.replicas"] td').nth(2)).to_have_text("2")
    expect(panel.locator("#old-cost")).to_have_text(planned)
    expect(panel.locator("#new-cost")).to_have_text(grown)
    expect(page.locator("#discard-changes")).to_be_enabled()
    # What the preview says the scale does: in place, no restart, no strategy to choose.
    effects = page.locator("#effects")
    expect(effects).to_contain_text("in place, no restart of the running engines")
    expect(page.locator("#chosen-strategy")).to_contain_text("no downtime, no extra nodes")
    expect(page.locator("#strategy-choices")).to_have_count(0)
    expect(page.locator("#job-changes")).to_contain_text("GPU node groups resize in place")
    shot(page, "16-pending-changes")

    page.goto(base + "/")
    row = page.locator('tr[data-name="pend"]')
    expect(row.locator(".pending-mark")).to_have_text("pending changes")
    expect(row.locator("td.topology")).to_contain_text("decode: 1 replica ")
    expect(row.locator("td.topology")).not_to_contain_text("2 replicas")
    expect(row).to_contain_text(planned)
    shot(page, "17-list-pending-mark")

    page.goto(base + "/deployments/pend/benchmark")
    expect(page.locator("#deployed-line")).to_contain_text("a benchmark measures what runs")

    # A model setting restarts the engines: the preview offers both strategies with their price.
    page.goto(base + "/deployments/pend/change")
    page.fill("#f-raypd-model-maxModelLen", "8192")
    page.click("#save-change")
    expect(page.locator("#job-percent")).to_have_text("100%", timeout=JOB_WAIT_MS)
    page.reload()
    expect(page.locator("#effects")).to_contain_text("engines restart")
    choices = page.locator("#strategy-choices")
    in_place, zero = choices.locator('tr[data-strategy="inPlace"]'), choices.locator('tr[data-strategy="newCluster"]')
    expect(in_place).to_contain_text("about 4 min")
    expect(in_place.locator(".badge")).to_have_text("chosen")
    expect(zero).to_contain_text("none")  # its downtime
    expect(zero).to_contain_text("2 × g6.8xlarge")  # the old cluster's nodes during the switch
    expect(zero).to_contain_text(re.compile(r"\$\d+\.\d\d"))  # their cost for the switch
    expect(page.locator("#price-basis")).to_contain_text(f"Prices on this page: {basis}")  # said once, the page's
    expect(zero).to_contain_text("L-DB2E81BA")  # the vCPU quota the preflight checks
    shot(page, "17b-strategies")
    page.click("#use-newCluster")
    expect(page.locator("#job-percent")).to_have_text("100%", timeout=JOB_WAIT_MS)
    page.reload()
    # A total over the switch, not a rate; the basis is the page's one line (#price-basis).
    expect(page.locator("#chosen-strategy")).to_contain_text(
        re.compile(r"zero downtime \(new cluster\).*\$\d+\.\d\d over ~\d+ min for the extra nodes"))

    # Discard (the page's confirm is accepted): the planned settings are back, the mark gone.
    page.goto(base + "/deployments/pend")
    page.click("#discard-changes")
    expect(page).to_have_url(re.compile(r"/deployments/pend$"))
    expect(page.locator(".flash")).to_contain_text("Pending changes discarded")
    expect(page.locator("#pending-changes")).to_have_count(0)
    expect(page.locator("#deployed-line .pending-mark")).to_have_count(0)
    expect(page.locator("#deployed-line")).to_contain_text("decode: 1 replica ")
    shot(page, "18-discarded")
    page.goto(base + "/")
    expect(page.locator('tr[data-name="pend"] .pending-mark')).to_have_count(0)
    page.goto(base + "/deployments/pend/change")
    expect(page.locator("#f-raypd-decode-replicas")).to_have_value("1")
    assert page.console_errors == []
