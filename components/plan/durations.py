"""How long a deployment takes: typical seconds per resource type, the plan's critical path, an ETA.

Pulumi does not say how long an update will take. What it does know is the dependency graph: the
offline plan (Contract 2) lists every resource with the names it `dependsOn`, and the engine
starts a resource as soon as everything it depends on is done. So the wall time of a `pulumi up`
is the longest path through that graph, weighted by how long each resource takes to create. That
path is dominated by three slow steps of the reference deployment: the EKS control plane, the GPU
node group and the RayService (which is Ready only once every node has pulled the serving image
and loaded the model). The rest (VPC, subnets, IAM, Namespace...) take seconds.

`TYPICAL` is the one table of typical creation times, each with where the number comes from.
The web app replaces entries with the medians of its own past runs (`measured_durations`,
`merged`) once it has them: what this account, region and model actually take beats any quote.

Everything here is plain data in, numbers out: resources are the plan's dicts (`type`, `name`,
`dependsOn`, optionally `inputs`), durations a mapping of key -> seconds. No Pulumi import, so the
web app and the benches can use it without the SDK loaded.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Optional, Sequence

from components.config.defaults import GPU_ROLE_LABEL

Resource = Mapping[str, Any]

MANAGED_NODE_GROUP = "eks:index:ManagedNodeGroup"
# A GPU node group takes far longer than the CPU system group (bigger instances, the NVIDIA AMI,
# EFA), but both have the same Pulumi type; `duration_key` tells them apart by their inputs.
GPU_NODE_GROUP = MANAGED_NODE_GROUP + "[gpu]"
GPU_AMI_MARKER = "NVIDIA"  # raypd's GPU groups use AL2023_x86_64_NVIDIA
# Component resources (the project's own `raypd:` types, the stack) create nothing themselves:
# their time is their children's, which the plan lists separately.
COMPONENT_PREFIXES = ("raypd:", "pulumi:pulumi:Stack")
# Any type the table does not know: most AWS and Kubernetes API objects are created in seconds.
DEFAULT_SECONDS = 10.0
# A started resource that has run past its typical time is still expected to take a little
# longer, not zero: without a floor, the ETA of a late RayService would read "0 s" for as long as
# it stays late, which is exactly when the user most wants an honest number.
LATE_FLOOR_FRACTION = 0.10


class Typical(NamedTuple):
    seconds: float
    source: str


# Typical creation time per Pulumi type token (key), and why. Sources:
#   [guide]    the AWS multi-node Ray LLM DLC guide this project reproduces ("Timings the guide
#              quotes": cluster 15-20 min, GPU node group 5-20 min, KubeRay 1-2 min, RayService
#              several minutes; weights load ~145 s cold for the ~18 GiB Qwen3.5-9B checkpoint).
#   [eason]    https://easontechtalk.com/unofficial-eks-cluster-creation-performance-across-aws-regions
#              (EKS control plane creation measured in 21 regions: us-east-2 904.62 s).
#   [peks1819] https://github.com/pulumi/pulumi-eks/issues/1819 (a `pulumi up` log: eks:index:Cluster
#              created (748s), aws:iam:Role created (1s), RolePolicyAttachment created (0.71s-1s)).
#   [tf-ng]    https://github.com/umotif-public/terraform-aws-eks-node-group/issues/7 (managed node
#              group "Creation complete after 2m50s"); https://github.com/eksctl-io/eksctl/pull/482
#              (node group stack CREATE_COMPLETE after 3m36s); https://alchemy.run/providers/aws/eks/nodegroup
#              ("CREATING -> ACTIVE, ~2-5 min").
#   [ray63859] https://github.com/ray-project/ray/pull/63859 (cold Ray Serve LLM start on GPU nodes:
#              node + image pull + join ~300 s, vLLM engine init incl. weights ~100 s).
#   [soci]     AWS ML blog "Reducing container cold start times using SOCI index on DLAMI and DLC":
#              "Standard Docker image pulls of 15-20 GB can take 4-6 minutes per instance".
#   [kops944]  https://github.com/kubernetes/kops/pull/944 (NAT gateway Pending -> Available "can take
#              up to 10 min", code comment "up to 5 min").
#   [raydocs]  https://docs.ray.io/en/master/kuberay/getting-started/operator-installation.html
#              (kuberay-operator pod Running, AGE 24s, after `helm install`).
TYPICAL: dict[str, Typical] = {
    # ---- the slow path ----
    "eks:index:Cluster": Typical(
        900.0,
        "[eason] control plane 904.62 s in us-east-2; [guide] 15-20 min; [peks1819] 748 s",
    ),
    GPU_NODE_GROUP: Typical(
        600.0,
        "estimate inside [guide] 5-20 min for the GPU node group: a CPU group takes ~3 min "
        "[tf-ng], GPU instances with the NVIDIA AMI and EFA boot and join slower",
    ),
    MANAGED_NODE_GROUP: Typical(
        180.0,
        "CPU (system) managed node group: [tf-ng] 2m50s, 3m36s, '~2-5 min'",
    ),
    "kubernetes:ray.io/v1:RayService": Typical(
        780.0,
        "until condition Ready (model loaded on every node): pull of the ~30 GB Ray LLM DLC at "
        "[soci] rates (15-20 GB in 4-6 min, ~60 MB/s) ~500 s + weights download and load ~145 s "
        "cold [guide] + vLLM engine init and Serve deploy ~100 s [ray63859] + pod scheduling and "
        "Ray start ~35 s (estimate); ~30 GB is the project's figure for the image, not a published one",
    ),
    "kubernetes:helm.sh/v3:Release": Typical(
        90.0,
        "[guide] KubeRay 1-2 min (Helm waits for the pods: atomic); [raydocs] operator Running "
        "after 24 s on a warm cluster; the device-plugin charts are small DaemonSets, same order; "
        "kube-prometheus-stack (issue 18) waits for its EBS volumes and six images, likely 2-4 "
        "min (estimate), dcgm-exporter is not awaited",
    ),
    "aws:eks/addon:Addon": Typical(
        120.0,
        "estimate: coredns, added once the system node exists, goes ACTIVE when its pods run; "
        "without a node it stays DEGRADED until a 20-min timeout ([peks1819])",
    ),
    "aws:ec2/natGateway:NatGateway": Typical(
        120.0,
        "estimate: NAT gateways wait Pending -> Available, 'up to 5 min', 'up to 10 min' [kops944]; "
        "1-2 min is the common case",
    ),
    # ---- seconds: one API call and a short wait ----
    "aws:ec2/vpc:Vpc": Typical(5.0, "estimate: create, wait available, set DNS attributes"),
    "aws:ec2/subnet:Subnet": Typical(3.0, "estimate: create and wait available"),
    "aws:ec2/internetGateway:InternetGateway": Typical(3.0, "estimate: create and attach"),
    "aws:ec2/eip:Eip": Typical(2.0, "estimate: one AllocateAddress call"),
    "aws:ec2/routeTable:RouteTable": Typical(3.0, "estimate: create and add its routes"),
    "aws:ec2/routeTableAssociation:RouteTableAssociation": Typical(1.0, "estimate: one call"),
    "aws:ec2/securityGroup:SecurityGroup": Typical(3.0, "estimate: create and set rules"),
    "aws:iam/role:Role": Typical(2.0, "[peks1819] aws:iam:Role created (1s)"),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": Typical(
        1.0, "[peks1819] RolePolicyAttachment created (0.71s-1s)"
    ),
    "kubernetes:core/v1:Namespace": Typical(2.0, "estimate: one API call, Pulumi awaits Active"),
    "kubernetes:yaml/v2:ConfigGroup": Typical(
        5.0, "estimate: KubeRay's CRDs, fetched from GitHub and applied server-side, Established"
    ),
    "kubernetes:batch/v1:Job": Typical(
        15.0,
        "estimate: the Serve rollout check (components.render.rollout) on a first deploy, where the app "
        "already runs: pod start with the image cached on the system node and one API call; on an "
        "in-place Serve change it lasts the whole redeploy instead",
    ),
    "kubernetes:core/v1:ServiceAccount": Typical(1.0, "estimate: one API call"),
    "aws:iam/rolePolicy:RolePolicy": Typical(1.0, "estimate: one PutRolePolicy call"),
    "raypd:serving:ModelReadRole": Typical(0.0, "component: its time is its children's"),
    "kubernetes:core/v1:Secret": Typical(1.0, "estimate: one API call"),
    # ---- the endpoint (components.stack.endpoint_stack) and the lock-down (components.render.network_policy) ----
    "kubernetes:gateway.networking.k8s.io/v1:Gateway": Typical(
        180.0,
        "estimate: awaited until Programmed (pulumi.com/waitFor), i.e. until the LB controller's "
        "NLB exists and Envoy's Service has its host name; an NLB goes provisioning -> active in "
        "a few minutes",
    ),
    "kubernetes:gateway.networking.k8s.io/v1:GatewayClass": Typical(1.0, "estimate: one API call"),
    "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute": Typical(1.0, "estimate: one API call"),
    "kubernetes:gateway.envoyproxy.io/v1alpha1:EnvoyProxy": Typical(1.0, "estimate: one API call"),
    "kubernetes:gateway.envoyproxy.io/v1alpha1:SecurityPolicy": Typical(
        1.0, "estimate: one API call"),
    "kubernetes:gateway.envoyproxy.io/v1alpha1:ClientTrafficPolicy": Typical(
        1.0, "estimate: one API call"),
    "kubernetes:gateway.envoyproxy.io/v1alpha1:BackendTrafficPolicy": Typical(
        1.0, "estimate: one API call"),
    "kubernetes:networking.k8s.io/v1:NetworkPolicy": Typical(1.0, "estimate: one API call"),
    "kubernetes:core/v1:NamespacePatch": Typical(1.0, "estimate: one server-side apply call"),
    "random:index/randomString:RandomString": Typical(0.0, "local: no cloud call"),
    "raypd:endpoint:Endpoint": Typical(0.0, "component: its time is its children's"),
    "raypd:endpoint:LoadBalancerController": Typical(0.0, "component: its time is its children's"),
    "raypd:security:NetworkPolicies": Typical(0.0, "component: its time is its children's"),
    # ---- the metrics stack (components.stack.observability_stack, issue 18) ----
    "raypd:observability:Observability": Typical(0.0, "component: its time is its children's"),
    "kubernetes:monitoring.coreos.com/v1:PodMonitor": Typical(1.0, "estimate: one API call"),
    "kubernetes:monitoring.coreos.com/v1:PrometheusRule": Typical(
        1.0, "estimate: one API call (the operator's admission webhook validates it)"),
    "kubernetes:core/v1:ConfigMap": Typical(1.0, "estimate: one API call (a Grafana dashboard)"),
    "kubernetes:storage.k8s.io/v1:StorageClass": Typical(1.0, "estimate: one API call"),
    "pulumi:providers:kubernetes": Typical(1.0, "estimate: local, no cloud call"),
    "pulumi:providers:aws": Typical(1.0, "estimate: local, no cloud call"),
    "pulumi:providers:eks": Typical(1.0, "estimate: local, no cloud call"),
    # ---- components: nothing of their own ----
    "pulumi:pulumi:Stack": Typical(0.0, "component: its time is its children's"),
    "raypd:network:Network": Typical(0.0, "component: its time is its children's"),
    "raypd:cluster:Cluster": Typical(0.0, "component: its time is its children's"),
    "raypd:cluster:GpuNodeGroup": Typical(0.0, "component: its time is its children's"),
    "raypd:addons:Addons": Typical(0.0, "component: its time is its children's"),
    "raypd:serving:PdService": Typical(0.0, "component: its time is its children's"),
}

# The table as the functions below take it: key -> seconds.
TYPICAL_SECONDS: dict[str, float] = {key: entry.seconds for key, entry in TYPICAL.items()}

# How long the things a CHANGE does take (components.changes: downtime and the time extra nodes run).
# Same sources as above, plus:
#   [eks-upd]  EKS user guide, "Update existing cluster to new Kubernetes version": the control
#              plane update "takes several minutes"; managed node group updates replace nodes one
#              at a time after surge nodes join (Managed node group update behavior).
CHANGE_TIMES: dict[str, Typical] = {
    "engine-restart": Typical(
        245.0,
        "an engine reloads its model on a node that already runs: weights ~145 s cold [guide] (the "
        "page cache can make a reload far faster) + vLLM engine init ~100 s [ray63859]",
    ),
    "ray-cluster-warm-nodes": Typical(
        280.0,
        "a new Ray cluster on nodes that already pulled the image: the RayService's 780 s minus "
        "its ~500 s image pull [soci]",
    ),
    "control-plane-upgrade": Typical(
        900.0, "estimate: [eks-upd] 'several minutes'; seen as 10-20 min in the field",
    ),
    "node-group-roll": Typical(
        900.0,
        "estimate: [eks-upd] surge nodes join (~600 s for GPU nodes, as above), then each old "
        "node is cordoned, drained and terminated",
    ),
}


class CriticalPath(NamedTuple):
    """The longest chain of dependencies: its total seconds and its names, first to last."""

    seconds: float
    names: tuple[str, ...]


# ---- one resource's time ----

def duration_key(resource: Resource) -> str:
    """The table key of a resource: its type token, except GPU node groups get their own.

    The web app should record measured samples under this key too (it has the plan, so it can
    map an event's name to the plan's resource), or a GPU group's 10 minutes would be averaged
    with the system group's 3.
    """
    kind = str(resource.get("type", ""))
    if kind == MANAGED_NODE_GROUP:
        inputs = resource.get("inputs") or {}
        labels = inputs.get("labels") or {}
        ami = str(inputs.get("amiType") or "")
        if GPU_AMI_MARKER in ami.upper() or all(labels.get(k) == v for k, v in GPU_ROLE_LABEL.items()):
            return GPU_NODE_GROUP
    return kind


def seconds_for(resource: Resource, durations: Mapping[str, float]) -> float:
    """Typical seconds of one resource: its key, else its type, else 0 for components, else default.

    Falling back from the GPU key to the plain type keeps a measured-only mapping usable.
    """
    key = duration_key(resource)
    kind = str(resource.get("type", ""))
    for candidate in (key, kind):
        if candidate in durations:
            return float(durations[candidate])
    if kind.startswith(COMPONENT_PREFIXES):
        return 0.0
    return DEFAULT_SECONDS


# ---- the graph ----

def _graph(
    resources: Sequence[Resource],
) -> tuple[list[str], dict[str, Resource], dict[str, list[str]]]:
    """Names in plan order, name -> resource, name -> the dependencies that are in the plan."""
    order: list[str] = []
    by_name: dict[str, Resource] = {}
    for resource in resources:
        name = str(resource["name"])
        if name in by_name:
            # dependsOn refers to names: two resources with one name cannot be told apart.
            raise ValueError(f"two resources are named {name!r}; dependsOn cannot tell them apart")
        by_name[name] = resource
        order.append(name)
    deps = {
        # Names outside the list (e.g. the stack, or resources of another plan) are ignored;
        # duplicates are kept once, in the order given.
        name: list(dict.fromkeys(
            str(d) for d in (by_name[name].get("dependsOn") or []) if d in by_name
        ))
        for name in order
    }
    return order, by_name, deps


def _topological(order: list[str], deps: Mapping[str, list[str]]) -> list[str]:
    """Dependencies before dependents; ValueError naming a cycle. Iterative: no recursion limit."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    result: list[str] = []
    for root in order:
        if state.get(root) == 2:
            continue
        path: list[str] = [root]
        iterators = [iter(deps[root])]
        state[root] = 1
        while path:
            step = next(iterators[-1], None)
            if step is None:
                done = path.pop()
                iterators.pop()
                state[done] = 2
                result.append(done)
            elif state.get(step) == 1:
                cycle = path[path.index(step):] + [step]
                raise ValueError("dependency cycle: " + " -> ".join(cycle))
            elif state.get(step) != 2:
                state[step] = 1
                path.append(step)
                iterators.append(iter(deps[step]))
    return result


