"""A "real" deployment whose cluster is the Kubernetes stand-in, holding the API-key Secret the
Pulumi program would create: what the web app's key management and its browser test run against."""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

from components.config.checks import Report
from components.render.endpoint_names import FIRST_KEY_NAME, api_keys_secret_name, created_annotation
from tests.fakes.kube_api import FakeKubeApi
from tests.web.support import AUTH, FakeEngine, create, wait_for_job
from webui.engines.base import JobContext, OperationResult

FIRST_KEY = "rpd_the-first-key-the-program-made-0123456789ab"
FIRST_CREATED = "2026-12-01T12:00:00Z"
ENDPOINT_URL = "http://internal-raypd-gw-1234.us-east-2.elb.amazonaws.com/v1"  # Contract 3: ends /v1


def endpoint_output(auth: str = "apiKey", url: str = ENDPOINT_URL, scope: str = "vpc") -> dict[str, str]:
    return {"url": url, "scope": scope, "auth": auth}


class EndpointEngine(FakeEngine):
    """The fake real engine whose up records outputs with `endpoint` (and apiKey masked), as a
    stack of issue 17 has them; `live` (secrets shown) points at the stand-in."""

    def __init__(self, kube: FakeKubeApi, endpoint: Optional[dict[str, str]] = None):
        super().__init__()
        self.endpoint = endpoint or endpoint_output()
        self.live = {**kube.outputs(), "endpoint": self.endpoint, "apiKey": FIRST_KEY}

    def run(self, stack: str, operation: str, ctx: JobContext, known_resources: Any = None,
            deployed_plan: Any = None) -> OperationResult:
        result = super().run(stack, operation, ctx, known_resources, deployed_plan)
        if result.outputs is not None:
            result.outputs = {**result.outputs, "endpoint": self.endpoint, "apiKey": "[secret]"}
        return result


def seed_keys(kube: FakeKubeApi) -> str:
    """The Secret as the program leaves it: the first key and its creation time; its name."""
    spec = kube.spec
    name = api_keys_secret_name(spec.service_name)
    kube.put_secret(spec.namespace, name, {FIRST_KEY_NAME: FIRST_KEY},
                    {created_annotation(FIRST_KEY_NAME): FIRST_CREATED})
    return name


def quiet_checks(app: Any) -> None:
    """No verify against the stand-in after each up (the key tests do not need its 20 s KV wait)."""
    app.extensions["raypd"].service.checker.verify_fn = lambda outputs, kubeconfig: Report.of("verify", [])


def session_contents(app: Any, client: Any) -> str:
    """What the signed session cookie holds, decoded: a key must never be in it."""
    cookie = client.get_cookie("raypd_session")
    return json.dumps(app.session_interface.get_signing_serializer(app).loads(cookie.value)) if cookie else ""


def deploy_live(make_app: Callable[..., Any], kube: FakeKubeApi) -> dict[str, Any]:
    """A deployed "live" deployment whose cluster is the stand-in, with the program's first key:
    {app, client, engine, kube, secret (its name), ns}."""
    secret = seed_keys(kube)
    engine = EndpointEngine(kube)
    app = make_app(engine=engine)
    quiet_checks(app)
    client = app.test_client()
    create(client, "live")
    up = client.post("/api/v1/deployments/live/up", headers=AUTH).get_json()["job"]
    assert wait_for_job(client, up)["status"] == "succeeded"
    return {"app": app, "client": client, "engine": engine, "kube": kube, "secret": secret,
            "ns": kube.spec.namespace}
