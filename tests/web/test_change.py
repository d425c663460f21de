"""Changing a deployment: PATCH (merge, reset with null, 400, 409), what the change means before it
runs (settings old -> new, resources created/updated/replaced/deleted, downtime, cost), and the
change form in the browser's pages."""

from __future__ import annotations

import re
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import BaseModel
from pydantic.alias_generators import to_camel

from components.config.spec import DeploymentSpec
from tests.patience import PATIENCE_S
from tests.web.support import AUTH, HF_TOKEN, create, extract_csrf, form_defaults, login, text_of, wait_for_job
from webui.resource_steps import change_counts, config_diff, consequences, plan_diff
from webui.settings import DEFAULT_MAX_BODY_BYTES

# ---- pure: what a change means ----

DIGEST = 'metadata.annotations["raypd.io/ray-cluster-digest"]'
OLD_PLAN = {"resources": [
    {"type": "aws:ec2/subnet:Subnet", "name": "subnet-a", "inputs": {"cidrBlock": "10.0.0.0/19"}},
    {"type": "raypd:cluster:GpuNodeGroup", "name": "gpu-nodes", "inputs": {}},
    {"type": "eks:index:ManagedNodeGroup", "name": "gpu-nodes-group", "parent": "gpu-nodes",
     "inputs": {"instanceTypes": ["g6.8xlarge"], "scalingConfig": {"desiredSize": 2}, "diskSize": 200}},
    {"type": "raypd:cluster:Cluster", "name": "cluster", "inputs": {}},
    {"type": "eks:index:Cluster", "name": "cluster-eks", "parent": "cluster",
     "inputs": {"name": "raypd-demo", "version": "1.35", "privateSubnetIds": ["subnet-a"]}},
    {"type": "eks:index:ManagedNodeGroup", "name": "cluster-system", "parent": "cluster",
     "inputs": {"instanceTypes": ["m7i.xlarge"], "scalingConfig": {"desiredSize": 1}}},
    {"type": "kubernetes:ray.io/v1:RayService", "name": "rs", "replaceOnChanges": [DIGEST],
     "inputs": {"metadata": {"annotations": {"raypd.io/ray-cluster-digest": "aaaa"}},
                "spec": {"serveConfigV2": "model: a", "rayClusterConfig": {"workerGroupSpecs": [
                    {"groupName": "gpu", "replicas": 2}]}}}},
    {"type": "kubernetes:core/v1:Secret", "name": "hf", "inputs": {}},
]}


def _with(plan: dict[str, Any], resource_name: str, **inputs: Any) -> dict[str, Any]:
    resources = []
    for resource in plan["resources"]:
        if resource["name"] == resource_name:
            resource = {**resource, "inputs": {**resource["inputs"], **inputs}}
        resources.append(resource)
    return {"resources": resources}


def _rayservice(digest: str, serve: str, replicas: int) -> dict[str, Any]:
    return {"metadata": {"annotations": {"raypd.io/ray-cluster-digest": digest}},
            "spec": {"serveConfigV2": serve, "rayClusterConfig": {"workerGroupSpecs": [
                {"groupName": "gpu", "replicas": replicas}]}}}


def _ops(steps: list[dict[str, Any]]) -> dict[str, str]:
    return {f"{step['type']} {step['name']}": step["op"] for step in steps}


def test_a_serve_change_updates_the_rayservice_and_says_the_engines_restart():
    # Not "no downtime": new Serve args are each engine's init args, and Ray Serve stops an outdated
    # replica before its successor starts; with no spare GPU every engine reloads the model.
    new = _with(OLD_PLAN, "rs", **_rayservice("aaaa", "model: b", 2))
    steps = plan_diff(OLD_PLAN, new)
    assert _ops(steps)["kubernetes:ray.io/v1:RayService rs"] == "update"
    assert next(s for s in steps if s["name"] == "rs")["keys"] == ["spec.serveConfigV2"]
    notes = " ".join(consequences(steps))
    assert "restarts each engine" in notes and "min of downtime" in notes
    assert "no downtime" not in notes


