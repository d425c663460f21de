"""Preflight, verify and the live status as the web app runs them, for either engine.

The checks themselves live in `components.preflight` and `serve.verify` (the CLIs run the same
functions), the live snapshot in `serve.live_status`; this module decides what evidence each engine
can offer. An offline deployment has
nothing in AWS, so its verify report says `skip` for every check (never `pass`), and its live
status says why there is none. The kubeconfig of a real deployment is read from the engine when a
check needs it and dropped right after: it is never stored, cached or logged.

The heavy imports (boto3 clients, the Kubernetes client) happen on first use, not at app start.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from components.config.checks import VERIFY_IDS, Check, Report
from components.config.spec import DeploymentSpec
from components.render.outputs import OBSERVABILITY_KEY
from serve.live_metrics import dashboard_links
from serve.live_status import cluster_status
from serve.verify import VerifyInputError, run_verify
from webui.engines.base import OFFLINE_NOTICE

logger = logging.getLogger(__name__)

STATUS_TTL_SECONDS = 15.0
NOTHING_DEPLOYED = (
    f"{OFFLINE_NOTICE}, so there is nothing running to verify; verify needs a deployment made "
    "with the Pulumi engine"
)

PreflightFn = Callable[[DeploymentSpec, Optional[DeploymentSpec], Optional[str]], Report]
VerifyFn = Callable[[dict[str, Any], Optional[str]], Report]
StatusFn = Callable[[dict[str, Any], Optional[str]], dict[str, Any]]


def _run_preflight(spec: DeploymentSpec, deployed: Optional[DeploymentSpec],
                   deployed_zone: Optional[str] = None) -> Report:
    from components.preflight.run import run_preflight  # boto3 (~0.5 s): loaded when a preflight runs

    return run_preflight(spec, deployed=deployed, deployed_zone=deployed_zone)


def _run_verify(outputs: dict[str, Any], kubeconfig: Optional[str]) -> Report:
    try:
        return run_verify(outputs, kubeconfig)
    except VerifyInputError as exc:  # outputs that break the contract, an unusable kubeconfig
        return nothing_to_verify(f"cannot verify: {exc}")


def _cluster_status(outputs: dict[str, Any], kubeconfig: Optional[str]) -> dict[str, Any]:
    return cluster_status(outputs, kubeconfig)


def nothing_to_verify(reason: str) -> Report:
    """Every verify check skipped, with why: no evidence is never a pass."""
    return Report.of("verify", [
        Check.skipped(check_id, check_id.replace("-", " "), reason) for check_id in VERIFY_IDS
    ])


@dataclass
class Checker:
    """The check functions (injectable for tests) and a short cache of the live status."""

    preflight_fn: PreflightFn = _run_preflight
    verify_fn: VerifyFn = _run_verify
    status_fn: StatusFn = _cluster_status
    _status_cache: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def preflight(self, spec: DeploymentSpec, deployed: Optional[DeploymentSpec] = None,
                  deployed_zone: Optional[str] = None) -> Report:
        return self.preflight_fn(spec, deployed, deployed_zone)

    def verify(self, engine: Any, stack: str) -> Report:
        if not engine.real:
            return nothing_to_verify(NOTHING_DEPLOYED)
        outputs = engine.live_outputs(stack)
        if not outputs:
            return nothing_to_verify("the stack has no outputs yet: run Deploy first")
        kubeconfig = outputs.get("kubeconfig")
        return self.verify_fn(outputs, kubeconfig if isinstance(kubeconfig, str) else None)

    def status(self, engine: Any, stack: str, deployed: bool) -> dict[str, Any]:
        """What runs now (nodes, pods, RayService, Serve), at most STATUS_TTL_SECONDS old."""
        if not engine.real:
            return {"available": False, "reason": f"{OFFLINE_NOTICE}: nothing is running"}
        if not deployed:
            return {"available": False, "reason": "not deployed yet: run Deploy first"}
        now = time.monotonic()
        with self._lock:
            cached = self._status_cache.get(stack)
        if cached is not None and now - cached[0] < STATUS_TTL_SECONDS:
            return cached[1]
        outputs = engine.live_outputs(stack) or {}
        kubeconfig = outputs.get("kubeconfig")
        status = {"available": True, "checkedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  **self.status_fn(outputs, kubeconfig if isinstance(kubeconfig, str) else None)}
        if outputs.get(OBSERVABILITY_KEY):
            status["dashboards"] = dashboard_links(stack)
        with self._lock:
            self._status_cache[stack] = (now, status)
        return status

    def forget(self, stack: str) -> None:
        """After an operation the cached picture is stale."""
        with self._lock:
            self._status_cache.pop(stack, None)
