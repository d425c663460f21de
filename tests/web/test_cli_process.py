"""The real engine end to end against a stand-in Pulumi CLI: cancel, crashes, shutdown, progress.

`PulumiEngine` + `LocalWorkspace` + `CliSession` run `tests/fakes/pulumi_cli.py` through a
`bin/pulumi` wrapper, so everything from the SDK's argument building and event channel (gRPC, as
with a current CLI) to the engine's errors is the real code path. What the stand-in cannot prove
about the real CLI is listed in docs/webui.md ("Tested only with the stand-in CLI").
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Optional

import pytest
from pulumi import automation as auto

from components.config.spec import DeploymentSpec
from tests.fakes.pulumi_cli import install, parse
from tests.patience import PATIENCE_S, until
from tests.web.support import AUTH, HF_TOKEN, create, settings_for, wait_for_job
from webui.engines.base import (
    EngineUnavailable,
    JobContext,
    OperationCancelled,
    OperationFailed,
    PendingOperations,
)
from webui.engines.cli_process import PID_FILE, CliSession
from webui.engines.pulumi_engine import PulumiEngine
from webui.settings import prepare_home
from webui.store import Store

pytestmark = pytest.mark.slow  # every test runs the stand-in Pulumi CLI as real subprocesses

STACK = "demo"
ALL_RESOURCES = 7  # what the stand-in's program creates (besides the stack itself)


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> auto.PulumiCommand:
    """The stand-in CLI as a real PulumiCommand (its `version` answered by the script)."""
    monkeypatch.setenv("FAKE_PULUMI_STEP_SECONDS", "0.02")
    monkeypatch.setenv("FAKE_PULUMI_CALL_LOG", str(tmp_path / "calls.jsonl"))
    monkeypatch.delenv("FAKE_PULUMI_VERSION", raising=False)
    return auto.PulumiCommand(root=str(install(tmp_path / "cli")))


@pytest.fixture
def engine(tmp_path: Path, cli: auto.PulumiCommand) -> PulumiEngine:
    return engine_at(tmp_path / "home", cli)


def engine_at(home: Path, cli: auto.PulumiCommand) -> PulumiEngine:
    settings = settings_for(home, engine="pulumi")
    prepare_home(settings)
    engine = PulumiEngine(settings, cli, stack_files=Store(settings.db_path))
    engine.shutdown_grace, engine.terminate_grace = 5.0, 5.0
    return engine


def created(engine: PulumiEngine) -> PulumiEngine:
    engine.create(DeploymentSpec.from_config({"raypd:hfToken": HF_TOKEN}, STACK), HF_TOKEN)
    return engine


def state_of(engine: PulumiEngine) -> dict[str, Any]:
    """The stand-in's state file for the stack (what the backend holds)."""
    return json.loads((engine.settings.state_dir / "fake-pulumi" / f"{STACK}.json").read_text())


def calls(tmp_path: Path) -> list[list[str]]:
    path = tmp_path / "calls.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def mid_step(engine: PulumiEngine) -> int:
    """Wait until the CLI is inside a resource step; return its pid."""
    until(lambda: state_of(engine)["pending_operations"], "a step in flight")
    return int((engine.settings.cli_dir(STACK) / PID_FILE).read_text())


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


class Job:
    """engine.run on a thread, as the job runner runs it."""

    def __init__(self, engine: PulumiEngine, operation: str):
        self.records: list[dict[str, Any]] = []
        self.ctx = JobContext("job1", self.records.append)
        self.error: Optional[BaseException] = None
        self.result: Any = None
        self.thread = threading.Thread(target=self._run, args=(engine, operation), daemon=True)
        self.thread.start()

    def _run(self, engine: PulumiEngine, operation: str) -> None:
        try:
            self.result = engine.run(STACK, operation, self.ctx)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            self.error = exc

    def join(self, timeout: float = PATIENCE_S) -> "Job":
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "engine.run did not return"
        return self


# ---- the happy path, through the SDK's real event channel ----

