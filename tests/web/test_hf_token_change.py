"""The HF token is judged by one rule on every path it enters by (issue 29 §3): `PATCH
{"raypd:hfToken": "hf_abc \\n"}` answered 200 where the same token is refused on create, and CR/LF,
`$(...)`, lone surrogates and 60 KB strings passed the API and the change form (with the real
engine a lone surrogate then failed `config set-all` with a 500). Every refusal names the key and
never the value; nothing reaches the engine."""

from __future__ import annotations

from typing import Any

import pytest

from components.config.spec import HF_TOKEN_KEY
from tests.unit.test_hf_token import BAD
from tests.web.support import AUTH, HF_TOKEN, create, extract_csrf, field_error, form_defaults, login, text_of

# The blank ones differ on purpose: an empty token on create means "no token", on PATCH it is
# refused ("null to remove it"); both are refused or dropped already (test_change.py).
NOT_BLANK = sorted(name for name, token in BAD.items() if token.strip())


def _patch(client: Any, name: str, config: Any) -> Any:
    return client.patch(f"/api/v1/deployments/{name}", json={"config": config}, headers=AUTH)


@pytest.mark.parametrize("name", NOT_BLANK)
def test_a_token_refused_on_create_is_refused_on_patch_with_the_same_words(fake_app: Any, fake_engine: Any,
                                                                          name: str) -> None:
    client = fake_app.test_client()
    create(client, "tok")
    on_create = client.post("/api/v1/deployments", json={"name": "other", "config": {HF_TOKEN_KEY: BAD[name]}},
                            headers=AUTH)
    on_patch = _patch(client, "tok", {HF_TOKEN_KEY: BAD[name], "raypd:decode": {"replicas": 2}})
    assert (on_create.status_code, on_patch.status_code) == (400, 400)
    assert on_patch.get_json()["errors"] == on_create.get_json()["errors"]
    assert [error["field"] for error in on_patch.get_json()["errors"]] == [HF_TOKEN_KEY]
    assert "SECRET" not in on_patch.get_data(as_text=True)
    assert fake_engine.configured == []  # nothing was written to the stack
    spec = client.get("/api/v1/deployments/tok", headers=AUTH).get_json()["spec"]
    assert HF_TOKEN_KEY not in spec and spec["raypd:decode"]["replicas"] == 1


def test_a_good_token_still_goes_to_the_engine(fake_app: Any, fake_engine: Any) -> None:
    client = fake_app.test_client()
    create(client, "tok")
    assert _patch(client, "tok", {HF_TOKEN_KEY: HF_TOKEN}).status_code == 200
    assert fake_engine.configured[-1][1] == HF_TOKEN


@pytest.mark.parametrize("token,said", [
    ("hf_SECRET\r\nX-Injected: 1", "contains a control character"),
    ("hf_SECRET$(id)", "is not a Hugging Face token"),
    ("hf_SECRET" + "a" * 300, "is longer than 256 characters"),
], ids=["crlf", "shell", "too-long"])
def test_the_change_form_refuses_what_the_api_refuses(fake_app: Any, fake_engine: Any, token: str, said: str) -> None:
    browser = fake_app.test_client()
    login(browser)
    create(browser, "form")
    page = text_of(browser.get("/deployments/form/change"))
    values = form_defaults(page) | {"csrf_token": extract_csrf(page), HF_TOKEN_KEY: token}
    values.pop("name", None)
    refused = browser.post("/deployments/form/change", data=values)
    shown = text_of(refused)
    assert refused.status_code == 400
    assert said in field_error(shown, "f-raypd-hfToken")
    assert "SECRET" not in shown and fake_engine.configured == []
