"""Verify checks of the RayService and its Serve application: `rayservice-ready`,
`serve-app-running` (the application RUNNING, every deployment HEALTHY) and `replica-placement`
(each engine's replicas on the nodes of its planned group, no two phases on one node)."""

from __future__ import annotations

from typing import Mapping

from components.config.checks import Check
from serve.evidence import RAY_GROUP_LABEL, Evidence, condition_of, labels_of, name_list, name_of, shorten
from serve.kube import KubeError, KubeNotFound
from serve.verify.report import TITLES, api_unavailable


def check_rayservice_ready(ev: Evidence) -> Check:
    cid, title = "rayservice-ready", TITLES["rayservice-ready"]
    target = f"{ev.plan.namespace}/{ev.plan.rayservice}"
    try:
        service = ev.rayservice()
    except KubeNotFound:
        return Check.failed(cid, title, f"RayService {target} does not exist",
                            "run `pulumi up`; check that the KubeRay operator is installed")
    except KubeError as exc:
        return api_unavailable(cid, exc)
    ready = condition_of(service, "Ready")
    if ready is None:
        legacy = (service.get("status") or {}).get("serviceStatus")
        return Check.warned(cid, title, f"RayService {target} has no Ready condition (KubeRay older "
                            f"than 1.3?); serviceStatus={legacy!r}",
                            "upgrade the KubeRay operator to 1.4 or later")
    reason, message = ready.get("reason", ""), shorten(ready.get("message", ""))
    if ready.get("status") == "True":
        return Check.passed(cid, title, f"RayService {target}: Ready=True ({reason})"
                            + (f": {message}" if message else ""))
    return Check.failed(cid, title, f"RayService {target}: Ready={ready.get('status')} "
                        f"({reason}){': ' + message if message else ''}",
                        "the model may still be loading: see `kubectl describe rayservice` and the "
                        "Ray dashboard; the KubeRay operator's log says why it is not ready")


def check_serve_app(ev: Evidence) -> Check:
    cid, title = "serve-app-running", TITLES["serve-app-running"]
    try:
        service = ev.rayservice()
    except KubeNotFound:
        return Check.skipped(cid, title, "no RayService (see rayservice-ready)")
    except KubeError as exc:
        return api_unavailable(cid, exc)
    apps = (((service.get("status") or {}).get("activeServiceStatus") or {})
            .get("applicationStatuses") or {})
    app = apps.get(ev.plan.app)
    if not isinstance(app, Mapping):
        return Check.failed(cid, title, f"no Serve application {ev.plan.app!r} in the RayService's "
                            f"active status (applications: {sorted(apps) or 'none'})",
                            "the Serve config may have failed to deploy: see the Ray dashboard")
    problems = []
    if app.get("status") != "RUNNING":
        problems.append(f"application {ev.plan.app} is {app.get('status')!r}"
                        + (f": {shorten(app.get('message', ''))}" if app.get("message") else ""))
    statuses = app.get("serveDeploymentStatuses") or {}
    for name in ev.plan.deployments:
        deployment = statuses.get(name)
        if not isinstance(deployment, Mapping):
            problems.append(f"deployment {name} missing (has: {name_list(sorted(statuses))})")
        elif deployment.get("status") != "HEALTHY":
            problems.append(f"deployment {name} is {deployment.get('status')!r}"
                            + (f": {shorten(deployment.get('message', ''), 200)}"
                               if deployment.get("message") else ""))
    if problems:
        return Check.failed(cid, title, "; ".join(problems),
                            "read the replicas' logs in the Ray dashboard (model download, GPU "
                            "memory, NIXL handshake errors)")
    return Check.passed(cid, title, f"application {ev.plan.app} RUNNING; "
                        + ", ".join(f"{name} HEALTHY" for name in ev.plan.deployments))


def check_replica_placement(ev: Evidence) -> Check:
    cid, title = "replica-placement", TITLES["replica-placement"]
    try:
        replicas = ev.engine_replicas()
        pods = ev.worker_pods()
        nodes = ev.gpu_nodes()
    except KubeError as exc:
        return Check.warned(cid, title, f"no evidence of placement: {exc}",
                            "check that the Ray head pod runs and its dashboard (8265) answers")
    pod_by_ip = {str((p.get("status") or {}).get("podIP")): p for p in pods}
    node_by_name = {name_of(n): n for n in nodes}
    problems: list[str] = []
    warnings: list[str] = []
    evidence: list[str] = []
    phases_on_node: dict[str, set[str]] = {}
    for phase, plan in ev.plan.phases.items():
        running = [r for r in replicas.get(phase, []) if r.get("state") == "RUNNING"]
        # An autoscaled phase may run anywhere between its bounds; a fixed one exactly its count.
        low, high = plan.min_replicas or plan.replicas, plan.max_replicas or plan.replicas
        planned = str(plan.replicas) if low == high else f"{low}..{high}"
        if len(running) < low:
            problems.append(f"{plan.deployment}: {len(running)} of {planned} replica(s) RUNNING")
        elif len(running) > high:
            warnings.append(f"{plan.deployment}: {len(running)} RUNNING, {planned} planned")
        places = []
        for replica in running:
            ip = str(replica.get("node_ip"))
            pod = pod_by_ip.get(ip)
            if pod is None:
                problems.append(f"{plan.deployment} replica {replica.get('replica_id', '?')} runs on "
                                f"Ray node {ip}, which is no worker pod of {ev.plan.rayservice}")
                continue
            node_name = str((pod.get("spec") or {}).get("nodeName"))
            group = labels_of(pod).get(RAY_GROUP_LABEL)
            node = node_by_name.get(node_name)
            node_group = ev.plan.group_of_node(node) if node else None
            if group != plan.group or (node_group is not None and node_group != plan.group):
                problems.append(f"{plan.deployment} replica on pod {name_of(pod)} (worker group "
                                f"{group}, node {node_name}) instead of node group {plan.group}")
            phases_on_node.setdefault(node_name, set()).add(phase)
            places.append(f"{node_name} ({group})")
        if running:
            evidence.append(f"{plan.deployment}: {len(running)}/{planned} RUNNING on "
                            f"{name_list(places, 4)}")
    # The plan gives every phase nodes of its own (components.plan.topology sizes each group as the sum
    # of its phases' nodes): two phases on one node halve its GPUs and take PD's gain away.
    shared = {node_name: sorted(p) for node_name, p in phases_on_node.items() if len(p) > 1}
    for node_name, phases in shared.items():
        problems.append(f"{' and '.join(phases)} engines share node {node_name}, but the plan gives "
                        "each its own node (prefill/decode disaggregation gains nothing this way)")
    remedy = ("engines go where the placement groups find GPUs: check the worker groups' "
              "rayStartParams and that every planned node joined the Ray cluster; if a restart "
              "packed the engines onto one node, restart the packed replica once the other node "
              "is Ready")
    if problems:
        return Check.failed(cid, title, "; ".join(problems + warnings), remedy)
    if warnings:
        return Check.warned(cid, title, "; ".join(evidence + warnings),
                            "more replicas than planned: an autoscaler or an old deployment's "
                            "replicas may still be running")
    return Check.passed(cid, title, "; ".join(evidence)
                        + " (Ray dashboard /api/serve/applications/, pod IPs, node labels)")