def test_a_cluster_digest_change_replaces_the_rayservice_and_says_the_endpoint_goes_down():
    new = _with(OLD_PLAN, "rs", **_rayservice("bbbb", "model: a", 2))
    steps = plan_diff(OLD_PLAN, new)
    assert _ops(steps)["kubernetes:ray.io/v1:RayService rs"] == "replace"
    assert any("RayService is replaced" in n and "endpoint is down" in n for n in consequences(steps))


def test_a_replica_count_change_alone_is_an_update_not_a_replacement():
    # KubeRay leaves replicas out of its cluster hash: the digest (and so replaceOnChanges) holds.
    new = _with(OLD_PLAN, "rs", **_rayservice("aaaa", "model: a", 3))
    assert _ops(plan_diff(OLD_PLAN, new))["kubernetes:ray.io/v1:RayService rs"] == "update"


def test_a_gpu_instance_type_change_is_a_child_node_group_replacement_under_a_component_update():
    # What a real preview reports: the pulumi-eks component updates, its aws:eks NodeGroup child
    # is replaced; offline the component's changed inputs are expanded into that child step.
    steps = plan_diff(OLD_PLAN, _with(OLD_PLAN, "gpu-nodes-group", instanceTypes=["p5.48xlarge"]))
    ops = _ops(steps)
    assert ops["eks:index:ManagedNodeGroup gpu-nodes-group"] == "update"
    assert ops["aws:eks/nodeGroup:NodeGroup gpu-nodes-group"] == "replace"
    notes = consequences(steps)
    assert any(n.startswith("GPU node groups are replaced (gpu-nodes)") and "both run" in n
               and "min" in n for n in notes), notes
    assert not any("resize in place" in n for n in notes)
    # Counted like Pulumi's summary: the child is not a second resource of the program.
    assert change_counts(steps).get("update") == 1 and "replace" not in change_counts(steps)


def test_a_system_node_type_change_says_the_endpoints_single_proxy_moves_with_the_head():
    # Envoy Gateway runs one proxy pod on the system nodes: whichever the strategy, the endpoint is
    # down while it moves to the new group (components.changes.node_groups, issue 29 §1).
    steps = plan_diff(OLD_PLAN, _with(OLD_PLAN, "cluster-system", instanceTypes=["m7i.2xlarge"]))
    assert _ops(steps)["aws:eks/nodeGroup:NodeGroup cluster-system"] == "replace"
    (note,) = [n for n in consequences(steps) if n.startswith("the system node group is replaced")]
    assert "Ray head" in note and "the endpoint's proxy" in note and "endpoint is down" in note


def test_a_scale_is_an_in_place_resize_and_a_disk_change_rolls_the_nodes():
    more = consequences(plan_diff(OLD_PLAN, _with(OLD_PLAN, "gpu-nodes-group", scalingConfig={"desiredSize": 3})))
    assert any("GPU node groups resize in place (gpu-nodes)" in n for n in more)
    disk = plan_diff(OLD_PLAN, _with(OLD_PLAN, "gpu-nodes-group", diskSize=400))
    assert _ops(disk)["aws:ec2/launchTemplate:LaunchTemplate gpu-nodes-group"] == "update"
    assert "replace" not in _ops(disk).values()  # diskSize lives in the launch template here
    assert any("GPU node groups roll" in n for n in consequences(disk))


def test_a_kubernetes_version_change_says_every_group_rolls_and_the_endpoint_goes_down():
    steps = plan_diff(OLD_PLAN, _with(OLD_PLAN, "cluster-eks", version="1.36"))
    assert _ops(steps)["aws:eks/cluster:Cluster cluster-eks"] == "update"
    (note,) = [n for n in consequences(steps) if n.startswith("Kubernetes upgrade")]
    assert "system node" in note and "full outage" in note and "quota" in note