def _longest(
    resources: Sequence[Resource],
    weight: Callable[[str, Resource], float],
    roots: frozenset[str] = frozenset(),
) -> CriticalPath:
    """Longest weighted path; resources in `roots` are treated as having no pending dependencies."""
    order, by_name, deps = _graph(resources)
    finish: dict[str, float] = {}
    previous: dict[str, Optional[str]] = {}
    for name in _topological(order, deps):
        best: Optional[str] = None
        if name not in roots:
            for dep in deps[name]:  # first listed wins a tie: deterministic
                if best is None or finish[dep] > finish[best]:
                    best = dep
        previous[name] = best
        finish[name] = weight(name, by_name[name]) + (finish[best] if best is not None else 0.0)
    if not finish:
        return CriticalPath(0.0, ())
    end = order[0]
    for name in order:  # plan order breaks ties between equally long ends
        if finish[name] > finish[end]:
            end = name
    names: list[str] = []
    cursor: Optional[str] = end
    while cursor is not None:
        names.append(cursor)
        cursor = previous[cursor]
    return CriticalPath(finish[end], tuple(reversed(names)))


def critical_path(resources: Sequence[Resource], durations: Mapping[str, float]) -> CriticalPath:
    """The longest path through the plan's dependsOn DAG: the time a `pulumi up` needs.

    Pulumi starts a resource as soon as all it depends on is created, with unbounded parallelism
    by default, so with typical durations the update takes the longest dependency chain. The
    returned names run from the first resource created to the last. Raises ValueError on a cycle.
    """
    return _longest(resources, lambda _name, resource: seconds_for(resource, durations))


