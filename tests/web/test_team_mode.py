"""Team mode for real: servers sharing one PostgreSQL store (and, for the real engine, one Pulumi
backend) operate every deployment wherever it was created, and one started on an empty RAYPD_HOME
can too (issue 16). A file backend directory both servers use stands in for S3 here; the real
engine runs the stand-in CLI (tests/fakes/pulumi_cli.py), which keeps config where the real CLI
does with a DIY backend: in the work dir's stack settings file, not in the backend.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml
from flask import Flask
from flask.testing import FlaskClient
from pulumi import automation as auto

from tests.fakes.pulumi_cli import install
from tests.patience import PATIENCE_S
from tests.web.support import AUTH, HF_TOKEN, create, settings_for, wait_for_job
from webui.app import close_app, create_app
from webui.engines.offline import OfflineEngine
from webui.engines.pulumi_cli import CliDiscovery
from webui.engines.pulumi_engine import PulumiEngine
from webui.engines.select import EngineSet, select_engines
from webui.settings import SettingsError

pytestmark = pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)  # team mode only

GROWN = {"raypd:decode": {"replicas": 2}}


def _job(client: FlaskClient, name: str, operation: str) -> dict[str, Any]:
    if operation == "destroy":
        answer = client.delete(f"/api/v1/deployments/{name}", headers=AUTH)
    else:
        answer = client.post(f"/api/v1/deployments/{name}/{operation}", headers=AUTH)
    assert answer.status_code == 202, answer.get_json()
    # A preflight and the engine's plan or up in a subprocess, on PostgreSQL: over a minute seen
    # on a loaded 2-core machine. The wait ends when the job does; the bound only stops a hang.
    return wait_for_job(client, answer.get_json()["job"], timeout=3 * PATIENCE_S)


def _patch(client: FlaskClient, name: str, config: dict[str, Any]) -> None:
    answer = client.patch(f"/api/v1/deployments/{name}", json={"config": config}, headers=AUTH)
    assert answer.status_code == 200, answer.get_json()


@pytest.fixture
def servers(store_url: Any) -> Iterator[Callable[..., Flask]]:
    """Servers sharing the test's store; stopped before its database goes."""
    apps: list[Flask] = []

    def start(app: Flask) -> Flask:
        app.config["TESTING"] = True
        apps.append(app)
        return app

    yield start
    for app in apps:
        close_app(app)


@pytest.mark.slow  # a scenario of fourteen jobs, each running offline plans in subprocesses
def test_offline_deployments_are_operated_by_whichever_server_takes_the_request(servers, store_url, tmp_path):
    def server(home: str) -> FlaskClient:
        settings = settings_for(tmp_path / home, RAYPD_DATABASE_URL=store_url)
        return servers(create_app(settings)).test_client()

    a, b = server("a"), server("b")
    names = ["one", "two"]  # one created on each server: both directions; each job runs offline plans
    for index, name in enumerate(names):  # created across both, every job on the other one
        creator, other = (a, b) if index % 2 == 0 else (b, a)
        create(creator, name)
        assert _job(other, name, "up")["status"] == "succeeded"
        _patch(creator, name, GROWN)
        preview = _job(other, name, "preview")
        assert preview["status"] == "succeeded", preview
        assert {step["op"] for step in preview["summary"]["steps"]} - {"create"}  # against the planned one
        assert _job(creator, name, "up")["status"] == "succeeded"
    assert not list(tmp_path.rglob("Pulumi.*.yaml"))  # no server's home holds a stack's settings
    # A server started on an empty home operates every deployment: change, preview, up, teardown.
    fresh = server("fresh-empty-home")
    for name in names:
        _patch(fresh, name, {"raypd:decode": {"replicas": 3}})
        assert _job(fresh, name, "preview")["status"] == "succeeded"
        assert _job(fresh, name, "up")["status"] == "succeeded"
        detail = fresh.get(f"/api/v1/deployments/{name}", headers=AUTH).get_json()
        assert detail["deployed"]["spec"]["raypd:decode"]["replicas"] == 3
        assert _job(fresh if name != "two" else a, name, "destroy")["status"] == "succeeded"
    assert fresh.get("/api/v1/deployments", headers=AUTH).get_json()["deployments"] == []


