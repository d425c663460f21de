"""The total before the first resource and the ETA of a real update (webui/progress.py)."""

from __future__ import annotations

from typing import Any

import pytest

from components.plan.durations import GPU_NODE_GROUP, TYPICAL_SECONDS, critical_path
from tests.web.support import AUTH, create, wait_for_job
from webui.progress import ProgressPlan, durations_for, planned_total

CHAIN = [
    {"type": "aws:ec2/vpc:Vpc", "name": "vpc", "dependsOn": []},
    {"type": "eks:index:Cluster", "name": "eks", "dependsOn": ["vpc"]},
    {"type": "eks:index:ManagedNodeGroup", "name": "gpu", "dependsOn": ["eks"],
     "inputs": {"amiType": "AL2023_x86_64_NVIDIA"}},
    {"type": "aws:iam/role:Role", "name": "role", "dependsOn": []},
]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _record(state: str, name: str, type_: str, done: int) -> dict[str, Any]:
    return {"kind": "resource", "state": state, "op": "create", "type": type_, "name": name,
            "done": done, "total": done + 1, "message": f"{state} {name}"}


def test_eta_follows_the_critical_path_and_the_clock():
    clock = Clock()
    durations = {"aws:ec2/vpc:Vpc": 10, "eks:index:Cluster": 900, GPU_NODE_GROUP: 600, "aws:iam/role:Role": 2}
    progress = ProgressPlan(CHAIN, durations, total=len(CHAIN), clock=clock)
    opening = progress.opening_record()
    assert opening["total"] == 4 and opening["done"] == 0 and opening["etaSeconds"] == 1510
    assert progress.decorate(_record("started", "vpc", "aws:ec2/vpc:Vpc", 0))["etaSeconds"] == 1510
    clock.now += 10
    assert progress.decorate(_record("finished", "vpc", "aws:ec2/vpc:Vpc", 1))["etaSeconds"] == 1500
    progress.decorate(_record("started", "eks", "eks:index:Cluster", 1))
    clock.now += 300
    during = progress.decorate(_record("finished", "role", "aws:iam/role:Role", 2))
    assert during["etaSeconds"] == 1200  # 600 s of the cluster left, then the node group
    assert during["total"] == 4  # the plan's total, not what the engine has seen so far


def test_other_records_pass_untouched():
    progress = ProgressPlan(CHAIN, dict(TYPICAL_SECONDS), total=4)
    record = {"kind": "diagnostic", "severity": "info", "message": "hello"}
    assert progress.decorate(record) is record


def test_measured_durations_replace_the_table_under_the_plans_own_keys():
    durations = durations_for(CHAIN, [("gpu", "eks:index:ManagedNodeGroup", 120.0),
                                      ("gpu", "eks:index:ManagedNodeGroup", 180.0),
                                      ("elsewhere", "eks:index:ManagedNodeGroup", 30.0)])
    assert durations[GPU_NODE_GROUP] == 150.0  # the GPU group's own runs, median
    assert durations["eks:index:ManagedNodeGroup"] == 30.0  # a system group, keyed apart
    assert durations["eks:index:Cluster"] == TYPICAL_SECONDS["eks:index:Cluster"]


def test_total_comes_from_the_preview_when_one_ran():
    assert planned_total(CHAIN, {"create": 3, "same": 30}) == 33
    assert planned_total(CHAIN, None) == 4
    assert planned_total(CHAIN, {}) == 4


def test_a_real_update_knows_its_total_and_eta_before_the_first_resource(fake_app, fake_engine, tmp_path):
    from components.stack.offline_plan import plan_file

    client = fake_app.test_client()
    store = fake_app.extensions["raypd"].store
    create(client, "real")
    job_id = client.post("/api/v1/deployments/real/up", headers=AUTH).get_json()["job"]
    assert wait_for_job(client, job_id)["status"] == "succeeded"
    events = store.events_after(job_id)
    opening = next(e for e in events if "etaSeconds" in e)
    (tmp_path / "Pulumi.real.yaml").write_text("config: {}\n")
    reference = plan_file(str(tmp_path / "Pulumi.real.yaml"))["resources"]
    assert opening["total"] == len(reference) and opening["done"] == 0
    assert opening["etaSeconds"] == round(critical_path(reference, TYPICAL_SECONDS).seconds)
    assert f"planned: {len(reference)} resources, about" in opening["message"]
    first_resource = next(e for e in events if e["kind"] == "resource")
    assert events.index(opening) < events.index(first_resource)
    assert first_resource["total"] == len(reference) and "etaSeconds" in first_resource


@pytest.mark.slow
def test_the_store_measures_step_durations_of_succeeded_updates(fake_app, fake_engine):
    client = fake_app.test_client()
    store = fake_app.extensions["raypd"].store
    create(client, "real")
    job_id = client.post("/api/v1/deployments/real/up", headers=AUTH).get_json()["job"]
    wait_for_job(client, job_id)
    samples = store.resource_durations("pulumi", "up")
    # The fake engine starts and finishes "vpc"; "eks" only finishes: no start, no measure.
    assert {(name, type_) for name, type_, _ in samples} == {("vpc", "aws:ec2/vpc:Vpc")}
    assert all(seconds >= 0 for _, _, seconds in samples)
    assert store.resource_durations("offline", "up") == []
