"""How the program behaves on `pulumi up` against an existing stack, and where it deploys to.

Read from the resource options the program registers under the mock runtime: which changes
replace the RayService rather than update it, and which Kubernetes provider every Kubernetes
object goes through.
"""

from __future__ import annotations

from typing import Any

import pytest

from components.mockrun import RegisteredResource, run_program
from components.program import build
from components.rayservice import render_rayservice
from components.spec import DeploymentSpec
from components.topology import plan_deployment

RAYSERVICE = "kubernetes:ray.io/v1:RayService"


def registered(config: dict[str, Any]) -> list[RegisteredResource]:
    spec = DeploymentSpec.from_config(config, "dev")
    return run_program(lambda: build(spec), project="raypd", stack="dev",
                       region=spec.region).resources


@pytest.fixture(scope="module")
def reference_resources() -> list[RegisteredResource]:
    return registered({"raypd:hfToken": "hf_token_for_the_secret_object"})


def changed_paths(old: Any, new: Any, path: str = "") -> set[str]:
    """Pulumi-style property paths (`a.b[0].c`) of every leaf that differs."""
    if isinstance(old, dict) and isinstance(new, dict):
        paths: set[str] = set()
        for key in old.keys() | new.keys():
            child = f"{path}.{key}" if path else key
            paths |= changed_paths(old.get(key), new.get(key), child)
        return paths
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        paths = set()
        for index, (a, b) in enumerate(zip(old, new, strict=False)):
            paths |= changed_paths(a, b, f"{path}[{index}]")
        return paths
    return set() if old == new else {path}


def triggers_replace(paths: set[str], replace_on_changes: tuple[str, ...]) -> bool:
    """The engine replaces when a changed path lies under a replaceOnChanges path."""
    return any(
        path == prefix or path.startswith((prefix + ".", prefix + "["))
        for path in paths for prefix in replace_on_changes
    )


def rayservice_diff(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    old = render_rayservice(plan_deployment(DeploymentSpec.from_config(before, "dev")))
    new = render_rayservice(plan_deployment(DeploymentSpec.from_config(after, "dev")))
    return changed_paths({"spec": old["spec"]}, {"spec": new["spec"]})


def test_worker_changes_replace_the_rayservice_old_one_first(reference_resources):
    # KubeRay would answer this change with a second RayCluster that the exactly-sized GPU node
    # groups cannot hold: it would stay Pending forever while the old cluster kept serving.
    (service,) = [r for r in reference_resources if r.type == RAYSERVICE]
    diff = rayservice_diff({}, {"raypd:decode": {"replicas": 2}})
    assert any(path.startswith("spec.rayClusterConfig.") for path in diff)
    assert triggers_replace(diff, service.replace_on_changes)
    # The GPUs hold one cluster: the old RayService must go before the new one can schedule.
    assert service.delete_before_replace


def test_serve_config_only_changes_update_the_rayservice_in_place(reference_resources):
    # KubeRay redeploys Serve applications on the running cluster: no reason to tear it down.
    (service,) = [r for r in reference_resources if r.type == RAYSERVICE]
    diff = rayservice_diff({}, {"raypd:model": {"maxModelLen": 8192}})
    assert diff == {"spec.serveConfigV2"}
    assert not triggers_replace(diff, service.replace_on_changes)


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


# ---- a model-only change returns only when the new Serve app is RUNNING ----

ROLLOUT_JOB = "kubernetes:batch/v1:Job"


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
    (again,) = rollout_jobs({"raypd:hfToken": "hf_token_for_the_secret_object"})
    assert before.inputs == again.inputs
