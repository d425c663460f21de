"""The HF token never shows up: not in API answers, pages, events, logs, or any file under RAYPD_HOME."""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any

import pytest

from tests.web.support import (
    AUTH,
    HF_TOKEN,
    FakeEngine,
    extract_csrf,
    form_defaults,
    login,
    text_of,
    wait_for_job,
)
from webui.engines.base import JobContext, OperationResult


def files_under(home: Path) -> list[Path]:
    return [path for path in home.rglob("*") if path.is_file()]


def assert_nowhere(token: str, answers: list[str], home: Path, logs: str) -> None:
    for index, text in enumerate(answers):
        assert token not in text, f"answer #{index} contains the token"
    files = files_under(home)
    assert any(path.name == "raypd.db" for path in files)
    for path in files:
        assert token.encode() not in path.read_bytes(), f"{path} contains the token"
    assert token not in logs


@pytest.mark.slow
def test_hf_token_never_leaks_from_an_offline_launch(app, client, caplog):
    caplog.set_level(logging.DEBUG)
    home = app.extensions["raypd"].settings.home
    answers: list[str] = []

    # Through the API ...
    created = client.post("/api/v1/deployments", headers=AUTH, json={
        "name": "gated", "config": {"raypd:hfToken": HF_TOKEN, "raypd:model": {"source": "meta-llama/Llama-3.1-8B"}},
    })
    assert created.status_code == 201
    answers.append(created.get_data(as_text=True))
    assert created.get_json()["spec"]["raypd:hfToken"] == "[secret]"
    job_id = client.post("/api/v1/deployments/gated/up", headers=AUTH).get_json()["job"]
    wait_for_job(client, job_id)

    # ... and through the form (preview, then launch with the token held server-side).
    login(client)
    page = text_of(client.get("/deployments/new"))
    values = form_defaults(page) | {"name": "formgated", "raypd:hfToken": HF_TOKEN,
                                    "csrf_token": extract_csrf(page), "action": "preview"}
    preview = client.post("/deployments/new", data=values)
    answers.append(preview.get_data(as_text=True))
    assert preview.status_code == 200
    assert "HF token" in text_of(preview)
    launch_values = {k: v for k, v in values.items() if k != "raypd:hfToken"}
    draft = text_of(preview).split('name="draft" value="')[1].split('"')[0]
    launched = client.post("/deployments/new", data=launch_values | {"action": "launch", "draft": draft})
    assert launched.status_code == 302
    form_job = launched.headers["Location"].split("job=")[1]
    wait_for_job(client, form_job)
    assert client.get("/api/v1/deployments/formgated", headers=AUTH).get_json()["summary"]["hasHfToken"] is True

    for path in ("/api/v1/deployments", "/api/v1/deployments/gated", "/api/v1/deployments/formgated",
                 f"/api/v1/jobs/{job_id}", f"/api/v1/jobs/{job_id}/events", f"/api/v1/jobs/{form_job}/events",
                 "/api/v1/openapi.json"):
        answers.append(client.get(path, headers=AUTH).get_data(as_text=True))
    for path in ("/", "/deployments/gated", "/deployments/formgated", f"/deployments/gated?job={job_id}",
                 "/deployments/new"):
        answers.append(client.get(path).get_data(as_text=True))
    assert_nowhere(HF_TOKEN, answers, home, caplog.text)


class EchoingEngine(FakeEngine):
    """An engine whose tool echoes the token back (as a careless provider or CLI might)."""

    def __init__(self, secret: str = HF_TOKEN):
        super().__init__()
        self.secret = secret

    def run(self, stack: str, operation: str, ctx: JobContext,
            known_resources: Any = None, deployed_plan: Any = None) -> OperationResult:
        ctx.emit({"kind": "diagnostic", "severity": "info", "message": f"using token {self.secret}"})
        result = super().run(stack, operation, ctx, known_resources, deployed_plan)
        result.outputs = {**(result.outputs or {}), "debug": f"Bearer {self.secret}"}
        if operation == "refresh":
            from webui.engines.base import OperationFailed
            raise OperationFailed(f"error: provider said token={self.secret} is invalid")
        return result


