"""The node autoscaler under the GPU node groups (issue 30 §2), read from the program's resources
under the mock runtime: Cluster Autoscaler's release, its IAM policy and trust policy (IRSA), the
tags on each GPU group's Auto Scaling group, the groups' min/max/desired sizes, and the Ray workers'
annotation that keeps it from evicting a busy engine.

The node autoscaler is installed only on a stack where some phase has an `autoscaling` block; the
autoscaled cases give phases one (`with_bounds`), the fixed reference shows what is left out.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator, Mapping

import pytest
from pulumi_aws.eks import outputs as aws_outputs

from components.config import defaults
from components.config.spec import DeploymentSpec
from components.render.node_autoscaler import (
    ACCELERATOR_LABEL,
    DISCOVERY_TAG,
    IAM_POLICY_PATH,
    SAFE_TO_EVICT_ANNOTATION,
    TEMPLATE_LABEL_PREFIX,
    TEMPLATE_RESOURCE_PREFIX,
    auto_discovery_tags,
)
from components.stack.mockrun import PlanMocks, RegisteredResource, run_program
from components.stack.node_groups import first_autoscaling_group_name
from components.stack.offline_plan import gpu_node_groups, render_summary, run_plan
from components.stack.program import build
from tests.pulumi.conftest import HETEROGENEOUS, Plan

RELEASE = "kubernetes:helm.sh/v3:Release"
TAG = "aws:autoscaling/tag:Tag"
MNG = "eks:index:ManagedNodeGroup"
CLUSTER = "raypd-demo"  # Pulumi.dev.yaml's raypd:clusterName
LIST_GROUPS = "aws:autoscaling/getAmiIds:getAmiIds"
GET_GROUP = "aws:autoscaling/getGroup:getGroup"


def with_bounds(config: Mapping[str, Any], table: Mapping[str, tuple[int, int]]) -> dict[str, Any]:
    """`config` with an `autoscaling` block of (min, max) replicas for each phase of `table`."""
    scaled = {key: dict(value) if isinstance(value, dict) else value for key, value in config.items()}
    for phase, (low, high) in table.items():
        key = f"raypd:{phase}"
        scaled[key] = {**scaled.get(key, {}), "autoscaling": {
            "minReplicas": low, "maxReplicas": high, "targetOngoingRequests": 8}}
    return scaled


@pytest.fixture(scope="module")
def autoscaled() -> Iterator[Callable[..., Plan]]:
    """Plans with some phases autoscaled, e.g. decode 1..4 (its two starting replicas on HETEROGENEOUS)."""
    plans: dict[str, Plan] = {}

    def plan(config: dict[str, Any], table: Mapping[str, tuple[int, int]]) -> Plan:
        key = json.dumps([config, sorted(table.items())], sort_keys=True)
        if key not in plans:
            plans[key] = Plan(run_plan(with_bounds(config, table)))
        return plans[key]
    yield plan


@pytest.fixture(scope="module")
def scaled_reference(autoscaled: Callable[..., Plan], reference_config: dict[str, Any]) -> Plan:
    """The reference stack (Pulumi.dev.yaml) with both phases autoscaled (prefill 1..2, decode 1..3)."""
    return autoscaled(reference_config, {"prefill": (1, 2), "decode": (1, 3)})


def release(plan: Plan) -> dict[str, Any]:
    (found,) = [r for r in plan.of_type(RELEASE) if r["inputs"]["chart"] == defaults.CLUSTER_AUTOSCALER_CHART]
    return found


def asg_tags(plan: Plan, group: str) -> dict[str, dict[str, Any]]:
    """The ASG tags of one GPU group's component, by tag key."""
    return {r["inputs"]["tag"]["key"]: r for r in plan.children_of(f"{group}-nodes") if r["type"] == TAG}


# ---- the release ----

