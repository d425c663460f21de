"""The node autoscaler under the GPU node groups (issue 30 §2), as pure values: Cluster Autoscaler's
Helm values, its IAM policy, the Auto Scaling group tags it reads, and the pod annotation that keeps
it away from busy engines. components.stack.node_autoscaler and components.stack.node_groups wire them.

Why Cluster Autoscaler and not Karpenter (docs/scaling.md, "GPU nodes", says the same to users):
raypd's GPU nodes are EKS managed node groups that pulumi-eks builds with EFA: a launch template
with one EFA interface per network card, a cluster placement group, one private subnet of the GPU
zone (components.stack.node_groups). Cluster Autoscaler only moves such a group's desired size
between its min and max (kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md: "It
will only adjust the desired value"), so every node it adds comes from that launch template into
that subnet: EFA, the placement group and the one-zone rule hold by construction, and a running
stack changes nothing but its groups' limits. Karpenter (>= 1.11 attaches EFA interfaces and takes
a placement group through EC2NodeClass `placementGroupSelector`) launches instances itself from a
NodePool and EC2NodeClass: moving to it means replacing every running GPU node group, an
interruption queue, and re-expressing the EFA, placement-group and zone rules in Karpenter's
terms, where they would hold only as long as two configurations agree. Its strengths
(consolidation across instance types, faster bin-packing) do not apply to groups of one instance
type whose nodes each hold one whole engine.

What it is told:
- Auto-discovery (README "Auto-Discovery Setup"): the ASGs carrying
  `k8s.io/cluster-autoscaler/enabled`, `k8s.io/cluster-autoscaler/<cluster>` (EKS puts both on
  every managed node group's ASG) AND raypd's own `raypd.io/node-autoscaler=<cluster>`, which only
  the GPU groups' ASGs get (`gpu_group_asg_tags`): the system node group, with the Ray head and
  the autoscaler itself, is never touched.
- Scale from zero (README: "When scaling up from 0 nodes, the Cluster Autoscaler reads ASG tags"):
  managed node groups' labels and taints never reach their ASG, so each GPU ASG gets
  `k8s.io/cluster-autoscaler/node-template/label/<key>` for every label its nodes carry (the Ray
  workers select them) and `.../resources/<name>` for the GPUs and EFA interfaces a worker pod asks
  for, which no instance-type table tells it. The GPU groups carry no taint, hence no `.../taint/`
  tag (`node_template_tags` writes one per taint it is given). The autoscaler derives instance type,
  zone and CPU/memory from the ASG's launch template itself (aws_manager.go `buildNodeFromTemplate`).
- `k8s.amazonaws.com/accelerator` on an autoscaled group's nodes (README, "Special note on GPU
  instances"): the autoscaler then counts a new GPU node as not ready until its device plugin
  advertises the GPUs, instead of adding a second node for the same pending pod.
- One node per pending worker, in its own group: each Ray worker selects its group's
  `raypd.io/node-group` label (and node set), so exactly one discovered group can hold it; the
  `least-waste` expander has a single candidate and `balance-similar-node-groups` is off, so a
  zero-downtime switch's two generations of a group are never balanced against each other.
- Scale-down never evicts a busy engine: a Ray worker pod carries
  `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"` (`busy_engine_annotations`, on the
  RayService's worker template), and also has a disk emptyDir (`--skip-nodes-with-local-storage`,
  kept on) and a custom controller (KubeRay: `--skip-nodes-with-custom-controller-pods`, kept on),
  each of which alone keeps its node (cluster-autoscaler/FAQ.md, "What types of pods can prevent CA
  from removing a node?"). Only the Ray autoscaler removes a worker, once it is idle; the node it
  leaves holds daemonsets alone and goes after `--scale-down-unneeded-time` (10 minutes).

Least privilege: the IAM role is assumed only by the autoscaler's ServiceAccount (IRSA, components.
render.model_access.irsa_trust_policy). Its policy is upstream's "Full Cluster Autoscaler Features
Policy" (the "minimal" one rules out auto-discovery), kept verbatim in components/render/data/, with
the restriction upstream recommends for its second statement: SetDesiredCapacity and
TerminateInstanceInAutoScalingGroup only on ASGs tagged for this cluster by EKS and by raypd. The
describe calls stay on "*": EC2 and Auto Scaling cannot scope them to resources.
"""

