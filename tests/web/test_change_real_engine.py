"""The change preview through the REAL engine: `PulumiEngine` + `LocalWorkspace` against the
stand-in Pulumi CLI (tests/fakes/pulumi_cli.py), which reports a changed stack's steps the way the
Pulumi engine does (a pulumi-eks component `update` with its `aws:eks/nodeGroup:NodeGroup` child
replaced: `create-replacement`, `replace`, and `delete-replaced` at the end). The web app must read
the child, not the component: a GPU instance-type change is a replacement of the node group."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pulumi import automation as auto

from tests.fakes.pulumi_cli import install
from tests.patience import PATIENCE_S
from tests.web.support import AUTH, create, settings_for, wait_for_job
from webui.engines.pulumi_engine import PulumiEngine
from webui.settings import prepare_home

STACK = "live"


@pytest.fixture
def client(make_app, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("FAKE_PULUMI_STEP_SECONDS", "0.01")
    monkeypatch.delenv("FAKE_PULUMI_VERSION", raising=False)
    # No AWS here: the preflight's AWS checks skip (say why) and the launch is not blocked.
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    settings = settings_for(tmp_path / "home", engine="pulumi")
    prepare_home(settings)
    engine = PulumiEngine(settings, auto.PulumiCommand(root=str(install(tmp_path / "cli"))))
    app = make_app(home=tmp_path / "home", engine=engine)
    test_client = app.test_client()
    create(test_client, STACK)
    up = wait_for_job(test_client, test_client.post(
        f"/api/v1/deployments/{STACK}/up", headers=AUTH, json={"force": True}).get_json()["job"],
        timeout=3 * PATIENCE_S)  # a preflight, then the CLI's up: minutes on a busy machine
    assert up["status"] == "succeeded", up
    return test_client


def preview_after(client, patch: dict[str, Any]) -> dict[str, Any]:
    changed = client.patch(f"/api/v1/deployments/{STACK}", headers=AUTH, json={"config": patch})
    assert changed.status_code == 200, changed.get_json()
    job = client.post(f"/api/v1/deployments/{STACK}/preview", headers=AUTH).get_json()["job"]
    preview = wait_for_job(client, job, timeout=3 * PATIENCE_S)
    assert preview["status"] == "succeeded", preview
    return preview["summary"]


@pytest.mark.slow
def test_a_gpu_instance_type_change_is_previewed_as_a_node_group_replacement(client):
    summary = preview_after(client, {"raypd:decode": {"instanceType": "g6e.8xlarge"}})
    ops = {(step["type"], step["name"]): step["op"] for step in summary["steps"]}
    assert ops[("eks:index:ManagedNodeGroup", "decode-nodes")] == "update"
    assert ops[("aws:eks/nodeGroup:NodeGroup", "decode-nodes")] == "replace"
    notes = summary["consequences"]
    assert any(n.startswith("GPU node groups are replaced (decode-nodes)") and "both run" in n for n in notes), notes
    assert any("RayService is replaced" in n and "endpoint is down" in n for n in notes), notes
    assert not any("no replacement" in n for n in notes), notes
    # The settings-level view agrees, and prices the way around the downtime.
    assessment = summary["assessment"]
    assert assessment["kind"] == "new Ray cluster"
    assert [c["name"] for c in assessment["choices"]] == ["inPlace", "newCluster"]


@pytest.mark.slow
def test_a_replica_change_is_previewed_in_place_with_no_restart(client):
    summary = preview_after(client, {"raypd:decode": {"replicas": 2}})
    ops = {(step["type"], step["name"]): step["op"] for step in summary["steps"]}
    assert ops[("aws:eks/nodeGroup:NodeGroup", "decode-nodes")] == "update"
    assert ops[("kubernetes:ray.io/v1:RayService", "pd-service-rayservice")] == "update"
    notes = " ".join(summary["consequences"])
    assert "GPU node groups resize in place (decode-nodes)" in notes
    assert "no restart of the running engines" in notes
    assert "replaced" not in notes
    assert summary["assessment"]["choices"] == []