@pytest.mark.parametrize("version,channel", [("v3.272.0", "grpc"), ("v3.200.0", "file")])
def test_up_reports_every_step_and_masks_secrets(engine, tmp_path, monkeypatch, version, channel):
    monkeypatch.setenv("FAKE_PULUMI_VERSION", version)
    engine.command = auto.PulumiCommand(root=str(tmp_path / "cli"))  # re-read the version
    result = Job(created(engine), "up").join()
    assert result.error is None, result.error
    up = [call for call in calls(tmp_path) if "up" in call][0]
    event_log = up[up.index("--event-log") + 1]
    assert event_log.startswith("tcp://127.0.0.1:") if channel == "grpc" else event_log.endswith("eventlog.txt")
    finished = [r["name"] for r in result.records if r.get("state") == "finished"]
    assert {"network-vpc", "cluster-eks", "decode-nodes"} <= set(finished)
    assert result.records[-1]["kind"] == "summary" and result.records[-1]["changes"] == {"create": ALL_RESOURCES}
    notes = [r["message"] for r in result.records if r["kind"] == "diagnostic"]
    assert any("prefill 1 x g6.8xlarge" in note and "<{%" not in note for note in notes)
    assert result.result.outputs["kubeconfig"] == "[secret]"
    assert HF_TOKEN not in json.dumps(result.records) + json.dumps(result.result.summary)
    assert all(call[0] == "--non-interactive" for call in calls(tmp_path) if call != ["version"])
    # The stream ended with the CLI's cancelEvent, as every stream does: no cancel was asked for.
    assert not any("cancel" in r.get("message", "") for r in result.records)


# ---- cancel ----

def test_cancel_mid_update_sigints_the_cli_and_returns_only_after_it_exited(engine, monkeypatch, caplog):
    caplog.set_level(logging.INFO)
    created(engine)
    monkeypatch.setenv("FAKE_PULUMI_STEP_SECONDS", "3.0")
    job = Job(engine, "up")
    pid = mid_step(engine)
    job.ctx.request_cancel()  # what POST /jobs/{id}/cancel does
    # The job holds the stack until the CLI exits: whenever the CLI is seen alive, the job was still
    # running a moment before (looked at first, so an exit in between cannot pass for the bug).
    looks_while_alive, deadline = 0, time.monotonic() + PATIENCE_S
    while time.monotonic() < deadline:
        running = job.thread.is_alive()
        if not alive(pid):
            break
        assert running, "the job must hold the stack until the CLI exits"
        looks_while_alive += 1
        time.sleep(0.01)
    assert looks_while_alive, "the CLI was gone before the first look: nothing was checked"
    job.join()
    assert isinstance(job.error, OperationCancelled)
    assert not alive(pid)
    assert any(r.get("message") == "the update stopped on the cancel request" for r in job.records)
    state = state_of(engine)
    # Graceful: the step in flight finished, no other started, nothing pending, lock released.
    assert 1 <= len(state["resources"]) < ALL_RESOURCES
    assert state["pending_operations"] == [] and state["lock"] is None
    assert state["history"][0]["result"] == "failed"
    assert "SIGINT" in caplog.text and HF_TOKEN not in caplog.text


def test_cancel_before_the_cli_starts_runs_nothing(engine, tmp_path):
    created(engine)
    before = len(calls(tmp_path))
    ctx = JobContext("job1", lambda record: None)
    ctx.request_cancel()
    with pytest.raises(OperationCancelled):
        engine.run(STACK, "up", ctx)
    assert calls(tmp_path)[before:] == []
    assert state_of(engine)["resources"] == []


def test_a_cancelled_session_refuses_to_start_an_operation_but_still_reads():
    class Base:
        command = "/nonexistent/pulumi"
        version = None

    session = CliSession(Base(), "demo")
    assert session.interrupt() is False  # nothing running: no signal, but cancelled from now on
    with pytest.raises(OperationCancelled):
        session.run(["up", "--yes"], "/", {})
    with pytest.raises(FileNotFoundError):  # a read is still attempted (this binary does not exist)
        session.run(["stack", "output", "--json"], "/", {})