def test_moving_the_cluster_subnets_updates_the_cluster_in_place():
    steps = plan_diff(OLD_PLAN, _with(OLD_PLAN, "cluster-eks", privateSubnetIds=["subnet-b"]))
    assert _ops(steps)["aws:eks/cluster:Cluster cluster-eks"] == "update"
    assert not any("EKS cluster is replaced" in n for n in consequences(steps))
    renamed = plan_diff(OLD_PLAN, _with(OLD_PLAN, "cluster-eks", name="other"))
    assert any("EKS cluster is replaced" in n for n in consequences(renamed))


def test_provider_create_only_inputs_replace():
    moved = _with(OLD_PLAN, "subnet-a", cidrBlock="10.0.32.0/19")
    assert _ops(plan_diff(OLD_PLAN, moved))["aws:ec2/subnet:Subnet subnet-a"] == "replace"


def test_created_and_deleted_resources_are_counted():
    new = {"resources": [r for r in OLD_PLAN["resources"] if r["name"] != "hf"]
           + [{"type": "aws:iam/role:Role", "name": "s3-reader", "inputs": {}}]}
    steps = plan_diff(OLD_PLAN, new)
    assert _ops(steps)["aws:iam/role:Role s3-reader"] == "create"
    assert _ops(steps)["kubernetes:core/v1:Secret hf"] == "delete"
    assert {"1 resource(s) created", "1 resource(s) deleted"} <= set(consequences(steps))
    assert consequences(plan_diff(OLD_PLAN, OLD_PLAN)) == ["no resource changes"]


def test_config_diff_names_nested_keys_and_defaults():
    old = {"raypd:decode": {"replicas": 1, "instanceType": "g6.8xlarge"}, "raypd:image": "a"}
    new = {"raypd:decode": {"replicas": 2, "instanceType": "g6.8xlarge"}}
    assert config_diff(old, new) == [
        {"key": "raypd:decode.replicas", "old": 1, "new": 2},
        {"key": "raypd:image", "old": "a", "new": None},
    ]


# ---- PATCH ----

def _patch(client, name: str, config: Any, **kwargs: Any):
    return client.patch(f"/api/v1/deployments/{name}", json={"config": config}, headers=AUTH, **kwargs)


def test_patch_merges_keys_and_null_resets_one_to_its_default(client):
    create(client, "demo", {"raypd:decode": {"replicas": 2}, "raypd:image": "public.ecr.aws/x/ray:1"})
    response = _patch(client, "demo", {"raypd:model": {"id": "qwen3.5-9b", "source": "Qwen/Qwen3.5-9B",
                                                       "maxModelLen": 8192},
                                       "raypd:image": None})
    assert response.status_code == 200, response.get_json()
    spec = response.get_json()["spec"]
    assert spec["raypd:model"]["maxModelLen"] == 8192
    assert spec["raypd:decode"]["replicas"] == 2  # untouched keys stay
    assert spec["raypd:image"] == ""  # back to the default: the region's Ray LLM DLC
    assert response.get_json()["status"] == "created"  # nothing ran


