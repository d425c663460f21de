"""raypd:hfToken is validated like every other text key (issue 16 §2), and never echoed: it is a
secret, so no error message, on any path, holds the value."""

from __future__ import annotations

import pytest

from components.config.errors import SpecError
from components.config.spec import HF_TOKEN_KEY, SECRET_PLACEHOLDER, DeploymentSpec

GOOD = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
BAD = {
    "whitespace-only": "   \t ",
    "empty": "",
    "inner-space": "hf_abc defSECRET",
    "trailing-newline": "hf_abcSECRET\n",
    "c1-control": "hf_SECRET\x85x",
    "c1-csi": "hf_SECRET\x9b31m",
    "del": "hf_SECRET\x7f",
    "surrogate": "hf_SECRET\ud800",
    "shell": "hf_SECRET$(touch /tmp/pwned)`id`;|&",
    "quotes": "hf_SECRET'\"",
    "full-width": "hf_SECRET\uff11\uff12",
    "60-kb": "hf_SECRET" + "a" * 60_000,
}


@pytest.mark.parametrize("strict", [False, True], ids=["stack-file", "json-api"])
@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_tokens_are_refused_without_echoing_them(name: str, strict: bool) -> None:
    token = BAD[name]
    with pytest.raises(SpecError) as caught:
        DeploymentSpec.from_config({HF_TOKEN_KEY: token}, strict=strict)
    assert [error.field for error in caught.value.errors] == [HF_TOKEN_KEY]
    assert "SECRET" not in str(caught.value)  # every non-blank bad token carries the marker
    assert len(str(caught.value)) < 300


@pytest.mark.parametrize("token", [GOOD, "api_org_abc123", "eyJhbGciOi.eyJzdWIi.c2lnbmF0dXJl", "b64+/tok=="])
def test_real_token_shapes_are_accepted(token: str) -> None:
    spec = DeploymentSpec.from_config({HF_TOKEN_KEY: token}, strict=True)
    assert spec.hf_token is not None and spec.hf_token.get_secret_value() == token
    assert spec.public_config()[HF_TOKEN_KEY] == SECRET_PLACEHOLDER


def test_an_undecryptable_stack_file_secret_still_plans() -> None:
    spec = DeploymentSpec.from_config({HF_TOKEN_KEY: SECRET_PLACEHOLDER})
    assert spec.hf_token is not None


@pytest.mark.parametrize("blank", ["   ", "", "\u00a0\u2003"])
def test_a_blank_token_says_so(blank: str) -> None:
    with pytest.raises(SpecError, match="empty or only whitespace"):
        DeploymentSpec.from_config({HF_TOKEN_KEY: blank}, strict=True)