def test_the_job_is_the_lock_a_second_update_is_refused_until_the_cli_exited(
    make_app, engine, monkeypatch, tmp_path,
):
    app = make_app(home=tmp_path / "home", engine=engine)
    client = app.test_client()
    create(client, STACK)
    assert Job(engine, "up").join().error is None  # resources to refresh (no preflight needed)
    monkeypatch.setenv("FAKE_PULUMI_STEP_SECONDS", "1.0")
    job_id = client.post(f"/api/v1/deployments/{STACK}/refresh", headers=AUTH).get_json()["job"]
    pid = mid_step(engine)
    assert client.post(f"/api/v1/jobs/{job_id}/cancel", headers=AUTH).status_code == 202
    second = client.post(f"/api/v1/deployments/{STACK}/refresh", headers=AUTH)
    assert second.status_code == 409 and second.get_json()["job"] == job_id
    assert alive(pid)
    job = client.get(f"/api/v1/jobs/{job_id}", headers=AUTH).get_json()
    assert job["status"] == "running"  # cancelling, not over: the CLI is still finishing its step
    assert wait_for_job(client, job_id)["status"] == "cancelled"
    assert not alive(pid)
    assert state_of(engine)["lock"] is None
    again = client.post(f"/api/v1/deployments/{STACK}/refresh", headers=AUTH)
    assert again.status_code == 202
    assert wait_for_job(client, again.get_json()["job"])["status"] == "succeeded"


def test_release_does_not_drop_the_lock_under_a_live_cli(engine, monkeypatch):
    created(engine)
    monkeypatch.setenv("FAKE_PULUMI_STEP_SECONDS", "1.0")
    job = Job(engine, "up")
    mid_step(engine)
    assert engine.release(STACK) is None  # no `pulumi cancel` while our CLI runs
    assert state_of(engine)["lock"] is not None
    job.ctx.request_cancel()
    job.join()
    state = state_of(engine)
    state["lock"] = 4242  # a lock some dead server's CLI left behind
    (engine.settings.state_dir / "fake-pulumi" / f"{STACK}.json").write_text(json.dumps(state))
    engine.release(STACK).join(PATIENCE_S)
    assert state_of(engine)["lock"] is None


# ---- shutdown ----

def test_app_shutdown_cancels_the_cli_and_waits_for_it(make_app, engine, monkeypatch, tmp_path):
    from webui import close_app

    app = make_app(home=tmp_path / "home", engine=engine)
    client = app.test_client()
    create(client, STACK)
    assert Job(engine, "up").join().error is None
    monkeypatch.setenv("FAKE_PULUMI_STEP_SECONDS", "1.0")
    job_id = client.post(f"/api/v1/deployments/{STACK}/refresh", headers=AUTH).get_json()["job"]
    pid = mid_step(engine)
    started = time.monotonic()
    close_app(app)
    assert time.monotonic() - started < engine.shutdown_grace + 5
    assert not alive(pid)
    store = Store(engine.settings.db_path)
    try:
        assert store.get_job(job_id)["status"] == "cancelled"
    finally:
        store.close()
    assert state_of(engine)["pending_operations"] == []  # graceful: finished within the grace


def test_shutdown_terminates_a_cli_that_outlives_the_grace_and_says_so(engine, monkeypatch, caplog):
    created(engine)
    # The step (and the SIGKILL's grace) far longer than the patience: only the second SIGINT ends it sooner.
    engine.shutdown_grace, engine.terminate_grace = 0.3, 2 * PATIENCE_S
    monkeypatch.setenv("FAKE_PULUMI_STEP_SECONDS", str(4 * PATIENCE_S))
    job = Job(engine, "up")
    pid = mid_step(engine)
    started = time.monotonic()
    job.ctx.request_cancel()
    assert engine.stop_processes() == [STACK]
    assert time.monotonic() - started < PATIENCE_S
    job.join()
    assert isinstance(job.error, OperationCancelled) and not alive(pid)
    assert "terminating" in caplog.text
    # The abandoned step is a pending operation: the next up is refused until it is cleared.
    assert [op["operation"] for op in engine.pending_operations(STACK)] == ["creating"]