# ---- the real engine, over one shared backend ----

@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> auto.PulumiCommand:
    monkeypatch.setenv("FAKE_PULUMI_STEP_SECONDS", "0.01")
    monkeypatch.delenv("FAKE_PULUMI_VERSION", raising=False)
    return auto.PulumiCommand(root=str(install(tmp_path / "cli")))


def _real_server(servers: Callable[..., Flask], cli: auto.PulumiCommand, home: Path, store_url: Any,
                 backend: Path, passphrase: str = "one passphrase for the team") -> FlaskClient:
    settings = settings_for(home, engine="pulumi", RAYPD_DATABASE_URL=store_url,
                            PULUMI_BACKEND_URL=backend.as_uri(), PULUMI_CONFIG_PASSPHRASE=passphrase)
    real = PulumiEngine(settings, cli)
    engines = EngineSet(real, {"pulumi": real, "offline": OfflineEngine(settings)})
    return servers(create_app(settings, engines=engines)).test_client()


def _backend_state(backend: Path, stack: str) -> dict[str, Any]:
    return json.loads((backend / "fake-pulumi" / f"{stack}.json").read_text())


@pytest.mark.slow  # every job runs the stand-in Pulumi CLI in subprocesses on two servers
def test_real_deployments_run_with_their_settings_on_every_server(servers, cli, store_url, tmp_path):
    backend = tmp_path / "shared-backend"  # what s3://bucket/prefix is for real servers
    a = _real_server(servers, cli, tmp_path / "a", store_url, backend)
    b = _real_server(servers, cli, tmp_path / "b", store_url, backend)
    create(a, "real", {"raypd:hfToken": HF_TOKEN, "aws:region": "us-west-2"})
    up = _job(b, "real", "up")
    assert up["status"] == "succeeded", up
    # B ran with the settings A wrote, the token opened with the shared passphrase.
    history = b.get("/api/v1/deployments/real", headers=AUTH).get_json()
    assert history["outputs"]["region"] == "us-west-2"
    state = _backend_state(backend, "real")
    deployed = {key: entry["value"] for key, entry in state["deployed_config"].items()}
    assert deployed["aws:region"] == "us-west-2" and deployed["raypd:hfToken"] == HF_TOKEN
    _patch(b, "real", GROWN)
    preview = _job(a, "real", "preview")
    assert preview["status"] == "succeeded", preview
    assert any(step["op"] != "create" for step in preview["summary"]["steps"])  # the change B saved
    # The store holds the settings file, its secret sealed; no server's home holds any.
    text = a.application.extensions["raypd"].store.stack_file("real")
    assert text is not None and HF_TOKEN not in text
    document = yaml.safe_load(text)
    assert document["encryptionsalt"].startswith("v1:") and set(document["config"]["raypd:hfToken"]) == {"secure"}
    assert json.loads(document["config"]["raypd:decode"])["replicas"] == 2
    assert not list(tmp_path.glob("[ab]/**/Pulumi.real.yaml"))
    # A server on an empty home finishes the job: up (with the change), then teardown.
    fresh = _real_server(servers, cli, tmp_path / "fresh", store_url, backend)
    assert _job(fresh, "real", "up")["status"] == "succeeded"
    deployed = {key: entry["value"] for key, entry in _backend_state(backend, "real")["deployed_config"].items()}
    assert json.loads(deployed["raypd:decode"])["replicas"] == 2 and deployed["raypd:hfToken"] == HF_TOKEN
    assert _job(fresh, "real", "destroy")["status"] == "succeeded"
    assert fresh.application.extensions["raypd"].store.stack_file("real") is None


