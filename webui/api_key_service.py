"""The web app's service over a deployment's API keys: what the pages and the JSON API call to list,
create and revoke them (issue 17 §2).

The keys are the endpoint's, in the Secret its gateway reads; serve.api_keys does the work through
the Kubernetes API with the stack's kubeconfig, which is read from the engine for the one call and
dropped (as verify does: webui/checking.py). Nothing here stores a key: not the job store, not the
audit log (it names the key, never its value), not a log line or an event. A new key's value is in
the one answer that created it; the page shows it in the answer to its create form (not after a
redirect, which another server of a team may serve), never through the session cookie, a flash
message, the job store or a URL.

What cannot be done is said plainly, with the status the API answers: an offline plan has no
cluster, a deployment not deployed yet has no outputs, auth none has no keys (409); a cluster that
does not answer, or a kubeconfig that cannot be used, is 503.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from components.config.errors import FieldError
from serve.api_keys import (
    ApiKeyError,
    ApiKeyInputError,
    ApiKeys,
    DuplicateKey,
    LastKey,
    UnknownKey,
)
from serve.evidence import VerifyInputError
from serve.kube import KubeConfigError, KubeError
from webui.api_models import BodyRefused
from webui.deployments.commands import Deployments
from webui.deployments.errors import NotFound
from webui.engines.base import OFFLINE_NOTICE

KUBE_TIMEOUT = 8.0  # one Secret read or write, in a request: bounded well under a browser's patience
OFFLINE_HAS_NO_CLUSTER = (f"{OFFLINE_NOTICE}: an offline plan has no cluster, so it has no endpoint "
                          "and no API keys. Keys exist once a deployment made with the Pulumi engine "
                          "is deployed")

KeysFor = Callable[[Mapping[str, Any]], ApiKeys]


class KeysUnavailable(Exception):
    """The keys cannot be reached or changed now: `status` 409 (the deployment's state) or 503
    (the cluster); `field` names what the API's error entry is about."""

    def __init__(self, status: int, message: str, field: str = "deployment"):
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


class UnknownKeyName(NotFound):
    """404 for a key name the Secret does not hold (the API names the field keyName)."""


def _keys_for(outputs: Mapping[str, Any]) -> ApiKeys:
    return ApiKeys.for_outputs(outputs, timeout=KUBE_TIMEOUT)


class ApiKeyService:
    """List, create and revoke one deployment's keys; the views call only this."""

    def __init__(self, deployments: Deployments, keys_for: KeysFor = _keys_for):
        self.deployments = deployments
        self.keys_for = keys_for

    def _keys(self, name: str) -> ApiKeys:
        record = self.deployments.record(name)  # NotFound
        engine = self.deployments.engine_of(name, record)  # EngineUnavailable: 503
        if not engine.real:
            raise KeysUnavailable(409, OFFLINE_HAS_NO_CLUSTER)
        outputs = engine.live_outputs(name)
        if not outputs:
            raise KeysUnavailable(409, f"{name} is not deployed yet: it has no outputs, so no cluster "
                                       "and no keys. Deploy it first")
        try:
            return self.keys_for(outputs)
        except (VerifyInputError, KubeConfigError) as exc:
            raise KeysUnavailable(503, f"cannot reach {name}'s cluster: {exc}") from None

    def _call(self, name: str, action: Callable[[ApiKeys], Any]) -> Any:
        keys = self._keys(name)
        try:
            return action(keys)
        except ApiKeyInputError as exc:
            raise BodyRefused([FieldError(exc.field, exc.message)]) from None
        except UnknownKey as exc:
            raise UnknownKeyName(str(exc)) from None
        except DuplicateKey as exc:
            raise KeysUnavailable(409, str(exc), field="name") from None
        except LastKey as exc:
            raise KeysUnavailable(409, str(exc), field="keyName") from None
        except ApiKeyError as exc:  # no key Secret (auth none, deployed before keys existed)
            raise KeysUnavailable(409, str(exc)) from None
        except KubeError as exc:  # its text names the API server and the status, never a credential
            raise KeysUnavailable(503, f"the keys of {name} cannot be reached: {exc}") from None

    def list(self, name: str) -> list[dict[str, Optional[str]]]:
        result: list[dict[str, Optional[str]]] = self._call(name, lambda keys: keys.list())
        return result

    def create(self, name: str, key_name: Any, actor: str) -> dict[str, str]:
        """{name, created, key}: the caller shows the value once and keeps it nowhere."""
        created: dict[str, str] = self._call(name, lambda keys: keys.create(key_name))
        self.deployments.audit(actor, "api key created", name, "succeeded", f"key {created['name']}")
        return created

    def revoke(self, name: str, key_name: Any, actor: str) -> str:
        revoked: str = self._call(name, lambda keys: keys.revoke(key_name))
        self.deployments.audit(actor, "api key revoked", name, "succeeded", f"key {revoked}")
        return revoked


def keys_box_state(detail: Mapping[str, Any]) -> Optional[str]:
    """Why the page's API keys box has nothing to load (None: the page loads the list from the
    API, so rendering the page never waits on the engine's outputs or the cluster)."""
    if detail.get("engine") == "offline":
        return OFFLINE_HAS_NO_CLUSTER
    if detail.get("status") != "deployed" and not detail.get("deployed"):
        return "Not deployed yet: the endpoint and its keys exist once Deploy has run."
    endpoint = (detail.get("outputs") or {}).get("endpoint")
    if not isinstance(endpoint, Mapping):
        return ("This stack's outputs have no endpoint: it was deployed before raypd exposed its "
                "endpoint and managed API keys. Deploy it again to get them.")
    if endpoint.get("auth") == "none":
        return ("This endpoint has auth none (raypd:endpoint.auth): it takes no API keys. Set auth: "
                "apiKey and Deploy to require them.")
    return None
