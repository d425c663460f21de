"""Changing a deployment: PATCH (merge, reset with null, 400, 409), what the change means before it
runs (settings old -> new, resources created/updated/replaced/deleted, downtime, cost), and the
change form in the browser's pages."""

from __future__ import annotations

from typing import Any

import pytest

from tests.patience import PATIENCE_S
from tests.web.support import AUTH, HF_TOKEN, create, extract_csrf, login, text_of, wait_for_job
from webui.change import config_diff, consequences, plan_diff

# ---- pure: what a change means ----

OLD_PLAN = {"resources": [
    {"type": "aws:ec2/subnet:Subnet", "name": "subnet-a", "inputs": {"cidrBlock": "10.0.0.0/19"}},
    {"type": "eks:index:ManagedNodeGroup", "name": "gpu", "inputs": {"instanceTypes": ["g6.8xlarge"],
                                                                      "scalingConfig": {"desiredSize": 2}}},
    {"type": "kubernetes:ray.io/v1:RayService", "name": "rs", "replaceOnChanges": ["spec.rayClusterConfig"],
     "inputs": {"spec": {"serveConfigV2": "model: a", "rayClusterConfig": {"workers": 2}}}},
    {"type": "kubernetes:core/v1:Secret", "name": "hf", "inputs": {}},
]}


def _with(plan: dict[str, Any], name: str, **inputs: Any) -> dict[str, Any]:
    resources = []
    for resource in plan["resources"]:
        if resource["name"] == name:
            resource = {**resource, "inputs": {**resource["inputs"], **inputs}}
        resources.append(resource)
    return {"resources": resources}


def _ops(steps: list[dict[str, Any]]) -> dict[str, str]:
    return {step["name"]: step["op"] for step in steps}


def test_a_model_change_is_an_in_place_serve_update():
    new = _with(OLD_PLAN, "rs", spec={"serveConfigV2": "model: b", "rayClusterConfig": {"workers": 2}})
    steps = plan_diff(OLD_PLAN, new)
    assert _ops(steps) == {"subnet-a": "same", "gpu": "same", "rs": "update", "hf": "same"}
    assert steps[2]["keys"] == ["spec.serveConfigV2"]
    assert "an in-place Serve update" in " ".join(consequences(steps))
    assert "endpoint is down" not in " ".join(consequences(steps))


def test_a_ray_cluster_change_replaces_the_rayservice_and_says_the_endpoint_goes_down():
    new = _with(OLD_PLAN, "rs", spec={"serveConfigV2": "model: a", "rayClusterConfig": {"workers": 3}})
    steps = plan_diff(OLD_PLAN, new)
    assert _ops(steps)["rs"] == "replace"
    notes = consequences(steps)
    assert any("RayService is replaced" in n and "endpoint is down" in n for n in notes)


def test_provider_create_only_inputs_replace_and_other_inputs_update():
    bigger = _with(OLD_PLAN, "gpu", instanceTypes=["p5.48xlarge"])
    more = _with(OLD_PLAN, "gpu", scalingConfig={"desiredSize": 3})
    moved = _with(OLD_PLAN, "subnet-a", cidrBlock="10.0.32.0/19")
    assert _ops(plan_diff(OLD_PLAN, bigger))["gpu"] == "replace"
    assert _ops(plan_diff(OLD_PLAN, more))["gpu"] == "update"
    assert _ops(plan_diff(OLD_PLAN, moved))["subnet-a"] == "replace"
    assert any("node groups are replaced (gpu)" in n for n in consequences(plan_diff(OLD_PLAN, bigger)))


def test_created_and_deleted_resources_are_counted():
    new = {"resources": [r for r in OLD_PLAN["resources"] if r["name"] != "hf"]
           + [{"type": "aws:iam/role:Role", "name": "s3-reader", "inputs": {}}]}
    steps = plan_diff(OLD_PLAN, new)
    assert _ops(steps)["s3-reader"] == "create" and _ops(steps)["hf"] == "delete"
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


@pytest.mark.parametrize("config,field", [
    ({"raypd:prefill": {"tensorParallelSize": 2}}, "raypd:prefill.tensorParallelSize"),
    ({"raypd:bogus": 1}, "raypd:bogus"),
    ({"kubernetes:context": "x"}, "kubernetes:context"),
    ({"raypd:model": {"source": "not a repo"}}, "raypd:model.source"),
    ({"raypd:decode": {"replicas": 0}}, "raypd:decode.replicas"),
    ({"raypd:hfToken": ""}, "raypd:hfToken"),
    ([], "config"),
    ("x" * 70_000, None),
])
def test_bad_patches_are_400_naming_the_field_and_change_nothing(client, config, field):
    create(client, "demo")
    before = client.get("/api/v1/deployments/demo", headers=AUTH).get_json()["spec"]
    response = _patch(client, "demo", config)
    assert response.status_code in (400, 413)
    if field is not None:
        assert field in [e["field"] for e in response.get_json()["errors"]]
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


def test_a_model_only_change_previews_as_an_in_place_serve_update(client):
    create(client, "model")
    wait_for_job(client, client.post("/api/v1/deployments/model/up", headers=AUTH).get_json()["job"])
    _patch(client, "model", {"raypd:model": {"maxModelLen": 8192}})
    preview = wait_for_job(client, client.post("/api/v1/deployments/model/preview", headers=AUTH).get_json()["job"])
    steps = {step["name"]: step["op"] for step in preview["summary"]["steps"]}
    assert set(steps.values()) == {"update"}, steps
    assert any("in-place Serve update" in note for note in preview["summary"]["consequences"])


# ---- pages ----

def test_change_form_is_filled_with_the_current_settings_then_saves_and_previews(app):
    browser = app.test_client()
    login(browser)
    create(browser, "form", {"raypd:decode": {"replicas": 2}})
    wait_for_job(browser, browser.post("/api/v1/deployments/form/up", headers=AUTH).get_json()["job"])
    page = text_of(browser.get("/deployments/form/change"))
    assert 'name="raypd:decode.replicas" value="2"' in page
    from tests.web.support import form_defaults

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
