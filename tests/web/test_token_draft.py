"""The HF token typed at preview is held in memory until launch (webui/state.py TokenDrafts). When
it is gone by then (the preview is over 30 minutes old, or 200 newer previews pushed it out), the
launch used to go on without it, silently (issue 29 §3): a gated or private model then fails to
download in the cluster (the model here is the public default, so no preflight check stops the
launch). Now the form comes back, saying so at the token field, and nothing is created."""

from __future__ import annotations

import time

import pytest

from tests.web.support import AUTH, HF_TOKEN, extract_csrf, field_error, form_defaults, login, text_of
from webui import state
from webui.state import DRAFT_TTL_SECONDS, MAX_DRAFTS


def _preview(client, name: str) -> tuple[dict[str, str], str]:
    login(client)
    page = text_of(client.get("/deployments/new"))
    values = form_defaults(page) | {"name": name, "raypd:hfToken": HF_TOKEN,
                                    "csrf_token": extract_csrf(page), "action": "preview"}
    preview = client.post("/deployments/new", data=values)
    assert preview.status_code == 200, text_of(preview)
    draft = text_of(preview).split('name="draft" value="')[1].split('"')[0]
    return {k: v for k, v in values.items() if k != "raypd:hfToken"}, draft


def _lose_by_age(app, monkeypatch) -> None:
    later = time.monotonic() + DRAFT_TTL_SECONDS + 1
    monkeypatch.setattr(state.time, "monotonic", lambda: later)


def _lose_by_crowd(app, monkeypatch) -> None:
    for index in range(MAX_DRAFTS):
        app.extensions["raypd"].drafts.put(f"hf_someoneElse{index:04d}abcdefgh")


@pytest.mark.parametrize("lose", [_lose_by_age, _lose_by_crowd], ids=["over 30 minutes", "pushed out by 200"])
def test_a_launch_whose_token_is_gone_says_so_and_creates_nothing(fake_app, fake_engine, monkeypatch, lose):
    client = fake_app.test_client()
    values, draft = _preview(client, "latelaunch")
    lose(fake_app, monkeypatch)
    launched = client.post("/deployments/new", data=values | {"action": "launch", "draft": draft})
    assert launched.status_code == 409
    page = text_of(launched)
    assert "no longer held" in field_error(page, "f-raypd-hfToken") and "type it again" in page
    assert 'name="draft"' not in page  # the form no longer claims a token is kept
    assert client.get("/api/v1/deployments/latelaunch", headers=AUTH).status_code == 404
    assert fake_engine.created == []
    # Typed again, it launches with the token.
    again = client.post("/deployments/new", data=values | {"action": "launch", "raypd:hfToken": HF_TOKEN,
                                                           "csrf_token": extract_csrf(page)})
    assert again.status_code == 302, text_of(again)
    assert fake_engine.created == [("latelaunch", True)]