def remaining_seconds(
    resources: Sequence[Resource],
    durations: Mapping[str, float],
    finished: Iterable[str],
    started: Mapping[str, float],
) -> float:
    """The ETA during a run: the longest path over what is not finished yet.

    - finished resources count 0;
    - a started resource (name -> seconds since it started) counts what is left of its typical
      time, but at least LATE_FLOOR_FRACTION of it: one running late is still expected to take
      a little longer, so the ETA never claims "done" while something is still being created;
      its dependencies are behind it (the engine started it), so nothing before it counts;
    - any other resource counts its typical time.
    Names that are not in the plan are ignored.
    """
    done = set(finished)
    running = {name: elapsed for name, elapsed in started.items() if name not in done}

    def weight(name: str, resource: Resource) -> float:
        if name in done:
            return 0.0
        typical = seconds_for(resource, durations)
        if name in running:
            elapsed = running[name]
            if not math.isfinite(elapsed) or elapsed < 0:
                elapsed = 0.0
            return max(typical - elapsed, LATE_FLOOR_FRACTION * typical)
        return typical

    return _longest(resources, weight, roots=frozenset(running)).seconds


# ---- learning from past runs ----

def measured_durations(samples: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Median seconds per key from (key, seconds) samples of past runs.

    The median, not the mean: one run that waited on a quota or a retry must not move the ETA
    of every later run. Non-positive, NaN and infinite samples (a resource that was skipped, or a
    clock that jumped) are ignored; keys with no valid sample are left out.
    """
    by_key: dict[str, list[float]] = {}
    for key, seconds in samples:
        try:
            value = float(seconds)
        except (TypeError, ValueError):
            continue
        if math.isfinite(value) and value > 0:
            by_key.setdefault(str(key), []).append(value)
    return {key: float(statistics.median(values)) for key, values in by_key.items()}


def merged(table: Mapping[str, float], measured: Mapping[str, float]) -> dict[str, float]:
    """The table with measured medians in place of quotes wherever there is a measurement."""
    return {**table, **measured}


def path_steps(
    resources: Sequence[Resource], path: CriticalPath, durations: Mapping[str, float]
) -> list[tuple[str, str, float]]:
    """(type, name, seconds) for every step of a path, for printing."""
    by_name = {str(r["name"]): r for r in resources}
    return [
        (str(by_name[name]["type"]), name, seconds_for(by_name[name], durations)) for name in path.names
    ]