def test_echoed_tokens_are_masked_before_they_are_stored(make_app, caplog):
    caplog.set_level(logging.DEBUG)
    app = make_app(engine=EchoingEngine())
    client = app.test_client()
    client.post("/api/v1/deployments", headers=AUTH, json={"name": "echo", "config": {"raypd:hfToken": HF_TOKEN}})
    up = client.post("/api/v1/deployments/echo/up", headers=AUTH).get_json()["job"]
    wait_for_job(client, up)
    refresh = client.post("/api/v1/deployments/echo/refresh", headers=AUTH).get_json()["job"]
    failed = wait_for_job(client, refresh)
    assert failed["status"] == "failed" and "[secret]" in failed["error"]
    answers = [
        client.get(f"/api/v1/jobs/{up}/events", headers=AUTH).get_data(as_text=True),
        client.get(f"/api/v1/jobs/{refresh}", headers=AUTH).get_data(as_text=True),
        client.get("/api/v1/deployments/echo", headers=AUTH).get_data(as_text=True),
    ]
    assert "[secret]" in answers[0]
    assert_nowhere(HF_TOKEN, answers, app.extensions["raypd"].settings.home, caplog.text)


class FieldEchoingEngine(FakeEngine):
    """An engine whose tool echoes a token in the forms a CLI or provider writes it: as an
    argument (`pulumi config set-all --secret raypd:hfToken=...`), an environment line and JSON."""

    def __init__(self, secret: str):
        super().__init__()
        self.secret = secret

    def run(self, stack: str, operation: str, ctx: JobContext,
            known_resources: Any = None, deployed_plan: Any = None) -> OperationResult:
        for message in (f"running pulumi config set-all --secret raypd:hfToken={self.secret}",
                        f"env: HF_TOKEN={self.secret}", f'config: {{"raypd:hfToken": "{self.secret}"}}'):
            ctx.emit({"kind": "diagnostic", "severity": "info", "message": message})
        return super().run(stack, operation, ctx, known_resources, deployed_plan)


def test_a_token_that_does_not_look_like_one_is_masked_where_it_is_named(make_app, caplog):
    # No `hf_` prefix: its format cannot give it away, the field it is written in does.
    secret = "OrgToken5b1f0c3e9d"
    caplog.set_level(logging.DEBUG)
    app = make_app(engine=FieldEchoingEngine(secret))
    client = app.test_client()
    client.post("/api/v1/deployments", headers=AUTH, json={"name": "plain", "config": {"raypd:hfToken": secret}})
    up = client.post("/api/v1/deployments/plain/up", headers=AUTH).get_json()["job"]
    assert wait_for_job(client, up)["status"] == "succeeded"
    events = client.get(f"/api/v1/jobs/{up}/events", headers=AUTH).get_data(as_text=True)
    assert "--secret raypd:hfToken=[secret]" in events and "HF_TOKEN=[secret]" in events
    answers = [events, client.get("/api/v1/deployments/plain", headers=AUTH).get_data(as_text=True)]
    assert_nowhere(secret, answers, app.extensions["raypd"].settings.home, caplog.text)


@pytest.mark.slow
def test_a_token_never_masks_the_same_words_in_another_deployment(app, client):
    """Issue 29 §3: with redaction by remembered values, A's token "us-east-2" became "[secret]" in
    B's region (then refused as not a region) and in B's subnet names, in the store every server shares."""
    for name in ("tokenholder", "neighbour"):
        assert client.post("/api/v1/deployments", headers=AUTH, json={"name": name, "config": {}}).status_code == 201
    patched = client.patch("/api/v1/deployments/tokenholder", headers=AUTH,
                           json={"config": {"raypd:hfToken": "us-east-2"}})
    assert patched.status_code == 200
    changed = client.patch("/api/v1/deployments/neighbour", headers=AUTH,
                           json={"config": {"aws:region": "us-east-2", "raypd:decode": {"replicas": 2}}})
    assert changed.status_code == 200, changed.get_json()
    assert changed.get_json()["spec"]["aws:region"] == "us-east-2"
    stored = app.extensions["raypd"].store.get_deployment("neighbour")
    assert stored["config"]["aws:region"] == "us-east-2"
    preview = client.post("/api/v1/deployments/neighbour/preview", headers=AUTH).get_json()["job"]
    assert wait_for_job(client, preview)["status"] == "succeeded"
    events = client.get(f"/api/v1/jobs/{preview}/events", headers=AUTH).get_data(as_text=True)
    assert "network-private-us-east-2a" in events and "[secret]" not in events


