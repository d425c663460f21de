"""What `pulumi up` does to a running stack for the changes people make, judged the way Pulumi does.

Both sides are the real program under Pulumi's mock runtime (`components.stack.offline_plan.plan_spec`, the
offline plan); every resource's op comes from its registered inputs and resource options through
the engine's rules (components.changes.pulumi_diff: pulumi-kubernetes's detailed diff, the engine's
replaceOnChanges containment, the providers' create-only inputs, and pulumi-eks's children as
webui.resource_steps expands them). The expected ops are what KubeRay 1.4, pulumi-eks 4.4 and
pulumi-kubernetes 4.34 define for each change (see components/render/rayservice.py and components/changes/assess.py
for the sources), not what raypd happens to do.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.changes.assess import assess
from components.changes.node_groups import endpoint_proxy_move_seconds
from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment
from components.stack.mockrun import RegisteredResource, run_program
from components.stack.offline_plan import plan_spec
from components.stack.program import build
from webui.resource_steps import plan_diff

RAYSERVICE = "kubernetes:ray.io/v1:RayService"
ROLLOUT_JOB = "kubernetes:batch/v1:Job"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
AWS_CLUSTER = "aws:eks/cluster:Cluster"
HF = {"raypd:hfToken": "hf_token_for_the_secret_object"}


def plan_of(config: dict[str, Any]) -> dict[str, Any]:
    return plan_spec(DeploymentSpec.from_config({**HF, **config}, "dev"))


@pytest.fixture(scope="module")
def reference_plan() -> dict[str, Any]:
    return plan_of({})


def ops(old: dict[str, Any], new: dict[str, Any]) -> dict[tuple[str, str], str]:
    return {(step["type"], step["name"]): step["op"] for step in plan_diff(old, new)}


def of_type(table: dict[tuple[str, str], str], kind: str) -> dict[str, str]:
    return {name: op for (type_, name), op in table.items() if type_ == kind}


def changed(table: dict[tuple[str, str], str]) -> dict[tuple[str, str], str]:
    return {key: op for key, op in table.items() if op != "same"}


# ---- replicas: in place, no restart of the running engines ----

@pytest.mark.parametrize("before,after", [(1, 2), (2, 1), (1, 3)])
def test_replica_changes_update_the_rayservice_in_place_and_resize_the_nodes(reference_plan, before, after):
    old = reference_plan if before == 1 else plan_of({"raypd:decode": {"replicas": before}})
    table = ops(old, plan_of({"raypd:decode": {"replicas": after}}))
    # KubeRay leaves replica counts out of its cluster hash: no replacement, no new cluster; only
    # the rollout check is a new Job (it waits for the new replica count to be RUNNING).
    assert of_type(table, RAYSERVICE) == {"pd-service-rayservice": "update"}
    assert of_type(table, ROLLOUT_JOB) == {"pd-service-rollout-check": "replace"}
    others = {op for (type_, _), op in table.items() if type_ != ROLLOUT_JOB}
    assert "replace" not in others and "delete" not in others
    assert of_type(table, NODE_GROUP) == {"gpu-nodes-group": "update"}  # the size, in place


def test_a_replica_change_leaves_the_serve_args_and_the_cluster_digest_alone(reference_plan):
    import yaml

    new = plan_of({"raypd:decode": {"replicas": 2}})

    def rayservice(plan: dict[str, Any]) -> dict[str, Any]:
        (service,) = [r for r in plan["resources"] if r["type"] == RAYSERVICE]
        return service["inputs"]

    old_rs, new_rs = rayservice(reference_plan), rayservice(new)
    key = "raypd.io/ray-cluster-digest"
    assert old_rs["metadata"]["annotations"][key] == new_rs["metadata"]["annotations"][key]
    (old_app,) = yaml.safe_load(old_rs["spec"]["serveConfigV2"])["applications"]
    (new_app,) = yaml.safe_load(new_rs["spec"]["serveConfigV2"])["applications"]
    # Equal args: the same Serve code version, so Serve scales without rebuilding the application.
    assert old_app["args"] == new_app["args"]
    assert old_app["deployments"] != new_app["deployments"]


# ---- Serve-side changes: an in-place update that restarts the engines ----

LLAMA = {"raypd:model": {"id": "llama", "source": "meta-llama/Llama-3.1-8B"}}


@pytest.mark.parametrize("before,after", [
    ({}, {"raypd:model": {"maxModelLen": 8192}}),                    # an engine argument
    ({}, {"raypd:model": {"id": "renamed"}}),                        # the served name
    (LLAMA, {"raypd:model": {"id": "qwen3-8b", "source": "Qwen/Qwen3-8B"}}),  # another model
])
def test_serve_changes_update_the_rayservice_in_place(reference_plan, before, after):
    table = changed(ops(plan_of(before) if before else reference_plan, plan_of(after)))
    assert of_type(table, RAYSERVICE) == {"pd-service-rayservice": "update"}
    # ... and the rollout check is a new Job (its name follows the Serve config): replaced.
    assert of_type(table, ROLLOUT_JOB) == {"pd-service-rollout-check": "replace"}
    assert {op for (type_, _), op in table.items() if type_ != ROLLOUT_JOB} == {"update"}


def test_a_model_of_another_architecture_changes_the_worker_env_and_rebuilds(reference_plan):
    # Qwen3.5 has linear-attention layers (workers get VLLM_SSM_CONV_STATE_LAYOUT=DS); Qwen3 has
    # none: the pods change, which KubeRay rebuilds for.
    table = changed(ops(reference_plan, plan_of({"raypd:model": {"source": "Qwen/Qwen3-8B"}})))
    assert of_type(table, RAYSERVICE) == {"pd-service-rayservice": "replace"}


# ---- the Ray cluster and the nodes ----

def test_a_gpu_instance_type_change_replaces_the_node_groups_and_the_rayservice(reference_plan):
    table = changed(ops(reference_plan, plan_of({"raypd:decode": {"instanceType": "g6e.8xlarge"},
                                                 "raypd:prefill": {"instanceType": "g6e.8xlarge"}})))
    # The pulumi-eks component only updates; its NodeGroup child is replaced (new group first).
    assert of_type(table, "eks:index:ManagedNodeGroup") == {"gpu-nodes-group": "update"}
    assert of_type(table, NODE_GROUP) == {"gpu-nodes-group": "replace"}
    # New worker resources and node selection: KubeRay would rebuild, so raypd replaces.
    assert of_type(table, RAYSERVICE) == {"pd-service-rayservice": "replace"}


def test_a_zone_move_replaces_the_gpu_nodes_and_updates_the_cluster_subnets_in_place(reference_plan):
    table = changed(ops(reference_plan, plan_of({"raypd:availabilityZone": "us-east-2c"})))
    # The system nodes stay in the first zone by name (components.plan.zones.system_zone, issue
    # 29): only the GPU group moves; before, the system group's two-zone subnet list changed too.
    assert of_type(table, NODE_GROUP) == {"gpu-nodes-group": "replace"}
    assert of_type(table, AWS_CLUSTER) == {"cluster-eks": "update"}  # no new control plane
    assert of_type(table, RAYSERVICE) == {"pd-service-rayservice": "replace"}  # pods select the zone


def test_a_kubernetes_version_change_upgrades_the_cluster_in_place_and_coredns_with_it(reference_plan):
    table = changed(ops(reference_plan, plan_of({"raypd:kubernetesVersion": "1.34"})))
    assert of_type(table, AWS_CLUSTER) == {"cluster-eks": "update"}
    assert of_type(table, "aws:eks/addon:Addon") == {"cluster-coredns": "update"}
    assert RAYSERVICE not in {type_ for type_, _ in table}


def test_a_kuberay_version_change_upgrades_the_operator_in_place(reference_plan):
    table = changed(ops(reference_plan, plan_of({"raypd:kuberayVersion": "1.5.1"})))
    assert of_type(table, "kubernetes:helm.sh/v3:Release") == {"addons-kuberay-operator": "update"}
    assert "replace" not in table.values()
    assert RAYSERVICE not in {type_ for type_, _ in table}


def test_admin_role_changes_touch_only_the_cluster_access_entries(reference_plan):
    table = changed(ops(reference_plan, plan_of({
        "raypd:adminRoleArns": ["arn:aws:iam::123456789012:role/ci"]})))
    assert set(table) == {("eks:index:Cluster", "cluster-eks")}
    assert set(table.values()) == {"update"}


def test_zero_downtime_stacks_never_replace_the_rayservice_they_add_a_node_generation(reference_plan):
    old = plan_of({"raypd:upgradeStrategy": "newCluster"})
    table = changed(ops(old, plan_of({"raypd:upgradeStrategy": "newCluster",
                                      "raypd:model": {"maxModelLen": 8192}})))
    # KubeRay's NewCluster upgrade on new GPU node groups; the old ones go at the end of the up.
    assert of_type(table, RAYSERVICE) == {"pd-service-rayservice": "update"}
    created = [name for (type_, name), op in table.items()
               if type_ == "eks:index:ManagedNodeGroup" and op == "create"]
    deleted = [name for (type_, name), op in table.items()
               if type_ == "eks:index:ManagedNodeGroup" and op == "delete"]
    assert len(created) == len(deleted) == 1 and created != deleted
    # ... but replicas still change in place, on the same generation.
    scaled = changed(ops(old, plan_of({"raypd:upgradeStrategy": "newCluster", "raypd:decode": {"replicas": 2}})))
    assert "create" not in scaled.values() and "delete" not in scaled.values()


# ---- zero-downtime stacks: `up` waits for KubeRay's switch before any old node group goes ----

NEW_CLUSTER = {"raypd:upgradeStrategy": "newCluster"}
NO_METRICS = {"raypd:observability": {"enabled": False}}
# Every change the preview calls "no downtime" on a zero-downtime stack that leaves the Serve config
# and the image alone, so the rollout check (named after them) does not run again: only a new Ray
# cluster, which KubeRay builds as a pending cluster and switches to when it is ready.
CLUSTER_ONLY_CHANGES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "GPU instance type on both phases": (NEW_CLUSTER, {
        **NEW_CLUSTER, "raypd:prefill": {"instanceType": "g6e.8xlarge"},
        "raypd:decode": {"instanceType": "g6e.8xlarge"}}),
    "system node type": (NEW_CLUSTER, {**NEW_CLUSTER, "raypd:systemNodes": {"instanceType": "m7i.2xlarge"}}),
    "rayVersion": (NEW_CLUSTER, {**NEW_CLUSTER, "raypd:rayVersion": "2.57.0"}),
    "observability off": (NEW_CLUSTER, {**NEW_CLUSTER, **NO_METRICS}),
    "observability on": ({**NEW_CLUSTER, **NO_METRICS}, NEW_CLUSTER),
    "inPlace -> newCluster": ({}, NEW_CLUSTER),
}
NODE_GROUP_TYPES = ("eks:index:ManagedNodeGroup", NODE_GROUP)
_plans: dict[str, dict[str, Any]] = {}


def cached_plan(config: dict[str, Any]) -> dict[str, Any]:
    """One mock run per distinct config in this module (several changes share a side)."""
    key = json.dumps(config, sort_keys=True)
    if key not in _plans:
        _plans[key] = plan_of(config)
    return _plans[key]


def removed_after_every_registration(step: dict[str, Any], delete_first: set[str]) -> bool:
    """Whether Pulumi removes what `step` takes away only after every resource the program
    registers has finished its step, its await included (the engine's order, pulumi/pulumi
    pkg/resource/deploy): a resource the program no longer registers ("delete") and the old half of
    a create-before-delete replacement are removed in `performPostSteps`, which runs once the
    program has ended (deployment_executor.go); the program ends only when every RegisterResource
    has answered, which the engine does after the step (step_generator.go: "the delete step is
    generated later on, after all creates/updates finish"). The old half of a delete-before-replace
    replacement is deleted before its replacement is created, in the middle of the run."""
    if step["op"] == "delete":
        return True
    if step["op"] == "replace":
        return step["name"] not in delete_first
    return False


@pytest.fixture(scope="module")
def delete_first() -> set[str]:
    """The resources the program registers with deleteBeforeReplace (resource options, not inputs:
    the mock runtime's record; the same on every stack)."""
    return {r.name for r in registered(NEW_CLUSTER) if r.delete_before_replace}


def the_rayservice(plan: dict[str, Any]) -> dict[str, Any]:
    (service,) = [r for r in plan["resources"] if r["type"] == RAYSERVICE]
    return service


@pytest.mark.parametrize("change", list(CLUSTER_ONLY_CHANGES))
def test_a_zero_downtime_cluster_switch_is_awaited_before_the_old_node_groups_go(change, delete_first):
    before, after = CLUSTER_ONLY_CHANGES[change]
    old_plan, new_plan = cached_plan(before), cached_plan(after)
    steps = plan_diff(old_plan, new_plan)
    table = {(step["type"], step["name"]): step["op"] for step in steps}
    old_service, new_service = the_rayservice(old_plan), the_rayservice(new_plan)
    digest = "raypd.io/ray-cluster-digest"
    # KubeRay builds a new Ray cluster: what it hashes of rayClusterConfig changed ...
    assert (old_service["inputs"]["metadata"]["annotations"][digest]
            != new_service["inputs"]["metadata"]["annotations"][digest])
    assert new_service["inputs"]["spec"]["upgradeStrategy"] == {"type": "NewCluster"}
    # ... while the Serve config and the image did not: the rollout check keeps its name, no run.
    assert of_type(table, ROLLOUT_JOB) == {"pd-service-rollout-check": "same"}
    # So the RayService's own update is the wait, re-armed by this very change: Pulumi updates it
    # (KubeRay's switch, no replacement) and awaits its waitFor, which holds only once KubeRay has
    # promoted the new cluster (components.render.rollout, 3).
    assert of_type(table, RAYSERVICE) == {"pd-service-rayservice": "update"}
    expressions = json.loads(new_service["inputs"]["metadata"]["annotations"]["pulumi.com/waitFor"])
    assert "condition=UpgradeInProgress=False" in expressions
    # The new cluster has nodes to start on: the RayService waits for every new GPU node group.
    created = [name for (type_, name), op in table.items()
               if type_ == "eks:index:ManagedNodeGroup" and op == "create"]
    assert created and set(created) <= set(new_service["dependsOn"])
    # Every node group the old cluster runs on (the old GPU generation; the old system group when
    # its type changes) goes only after every registered resource's step, that await included.
    removed = [step for step in steps
               if step["type"] in NODE_GROUP_TYPES and step["op"] in ("delete", "replace")]
    assert {step["name"] for step in removed if step["op"] == "delete"} == {
        f"{name}-group" for (type_, name), op in table.items()
        if type_ == "raypd:cluster:GpuNodeGroup" and op == "delete"}
    assert removed and all(removed_after_every_registration(step, delete_first) for step in removed)
    # Nothing else goes first, in the middle of the run.
    assert not [step for step in steps if step["op"] == "replace" and step["name"] in delete_first]
    # That is what makes the preview's words true: no downtime from the Ray cluster; only a new
    # system node type costs the endpoint's proxy move, which no strategy avoids.
    new_spec = DeploymentSpec.from_config({**HF, **after}, "dev")
    preview = assess(plan_deployment(DeploymentSpec.from_config({**HF, **before}, "dev")),
                     plan_deployment(new_spec), "us-east-2a")
    assert preview.chosen.name == "newCluster"
    expected = endpoint_proxy_move_seconds(new_spec) if change == "system node type" else 0.0
    assert preview.chosen.downtime_seconds == expected
    assert preview.chosen.summary.startswith("no downtime") == (expected == 0)


def test_in_place_the_rayservice_itself_goes_first_which_is_the_downtime_the_preview_counts(
        reference_plan, delete_first):
    # The contrast that keeps the engine model above honest: an in-place stack replaces its
    # RayService delete-first on a cluster change (no room for two clusters), mid-run.
    steps = plan_diff(reference_plan, cached_plan({"raypd:rayVersion": "2.57.0"}))
    (service,) = [step for step in steps if step["type"] == RAYSERVICE]
    assert service["op"] == "replace"
    assert not removed_after_every_registration(service, delete_first)


# ---- resource options the plan does not show as inputs ----

def registered(config: dict[str, Any]) -> list[RegisteredResource]:
    spec = DeploymentSpec.from_config({**HF, **config}, "dev")
    return run_program(lambda: build(spec), project="raypd", stack="dev",
                       region=spec.region).resources


@pytest.fixture(scope="module")
def reference_resources() -> list[RegisteredResource]:
    return registered({})


def test_an_in_place_rayservice_replacement_deletes_the_old_one_first(reference_resources):
    # The GPUs hold one cluster: the old RayService must go before the new one can schedule.
    (service,) = [r for r in reference_resources if r.type == RAYSERVICE]
    assert service.replace_on_changes == ('metadata.annotations["raypd.io/ray-cluster-digest"]',)
    assert service.delete_before_replace


def test_every_kubernetes_object_goes_to_the_new_cluster_never_the_local_kubeconfig(
    reference_resources,
):
    (provider,) = [r for r in reference_resources if r.type == "pulumi:providers:kubernetes"]
    objects = [r for r in reference_resources
               if r.type.startswith("kubernetes:") and r is not provider]
    assert {r.type for r in objects} >= {
        RAYSERVICE, "kubernetes:helm.sh/v3:Release", "kubernetes:core/v1:Namespace",
        "kubernetes:core/v1:Secret",
    }
    for resource in objects:
        # A provider reference is "<provider urn>::<provider id>"; an empty one means the
        # default provider, i.e. whatever cluster the user's kubectl context points at.
        assert resource.provider.split("::")[:-1] == provider.urn.split("::"), resource.name


# ---- a Serve change returns only when the new Serve app is RUNNING ----

def test_the_rayservice_waits_for_ready_and_every_app_running_at_the_new_generation(
    reference_resources,
):
    import json

    (service,) = [r for r in reference_resources if r.type == RAYSERVICE]
    annotations = service.inputs["metadata"]["annotations"]
    expressions = json.loads(annotations["pulumi.com/waitFor"])
    assert "condition=Ready" in expressions
    assert ("jsonpath={.status.activeServiceStatus.applicationStatuses.llm.status}=RUNNING"
            in expressions)
    assert int(annotations["pulumi.com/timeoutSeconds"]) >= 1800


def rollout_jobs(config: dict[str, Any]) -> list[RegisteredResource]:
    return [r for r in registered(config) if r.type == ROLLOUT_JOB]


def test_a_model_only_change_creates_a_new_rollout_check_after_the_rayservice(reference_resources):
    # KubeRay reports the old app's RUNNING with the new observedGeneration right after it submits
    # a new Serve config, so the RayService's own await cannot see an in-place change: a Job named
    # after the Serve config polls Serve until the NEW config is RUNNING.
    (before,) = [r for r in reference_resources if r.type == ROLLOUT_JOB]
    (after,) = rollout_jobs({"raypd:model": {"maxModelLen": 8192}})
    assert before.inputs["metadata"]["name"] != after.inputs["metadata"]["name"]
    (service,) = [r for r in reference_resources if r.type == RAYSERVICE]
    assert service.urn in before.dependencies
    env = {e["name"]: e["value"] for e in
           after.inputs["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["SERVE_API"] == (
        "http://ray-llm-head-svc.inference.svc.cluster.local:8265/api/serve/applications/")
    assert '"max_model_len": 8192' in env["EXPECTED_ARGS"]


def test_an_unchanged_config_keeps_the_same_rollout_check(reference_resources):
    (before,) = [r for r in reference_resources if r.type == ROLLOUT_JOB]
    (again,) = rollout_jobs({})
    assert before.inputs == again.inputs


def test_a_failed_rollout_check_is_replaced_by_the_next_up_not_awaited_again(reference_resources):
    # The same Serve config keeps the Job's name; pulumi-kubernetes re-awaits an unready resource
    # on every update, which fails at once for a failed Job. With replaceUnready its Diff reads the
    # live Job and replaces it when it is not Ready (provider.go, metadata.ReplaceUnready: Jobs
    # only), so the second `up` after a failed check runs a fresh one.
    (job,) = [r for r in reference_resources if r.type == ROLLOUT_JOB]
    assert job.inputs["kind"] == "Job"  # the provider's replaceUnready branch keys on the kind
    assert job.inputs["metadata"]["annotations"]["pulumi.com/replaceUnready"] == "true"