def test_the_autoscaler_runs_on_the_system_nodes_discovering_only_this_clusters_gpu_groups(scaled_reference):
    found = release(scaled_reference)
    inputs, values = found["inputs"], found["inputs"]["values"]
    assert (inputs["version"], inputs["namespace"], inputs["repositoryOpts"]["repo"]) == (
        "9.59.0", "kube-system", "https://kubernetes.github.io/autoscaler")
    assert values["cloudProvider"] == "aws" and values["awsRegion"] == "us-east-2"
    assert values["autoDiscovery"] == {"clusterName": CLUSTER, "tags": [
        "k8s.io/cluster-autoscaler/enabled", f"k8s.io/cluster-autoscaler/{CLUSTER}",
        f"{DISCOVERY_TAG}={CLUSTER}"]}
    assert values["nodeSelector"] == defaults.SYSTEM_LABELS
    # The autoscaler's minor is the cluster's (raypd:kubernetesVersion 1.35 in Pulumi.dev.yaml).
    assert values["image"]["tag"].startswith("v1.35.")
    # One group per pending worker, never two generations balanced against each other; busy
    # workers (disk emptyDir, KubeRay's controller) keep their nodes.
    assert values["extraArgs"] == {"expander": "least-waste", "balance-similar-node-groups": False,
                                   "skip-nodes-with-local-storage": True,
                                   "skip-nodes-with-custom-controller-pods": True}
    assert values["containerSecurityContext"]["allowPrivilegeEscalation"] is False
    assert values["securityContext"]["runAsNonRoot"] is True
    # It installs once the system nodes exist, and reads its role only once the policy is attached.
    assert {"cluster-system", "node-autoscaler-policy"} <= set(found["dependsOn"])


def test_the_service_account_carries_the_autoscalers_own_role(scaled_reference):
    account = release(scaled_reference)["inputs"]["values"]["rbac"]["serviceAccount"]
    assert account["name"] == defaults.CLUSTER_AUTOSCALER_SERVICE_ACCOUNT and account["create"] is True
    # The mocks name a role <resource name>-<digest>: this is node-autoscaler-role's ARN.
    assert account["annotations"]["eks.amazonaws.com/role-arn"].startswith(
        "arn:aws:iam::123456789012:role/node-autoscaler-role-")


# ---- IAM: who may assume the role, and what it may do ----

def test_only_the_autoscalers_service_account_may_assume_its_role(scaled_reference):
    role = scaled_reference.named("node-autoscaler-role")
    (statement,) = json.loads(role["inputs"]["assumeRolePolicy"])["Statement"]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert ":oidc-provider/oidc.eks.us-east-2.amazonaws.com/id/" in statement["Principal"]["Federated"]
    conditions = statement["Condition"]["StringEquals"]
    issuer = statement["Principal"]["Federated"].split(":oidc-provider/", 1)[1]
    assert conditions == {f"{issuer}:sub": "system:serviceaccount:kube-system:cluster-autoscaler",
                          f"{issuer}:aud": "sts.amazonaws.com"}


def test_the_policy_is_upstreams_with_scaling_limited_to_this_clusters_gpu_groups(scaled_reference):
    policy = json.loads(scaled_reference.named("node-autoscaler-policy")["inputs"]["policy"])
    upstream = json.loads(IAM_POLICY_PATH.read_text(encoding="utf-8"))
    reads, writes = policy["Statement"]
    assert reads == upstream["Statement"][0]  # describe calls, unchanged
    assert all(action.split(":")[1].startswith(("Describe", "Get")) for action in reads["Action"])
    assert writes["Action"] == ["autoscaling:SetDesiredCapacity",
                                "autoscaling:TerminateInstanceInAutoScalingGroup"]
    # Only ASGs EKS tagged for this cluster AND raypd tagged as one of its GPU groups.
    assert writes["Condition"] == {"StringEquals": {
        f"aws:ResourceTag/k8s.io/cluster-autoscaler/{CLUSTER}": "owned",
        f"aws:ResourceTag/{DISCOVERY_TAG}": CLUSTER}}
    assert all(s["Effect"] == "Allow" for s in policy["Statement"])
    assert not any("*" in action for s in policy["Statement"] for action in s["Action"])


# ---- the GPU groups' ASG tags ----

def test_each_gpu_group_tags_its_own_asg_with_what_its_new_nodes_carry(autoscaled):
    heterogeneous_plan = autoscaled(HETEROGENEOUS, {"prefill": (1, 2), "decode": (1, 4)})
    groups = heterogeneous_plan.gpu_node_groups()
    assert set(groups) == {"prefill", "decode"}
    devices = {"prefill": ("8", "32"), "decode": ("8", "4")}  # p5.48xlarge, g6e.48xlarge
    for name, group in groups.items():
        tags = asg_tags(heterogeneous_plan, name)
        labels = group["inputs"]["labels"]
        gpus, efa = devices[name]
        assert {key: r["inputs"]["tag"]["value"] for key, r in tags.items()} == {
            DISCOVERY_TAG: "raypd-dev",  # no raypd:clusterName: raypd-<stack>
            **{TEMPLATE_LABEL_PREFIX + key: value for key, value in labels.items()},
            TEMPLATE_RESOURCE_PREFIX + "nvidia.com/gpu": gpus,
            TEMPLATE_RESOURCE_PREFIX + "vpc.amazonaws.com/efa": efa,
        }
        assert labels[defaults.PHASE_LABEL_KEY] == name  # the label the phase's workers select
        for tag in tags.values():
            assert tag["inputs"]["tag"]["propagateAtLaunch"] is False
            # The ASG is this group's own: its name is read from this group's managed node group.
            assert tag["dependsOn"] == [group["name"]]
            assert tag["inputs"]["autoscalingGroupName"] == "[unknown]"  # known once EKS made it


