"""The smaller things a new user noticed on the pages (issue 29 §2): commands and YAML without copy
buttons, doc references as plain text, the login page naming a command the user did not run, and an
event log whose count is not its length. (What only a browser shows, the page after a job's end,
is in tests/browser/test_browser_flow.py.)"""

from __future__ import annotations

import re

import pytest

from components.config.checks import VERIFY_IDS, Check, Report
from tests.web.support import AUTH, create, login, text_of, wait_for_job


def _pres(page: str) -> list[str]:
    return re.findall(r'<pre class="[^"]*" id="([^"]+)"', page)


@pytest.mark.slow
def test_every_command_and_the_yaml_has_a_copy_button(client):
    login(client)
    create(client, "demo")
    wait_for_job(client, client.post("/api/v1/deployments/demo/up", headers=AUTH).get_json()["job"])
    page = text_of(client.get("/deployments/demo"))
    shown = _pres(page)
    assert {"kubeconfig-cmd", "port-forward", "curl-example", "rayservice-yaml"} <= set(shown)
    for dom_id in shown:
        assert f'data-copy-target="{dom_id}"' in page, dom_id


def test_the_login_page_names_the_command_users_start_it_with(client):
    page = text_of(client.get("/login"))
    help_text = re.search(r'<p class="muted" id="token-help">(.*?)</p>', page, flags=re.S).group(1)
    assert "<code>make run</code>" in help_text and "RAYPD_TOKEN" in help_text


@pytest.mark.slow
def test_the_event_log_counts_its_lines(client):
    login(client)
    create(client, "demo")
    job = wait_for_job(client, client.post("/api/v1/deployments/demo/up", headers=AUTH).get_json()["job"])
    page = text_of(client.get(f"/deployments/demo?job={job['id']}"))
    log = re.search(r'<ol id="event-log" class="event-log">(.*?)</ol>', page, flags=re.S).group(1)
    lines = log.count("<li ")
    assert lines > 15 and f'Event log (<span id="event-count">{lines}</span>)' in page


# ---- doc references are links to the docs the app serves ----

def test_a_doc_reference_in_a_check_is_a_link_to_the_served_doc(app, client):
    checks = [Check.warned(i, "t", "no series; see docs/observability.md") if i == "metrics-flowing"
              else Check.passed(i, "t", "seen") for i in VERIFY_IDS]
    report = Report.of("verify", checks).as_dict()
    with app.test_request_context():
        macro = app.jinja_env.get_template("_macros.html").module.check_report
        html = str(macro(report, "verify-report"))
    assert 'see <a href="/docs/observability.md">docs/observability.md</a>' in html
    login(client)
    assert "PodMonitor" in text_of(client.get("/docs/observability.md"))


def test_the_docs_pages_have_their_anchors_and_nothing_else_is_served(client):
    login(client)
    page = text_of(client.get("/docs/troubleshooting.md"))
    assert '<a id="alert-nixl-transfers-failed"></a>' in page  # what alert runbooks point at
    assert re.search(r'<h3 id="not-enough-vcpu-quota--vcpu-quota">', page)
    for name in ("../README.md", "..%2FREADME.md", "nope.md", "contracts", "%2e%2e%2fwebui%2fapp.py"):
        assert client.get(f"/docs/{name}").status_code == 404, name


def test_docs_need_the_access_token(client):
    assert client.get("/docs/webui.md").status_code in (302, 401)