# Every object-valued Contract 1 key, set away from its defaults, and a patch naming one sub-key
# (issue 29 §2): a PATCH is a JSON Merge Patch, so the sub-keys it leaves out keep their values.
NESTED_START: dict[str, dict[str, Any]] = {
    "raypd:systemNodes": {"instanceType": "m7i.2xlarge", "count": 2},
    "raypd:model": {"id": "qwen3-8b", "source": "Qwen/Qwen3-8B", "maxModelLen": 8192, "dtype": "float16",
                    "gpuMemoryUtilization": 0.85, "enforceEager": False},
    "raypd:prefill": {"instanceType": "g6.12xlarge", "replicas": 1, "tensorParallelSize": 2,
                      "pipelineParallelSize": 1},
    "raypd:decode": {"instanceType": "g6.12xlarge", "replicas": 1, "tensorParallelSize": 2,
                     "pipelineParallelSize": 1},
    "raypd:colocated": {"instanceType": "g6.12xlarge", "replicas": 1, "tensorParallelSize": 2,
                        "pipelineParallelSize": 1},
    "raypd:kvTransfer": {"connector": "NixlConnector", "backend": "UCX", "loadFailurePolicy": "fail",
                         "leaseSeconds": 600},
    "raypd:faultTolerance": {"gcs": "elasticache", "cacheNodeType": "cache.t4g.medium"},
    "raypd:endpoint": {"scope": "vpc", "auth": "none", "allowedCidrs": ["10.1.0.0/16"],
                       "host": "llm.internal.example.com"},
    "raypd:observability": {"enabled": True, "prometheusStorageSize": "100Gi", "prometheusRetention": "30d",
                            "grafanaStorageSize": "20Gi"},
}
NESTED_PATCH: dict[str, dict[str, Any]] = {
    "raypd:systemNodes": {"count": 3},
    "raypd:model": {"maxModelLen": 2048},
    "raypd:prefill": {"replicas": 2},
    "raypd:decode": {"replicas": 3},  # the example: it reset decode.instanceType to g6.8xlarge
    "raypd:colocated": {"replicas": 2},
    "raypd:kvTransfer": {"connector": "NixlConnector"},  # backend stays UCX
    "raypd:faultTolerance": {"cacheNodeType": "cache.t4g.small"},  # gcs stays elasticache
    "raypd:endpoint": {"auth": "apiKey"},
    "raypd:observability": {"grafanaStorageSize": "30Gi"},
}


def test_the_nested_patch_table_covers_every_object_valued_key():
    objects = {f"raypd:{to_camel(name)}" for name, info in DeploymentSpec.model_fields.items()
               if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)}
    assert set(NESTED_START) == objects == set(NESTED_PATCH)


@pytest.mark.parametrize("key", sorted(NESTED_PATCH))
def test_a_patch_of_one_sub_key_keeps_the_others(client, key):
    create(client, "nested", NESTED_START)
    response = _patch(client, "nested", {key: NESTED_PATCH[key]})
    assert response.status_code == 200, response.get_json()
    spec = response.get_json()["spec"]
    assert spec[key] == NESTED_START[key] | NESTED_PATCH[key]
    for other in set(NESTED_START) - {key}:  # and the other objects are untouched
        assert spec[other] == NESTED_START[other], other


def test_a_null_sub_key_resets_it_to_its_default_and_a_list_is_replaced_whole(client):
    create(client, "nested", NESTED_START)
    spec = _patch(client, "nested", {"raypd:endpoint": {"host": None, "allowedCidrs": ["10.2.0.0/16"]},
                                     "raypd:model": {"dtype": None}}).get_json()["spec"]
    assert spec["raypd:endpoint"] == {"scope": "vpc", "auth": "none", "allowedCidrs": ["10.2.0.0/16"]}
    assert spec["raypd:model"] == NESTED_START["raypd:model"] | {"dtype": "bfloat16"}
    # null for a whole key: the object's every sub-key back to its default.
    spec = _patch(client, "nested", {"raypd:observability": None}).get_json()["spec"]
    assert "raypd:observability" not in spec  # the default, which the stored config leaves out


def test_the_document_describes_a_patch_as_a_merge_patch(client):
    document = client.get("/api/v1/openapi.json", headers=AUTH).get_json()
    schema = {"$ref": "#/components/schemas/DeploymentConfigPatch", "components": document["components"]}
    validator = Draft202012Validator(schema)
    assert validator.is_valid({"raypd:decode": {"replicas": 3}, "raypd:model": {"dtype": None}})
    assert not validator.is_valid({"raypd:decode": {"bogus": 1}})
    assert not validator.is_valid({"raypd:decode": {"replicas": "3"}})


