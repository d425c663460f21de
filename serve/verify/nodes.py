"""Verify checks of the GPU nodes: `gpu-nodes` (registered, Ready, advertising their GPUs, in
their planned groups), `efa-devices` (EFA advertised where LIBFABRIC needs it) and `one-zone`."""

from __future__ import annotations

from typing import Any

from components.config import defaults
from components.config.checks import Check
from components.render.rayservice import EFA_RESOURCE, GPU_RESOURCE
from serve.evidence import ZONE_LABEL, Evidence, allocatable, labels_of, name_list, name_of, node_ready
from serve.kube import KubeError
from serve.verify.report import TITLES, api_unavailable


def check_gpu_nodes(ev: Evidence) -> Check:
    cid, title = "gpu-nodes", TITLES["gpu-nodes"]
    try:
        nodes = ev.gpu_nodes()
    except KubeError as exc:
        return Check.failed(cid, title, f"cannot list the GPU nodes: {exc}",
                            "check the kubeconfig and that the cluster's API endpoint is reachable")
    problems: list[str] = []
    evidence: list[str] = []
    by_group: dict[str, list[dict[str, Any]]] = {name: [] for name in ev.plan.groups}
    stray: list[str] = []
    for node in nodes:
        group_name = ev.plan.group_of_node(node)
        if group_name in by_group:
            by_group[group_name].append(node)
        else:
            stray.append(name_of(node))
    for name, planned in ev.plan.groups.items():
        members = by_group[name]
        # The node autoscaler keeps an autoscaled group between its limits, not at its start.
        low = planned.min_nodes or planned.nodes
        count = str(planned.nodes) if low == (planned.max_nodes or planned.nodes) else (
            f"{low}..{planned.max_nodes}")
        if len(members) < low:
            problems.append(f"node group {name}: {len(members)} of {count} planned "
                            f"{planned.instance_type} node(s) registered")
        not_ready = [name_of(n) for n in members if not node_ready(n)]
        if not_ready:
            problems.append(f"node group {name}: not Ready: {name_list(not_ready)}")
        want = planned.gpus_per_node
        short = [f"{name_of(n)} ({allocatable(n, GPU_RESOURCE)})" for n in members
                 if (allocatable(n, GPU_RESOURCE) != want if want else allocatable(n, GPU_RESOURCE) < 1)]
        if short:
            problems.append(f"node group {name}: {GPU_RESOURCE} allocatable is not "
                            f"{want or '>= 1'} on {name_list(short)}")
        if members:
            evidence.append(f"{name}: {len(members)}/{count} Ready node(s) "
                            f"({name_list([name_of(n) for n in members], 4)}), {GPU_RESOURCE}="
                            f"{want or allocatable(members[0], GPU_RESOURCE)} each")
    if stray and ev.plan.pinned:
        problems.append(f"GPU node(s) without a {defaults.PHASE_LABEL_KEY} label of a planned "
                        f"group: {name_list(stray)}")
    if problems:
        return Check.failed(cid, title, "; ".join(problems),
                            "look at the node groups in the EKS console (capacity, health); a "
                            "missing nvidia.com/gpu means the NVIDIA device plugin is not running "
                            "on the node")
    extra = sum(len(m) for m in by_group.values()) - sum(
        g.max_nodes or g.nodes for g in ev.plan.groups.values())
    if extra > 0:
        return Check.warned(cid, title, "; ".join(evidence) + f"; {extra} more GPU node(s) than "
                            "planned", "an earlier node group may still be draining")
    return Check.passed(cid, title, "; ".join(evidence))


def check_efa_devices(ev: Evidence) -> Check:
    cid, title = "efa-devices", TITLES["efa-devices"]
    if ev.plan.kv_backend is None:
        return Check.skipped(cid, title, "colocated mode: no KV cache moves between nodes")
    if ev.plan.kv_backend != "LIBFABRIC":
        return Check.skipped(cid, title, f"kvTransfer.backend is {ev.plan.kv_backend}: EFA is "
                             "only needed for LIBFABRIC")
    try:
        nodes = ev.gpu_nodes()
    except KubeError as exc:
        return api_unavailable(cid, exc)
    if not nodes:
        return Check.skipped(cid, title, "no GPU nodes to look at (see gpu-nodes)")
    missing = [name_of(n) for n in nodes if allocatable(n, EFA_RESOURCE) < 1]
    if missing:
        return Check.failed(
            cid, title, f"{EFA_RESOURCE} is not advertised (allocatable 0 or absent) on "
            f"{name_list(missing)}: NIXL's LIBFABRIC backend cannot use EFA there",
            "check that the aws-efa-k8s-device-plugin daemonset runs on the GPU nodes and that "
            "the node group was created with EFA interfaces (enable_efa_support)")
    counts = ", ".join(f"{name_of(n)}={allocatable(n, EFA_RESOURCE)}" for n in nodes[:6])
    return Check.passed(cid, title, f"{EFA_RESOURCE} allocatable on every GPU node: {counts}")


def check_one_zone(ev: Evidence) -> Check:
    cid, title = "one-zone", TITLES["one-zone"]
    try:
        nodes = ev.gpu_nodes()
    except KubeError as exc:
        return api_unavailable(cid, exc)
    if not nodes:
        return Check.skipped(cid, title, "no GPU nodes to look at (see gpu-nodes)")
    zones: dict[str, list[str]] = {}
    unlabelled = []
    for node in nodes:
        zone = labels_of(node).get(ZONE_LABEL)
        if zone:
            zones.setdefault(zone, []).append(name_of(node))
        else:
            unlabelled.append(name_of(node))
    want = ev.plan.availability_zone
    if len(zones) > 1 or (zones and want not in zones):
        spread = "; ".join(f"{zone}: {name_list(names, 3)}" for zone, names in sorted(zones.items()))
        return Check.failed(cid, title, f"GPU nodes are in {spread}; the stack's zone is {want} "
                            "(EFA traffic cannot cross availability zones)",
                            "every GPU node group must use the one private subnet of the GPU zone; "
                            "run `pulumi up` again to replace the stray group")
    if unlabelled or not zones:
        return Check.warned(cid, title, f"no {ZONE_LABEL} label on {name_list(unlabelled)}")
    return Check.passed(cid, title, f"all {len(nodes)} GPU node(s) in {want} ({ZONE_LABEL})")
