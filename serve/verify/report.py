"""What every verify check shares: its title, and how a check becomes a line of the report.

A check that meets an answer it cannot read warns instead of crashing the report (`guarded`); one
whose evidence the Kubernetes API did not give is skipped, never passed (`api_unavailable`); and a
report of a cluster that answered nothing must not read "ok" (`nothing_checked_fails`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

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
    "api-parity": "OpenAI features the stack promises work: streamed usage, stop, temperature 0, logprobs, "
                  "too-long 400",
    **ENDPOINT_TITLES,  # endpoint-external, endpoint-auth: serve/verify/external.py
    exposure.CHECK_ID: exposure.TITLE,
    metrics_flowing.CHECK_ID: metrics_flowing.TITLE,
}


def api_unavailable(check_id: str, exc: KubeError) -> Check:
    return Check.skipped(check_id, TITLES[check_id],
                         f"no evidence: the Kubernetes API did not answer ({exc})")


@dataclass
class ApiGate:
    """Runs the checks that need the Kubernetes API while it answers. Once one finds it unreachable,
    the others are not run: each is one short `skip` pointing at the check that says why, instead
    of every check repeating "connection refused" (14 times, issue 29 §2); `stopped` lists them for
    the report's first line."""

    ev: Evidence
    found_by: Optional[str] = None
    stopped: list[str] = field(default_factory=list)

    def check(self, check_id: str, check: Callable[..., Check], *args: Any) -> Check:
        if self.ev.down is not None:
            self.stopped.append(check_id)
            why = f"{self.found_by} says why" if self.found_by else str(self.ev.down)
            return Check.skipped(check_id, TITLES[check_id],
                                 f"not run: the Kubernetes API cannot be reached ({why})")
        result = guarded(self.ev, check_id, check, *args)
        if self.ev.down is not None and self.found_by is None:
            self.found_by = check_id
        return result


def nothing_checked_fails(ev: Evidence, checks: list[Check], stopped: Sequence[str] = ()) -> list[Check]:
    """When the cluster answered nothing verify could use, the report must not read "ok" (nor
    hide why under warnings): the first check (gpu-nodes) fails and says so, once, with the checks
    that did not run for want of the API (`stopped`)."""
    if ev.answered or (checks[0].status == "fail" and not stopped):
        return checks
    why = str(ev.down) if ev.down is not None else "no call to the Kubernetes API got a usable answer"
    first = checks[0]
    detail = f"nothing was checked: {first.detail if why in first.detail else f'{why} ({first.detail})'}"
    if stopped:
        detail += f"; not run without the Kubernetes API: {', '.join(stopped)}"
    replaced = Check.failed(first.id, first.title, detail,
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