@pytest.mark.parametrize("config,field", [
    ({"raypd:prefill": {"tensorParallelSize": 2}}, "raypd:prefill.tensorParallelSize"),
    ({"raypd:bogus": 1}, "raypd:bogus"),
    ({"kubernetes:context": "x"}, "kubernetes:context"),
    ({"raypd:model": {"source": "not a repo"}}, "raypd:model.source"),
    ({"raypd:decode": {"replicas": 0}}, "raypd:decode.replicas"),
    ({"raypd:hfToken": ""}, "raypd:hfToken"),
    ([], "config"),
])
def test_bad_patches_are_400_naming_the_field_and_change_nothing(client, config, field):
    create(client, "demo")
    before = client.get("/api/v1/deployments/demo", headers=AUTH).get_json()["spec"]
    response = _patch(client, "demo", config)
    assert response.status_code == 400
    assert field in [e["field"] for e in response.get_json()["errors"]]
    assert client.get("/api/v1/deployments/demo", headers=AUTH).get_json()["spec"] == before


def test_a_patch_over_the_body_limit_is_413_naming_the_body_and_changes_nothing(client):
    # Too large, not malformed: 413 tells the client that resending it smaller is the fix.
    create(client, "demo")
    before = client.get("/api/v1/deployments/demo", headers=AUTH).get_json()["spec"]
    response = _patch(client, "demo", "x" * DEFAULT_MAX_BODY_BYTES)
    assert response.status_code == 413
    assert response.get_json()["errors"] == [
        {"field": "body", "message": f"request body larger than {DEFAULT_MAX_BODY_BYTES} bytes"}]
    assert client.get("/api/v1/deployments/demo", headers=AUTH).get_json()["spec"] == before


def test_patch_is_refused_while_a_job_runs(fake_app, fake_engine):
    client = fake_app.test_client()
    create(client, "busy")
    fake_engine.gate.clear()
    job = client.post("/api/v1/deployments/busy/refresh", headers=AUTH).get_json()["job"]
    assert fake_engine.started.wait(PATIENCE_S)
    refused = _patch(client, "busy", {"raypd:decode": {"replicas": 2}})
    assert refused.status_code == 409 and refused.get_json()["job"] == job
    fake_engine.gate.set()
    wait_for_job(client, job)
    assert _patch(client, "busy", {"raypd:decode": {"replicas": 2}}).status_code == 200


def test_patch_of_a_missing_deployment_is_404(client):
    assert _patch(client, "nope", {}).status_code == 404


def test_a_new_token_goes_to_the_engine_and_nowhere_else(fake_app, fake_engine):
    client = fake_app.test_client()
    create(client, "tok")
    configured: list[tuple[Any, Any, Any]] = []
    fake_engine.configure = lambda spec, token, removed: configured.append((spec, token, removed))
    answer = _patch(client, "tok", {"raypd:hfToken": HF_TOKEN}).get_data(as_text=True)
    assert configured[-1][1] == HF_TOKEN and HF_TOKEN not in answer
    assert client.get("/api/v1/deployments/tok", headers=AUTH).get_json()["spec"]["raypd:hfToken"] == "[secret]"
    _patch(client, "tok", {"raypd:decode": {"replicas": 2}})
    assert configured[-1][1] is None  # no new token: the stack keeps its own
    _patch(client, "tok", {"raypd:hfToken": None})
    assert configured[-1][1] is None and "raypd:hfToken" in configured[-1][2]
    assert "raypd:hfToken" not in client.get("/api/v1/deployments/tok", headers=AUTH).get_json()["spec"]