# ---- destroy of a stack whose state is gone ----

def test_destroy_of_a_stack_the_backend_lost_succeeds_and_the_deployment_goes(make_app, engine, tmp_path):
    app = make_app(home=tmp_path / "home", engine=engine)
    client = app.test_client()
    create(client, STACK)
    (engine.settings.state_dir / "fake-pulumi" / f"{STACK}.json").unlink()  # state deleted by hand
    job_id = client.delete(f"/api/v1/deployments/{STACK}", headers=AUTH).get_json()["job"]
    job = wait_for_job(client, job_id)
    assert job["status"] == "succeeded", job
    assert client.get(f"/api/v1/deployments/{STACK}", headers=AUTH).status_code == 404
    events = app.extensions["raypd"].store.events_after(job_id, 0)
    assert any("already destroyed" in json.dumps(event) for event in events)


def test_destroy_of_a_missing_stack_says_it_treated_it_as_destroyed(engine):
    created(engine)
    (engine.settings.state_dir / "fake-pulumi" / f"{STACK}.json").unlink()
    job = Job(engine, "destroy").join()
    assert job.error is None and job.result.resources == []
    assert job.result.summary["alreadyDestroyed"] is True
    warnings = [r["message"] for r in job.records if r["kind"] == "diagnostic"]
    assert any("already destroyed" in message for message in warnings)


# ---- what each call leaves, and what it needs ----

@pytest.mark.parametrize("reached", ["directly", "through a symlink"])
def test_no_bookkeeping_file_of_the_cli_outlives_an_engine_call(reached, cli, tmp_path, monkeypatch):
    """`stack select`/`stack init` write PULUMI_HOME/workspaces/raypd-<sha1 of the work dir>-
    workspace.json; a new work dir per call would leave one file per call there forever. The CLI
    names the file by the path its getcwd returns, symlinks resolved, so a RAYPD_HOME reached
    through a symlink (/tmp on macOS, a mounted volume) must be resolved the same way (settings
    resolve the home and the file name resolves the work dir again: red only when neither does)."""
    home = tmp_path / "pulumi-home"
    monkeypatch.setenv("PULUMI_HOME", str(home))
    raypd_home = tmp_path / "home"
    if reached == "through a symlink":
        (tmp_path / "real-home").mkdir()
        raypd_home.symlink_to(tmp_path / "real-home", target_is_directory=True)
    engine = engine_at(raypd_home, cli)
    created(engine)
    assert Job(engine, "up").join().error is None
    engine.history(STACK)
    engine.live_outputs(STACK)
    assert Job(engine, "destroy").join().error is None
    assert sum(parse(call)[0][:2] in (["stack", "select"], ["stack", "init"]) for call in calls(tmp_path)) >= 4
    assert (home / "workspaces").is_dir()  # the CLI wrote its files there ...
    assert list((home / "workspaces").iterdir()) == []  # ... and none is left


def test_a_stack_whose_settings_file_is_not_in_the_store_is_not_operated(engine, tmp_path):
    """Without the file the CLI would run `up` with no config at all (a DIY backend keeps none):
    the call stops after `stack select` and says where the file is and what to do."""
    created(engine)
    engine.stack_files.delete_stack_file(STACK)
    before = len(calls(tmp_path))
    for operation in ("up", "preview", "destroy"):
        job = Job(engine, operation).join()
        assert isinstance(job.error, EngineUnavailable), job.error
        assert "settings file of demo is not in the shared store" in job.error.message
        assert "nothing was run" in job.error.message
    with pytest.raises(EngineUnavailable, match="not in the shared store"):
        engine.configure(DeploymentSpec.from_config({"raypd:hfToken": HF_TOKEN}, STACK), None, [])
    assert {" ".join(parse(call)[0][:2]) for call in calls(tmp_path)[before:]} == {"stack select"}
    assert state_of(engine)["resources"] == [] and engine.stack_files.stack_file(STACK) is None


# ---- pending operations ----

# The SDK warns "Error in event stream" when the CLI dies mid-stream: expected after a SIGKILL.
crash = pytest.mark.filterwarnings("ignore:Error in event stream")


