"""A PATCH racing an `up` (issue 29 §3): `up` read the config, then took the job lock; a PATCH
landing between the two was what the engine deployed while the OLD config was recorded as
deployed (10 of 40 rounds with the PATCH 0-8 ms before the up). Now the config is read under the
lock that starts the job: a change either lands before it (deployed AND recorded) or finds the job
active (409). The window is opened deterministically: the PATCH runs where the old code had read
the config and not yet taken the lock (on entry to the service's `submit`)."""

from __future__ import annotations

from typing import Any, Optional

from tests.web.support import AUTH, FakeEngine, wait_for_job
from webui.engines.base import JobContext, OperationResult


class StackEngine(FakeEngine):
    """A fake engine that keeps each stack's config as the CLI would, and says which config each
    run deployed (not "real": no offline plan for an ETA, no verify after the up)."""

    def __init__(self) -> None:
        super().__init__(real=False)
        self.stack_config: dict[str, dict[str, Any]] = {}
        self.ran_with: list[dict[str, Any]] = []

    def create(self, spec: Any, hf_token: Optional[str]) -> None:
        super().create(spec, hf_token)
        self.stack_config[spec.stack] = spec.public_config()

    def configure(self, spec: Any, hf_token: Optional[str], removed: list[str]) -> None:
        super().configure(spec, hf_token, removed)
        self.stack_config[spec.stack] = spec.public_config()

    def run(self, stack: str, operation: str, ctx: JobContext,
            known_resources: Any = None, deployed_plan: Any = None) -> OperationResult:
        if operation == "up":
            self.ran_with.append(self.stack_config[stack])
        return super().run(stack, operation, ctx, known_resources, deployed_plan)


def test_a_patch_just_before_an_up_is_deployed_and_recorded_as_deployed(make_app, monkeypatch):
    engine = StackEngine()
    app = make_app(engine=engine)
    client = app.test_client()
    assert client.post("/api/v1/deployments", headers=AUTH, json={"name": "race", "config": {}}).status_code == 201
    service = app.extensions["raypd"].service
    patched: list[int] = []
    submit = service.submit

    def patch_first(*args: Any, **kwargs: Any) -> str:
        if not patched:  # the PATCH lands after `up` was asked for, before its job takes the lock
            answer = client.patch("/api/v1/deployments/race", headers=AUTH,
                                  json={"config": {"raypd:decode": {"replicas": 3}}})
            patched.append(answer.status_code)
        return submit(*args, **kwargs)

    monkeypatch.setattr(service, "submit", patch_first)
    job = wait_for_job(client, client.post("/api/v1/deployments/race/up", headers=AUTH).get_json()["job"])
    assert patched == [200] and job["status"] == "succeeded", job
    assert engine.ran_with[-1]["raypd:decode"]["replicas"] == 3
    detail = client.get("/api/v1/deployments/race", headers=AUTH).get_json()
    assert detail["deployed"]["spec"]["raypd:decode"]["replicas"] == 3  # what ran is what is recorded
    assert detail["pending"] is None


def test_a_patch_once_the_up_has_started_is_refused(make_app):
    engine = StackEngine()
    engine.gate.clear()
    app = make_app(engine=engine)
    client = app.test_client()
    assert client.post("/api/v1/deployments", headers=AUTH, json={"name": "busy", "config": {}}).status_code == 201
    job_id = client.post("/api/v1/deployments/busy/up", headers=AUTH).get_json()["job"]
    refused = client.patch("/api/v1/deployments/busy", headers=AUTH, json={"config": {"raypd:decode": {"replicas": 3}}})
    assert refused.status_code == 409
    engine.gate.set()
    assert wait_for_job(client, job_id)["status"] == "succeeded"
    assert engine.ran_with[-1]["raypd:decode"]["replicas"] == 1
    detail = client.get("/api/v1/deployments/busy", headers=AUTH).get_json()
    assert detail["deployed"]["spec"]["raypd:decode"]["replicas"] == 1 and detail["pending"] is None