@pytest.mark.slow
def test_pending_changes_show_old_and_new_settings_and_cost_until_deployed(client):
    create(client, "grow")
    assert wait_for_job(client, client.post("/api/v1/deployments/grow/up", headers=AUTH).get_json()["job"])[
        "status"] == "succeeded"
    assert client.get("/api/v1/deployments/grow", headers=AUTH).get_json()["pendingChanges"] is None
    changed = _patch(client, "grow", {"raypd:decode": {"replicas": 3}}).get_json()["pendingChanges"]
    assert changed["config"] == [{"key": "raypd:decode.replicas", "old": 1, "new": 3}]
    cost = changed["usdPerHour"]
    assert cost["new"] > cost["old"] and cost["delta"] == pytest.approx(cost["new"] - cost["old"])
    preview = wait_for_job(client, client.post("/api/v1/deployments/grow/preview", headers=AUTH).get_json()["job"])
    steps = {step["name"]: step["op"] for step in preview["summary"]["steps"]}
    assert "update" in steps.values() or "replace" in steps.values()
    assert preview["summary"]["changes"].get("same", 0) > 0
    assert wait_for_job(client, client.post("/api/v1/deployments/grow/up", headers=AUTH).get_json()["job"])[
        "status"] == "succeeded"
    assert client.get("/api/v1/deployments/grow", headers=AUTH).get_json()["pendingChanges"] is None


@pytest.mark.slow
def test_a_model_change_previews_as_an_engine_restart_and_offers_zero_downtime(client):
    create(client, "model")
    wait_for_job(client, client.post("/api/v1/deployments/model/up", headers=AUTH).get_json()["job"])
    _patch(client, "model", {"raypd:model": {"maxModelLen": 8192}})
    preview = wait_for_job(client, client.post("/api/v1/deployments/model/preview", headers=AUTH).get_json()["job"])
    steps = {step["name"]: step["op"] for step in preview["summary"]["steps"]}
    assert steps.pop("pd-service-rollout-check") == "replace"  # a new check for the new config
    assert set(steps.values()) == {"update"}, steps
    notes = " ".join(preview["summary"]["consequences"])
    assert "Ray Serve redeploys the application" in notes and "min of downtime" in notes
    assessment = preview["summary"]["assessment"]
    assert assessment["kind"] == "engines restart"
    in_place, zero = assessment["choices"]
    assert in_place["name"] == "inPlace" and in_place["downtimeSeconds"] > 0 and not in_place["extraNodes"]
    assert zero["name"] == "newCluster" and zero["downtimeSeconds"] == 0
    assert sum(line["nodes"] for line in zero["extraNodes"]) == 2 and zero["extraUsd"] > 0


@pytest.mark.slow
def test_a_replica_change_previews_in_place_with_no_restart_and_no_strategy_to_choose(client):
    create(client, "scale")
    wait_for_job(client, client.post("/api/v1/deployments/scale/up", headers=AUTH).get_json()["job"])
    _patch(client, "scale", {"raypd:decode": {"replicas": 2}})
    preview = wait_for_job(client, client.post("/api/v1/deployments/scale/preview", headers=AUTH).get_json()["job"])
    ops = {step["name"]: step["op"] for step in preview["summary"]["steps"]}
    assert ops.pop("pd-service-rollout-check") == "replace"  # a new check for the new count
    assert ops["pd-service-rayservice"] == "update", ops  # not a replacement: KubeRay keeps the cluster
    assert "replace" not in ops.values()
    notes = " ".join(preview["summary"]["consequences"])
    assert "no restart of the running engines" in notes and "resize in place" in notes
    assessment = preview["summary"]["assessment"]
    assert assessment["kind"] == "in place" and assessment["choices"] == []
    assert assessment["chosen"]["downtimeSeconds"] == 0


# ---- pages ----