def test_every_tag_the_autoscaler_discovers_by_is_on_the_gpu_asgs_and_in_the_policy(scaled_reference):
    tags = asg_tags(scaled_reference, "gpu")
    values = release(scaled_reference)["inputs"]["values"]
    ours = [tag for tag in values["autoDiscovery"]["tags"] if "=" in tag]
    assert ours == [f"{DISCOVERY_TAG}={CLUSTER}"]
    key, value = ours[0].split("=")
    assert tags[key]["inputs"]["tag"]["value"] == value
    # The system group gets none: the autoscaler never touches the nodes it runs on.
    assert not [r for r in scaled_reference.children_of("cluster") if r["type"] == TAG]
    assert auto_discovery_tags(CLUSTER)[:2] == ["k8s.io/cluster-autoscaler/enabled",
                                               f"k8s.io/cluster-autoscaler/{CLUSTER}"]


# ---- the node groups' sizes ----

def test_a_fixed_stack_keeps_min_max_and_desired_at_its_nodes(reference_plan, heterogeneous_plan):
    assert reference_plan.gpu_node_groups()["gpu"]["inputs"]["scalingConfig"] == {
        "minSize": 2, "maxSize": 2, "desiredSize": 2}
    assert heterogeneous_plan.gpu_node_groups()["decode"]["inputs"]["scalingConfig"] == {
        "minSize": 2, "maxSize": 2, "desiredSize": 2}
    assert ACCELERATOR_LABEL not in reference_plan.gpu_node_groups()["gpu"]["inputs"]["labels"]


def test_an_autoscaled_phase_sizes_its_own_group_from_its_bounds(autoscaled):
    plan = autoscaled(HETEROGENEOUS, {"decode": (1, 4)})
    groups = plan.gpu_node_groups()
    # TP 8 on 8-GPU nodes: one node per replica; starts at its 2 replicas.
    assert groups["decode"]["inputs"]["scalingConfig"] == {"minSize": 1, "maxSize": 4, "desiredSize": 2}
    assert groups["prefill"]["inputs"]["scalingConfig"] == {"minSize": 1, "maxSize": 1, "desiredSize": 1}
    # Only the autoscaled group's nodes carry the GPU label the autoscaler waits on, and its ASG
    # says so for nodes it has not seen.
    assert groups["decode"]["inputs"]["labels"][ACCELERATOR_LABEL] == "nvidia-l40s"
    assert ACCELERATOR_LABEL not in groups["prefill"]["inputs"]["labels"]
    decode_tags = asg_tags(plan, "decode")
    assert decode_tags[TEMPLATE_LABEL_PREFIX + ACCELERATOR_LABEL]["inputs"]["tag"]["value"] == "nvidia-l40s"


def test_phases_sharing_a_group_add_up_their_bounds(autoscaled):
    plan = autoscaled({}, {"prefill": (1, 2), "decode": (1, 3)})
    assert plan.gpu_node_groups()["gpu"]["inputs"]["scalingConfig"] == {
        "minSize": 2, "maxSize": 5, "desiredSize": 2}


class RunningGroups(PlanMocks):
    """EC2 Auto Scaling as a running stack answers: one ASG per tagged group, at `running` nodes."""

    def __init__(self, region: str, running: dict[str, int]):
        super().__init__(region)
        self.running = running
        self.asked: list[dict[str, Any]] = []

    def call(self, args):  # type: ignore[override]
        if args.token == LIST_GROUPS:
            filters = {f["name"]: f["values"] for f in args.args.get("filters") or []}
            self.asked.append(filters)
            group = (filters.get(f"tag:{TEMPLATE_LABEL_PREFIX}{defaults.NODE_GROUP_LABEL}") or [""])[0]
            names = [f"eks-{group}-nodes-0123"] if group in self.running else []
            return {"id": self.region, "names": names, "arns": [], "filters": args.args.get("filters")}
        if args.token == GET_GROUP:
            group = args.args["name"].split("-")[1]
            return {"name": args.args["name"], "desiredCapacity": self.running[group], "id": args.args["name"]}
        return super().call(args)


