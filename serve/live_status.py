"""The live status of a deployed stack for the web app's Status panel (not a check report).

One snapshot of what runs now: GPU nodes, Ray worker pods per group and the engines they host,
the RayService's Ready condition, the Serve application's status, the SLO strip's numbers and
active alerts from the deployment's Prometheus (serve.live_metrics), and each phase's scaling
(serve.live_scaling). It never raises and never
holds a secret: a section that could not be read says so inside the snapshot.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping, Optional

from components.render.rayservice import EFA_RESOURCE, GPU_RESOURCE
from serve.evidence import (
    EKS_NODEGROUP_LABEL,
    INSTANCE_TYPE_LABEL,
    RAY_GROUP_LABEL,
    ZONE_LABEL,
    Evidence,
    VerifyInputError,
    VerifyPlan,
    allocatable,
    check_outputs,
    condition_of,
    labels_of,
    name_of,
    node_ready,
    resolve_kubeconfig,
)
from serve.kube import DEFAULT_TIMEOUT, KubeClient, KubeError, client_from_kubeconfig
from serve.live_metrics import live_metrics
from serve.live_scaling import scaling_status

log = logging.getLogger(__name__)


def _pod_status(pod: Mapping[str, Any]) -> str:
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            return str(waiting["reason"])
    return str(status.get("phase") or "Unknown")


def cluster_status(outputs: Mapping[str, Any], kubeconfig: Optional[str] = None, *,
                   client: Optional[KubeClient] = None, timeout: float = DEFAULT_TIMEOUT,
                   aws_session: Any = None) -> dict[str, Any]:
    """A JSON-able snapshot for the web app's Status panel; never raises, never holds secrets.

    Sections that could not be read carry `{"error": "..."}`; a whole-snapshot failure (bad
    outputs, unusable kubeconfig) is `{"error": "..."}` alone. At most eight API calls of
    `timeout` seconds each (the Scaling section adds Serve's controller log and one Prometheus
    query), and one when the API does not answer at all.
    """
    try:
        return _cluster_status(outputs, kubeconfig, client, timeout, aws_session)
    except Exception as exc:  # noqa: BLE001 - the Status panel must render whatever the API says
        log.debug("live status failed", exc_info=True)
        return {"error": f"cannot read the cluster's status: {type(exc).__name__}"}


def _cluster_status(outputs: Mapping[str, Any], kubeconfig: Optional[str],
                    client: Optional[KubeClient], timeout: float, aws_session: Any) -> dict[str, Any]:
    try:
        check_outputs(outputs, have_kubeconfig=kubeconfig is not None or client is not None)
        plan = VerifyPlan.from_outputs(outputs)
        if client is None:
            client = client_from_kubeconfig(resolve_kubeconfig(outputs, kubeconfig),
                                            region_hint=plan.region, timeout=timeout,
                                            session=aws_session)
    except (VerifyInputError, KubeError) as exc:
        return {"error": str(exc)}
    ev = Evidence(client, plan)
    result: dict[str, Any] = {"namespace": plan.namespace, "rayService": plan.rayservice}
    try:
        result["nodes"] = [{
            "name": name_of(n),
            "ready": node_ready(n),
            "zone": labels_of(n).get(ZONE_LABEL),
            "instanceType": labels_of(n).get(INSTANCE_TYPE_LABEL),
            "nodeGroup": plan.group_of_node(n),
            "eksNodeGroup": labels_of(n).get(EKS_NODEGROUP_LABEL),
            "gpus": allocatable(n, GPU_RESOURCE),
            "efa": allocatable(n, EFA_RESOURCE),
        } for n in ev.gpu_nodes()]
    except KubeError as exc:
        result["nodes"] = {"error": str(exc)}
    phase_of_group = {g.name: "+".join(g.phases) for g in plan.groups.values()}
    phases_on_ip: dict[str, set[str]] = {}
    try:  # which engines each pod hosts, when the dashboard answers (optional detail)
        for phase, replicas in ev.engine_replicas().items():
            for replica in replicas:
                phases_on_ip.setdefault(str(replica.get("node_ip")), set()).add(phase)
    except KubeError as exc:
        log.info("live status without engine placement: %s", exc)
    try:
        pods = [{
            "name": name_of(p),
            "group": labels_of(p).get(RAY_GROUP_LABEL),
            "phase": "+".join(sorted(phases_on_ip.get(str((p.get("status") or {}).get("podIP")), ())))
            or phase_of_group.get(str(labels_of(p).get(RAY_GROUP_LABEL))),
            "node": (p.get("spec") or {}).get("nodeName"),
            "status": _pod_status(p),
        } for p in ev.worker_pods()]
        result["rayPods"] = pods
    except KubeError as exc:
        result["rayPods"] = {"error": str(exc)}
    try:
        service = ev.rayservice()
        ready = condition_of(service, "Ready") or {}
        result["ready"] = {"status": ready.get("status", "Unknown"), "reason": ready.get("reason"),
                           "message": ready.get("message")}
        app = ((((service.get("status") or {}).get("activeServiceStatus") or {})
                .get("applicationStatuses") or {}).get(plan.app) or {})
        result["serveApplication"] = {
            "name": plan.app,
            "status": app.get("status", "UNKNOWN"),
            "message": app.get("message"),
            "deployments": {name: {"status": d.get("status"), "message": d.get("message")}
                            for name, d in (app.get("serveDeploymentStatuses") or {}).items()
                            if isinstance(d, Mapping)},
        }
    except KubeError as exc:
        result["ready"] = {"error": str(exc)}
        result["serveApplication"] = {"error": str(exc)}
    result["metrics"] = ({"available": False, "reason": str(ev.down)} if ev.down is not None
                         else live_metrics(client, outputs, timeout))
    result["scaling"] = scaling_status(ev, plan, outputs, client, timeout)
    return result
