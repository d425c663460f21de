"""A report's badge is its verdict: "not checked" when most checks were skipped, never "ok".

An offline deployment has nothing to verify, so every verify check says `skip`; the preflight
without AWS credentials skips its AWS checks too. Both reports have `ok: true` (nothing failed), and
both must read "not checked" on the deployment page and in the job's summary line.
"""

from __future__ import annotations

import re

from tests.web.support import AUTH, create, extract_csrf, login, text_of, wait_for_job


def badge_of(html: str, dom_id: str) -> tuple[str, str]:
    """The verdict attribute and the badge text of the report with this id."""
    match = re.search(rf'id="{dom_id}"[^>]*data-verdict="([^"]+)">\s*<p class="report-head">'
                      rf'<strong>[^<]*</strong>\s*<span class="badge (badge-[^"]+)">([^<]+)</span>', html)
    assert match, f"no report {dom_id} with a badge in the page"
    assert match.group(3) == match.group(1)
    return match.group(1), match.group(2)


def test_all_skipped_verify_shows_not_checked_not_ok(app):
    browser = app.test_client()
    login(browser)
    create(browser, "demo")
    page = text_of(browser.get("/deployments/demo"))
    started = browser.post("/deployments/demo/verify", data={"csrf_token": extract_csrf(page)})
    job_id = started.headers["Location"].split("job=")[1]
    job = wait_for_job(browser, job_id, headers={})
    report = job["reports"]["verify"]
    assert report["ok"] is True and {c["status"] for c in report["checks"]} == {"skip"}
    after = text_of(browser.get("/deployments/demo"))
    verdict, tone = badge_of(after, "job-verify-report")  # shown once: with the job that made it
    assert verdict == "not checked" and tone == "badge-neutral"
    job_page = text_of(browser.get(f"/deployments/demo?job={job_id}"))
    assert "Checks this job ran: verify not checked" in job_page
    assert "verify ok" not in job_page


def test_preflight_without_aws_credentials_is_not_checked(app):
    browser = app.test_client()
    login(browser)
    create(browser, "demo")
    started = browser.post("/api/v1/deployments/demo/preflight", headers=AUTH)
    report = wait_for_job(browser, started.get_json()["job"])["reports"]["preflight"]
    skipped = [c["id"] for c in report["checks"] if c["status"] == "skip"]
    assert report["ok"] is True and len(skipped) * 2 > len(report["checks"]), report
    verdict, tone = badge_of(text_of(browser.get("/deployments/demo")), "job-preflight-report")
    assert verdict == "not checked" and tone == "badge-neutral"


def test_an_ok_report_with_warnings_names_them_beside_the_badge(app):
    """A warn is no failure and no skip, so the verdict stays "ok"; but a verify whose key PD
    evidence checks found nothing either way must not look clean: the warnings show beside it."""
    from components.config.checks import VERIFY_IDS, Check, Report

    checks = [Check.warned(i, "t", "no evidence either way") if i in ("nixl-backend", "kv-transfer")
              else Check.passed(i, "t", "seen") for i in VERIFY_IDS]
    report = {**Report.of("verify", checks).as_dict(), "at": "2026-12-01T12:00:00Z"}
    with app.app_context():
        macro = app.jinja_env.get_template("_macros.html").module.check_report
        html = str(macro(report, "verify-report"))
    verdict, tone = badge_of(html, "verify-report")
    assert verdict == "ok" and tone == "badge-ok"
    assert re.search(r'class="badge badge-warn" data-warnings="2">2 warnings: nixl-backend, kv-transfer<', html), html
    clean = {**Report.of("verify", [Check.passed(i, "t", "seen") for i in VERIFY_IDS]).as_dict()}
    with app.app_context():
        assert "data-warnings" not in str(macro(clean, "verify-report"))