def running_sizes(config: dict[str, Any], table: Mapping[str, tuple[int, int]],
                  running: dict[str, int]) -> tuple[dict[str, dict[str, int]], RunningGroups]:
    spec = DeploymentSpec.from_config(with_bounds(config, table), "dev")
    mock = RunningGroups(spec.region, running)
    run = run_program(lambda: build(spec), project="raypd", stack="dev", region=spec.region, mock=mock)
    groups: dict[str, RegisteredResource] = {r.parent_urn.rsplit("::", 1)[1].removesuffix("-nodes"): r
                                             for r in run.resources if r.type == MNG and "gpu-worker"
                                             in str(r.inputs.get("labels"))}
    return {name: r.inputs["scalingConfig"] for name, r in groups.items()}, mock


@pytest.mark.parametrize("running, desired", [(3, 3), (1, 1), (4, 4), (6, 4)])
def test_an_existing_autoscaled_group_keeps_the_size_it_runs_at_within_its_limits(running, desired):
    """EKS applies a scaling config whole: sending the start (2) again would shrink a group the
    autoscaler grew, draining nodes EKS picks; a size now outside the new limits is brought in."""
    sizes, mock = running_sizes(HETEROGENEOUS, {"decode": (1, 4)}, {"decode": running})
    assert sizes["decode"] == {"minSize": 1, "maxSize": 4, "desiredSize": desired}
    # Found by the tags raypd put on that group's ASG (not asked for the fixed prefill group).
    (asked,) = mock.asked
    assert asked == {f"tag:{DISCOVERY_TAG}": ["raypd-dev"],
                     f"tag:{TEMPLATE_LABEL_PREFIX}{defaults.NODE_GROUP_LABEL}": ["decode"]}


def test_a_new_autoscaled_group_starts_at_its_starting_count():
    sizes, _ = running_sizes(HETEROGENEOUS, {"decode": (1, 4)}, {})
    assert sizes["decode"]["desiredSize"] == 2


# ---- scale-down never evicts a busy engine ----

def test_every_ray_worker_tells_the_autoscaler_not_to_evict_it(scaled_reference, autoscaled):
    # Every worker, the fixed phase's too: the autoscaler may empty any GPU group it discovers.
    for plan in (scaled_reference, autoscaled(HETEROGENEOUS, {"decode": (1, 4)})):
        (service,) = plan.of_type("kubernetes:ray.io/v1:RayService")
        workers = service["inputs"]["spec"]["rayClusterConfig"]["workerGroupSpecs"]
        assert workers
        for worker in workers:
            annotations = worker["template"]["metadata"].get("annotations") or {}
            assert annotations.get(SAFE_TO_EVICT_ANNOTATION) == "false", worker["groupName"]


def test_a_fixed_stack_has_no_node_autoscaler_and_its_workers_are_as_before(reference_plan, heterogeneous_plan):
    """Nothing for an autoscaler to move: no release, role, ASG tag or worker annotation, so a stack
    deployed before issue 30 plans as it did (no RayService rebuild for a setting it does not use)."""
    for plan in (reference_plan, heterogeneous_plan):
        assert not [r for r in plan.of_type(RELEASE)
                    if r["inputs"]["chart"] == defaults.CLUSTER_AUTOSCALER_CHART]
        assert not [r for r in plan.resources if r["name"].startswith("node-autoscaler")]
        assert not plan.of_type(TAG)
        (service,) = plan.of_type("kubernetes:ray.io/v1:RayService")
        for worker in service["inputs"]["spec"]["rayClusterConfig"]["workerGroupSpecs"]:
            assert "annotations" not in worker["template"]["metadata"]


def test_the_asg_name_is_read_from_the_managed_node_groups_resources_output():
    """pulumi-aws's `aws.eks.NodeGroup.resources`: one entry with the group's one ASG."""
    group = aws_outputs.NodeGroupResource(autoscaling_groups=[
        aws_outputs.NodeGroupResourceAutoscalingGroup(name="eks-gpu-nodes-group-1a2b")])
    assert first_autoscaling_group_name([group]) == "eks-gpu-nodes-group-1a2b"
    assert first_autoscaling_group_name(None) is None
    assert first_autoscaling_group_name([aws_outputs.NodeGroupResource()]) is None


def test_the_offline_plan_summary_shows_an_autoscaled_groups_limits(autoscaled, heterogeneous_plan):
    plan = autoscaled(HETEROGENEOUS, {"decode": (1, 4)})
    groups = {g["name"]: g for g in gpu_node_groups(plan.document)}
    assert (groups["decode-nodes"]["minNodes"], groups["decode-nodes"]["maxNodes"]) == (1, 4)
    assert "decode-nodes: 2 (autoscaled 1..4) x g6e.48xlarge" in render_summary(plan.document)
    assert "prefill-nodes: 1 x p5.48xlarge" in render_summary(heterogeneous_plan.document)