@pytest.mark.slow
def test_change_form_is_filled_with_the_current_settings_then_saves_and_previews(app):
    browser = app.test_client()
    login(browser)
    create(browser, "form", {"raypd:decode": {"replicas": 2}})
    wait_for_job(browser, browser.post("/api/v1/deployments/form/up", headers=AUTH).get_json()["job"])
    page = text_of(browser.get("/deployments/form/change"))
    assert 'name="raypd:decode.replicas" value="2"' in page
    values = form_defaults(page) | {"csrf_token": extract_csrf(page), "raypd:decode.replicas": "4"}
    values.pop("name", None)
    bad = browser.post("/deployments/form/change", data=values | {"raypd:decode.tensorParallelSize": "2"})
    assert bad.status_code == 400 and "g6.8xlarge has 1" in text_of(bad)
    saved = browser.post("/deployments/form/change", data=values)
    assert saved.status_code == 302
    job_id = saved.headers["Location"].split("job=")[1]
    assert wait_for_job(browser, job_id, headers={})["status"] == "succeeded"
    shown = text_of(browser.get(saved.headers["Location"]))
    assert 'id="pending-changes"' in shown and "raypd:decode.replicas" in shown
    assert 'id="job-changes"' in shown and "What this update would do" in shown


@pytest.mark.slow
def test_the_preview_page_offers_both_strategies_and_switching_previews_again(app):
    browser = app.test_client()
    login(browser)
    create(browser, "pick")
    wait_for_job(browser, browser.post("/api/v1/deployments/pick/up", headers=AUTH).get_json()["job"])
    _patch(browser, "pick", {"raypd:model": {"maxModelLen": 8192}})
    job = browser.post("/api/v1/deployments/pick/preview", headers=AUTH).get_json()["job"]
    wait_for_job(browser, job)
    page = text_of(browser.get(f"/deployments/pick?job={job}"))
    assert 'id="strategy-choices"' in page and 'data-strategy="newCluster"' in page
    assert "engines restart" in page and 'id="use-newCluster"' in page
    switched = browser.post("/deployments/pick/strategy",
                            data={"csrf_token": extract_csrf(page), "strategy": "newCluster"})
    assert switched.status_code == 302
    again = switched.headers["Location"].split("job=")[1]
    assert wait_for_job(browser, again, headers={})["status"] == "succeeded"
    shown = text_of(browser.get(switched.headers["Location"]))
    assert "rolls this out <strong>zero downtime (new cluster)</strong>" in shown
    assert re.search(r'id="chosen-extra-cost">\$[0-9.]+ over ~[0-9]+ min</span> for the extra nodes\)', shown)
    spec = browser.get("/api/v1/deployments/pick", headers=AUTH).get_json()["spec"]
    assert spec["raypd:upgradeStrategy"] == "newCluster"
    # Anything else is refused with a page, not a traceback; without the CSRF token, too.
    bad = browser.post("/deployments/pick/strategy",
                       data={"csrf_token": extract_csrf(page), "strategy": "$(reboot)\x00"})
    assert bad.status_code == 400
    assert browser.post("/deployments/pick/strategy", data={"strategy": "inPlace"}).status_code == 403


@pytest.mark.slow
def test_the_change_form_is_a_merge_patch_too_and_an_emptied_field_resets_its_sub_key(app):
    # The form sends every field it shows; one emptied must reset its sub-key (a null in the merge
    # patch), and the other mode's sections, which it does not show, keep their values.
    browser = app.test_client()
    login(browser)
    create(browser, "formed", NESTED_START)
    page = text_of(browser.get("/deployments/formed/change"))
    values = form_defaults(page) | {"csrf_token": extract_csrf(page), "raypd:endpoint.host": "",
                                    "raypd:decode.replicas": "2"}
    values.pop("name", None)
    saved = browser.post("/deployments/formed/change", data=values)
    assert saved.status_code == 302, text_of(saved)[:500]
    wait_for_job(browser, saved.headers["Location"].split("job=")[1], headers={})
    spec = browser.get("/api/v1/deployments/formed", headers=AUTH).get_json()["spec"]
    assert spec["raypd:endpoint"] == {"scope": "vpc", "auth": "none", "allowedCidrs": ["10.1.0.0/16"]}
    assert spec["raypd:decode"] == NESTED_START["raypd:decode"] | {"replicas": 2}
    assert spec["raypd:colocated"] == NESTED_START["raypd:colocated"]
    assert spec["raypd:observability"] == NESTED_START["raypd:observability"]
