"""What every verify check shares: its title, and how a check becomes a line of the report.

A check that meets an answer it cannot read warns instead of crashing the report (`guarded`); one
whose evidence the Kubernetes API did not give is skipped, never passed (`api_unavailable`); and a
report of a cluster that answered nothing must not read "ok" (`nothing_checked_fails`).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from components.config.checks import Check
from serve.evidence import Evidence, shorten
from serve.kube import KubeError
from serve.verify import exposure, metrics_flowing
from serve.verify.external import TITLES as ENDPOINT_TITLES

log = logging.getLogger(__name__)

TITLES = {
    "gpu-nodes": "GPU nodes present, Ready and advertising their GPUs",
    "efa-devices": "GPU nodes advertise EFA devices",
    "one-zone": "all GPU nodes in the stack's one availability zone",
    "rayservice-ready": "RayService condition Ready",
    "serve-app-running": "Serve application RUNNING, deployments HEALTHY",
    "replica-placement": "engine replicas running on their planned node groups",
    "nixl-backend": "NIXL uses the requested KV transfer backend",
    "endpoint-models": "OpenAI endpoint lists the model",
    "endpoint-chat": "OpenAI endpoint answers a chat completion",
    "kv-transfer": "KV cache moved from prefill to decode for a real request",
    **ENDPOINT_TITLES,  # endpoint-external, endpoint-auth: serve/verify/external.py
    exposure.CHECK_ID: exposure.TITLE,
    metrics_flowing.CHECK_ID: metrics_flowing.TITLE,
}


def api_unavailable(check_id: str, exc: KubeError) -> Check:
    return Check.skipped(check_id, TITLES[check_id],
                         f"no evidence: the Kubernetes API did not answer ({exc})")


def nothing_checked_fails(ev: Evidence, checks: list[Check]) -> list[Check]:
    """When the cluster answered nothing verify could use, the report must not read "ok" (nor
    hide why under warnings): the first check (gpu-nodes) fails and says so."""
    if ev.answered or checks[0].status == "fail":
        return checks
    why = str(ev.down) if ev.down is not None else "no call to the Kubernetes API got a usable answer"
    first = checks[0]
    replaced = Check.failed(first.id, first.title, f"nothing was checked: {why} ({first.detail})",
                            "check the kubeconfig and that the cluster's API endpoint is reachable")
    return [replaced, *checks[1:]]


def guarded(ev: Evidence, check_id: str, check: Callable[..., Check], *args: Any) -> Check:
    """A check that meets an object it cannot read (a malformed API answer) warns, never crashes
    the report; the exception's type and text are shown, scrubbed of the client's credentials."""
    try:
        return check(*args)
    except Exception as exc:  # noqa: BLE001 - one bad answer must not cost the other nine checks
        scrub = ev.client.scrub if ev.client is not None else (lambda text: text)
        log.debug("check %s could not be evaluated: %s", check_id, scrub(f"{type(exc).__name__}: {exc}"))
        return Check.warned(check_id, TITLES[check_id], f"could not be evaluated: "
                            f"{shorten(scrub(f'{type(exc).__name__}: {exc}'), 200)}")
