"""The KubeRay `ray.io/v1` RayService manifest for a spec: a pure function, dict in, dict out.

The Pulumi component only wires this dict into a `CustomResource`. Every fact of the AWS reference's
RayService is here (CPU-only head on the system nodes, one GPU worker pod per GPU node with all its
GPUs and EFA interfaces, privileged for NIXL, FI_PROVIDER=efa, VLLM_HOST_IP from the pod IP,
/dev/shm in memory, `ray stop` before the pod goes); the node plan decides how many pods of what.

Field names follow KubeRay's RayService CRD as published in helm chart kuberay-operator 1.4.0 (the
default version) and 1.7.0: per-group `resources`/`labels` are in 1.7.0 but not 1.4.0, so custom Ray
resources go through `rayStartParams.resources`, which every version accepts. The deprecated
`serviceUnhealthySecondThreshold`/`deploymentUnhealthySecondThreshold` are not used.

How changes reach a running RayService (KubeRay 1.4-1.7, ray-operator/controllers/ray/
rayservice_controller.go), and what raypd does about each:
- KubeRay compares a hash of `rayClusterConfig` without each worker group's replicas, minReplicas,
  maxReplicas and workersToDelete (`generateHashWithoutReplicasAndWorkersToDelete`) with the
  running cluster's. A different hash means a new RayCluster: with `upgradeStrategy` NewCluster a
  second, pending cluster that takes over once ready (`shouldPrepareNewCluster`); with None,
  nothing at all. `cluster_rebuild_digest` computes the same projection; the RayService carries it
  as an annotation, and in-place stacks replace the RayService when it changes
  (components.stack.pd_service).
- An equal hash leaves the RayCluster alone (`shouldUpdateCluster`): a replica count changed in the
  RayService never reaches the RayCluster. KubeRay means the Ray autoscaler to own worker replicas
  (kuberay#2333, kuberay#1734), so raypd enables it (`enableInTreeAutoscaling`; min 0 and a
  ceiling for max, not a phase's own bounds, which would never reach a running cluster either:
  components.render.ray_autoscaler): Serve asks for one more engine (components.render.serve_config
  puts replica counts, or a phase's autoscaling config, in lightweight `deployments` overrides),
  the autoscaler adds the worker pod on a node the node group has or adds; fewer engines leave a
  worker idle and the autoscaler removes it.
- Every pod selects the exact nodes meant for it: its group's labels plus the instance type and the
  GPU zone, so after a node-group replacement (new type, new zone) no Ray pod can be scheduled on
  the old nodes that Pulumi drains at the end of the same `up`; zero-downtime stacks add the node
  set (`node_set`) that each generation of GPU node groups carries.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from typing import Any, Optional

from components.config import catalogue, defaults
from components.config.spec import DeploymentSpec
from components.plan.topology import DeploymentPlan, GpuGroupPlan
from components.render import observability_names as metrics
from components.render.gcs_fault_tolerance import gcs_fault_tolerance_options
from components.render.model_access import service_account_name
from components.render.node_autoscaler import busy_engine_annotations
from components.render.ray_autoscaler import autoscaler_options, worker_group_bounds
from components.render.rollout import rayservice_await_annotations
from components.render.scaling_policy.rendering import mount_policy_file
from components.render.serve_autoscaling import serve_code_version
from components.render.serve_config import render_application, to_yaml

API_VERSION = "ray.io/v1"
KIND = "RayService"
# Under /tmp: writable whatever user the image runs as; on workers an emptyDir is mounted there.
HF_HOME = "/tmp/huggingface"
HF_TOKEN_SECRET_KEY = "token"
GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
# On the head's and every worker's pod template: NetworkPolicies (components.render.network_policy) select
# a RayService's pods by it. KubeRay's own ray.io/cluster names the RayCluster, which a NewCluster
# upgrade replaces under another name; this label stays the same across generations.
RAY_SERVICE_LABEL = "raypd.io/ray-service"
HEAD_CONTAINER = "ray-head"
WORKER_CONTAINER = "ray-worker"

# Node headroom for the kubelet's reservations (EKS: kube-reserved ~255 MiB + 11 MiB per pod slot,
# system-reserved, eviction threshold), the kernel's own share of RAM, and the daemonsets every GPU
# node runs (VPC CNI, kube-proxy, NVIDIA and EFA device plugins).
NODE_MEMORY_RESERVE_FRACTION = 0.08
NODE_MEMORY_RESERVE_MIN_GIB = 4
NODE_CPU_RESERVE_FRACTION = 0.05
NODE_CPU_RESERVE_MIN = 2
# The Ray head shares the system nodes with the KubeRay operator, CoreDNS and add-ons: it takes half.
HEAD_SHARE = 0.5
HEAD_FALLBACK = {"cpu": "1", "memory": "4Gi"}  # system types outside the catalogue
# During a zero-downtime switch two Ray heads (the old cluster's and the new one's) share the system
# nodes, so each takes half of what it would otherwise.
NEW_CLUSTER_HEAD_FACTOR = 0.5
RAY_CLUSTER_DIGEST_ANNOTATION = "raypd.io/ray-cluster-digest"
# The fields KubeRay leaves out of its cluster hash (generateHashWithoutReplicasAndWorkersToDelete).
REPLICA_FIELDS = ("replicas", "minReplicas", "maxReplicas")


def hf_token_secret_name(spec: DeploymentSpec) -> str:
    """Name of the Kubernetes Secret (in spec.namespace, key "token") holding the HF token."""
    return f"{spec.service_name}-hf-token"


def ray_resources_param(resources: dict[str, int]) -> str:
    """`rayStartParams.resources` as KubeRay itself writes it: single-quoted JSON, '{"name": 1}'.

    KubeRay (1.4 and later, `getResourcesMap`) trims surrounding quotes and parses the rest as JSON
    when it adds accelerator resources, and pastes `--resources=<value>` into the shell line that
    runs `ray start`, where the single quotes keep the JSON one word. A backslash-escaped form still
    starts Ray (the shell unescapes it) but fails KubeRay's parse: "failed to add accelerator
    resources" in the operator's log.
    """
    return "'" + json.dumps(resources) + "'"


def worker_resources(group: GpuGroupPlan) -> dict[str, dict[str, str]]:
    """Container requests/limits for a worker pod that owns its whole node.

    Formula (from the catalogue entry of the node's instance type):
      memory = node memory - max(4 GiB, ceil(8% of node memory)),  requested AND limited
      cpu    = vCPUs - max(2, ceil(5% of vCPUs)),                  requested only
    The 8% covers the kernel's share, the kubelet's reservations and the daemonsets, so the pod
    still schedules on the node's allocatable memory. The large limit matters: the OS page cache
    that holds the checkpoint counts against it, and a limit well above the checkpoint keeps the
    weights cached across engine restarts (the reference saw reloads fall from ~145 s to ~2 s).
    /dev/shm (memory-backed emptyDir, Ray's object store) is charged to the same limit.
    No CPU limit: CFS throttling would slow tokenization and the engine's scheduler for no gain.
    GPUs and EFA interfaces are extended resources, so requests must equal limits.
    """
    hardware = catalogue.CATALOGUE[group.instance_type]
    memory_reserve = max(
        NODE_MEMORY_RESERVE_MIN_GIB, math.ceil(hardware.memory_gib * NODE_MEMORY_RESERVE_FRACTION)
    )
    cpu_reserve = max(NODE_CPU_RESERVE_MIN, math.ceil(hardware.vcpus * NODE_CPU_RESERVE_FRACTION))
    memory = f"{hardware.memory_gib - memory_reserve}Gi"
    cpu = str(max(1, hardware.vcpus - cpu_reserve))
    devices = {GPU_RESOURCE: str(group.gpus_per_node)}
    if group.efa_interfaces_per_node > 0:
        devices[EFA_RESOURCE] = str(group.efa_interfaces_per_node)
    return {
        "requests": {"cpu": cpu, "memory": memory, **devices},
        "limits": {"memory": memory, **devices},
    }


def head_resources(spec: DeploymentSpec) -> dict[str, dict[str, str]]:
    """Half of a system node: the other half is for the operator and cluster add-ons (a quarter on
    zero-downtime stacks, where a second head starts beside the first during a switch)."""
    hardware = catalogue.lookup(spec.system_nodes.instance_type)
    share = HEAD_SHARE * (NEW_CLUSTER_HEAD_FACTOR if spec.upgrade_strategy == "newCluster" else 1)
    if hardware is None:
        requests = dict(HEAD_FALLBACK)
    else:
        requests = {
            "cpu": str(max(1, math.floor(hardware.vcpus * share))),
            "memory": f"{max(2, math.floor(hardware.memory_gib * share))}Gi",
        }
    return {"requests": requests, "limits": {"memory": requests["memory"]}}


def _hf_token_env(spec: DeploymentSpec) -> list[dict[str, Any]]:
    if spec.hf_token is None:
        return []
    return [{
        "name": "HF_TOKEN",
        "valueFrom": {
            "secretKeyRef": {"name": hf_token_secret_name(spec), "key": HF_TOKEN_SECRET_KEY}
        },
    }]


def _pod_identity(spec: DeploymentSpec) -> dict[str, Any]:
    """`serviceAccountName` of every Ray pod when the model comes from S3: the ServiceAccount
    whose IAM role may read it (components.render.model_access); nothing for Hugging Face sources."""
    name = service_account_name(spec.service_name, spec.model.source)
    return {"serviceAccountName": name} if name else {}


def pod_labels(spec: DeploymentSpec) -> dict[str, str]:
    """Labels of every Ray pod of the RayService (KubeRay adds its own; see RAY_SERVICE_LABEL)."""
    return {RAY_SERVICE_LABEL: spec.service_name}


def _pre_stop() -> dict[str, Any]:
    # Lets Ray drain and deregister the node instead of the GCS discovering a vanished raylet.
    return {"preStop": {"exec": {"command": ["/bin/sh", "-c", "ray stop"]}}}


def _head_group(plan: DeploymentPlan) -> dict[str, Any]:
    spec = plan.spec
    ports = [
        {"containerPort": defaults.GCS_PORT, "name": "gcs"},
        {"containerPort": defaults.DASHBOARD_PORT, "name": "dashboard"},
        # KubeRay builds <name>-serve-svc from the head port named "serve".
        {"containerPort": defaults.SERVE_PORT, "name": "serve"},
    ]
    env = [{"name": "HF_HOME", "value": HF_HOME}, *_hf_token_env(spec)]
    if spec.observability.enabled:
        # The head PodMonitor scrapes these ports by name; Ray's dashboard embeds Grafana.
        ports += metrics.head_metrics_ports()
        env += metrics.head_metrics_env()
    container = {
        "name": HEAD_CONTAINER,
        "image": spec.image_uri,
        "ports": ports,
        "resources": head_resources(spec),
        "env": env,
        "lifecycle": _pre_stop(),
    }
    pod_spec = {
        **_pod_identity(spec),
        # The system group's type too: after a system node type change the head must not
        # start on the old node that Pulumi drains at the end of the update.
        "nodeSelector": {**defaults.SYSTEM_LABELS,
                         defaults.INSTANCE_TYPE_LABEL: spec.system_nodes.instance_type},
        "containers": [container],
    }
    mount_policy_file(plan, container, pod_spec)
    return {
        # num-gpus 0: the head runs on a CPU node; no engine may be scheduled on it.
        "rayStartParams": {"dashboard-host": "0.0.0.0", "num-gpus": "0"},
        "template": {"metadata": {"labels": pod_labels(spec)}, "spec": pod_spec},
    }


def _worker_env(plan: DeploymentPlan) -> list[dict[str, Any]]:
    """Worker environment. Never VLLM_NIXL_SIDE_CHANNEL_PORT/HOST: Ray Serve LLM's NIXL backend
    picks a free port per engine process (plus a per-replica offset) and the node's IP unless they
    are set; a fixed port in the pod would make two engines on one node bind the same port."""
    spec = plan.spec
    env: list[dict[str, Any]] = []
    if spec.kv_transfer.backend == "LIBFABRIC":
        env.append({"name": "FI_PROVIDER", "value": "efa"})
    env += [
        # NIXL's side channel advertises this address; the pod IP is the one peers can reach.
        {"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "HF_HOME", "value": HF_HOME},
    ]
    if plan.hybrid_kv_transfer:
        # vLLM 0.26's NixlConnector transfers a hybrid model's Mamba / Gated-DeltaNet conv state
        # only in the DS layout and asserts it at start ("Set VLLM_SSM_CONV_STATE_LAYOUT=DS");
        # the hybrid KV cache manager stays on with NIXL, so nothing else changes.
        env.append({"name": "VLLM_SSM_CONV_STATE_LAYOUT", "value": "DS"})
    env += _hf_token_env(spec)
    return env


def worker_node_selector(group: GpuGroupPlan, zone: Optional[str],
                         node_set: Optional[str]) -> dict[str, str]:
    """The nodes a group's Ray workers may run on: the group's labels, its instance type and zone
    (labels every node carries), and on zero-downtime stacks the node set of this generation."""
    selector = {**group.labels, defaults.INSTANCE_TYPE_LABEL: group.instance_type}
    if zone:
        selector[defaults.ZONE_LABEL] = zone
    if node_set:
        selector[defaults.NODE_SET_LABEL] = node_set
    return selector


def _worker_group(plan: DeploymentPlan, group: GpuGroupPlan, zone: Optional[str],
                  node_set: Optional[str]) -> dict[str, Any]:
    spec = plan.spec
    start_params = {"num-gpus": str(group.gpus_per_node)}
    if group.ray_resource is not None:
        # One unit per GPU: the phase's placement-group bundles each take one unit with one GPU.
        start_params["resources"] = ray_resources_param({group.ray_resource: group.gpus_per_node})
    container = {
        "name": WORKER_CONTAINER,
        "image": spec.image_uri,
        "resources": worker_resources(group),
        # NIXL registers CUDA memory with the EFA NIC; IPC_LOCK alone is not enough for that.
        "securityContext": {"privileged": True},
        "env": _worker_env(plan),
        "volumeMounts": [
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "hf-cache", "mountPath": HF_HOME},
        ],
        "lifecycle": _pre_stop(),
    }
    if spec.observability.enabled:
        container["ports"] = metrics.worker_metrics_ports()  # the worker PodMonitor's port
    pod_spec: dict[str, Any] = {
        **_pod_identity(spec),
        "nodeSelector": worker_node_selector(group, zone, node_set),
        # Harmless where GPU nodes are untainted; needed where they carry the usual taint.
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [container],
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory"}},
            # Survives container restarts within the pod, so a crashed engine does not
            # download the checkpoint again.
            {"name": "hf-cache", "emptyDir": {}},
        ],
    }
    mount_policy_file(plan, container, pod_spec)
    return {
        "groupName": group.name,
        # Where the cluster starts; from then on the autoscaler owns the count (module docstring).
        **worker_group_bounds(group),
        "rayStartParams": start_params,
        "template": {
            # With autoscaling, the node autoscaler runs and must never evict a worker (its
            # engine) to remove the node under it; without, the template stays as it was.
            "metadata": {"labels": pod_labels(spec),
                         **({"annotations": busy_engine_annotations()} if plan.autoscaling else {})},
            "spec": pod_spec,
        },
    }


def serve_config_v2(plan: DeploymentPlan) -> str:
    """serveConfigV2: the application list only; KubeRay owns the HTTP options of the cluster."""
    return to_yaml({"applications": [render_application(plan)]})


def labels(spec: DeploymentSpec) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "raypd",
        "app.kubernetes.io/instance": spec.service_name,
        "app.kubernetes.io/managed-by": "pulumi",
        "raypd.io/stack": spec.stack,
    }


def cluster_rebuild_digest(ray_cluster_config: dict[str, Any]) -> str:
    """What KubeRay hashes to decide on a new RayCluster: the config without each worker group's
    replicas, minReplicas, maxReplicas and scaleStrategy.workersToDelete
    (`generateHashWithoutReplicasAndWorkersToDelete`). Equal digests: KubeRay keeps the cluster."""
    config = copy.deepcopy(ray_cluster_config)
    for group in config.get("workerGroupSpecs") or []:
        for key in REPLICA_FIELDS:
            group.pop(key, None)
        (group.get("scaleStrategy") or {}).pop("workersToDelete", None)
    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _ray_cluster_config(plan: DeploymentPlan, zone: Optional[str],
                        node_set: Optional[str]) -> dict[str, Any]:
    spec = plan.spec
    return {
        "rayVersion": spec.ray_version,
        # KubeRay never carries a RayService's replica counts to its RayCluster (module
        # docstring): the Ray autoscaler adds and removes workers as Serve asks for engines.
        "enableInTreeAutoscaling": True,
        "autoscalerOptions": autoscaler_options(),  # components.render.ray_autoscaler
        "headGroupSpec": _head_group(plan),
        "workerGroupSpecs": [_worker_group(plan, group, zone, node_set) for group in plan.groups],
        **gcs_fault_tolerance_options(spec),  # the head survives a restart (issue 31)
    }


def node_set(plan: DeploymentPlan, zone: Optional[str] = None) -> Optional[str]:
    """The generation of GPU node groups a zero-downtime stack runs on (None for in-place stacks).

    It changes whenever the Ray cluster must be rebuilt or its engines restarted (the cluster
    digest, the Serve args, the image, a phase's autoscaling turned on or off: Serve's code version),
    and not when only replica counts or autoscaling settings change. A new value means
    new node groups (components.stack.node_groups names them by it) and a new RayCluster on them; the
    old groups are deleted at the end of the same `pulumi up`, after the switch.
    """
    if plan.spec.upgrade_strategy != "newCluster":
        return None
    base = cluster_rebuild_digest(_ray_cluster_config(plan, zone, None))
    version = serve_code_version(render_application(plan))
    args = json.dumps(version["args"], sort_keys=True)
    # The autoscaling parts only where there are some: a fixed stack's node set stays what it was
    # before issue 30 (the import path goes with the args: the mode changes both).
    scaling = {key: value for key, value in version.items()
               if key not in ("args", "import_path") and value not in (None, [])}
    if scaling:
        args += "\n" + json.dumps(scaling, sort_keys=True)
    return hashlib.sha256(f"{base}\n{args}".encode("utf-8")).hexdigest()[:10]


def render_rayservice(plan: DeploymentPlan, zone: Optional[str] = None) -> dict[str, Any]:
    """The full RayService manifest: one Ray worker group per GPU node group of the plan.

    `zone` is the GPU zone the program resolved (pods select it); None where it is not known yet
    (a preview of the manifest before any zone lookup).
    """
    spec = plan.spec
    serve_config = serve_config_v2(plan)
    cluster = _ray_cluster_config(plan, zone, node_set(plan, zone))
    annotations = {
        # Custom resources are not awaited unless told what "ready" means: Ready, every
        # application RUNNING and, on zero-downtime stacks, KubeRay's switch to a new cluster done
        # (components.render.rollout says why each, and what covers the rest).
        **rayservice_await_annotations(serve_config, spec.upgrade_strategy),
        RAY_CLUSTER_DIGEST_ANNOTATION: cluster_rebuild_digest(cluster),
    }
    strategy = "NewCluster" if spec.upgrade_strategy == "newCluster" else "None"
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": spec.service_name,
            "namespace": spec.namespace,
            "labels": labels(spec),
            "annotations": annotations,
        },
        "spec": {
            # None: a cluster change on an in-place stack replaces the RayService instead
            # (components.stack.pd_service), and KubeRay must never start a second cluster that the
            # exactly-sized GPU node groups cannot hold.
            "upgradeStrategy": {"type": strategy},
            "serveConfigV2": serve_config,
            "rayClusterConfig": cluster,
        },
    }