@pytest.mark.slow
def test_a_server_with_another_passphrase_fails_the_job_saying_so_and_loses_nothing(servers, cli, store_url,
                                                                                      tmp_path):
    backend = tmp_path / "shared-backend"
    a = _real_server(servers, cli, tmp_path / "a", store_url, backend)
    create(a, "sealed", {"raypd:hfToken": HF_TOKEN})
    store = a.application.extensions["raypd"].store
    before = store.stack_file("sealed")
    stranger = _real_server(servers, cli, tmp_path / "b", store_url, backend, passphrase="not the team's")
    job = _job(stranger, "sealed", "up")
    assert job["status"] == "failed" and "incorrect passphrase" in job["error"], job
    assert store.stack_file("sealed") == before
    answer = stranger.patch("/api/v1/deployments/sealed", json={"config": {"raypd:hfToken": "hf_" + "n" * 34}},
                            headers=AUTH)
    # Not a bug of raypd's (500): this server lacks the team's key, so it says which setting and a load
    # balancer's client may try another server (503).
    assert answer.status_code == 503, answer.get_json()
    [error] = answer.get_json()["errors"]
    assert error["field"] == "engine" and "incorrect passphrase" in error["message"]
    assert "PULUMI_CONFIG_PASSPHRASE" in error["message"] and "not the team's" not in error["message"]
    assert store.stack_file("sealed") == before  # the refused change wrote nothing
    assert _job(a, "sealed", "up")["status"] == "succeeded"  # the team's servers still can


@pytest.mark.slow
def test_stacks_sealed_by_a_cloud_secrets_provider_need_no_passphrase_anywhere(servers, cli, store_url, tmp_path):
    backend = tmp_path / "shared-backend"
    kms = "awskms://alias/raypd?region=us-west-2"
    a = _real_server(servers, cli, tmp_path / "a", store_url, backend, passphrase="")
    a.application.extensions["raypd"].engines.default.settings = (
        a.application.extensions["raypd"].engines.default.settings.with_overrides(secrets_provider=kms))
    create(a, "kms", {"raypd:hfToken": HF_TOKEN})
    document = yaml.safe_load(a.application.extensions["raypd"].store.stack_file("kms"))
    assert document["secretsprovider"] == kms and "encryptionsalt" not in document
    b = _real_server(servers, cli, tmp_path / "b", store_url, backend, passphrase="")
    assert _job(b, "kms", "up")["status"] == "succeeded"
    deployed = _backend_state(backend, "kms")["deployed_config"]
    assert deployed["raypd:hfToken"]["value"] == HF_TOKEN


# ---- what team mode refuses at start ----

def _found() -> CliDiscovery:
    return CliDiscovery(command=object(), where="/usr/local/bin/pulumi", reason=None)


@pytest.mark.parametrize("env,needed", [
    ({}, "PULUMI_BACKEND_URL=s3://"),
    ({"PULUMI_BACKEND_URL": "file:///srv/pulumi"}, "two servers cannot share file:// state"),
    ({"PULUMI_BACKEND_URL": "s3://bucket/raypd"}, "PULUMI_CONFIG_PASSPHRASE_FILE"),
])
def test_team_mode_refuses_a_backend_or_secrets_key_one_server_alone_has(store_url, tmp_path, env, needed):
    settings = settings_for(tmp_path / "home", engine="auto", RAYPD_DATABASE_URL=store_url, **env)
    with pytest.raises(SettingsError) as refused:
        select_engines(settings, _found)
    assert needed in str(refused.value)
    assert "team mode" in str(refused.value) and "Sup3r" not in str(refused.value)


def test_team_mode_starts_with_a_shared_backend_and_key(store_url, tmp_path):
    for secrets in ({"PULUMI_CONFIG_PASSPHRASE_FILE": str(tmp_path / "team-passphrase")},
                    {"RAYPD_SECRETS_PROVIDER": "awskms://alias/raypd?region=us-west-2"}):
        settings = settings_for(tmp_path / "home", engine="auto", RAYPD_DATABASE_URL=store_url,
                                PULUMI_BACKEND_URL="s3://bucket/raypd", **secrets)
        assert select_engines(settings, _found).default.name == "pulumi"
    # Offline, nothing is kept in a backend and nothing is encrypted: team mode needs neither.
    settings = settings_for(tmp_path / "home", engine="offline", RAYPD_DATABASE_URL=store_url)
    assert select_engines(settings, _found).default.name == "offline"