from __future__ import annotations

import copy
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from components.config import catalogue, defaults
from components.render.model_access import ROLE_ARN_ANNOTATION

# kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md at tag cluster-autoscaler-1.35.2,
# "Full Cluster Autoscaler Features Policy (Recommended)", stored unchanged.
IAM_POLICY_PATH = Path(__file__).resolve().parent / "data" / "cluster-autoscaler-iam-policy-1.35.2.json"
# The statement upstream says to restrict ("only the second block of actions should be updated").
SCALING_ACTIONS = ("autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup")
ENABLED_TAG = "k8s.io/cluster-autoscaler/enabled"
OWNED = "owned"
# raypd's own discovery tag, on the GPU groups' ASGs only (value: the cluster name).
DISCOVERY_TAG = "raypd.io/node-autoscaler"
TEMPLATE_LABEL_PREFIX = "k8s.io/cluster-autoscaler/node-template/label/"
TEMPLATE_TAINT_PREFIX = "k8s.io/cluster-autoscaler/node-template/taint/"
TEMPLATE_RESOURCE_PREFIX = "k8s.io/cluster-autoscaler/node-template/resources/"
SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict"
# cluster-autoscaler/cloudprovider/aws/aws_cloud_provider.go `GPULabel`.
ACCELERATOR_LABEL = "k8s.amazonaws.com/accelerator"
# The upstream example deployment's (cloudprovider/aws/examples/cluster-autoscaler-autodiscover.yaml)
# requests and security contexts; no CPU limit (raypd throttles no controller).
RESOURCES = {"requests": {"cpu": "100m", "memory": "600Mi"}, "limits": {"memory": "600Mi"}}
POD_SECURITY_CONTEXT = {"runAsNonRoot": True, "runAsUser": 65534, "fsGroup": 65534,
                        "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_SECURITY_CONTEXT = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                              "readOnlyRootFilesystem": True}
# Flags (cluster-autoscaler/FAQ.md, "What are the parameters to CA?"); the kept defaults are written
# out because raypd's safety rests on them (module docstring).
EXTRA_ARGS = {
    "expander": "least-waste",
    "balance-similar-node-groups": False,
    "skip-nodes-with-local-storage": True,
    "skip-nodes-with-custom-controller-pods": True,
}


def cluster_tag(cluster_name: str) -> str:
    """The tag EKS puts on every managed node group's ASG of the cluster (value "owned")."""
    return f"k8s.io/cluster-autoscaler/{cluster_name}"


def image_tag(kubernetes_version: str) -> str:
    """The autoscaler release of the cluster's minor; for a minor the table does not know yet, the
    newest one below it (else the oldest the table has)."""
    tags = defaults.CLUSTER_AUTOSCALER_IMAGE_TAGS
    if kubernetes_version in tags:
        return tags[kubernetes_version]

    def minor(version: str) -> tuple[int, ...]:
        return tuple(int(part) for part in version.split("."))

    known = sorted(tags, key=minor)
    below = [version for version in known if minor(version) < minor(kubernetes_version)]
    return tags[below[-1] if below else known[0]]


def auto_discovery_tags(cluster_name: str) -> list[str]:
    """`--node-group-auto-discovery=asg:tag=...`: an ASG must carry every one (README)."""
    return [ENABLED_TAG, cluster_tag(cluster_name), f"{DISCOVERY_TAG}={cluster_name}"]


def cluster_autoscaler_values(cluster_name: str, region: str, role_arn: str,
                              kubernetes_version: str) -> dict[str, Any]:
    """The chart's values: AWS, auto-discovery, the IRSA ServiceAccount, the system nodes.

    `awsRegion` is given so the autoscaler never asks the instance metadata service for it."""
    return {
        "cloudProvider": "aws",
        "awsRegion": region,
        "autoDiscovery": {"clusterName": cluster_name, "tags": auto_discovery_tags(cluster_name)},
        "image": {"repository": defaults.CLUSTER_AUTOSCALER_IMAGE, "tag": image_tag(kubernetes_version)},
        "fullnameOverride": defaults.CLUSTER_AUTOSCALER_CHART,
        "rbac": {"serviceAccount": {
            "create": True,
            "name": defaults.CLUSTER_AUTOSCALER_SERVICE_ACCOUNT,
            "annotations": {ROLE_ARN_ANNOTATION: role_arn},
        }},
        "nodeSelector": dict(defaults.SYSTEM_LABELS),
        "resources": copy.deepcopy(RESOURCES),
        "securityContext": copy.deepcopy(POD_SECURITY_CONTEXT),
        "containerSecurityContext": copy.deepcopy(CONTAINER_SECURITY_CONTEXT),
        "extraArgs": dict(EXTRA_ARGS),
    }


@lru_cache(maxsize=1)
def _upstream_policy() -> str:
    return IAM_POLICY_PATH.read_text(encoding="utf-8")


def cluster_autoscaler_iam_policy(cluster_name: str) -> dict[str, Any]:
    """Upstream's policy, its scaling statement limited to this cluster's GPU groups' ASGs."""
    document: dict[str, Any] = json.loads(_upstream_policy())
    (scaling,) = [s for s in document["Statement"] if set(s["Action"]) == set(SCALING_ACTIONS)]
    scaling["Condition"] = {"StringEquals": {
        f"aws:ResourceTag/{cluster_tag(cluster_name)}": OWNED,
        f"aws:ResourceTag/{DISCOVERY_TAG}": cluster_name,
    }}
    return document


def node_template_tags(labels: Mapping[str, str], resources: Mapping[str, str],
                       taints: Sequence[Mapping[str, str]] = ()) -> dict[str, str]:
    """Scale-from-zero hints: what a new node of the group will carry (README, tag formats)."""
    tags = {f"{TEMPLATE_LABEL_PREFIX}{key}": value for key, value in labels.items()}
    tags.update({f"{TEMPLATE_RESOURCE_PREFIX}{name}": str(amount) for name, amount in resources.items()})
    tags.update({f"{TEMPLATE_TAINT_PREFIX}{t['key']}": f"{t.get('value', '')}:{t['effect']}" for t in taints})
    return tags


def extended_resources(requests: Mapping[str, str]) -> dict[str, str]:
    """The device resources (GPUs, EFA interfaces) among a worker pod's requests: the ones no
    instance-type table tells the autoscaler (a Ray worker asks for all of its node's)."""
    return {name: value for name, value in requests.items() if "/" in name}


def gpu_group_asg_tags(cluster_name: str, labels: Mapping[str, str],
                       resources: Mapping[str, str]) -> dict[str, str]:
    """Every tag raypd puts on a GPU node group's ASG: discovery, then the node template."""
    return {DISCOVERY_TAG: cluster_name, **node_template_tags(labels, resources)}


def asg_identity_tags(cluster_name: str, labels: Mapping[str, str]) -> dict[str, str]:
    """The tags among `gpu_group_asg_tags` that pick out one group's ASG (generation included):
    how a later `pulumi up` finds the group to read the size it runs at."""
    identity = {DISCOVERY_TAG} | {TEMPLATE_LABEL_PREFIX + key for key in
                                  (defaults.NODE_GROUP_LABEL, defaults.NODE_SET_LABEL)}
    return {key: value for key, value in gpu_group_asg_tags(cluster_name, labels, {}).items()
            if key in identity}


def accelerator_label(instance_type: str) -> dict[str, str]:
    """The GPU label the autoscaler waits on, e.g. nvidia-l4 (the value is informational)."""
    model = catalogue.CATALOGUE[instance_type].gpu_model or "gpu"
    return {ACCELERATOR_LABEL: "nvidia-" + re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")}


def busy_engine_annotations() -> dict[str, str]:
    """On every Ray worker pod: the node autoscaler never evicts one to remove its node."""
    return {SAFE_TO_EVICT_ANNOTATION: "false"}


def tag_resource_suffix(key: str) -> str:
    """A readable, stable Pulumi name part for one ASG tag key."""
    short = key.removeprefix("k8s.io/cluster-autoscaler/node-template/")
    return re.sub(r"[^A-Za-z0-9]+", "-", short).strip("-").lower()
