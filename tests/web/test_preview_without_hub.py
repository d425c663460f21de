"""A new user's first preview of the reference deployment, on a machine that cannot reach the
Hugging Face Hub, does not read FAILED (issue 29 §2): the pods download from AWS, so a Hub that
does not answer from here is a warning saying so, and Launch is not blocked by it."""

from __future__ import annotations

import re
import socket
from typing import Any

import pytest

from tests.web.support import extract_csrf, form_defaults, login, text_of


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_reference_preview_without_the_hub_warns_and_does_not_block(app: Any,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    browser = app.test_client()
    login(browser)
    page = text_of(browser.get("/deployments/new"))
    values = form_defaults(page) | {"csrf_token": extract_csrf(page), "name": "first", "action": "preview"}
    preview = browser.post("/deployments/new", data=values)
    shown = text_of(preview)
    assert preview.status_code == 200
    report = re.search(r'<div class="report" id="preflight-report"[^>]*>', shown)
    assert report is not None and 'data-ok="1"' in report.group(0)
    assert 'data-verdict="failed"' not in report.group(0) and "FAILED" not in shown
    row = shown[shown.index('data-check="model-source"'):]
    row = row[: row.index("</tr>")]
    assert 'class="badge badge-warn">warn<' in row
    assert "from this machine (host" in row and "the pods download it through the stack's own network" in row
    assert 'id="force-launch"' not in shown  # nothing to override