def test_redaction_keeps_nothing_however_many_tokens_pass(fake_app):
    """Memory stays bounded: 300 PATCHes with 300 tokens leave webui.redact holding nothing, and no
    token of them is masked in text that does not say it is a secret."""
    import webui.redact as redaction

    client = fake_app.test_client()
    assert client.post("/api/v1/deployments", headers=AUTH, json={"name": "many", "config": {}}).status_code == 201
    tokens = [f"plainTokenNumber{index:04d}" for index in range(300)]
    for token in tokens:
        assert client.patch("/api/v1/deployments/many", headers=AUTH,
                            json={"config": {"raypd:hfToken": token}}).status_code == 200
    state = {name: value for name, value in vars(redaction).items()
             if isinstance(value, (set, dict, list)) and not name.startswith("__")}
    assert state == {}, "webui.redact keeps values between calls"
    text = " ".join(tokens)
    assert redaction.redact(text) == text


def test_log_tracebacks_are_masked_too():
    from webui.redact import RedactingFilter

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    log = logging.getLogger("raypd.test.traceback")
    log.addHandler(handler)
    log.propagate = False
    try:
        try:
            raise RuntimeError(f"CLI said: stderr: token={HF_TOKEN}")
        except RuntimeError:
            log.exception("job crashed")
    finally:
        log.removeHandler(handler)
    text = stream.getvalue()
    assert "job crashed" in text and "Traceback" in text and "RuntimeError" in text
    assert HF_TOKEN not in text


@pytest.mark.slow
def test_tokens_never_leak_through_a_change_and_its_discard(app, client, caplog):
    """A token replaced after a launch, then the change discarded: neither token anywhere, and the
    pending panel says what Discard could not undo without showing either."""
    caplog.set_level(logging.DEBUG)
    second = "hf_ReplacementTokenNeverShown0123456789"
    answers: list[str] = []
    created = client.post("/api/v1/deployments", headers=AUTH,
                          json={"name": "swap", "config": {"raypd:hfToken": HF_TOKEN}})
    answers.append(created.get_data(as_text=True))
    up = client.post("/api/v1/deployments/swap/up", headers=AUTH).get_json()["job"]
    assert wait_for_job(client, up)["status"] == "succeeded"
    changed = client.patch("/api/v1/deployments/swap", headers=AUTH,
                           json={"config": {"raypd:hfToken": second, "raypd:decode": {"replicas": 2}}})
    assert changed.status_code == 200 and changed.get_json()["pending"]["hfTokenReplaced"] is True
    answers.append(changed.get_data(as_text=True))
    login(client)
    answers.append(client.get("/deployments/swap").get_data(as_text=True))
    page = text_of(client.get("/deployments/swap/change"))
    answers.append(page)
    discarded = client.post("/deployments/swap/discard", data={"csrf_token": extract_csrf(page)})
    assert discarded.status_code == 302
    shown = client.get(discarded.headers["Location"])
    assert "Discard keeps it" in text_of(shown)
    answers.append(shown.get_data(as_text=True))
    refused = client.delete("/api/v1/deployments/swap/pending-config", headers=AUTH)
    assert refused.status_code == 409
    for response in (refused, client.get("/api/v1/deployments/swap", headers=AUTH),
                     client.get("/api/v1/deployments", headers=AUTH), client.get("/"),
                     client.get("/deployments/swap/benchmark")):
        answers.append(response.get_data(as_text=True))
    audit = str(app.extensions["raypd"].store.audit_entries())
    home = app.extensions["raypd"].settings.home
    for token in (HF_TOKEN, second):
        assert token not in audit
        assert_nowhere(token, answers, home, caplog.text)