def crash_mid_step(engine: PulumiEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL the CLI inside a step: what a crash or a power cut leaves behind."""
    monkeypatch.setenv("FAKE_PULUMI_STEP_SECONDS", "20")
    job = Job(engine, "up")
    pid = mid_step(engine)
    os.kill(pid, signal.SIGKILL)
    job.join()
    assert isinstance(job.error, OperationFailed) and "SIGKILL" in job.error.message
    notes = [r["message"] for r in job.records if r["kind"] == "diagnostic"]
    assert any("releasing the lock" in note for note in notes)
    assert state_of(engine)["lock"] is None  # ours was the only CLI: its lock was stale
    monkeypatch.setenv("FAKE_PULUMI_STEP_SECONDS", "0.02")


@crash
def test_pending_operations_block_up_and_destroy_and_are_listed_without_secrets(engine, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    created(engine)
    crash_mid_step(engine, monkeypatch)
    with engine._stack(STACK) as selected:
        raw = selected.export_stack()
    assert HF_TOKEN in json.dumps(raw.deployment)  # the export really holds the secret...
    pending = engine.pending_operations(STACK)
    assert pending == [{
        "urn": f"urn:pulumi:{STACK}::raypd::aws:ec2/vpc:Vpc::network-vpc", "type": "aws:ec2/vpc:Vpc",
        "name": "network-vpc", "operation": "creating", "check": pending[0]["check"],
    }]
    assert "VPC console" in pending[0]["check"]
    for operation in ("up", "destroy"):
        job = Job(engine, operation).join()
        assert isinstance(job.error, PendingOperations), job.error
        assert job.error.http_status == 409 and job.error.operations == pending
        assert "network-vpc" in job.error.message and "AWS console" in job.error.message
        assert HF_TOKEN not in job.error.message + json.dumps(job.records)
    assert HF_TOKEN not in json.dumps(pending) + caplog.text  # ...and it goes nowhere
    state = state_of(engine)
    assert state["resources"] == []  # nothing was created again, nothing destroyed


@crash
def test_clear_pending_clears_them_and_the_next_up_completes_once(engine, monkeypatch):
    created(engine)
    crash_mid_step(engine, monkeypatch)
    cleared = Job(engine, "clear-pending").join()
    assert cleared.error is None, cleared.error
    assert engine.pending_operations(STACK) == []
    up = Job(engine, "up").join()
    assert up.error is None, up.error
    assert len(state_of(engine)["resources"]) == ALL_RESOURCES


@crash
def test_clear_pending_drops_creates_and_the_refresh_drops_the_rest(engine, monkeypatch):
    created(engine)
    assert Job(engine, "up").join().error is None
    monkeypatch.setenv("FAKE_PULUMI_STEP_SECONDS", "20")
    job = Job(engine, "destroy")
    pid = mid_step(engine)
    os.kill(pid, signal.SIGKILL)
    job.join()
    assert [op["operation"] for op in engine.pending_operations(STACK)] == ["deleting"]
    monkeypatch.setenv("FAKE_PULUMI_STEP_SECONDS", "0.02")
    assert Job(engine, "clear-pending").join().error is None
    assert engine.pending_operations(STACK) == []


def test_release_leaves_the_lock_of_a_cli_that_outlived_the_previous_server(engine):
    import subprocess
    import sys

    created(engine)
    # A CLI the last server started (its own session, so it survived the server): only its pid file.
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "pulumi", "up"])
    try:
        until(lambda: b"pulumi" in Path(f"/proc/{orphan.pid}/cmdline").read_bytes(), "exec")
        engine.settings.cli_dir(STACK).mkdir(parents=True)  # where that server's session kept it
        (engine.settings.cli_dir(STACK) / PID_FILE).write_text(str(orphan.pid))
        assert engine.release(STACK) is None
    finally:
        orphan.kill()
        orphan.wait(PATIENCE_S)
    thread = engine.release(STACK)  # the pid file now names a dead process
    assert thread is not None
    thread.join(PATIENCE_S)
