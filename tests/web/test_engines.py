"""Engine seams: offline stack file, Automation API config/events/errors/CLI discovery, selection.

The Pulumi CLI cannot run here, so the Automation API engine is tested at every seam that does
not need it, with the SDK's real classes (EngineEvent, CommandResult errors, OutputValue,
UpdateSummary, LocalWorkspace writing its project file). The one test that needs a CLI says so.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import threading
import time
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from pulumi import automation as auto
from pulumi.automation import events as ev
from pulumi.automation._cmd import CommandResult
from pulumi.automation.errors import create_command_error

from components.config.spec import DeploymentSpec
from tests.patience import PATIENCE_S
from tests.web.support import HF_TOKEN, settings_for
from webui.engines.base import (
    EngineConflict,
    EngineNotFound,
    EngineUnavailable,
    JobContext,
    OperationCancelled,
    OperationFailed,
    PendingOperations,
)
from webui.engines.events import EventTranslator, urn_name
from webui.engines.offline import OfflineEngine, stack_file_document
from webui.engines.pulumi_cli import CLI_NOT_FOUND, find_pulumi_cli
from webui.engines.pulumi_engine import PulumiEngine
from webui.engines.pulumi_io import (
    clean_command_error,
    config_map,
    map_command_error,
    masked_outputs,
    pending_from_deployment,
    write_config,
)
from webui.engines.select import select_engines
from webui.engines.workdir import stack_work_dir, sweep_stale_work_dirs
from webui.settings import Settings, SettingsError, prepare_home, pulumi_env
from webui.store import Store

STACK = "urn:pulumi:demo::raypd::pulumi:pulumi:Stack::raypd-demo"
VPC = "urn:pulumi:demo::raypd::raypd:network:Network$aws:ec2/vpc:Vpc::network-vpc"
EKS = "urn:pulumi:demo::raypd::raypd:cluster:Cluster$eks:index:Cluster::cluster-eks"


def engine_event(seq: int, **payload: Any) -> ev.EngineEvent:
    """An EngineEvent parsed from the JSON the CLI writes to its event log."""
    return ev.EngineEvent.from_json({"sequence": seq, "timestamp": 1700000000 + seq, **payload})


def step(op: str, urn: str, type_: str) -> dict[str, Any]:
    return {"metadata": {"op": op, "urn": urn, "type": type_, "provider": ""}}


def reference_events() -> list[ev.EngineEvent]:
    return [
        engine_event(1, preludeEvent={"config": {}}),
        engine_event(2, resourcePreEvent=step("create", STACK, "pulumi:pulumi:Stack")),
        engine_event(3, resourcePreEvent=step("create", VPC, "aws:ec2/vpc:Vpc")),
        engine_event(4, resOutputsEvent=step("create", VPC, "aws:ec2/vpc:Vpc")),
        engine_event(5, resourcePreEvent=step("create", EKS, "eks:index:Cluster")),
        engine_event(6, diagnosticEvent={"message": "creating cluster with token hf_AbCdEfGhIjKlMnOp123\n",
                                         "color": "never", "severity": "info#err", "urn": EKS}),
        engine_event(7, diagnosticEvent={"message": "progress...", "color": "never", "severity": "info",
                                         "ephemeral": True}),
        engine_event(8, resOpFailedEvent={**step("create", EKS, "eks:index:Cluster"), "status": 1, "steps": 1}),
        engine_event(9, diagnosticEvent={"message": "error: AccessDenied", "color": "never", "severity": "error"}),
        engine_event(10, summaryEvent={"maybeCorrupt": False, "durationSeconds": 12,
                                       "resourceChanges": {"create": 2}, "PolicyPacks": {}}),
    ]


# ---- event translation ----

def test_translator_turns_engine_events_into_progress_records():
    records: list[dict[str, Any]] = []
    translator = EventTranslator(records.append, expected_total=5)
    for event in reference_events():
        translator(event)
    kinds = [(r["kind"], r.get("state"), r.get("name")) for r in records]
    assert ("resource", "started", "network-vpc") in kinds
    assert ("resource", "finished", "network-vpc") in kinds
    assert ("resource", "failed", "cluster-eks") in kinds
    vpc_done = next(r for r in records if r.get("state") == "finished")
    assert (vpc_done["done"], vpc_done["total"]) == (1, 5)  # total starts from the last run's count
    errors = [r for r in records if r["kind"] == "diagnostic"]
    assert [e["severity"] for e in errors] == ["info", "error"]  # ephemeral noise dropped
    assert "hf_AbCdEfGhIjKlMnOp123" not in json.dumps(records)
    summary = records[-1]
    assert summary["kind"] == "summary" and summary["changes"] == {"create": 2}
    assert summary["done"] == summary["total"] == 3  # finished means 100%
    assert translator.resources() == [{"type": "aws:ec2/vpc:Vpc", "name": "network-vpc"}]


def test_resources_deleted_by_an_update_are_not_listed():
    old_group = "urn:pulumi:demo::raypd::aws:eks/nodeGroup:NodeGroup::decode-nodes"
    translator = EventTranslator(lambda record: None)
    for seq, payload in enumerate([
        {"resourcePreEvent": step("same", VPC, "aws:ec2/vpc:Vpc")},
        {"resOutputsEvent": step("same", VPC, "aws:ec2/vpc:Vpc")},
        {"resourcePreEvent": step("create-replacement", EKS, "eks:index:Cluster")},
        {"resOutputsEvent": step("create-replacement", EKS, "eks:index:Cluster")},
        {"resourcePreEvent": step("delete-replaced", EKS, "eks:index:Cluster")},
        {"resOutputsEvent": step("delete-replaced", EKS, "eks:index:Cluster")},
        {"resourcePreEvent": step("delete", old_group, "aws:eks/nodeGroup:NodeGroup")},
        {"resOutputsEvent": step("delete", old_group, "aws:eks/nodeGroup:NodeGroup")},
    ], start=1):
        translator(engine_event(seq, **payload))
    assert translator.resources() == [
        {"type": "aws:ec2/vpc:Vpc", "name": "network-vpc"},
        {"type": "eks:index:Cluster", "name": "cluster-eks"},
    ]


def test_translator_never_raises_on_the_grpc_thread(caplog):
    def broken_sink(record: dict[str, Any]) -> None:
        raise RuntimeError("database is gone")

    translator = EventTranslator(broken_sink)
    translator(reference_events()[2])  # must not raise
    translator(object())  # not even an EngineEvent
    assert "could not translate" in caplog.text


def test_urn_name_is_the_logical_name():
    assert urn_name(VPC) == "network-vpc"
    assert urn_name("plain") == "plain"


# ---- config, outputs, errors ----

def test_config_map_writes_every_key_with_the_token_as_a_secret():
    spec = DeploymentSpec.from_config({"raypd:hfToken": HF_TOKEN, "raypd:mode": "colocated"}, "demo")
    values = config_map(spec, HF_TOKEN)
    assert values["raypd:hfToken"].secret is True and values["raypd:hfToken"].value == HF_TOKEN
    assert all(not v.secret for k, v in values.items() if k != "raypd:hfToken")
    assert values["raypd:mode"].value == "colocated"
    model = json.loads(values["raypd:model"].value)
    assert model["source"] == "Qwen/Qwen3.5-9B"
    # What the program reads back is the same spec (Pulumi hands object config over as JSON text).
    round_trip = DeploymentSpec.from_config({k: v.value for k, v in values.items()}, "demo")
    assert round_trip.public_config() == spec.public_config()


def test_write_config_replaces_the_stack_config_in_one_call():
    calls: list[tuple[dict[str, Any], bool]] = []

    class FakeStack:
        def set_all_config(self, config: dict[str, Any], *, path: bool = False) -> None:
            calls.append((config, path))

    spec = DeploymentSpec.from_config({}, "demo")
    write_config(FakeStack(), spec, None)
    (config, path), = calls
    assert path is False
    assert "raypd:hfToken" not in config
    assert config["aws:region"].value == "us-east-2"


def test_outputs_mask_secrets_by_their_flag():
    outputs = {
        "kubeconfig": auto.OutputValue('{"users": [{"token": "abc"}]}', secret=True),
        "modelId": auto.OutputValue("qwen3.5-9b", secret=False),
        "topology": auto.OutputValue({"prefill": {"nodes": 1}}, secret=False),
    }
    assert masked_outputs(outputs) == {
        "kubeconfig": "[secret]", "modelId": "qwen3.5-9b", "topology": {"prefill": {"nodes": 1}},
    }


@pytest.mark.parametrize("stderr,kind,status", [
    ("error: the stack is currently locked by 1 lock(s). Either wait for the other process(es) to end",
     EngineConflict, 409),
    ("error: [409] Conflict: Another update is currently in progress.", EngineConflict, 409),
    ("error: no stack named 'demo' found", EngineNotFound, 404),
    ("error: stack 'demo' already exists", EngineConflict, 409),
    ("error: creating EKS Cluster (raypd-demo): AccessDeniedException: not authorized", OperationFailed, 500),
    ("error: incorrect passphrase", EngineUnavailable, 503),
    ('error: constructing secrets manager of type "passphrase": incorrect passphrase', EngineUnavailable, 503),
])
def test_automation_api_errors_map_to_http_answers(stderr, kind, status):
    error = create_command_error(CommandResult(stdout="", stderr=stderr, code=255))
    mapped = map_command_error(error, "demo")
    assert isinstance(mapped, kind)
    assert mapped.http_status == status
    assert "Traceback" not in mapped.message and mapped.message


def test_command_errors_are_cut_down_to_the_lines_people_need():
    stdout = "Updating (demo)\n\n    pulumi:pulumi:Stack raypd-demo running\n" * 30
    stderr = (
        "warning: something noisy\n"
        "error: update failed: creating EKS Node Group: ResourceLimitExceeded\n"
        "    with token hf_ShouldNeverShow12345\n"
    )
    message = clean_command_error(auto.CommandError(CommandResult(stdout, stderr, 255)))
    assert message.startswith("error: update failed: creating EKS Node Group")
    assert "Updating (demo)" not in message
    assert "hf_ShouldNeverShow12345" not in message


def test_command_errors_lose_the_clis_colour_markup():
    stderr = "<{%fg 1%}>error: <{%reset%}>creating EKS Cluster: ResourceInUseException<{%reset%}>\n"
    message = clean_command_error(auto.CommandError(CommandResult("", stderr, 255)))
    assert message == "error: creating EKS Cluster: ResourceInUseException"


# ---- the engine's run(), with a stand-in Stack (the CLI-free part of it) ----

class FakeStack:
    def __init__(self, fail: Exception | None = None):
        self.fail = fail
        self.cancelled = 0
        self.pending: list[dict[str, Any]] = []  # the export's pending_operations
        self.pending_after: list[dict[str, Any]] = []  # ... once an operation ran
        self.removed: list[str] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        outer = self

        class Workspace:
            def remove_stack(self, name: str) -> None:
                outer.removed.append(name)
                outer.calls.append(("remove_stack", {}))

        self.workspace = Workspace()

    def _run(self, name: str, on_event, **kwargs: Any) -> None:
        self.calls.append((name, kwargs))
        self.pending = self.pending_after or self.pending
        for event in reference_events()[:5]:
            on_event(event)
        on_event(engine_event(11, resOutputsEvent=step("create", EKS, "eks:index:Cluster")))
        on_event(reference_events()[-1])
        if self.fail:
            raise self.fail

    def up(self, on_event, **kwargs: Any) -> auto.UpResult:
        self._run("up", on_event, **kwargs)
        summary = auto.UpdateSummary(
            kind="update", start_time=datetime(2025, 1, 1), message="", environment={},
            config={"raypd:hfToken": {"value": HF_TOKEN, "secret": True}}, result="succeeded",
            version=3, resource_changes={"create": 3},
        )
        outputs = {"kubeconfig": auto.OutputValue("apiVersion: v1", True),
                   "modelId": auto.OutputValue("qwen3.5-9b", False)}
        return auto.UpResult("", "", summary, outputs)

    def preview(self, on_event, **kwargs: Any) -> auto.PreviewResult:
        self._run("preview", on_event, **kwargs)
        return auto.PreviewResult("", "", {"create": 3})

    def destroy(self, on_event, **kwargs: Any) -> auto.DestroyResult:
        self._run("destroy", on_event, **kwargs)
        return auto.DestroyResult("", "", None)

    def cancel(self) -> None:
        self.cancelled += 1

    def export_stack(self) -> auto.Deployment:
        self.calls.append(("export", {}))
        deployment: dict[str, Any] = {"resources": [{"urn": EKS, "outputs": {"token": HF_TOKEN}}]}
        if self.pending:
            deployment["pending_operations"] = self.pending
        return auto.Deployment(version=3, deployment=deployment)

    def outputs(self) -> dict[str, auto.OutputValue]:
        if self.fail:
            raise self.fail
        return {"kubeconfig": auto.OutputValue("apiVersion: v1\nkind: Config", True),
                "modelId": auto.OutputValue("qwen3.5-9b", False)}

    def history(self, page_size: int | None = None, show_secrets: bool = True) -> list[auto.UpdateSummary]:
        self.calls.append(("history", {"page_size": page_size, "show_secrets": show_secrets}))
        return [auto.UpdateSummary(
            kind="update", start_time=datetime(2025, 1, 1, 12), message="", environment={},
            config={"raypd:hfToken": {"value": HF_TOKEN, "secret": True}}, result="failed",
            end_time=datetime(2025, 1, 1, 12, 30), version=2, resource_changes={"create": 5},
        )]


class SteppedEngine(PulumiEngine):
    """The real engine with `_select` answering a FakeStack instead of asking the CLI."""

    def __init__(self, settings: Settings, stack: FakeStack):
        super().__init__(settings, command=FakeCommand())
        self.stack = stack

    @contextmanager
    def _stack(self, stack: str, command: Any = None, keep_changes: bool = True,
               needs_settings: bool = False) -> Iterator[Any]:
        if isinstance(self.stack.fail, auto.StackNotFoundError):
            raise map_command_error(self.stack.fail, stack)
        yield self.stack


def run_job(engine: PulumiEngine, operation: str) -> tuple[Any, list[dict[str, Any]], JobContext]:
    records: list[dict[str, Any]] = []
    ctx = JobContext("job1", records.append)
    return engine.run("demo", operation, ctx), records, ctx


def test_pulumi_up_reports_progress_and_keeps_no_secret(tmp_path):
    stack = FakeStack()
    result, records, _ = run_job(SteppedEngine(settings_for(tmp_path), stack), "up")
    assert result.outputs == {"kubeconfig": "[secret]", "modelId": "qwen3.5-9b"}
    assert result.summary["changes"] == {"create": 3} and result.summary["version"] == 3
    assert HF_TOKEN not in json.dumps(result.summary) and HF_TOKEN not in json.dumps(records)
    assert {"type": "eks:index:Cluster", "name": "cluster-eks"} in result.resources
    assert records[-1]["kind"] == "summary" and records[-1]["done"] == records[-1]["total"]
    name, kwargs = stack.calls[1]
    assert stack.calls[0][0] == "export"  # pending operations are looked for first
    assert name == "up" and kwargs["show_secrets"] is False and kwargs["color"] == "never"


def test_live_outputs_hand_verify_the_kubeconfig_in_clear(tmp_path):
    outputs = SteppedEngine(settings_for(tmp_path), FakeStack()).live_outputs("demo")
    assert outputs == {"kubeconfig": "apiVersion: v1\nkind: Config", "modelId": "qwen3.5-9b"}


def test_live_outputs_of_a_locked_stack_is_a_conflict(tmp_path):
    failing = FakeStack(fail=create_command_error(
        CommandResult("", "error: the stack is currently locked by 1 lock(s)", 255)))
    with pytest.raises(EngineConflict):
        SteppedEngine(settings_for(tmp_path), failing).live_outputs("demo")


def test_pulumi_history_lists_updates_without_their_config(tmp_path):
    stack = FakeStack()
    entries = SteppedEngine(settings_for(tmp_path), stack).history("demo", limit=5)
    assert entries == [{"kind": "update", "result": "failed", "version": 2, "changes": {"create": 5},
                        "startTime": "2025-01-01T12:00:00", "endTime": "2025-01-01T12:30:00"}]
    assert stack.calls == [("history", {"page_size": 5, "show_secrets": False})]


def test_pulumi_destroy_removes_the_stack_afterwards(tmp_path):
    stack = FakeStack()
    result, _, _ = run_job(SteppedEngine(settings_for(tmp_path), stack), "destroy")
    assert stack.removed == ["demo"] and result.resources == []
    order = [name for name, _ in stack.calls if name in ("destroy", "remove_stack")]
    assert order == ["destroy", "remove_stack"]  # never forget a stack before its resources are gone


def test_pulumi_concurrent_update_fails_the_job_as_a_conflict(tmp_path):
    locked = create_command_error(CommandResult("", "error: the stack is currently locked by 1 lock(s)", 255))
    with pytest.raises(EngineConflict):
        run_job(SteppedEngine(settings_for(tmp_path), FakeStack(fail=locked)), "up")


def test_pulumi_cancel_during_an_update_ends_cancelled_without_pulumi_cancel(tmp_path):
    # The CLI is SIGINTed through its CliSession (tests/web/test_cli_process.py); `pulumi cancel`
    # would only drop the lock under a CLI that goes on creating resources.
    failure = create_command_error(CommandResult("", "error: update canceled", 1))
    stack = FakeStack(fail=failure)
    engine = SteppedEngine(settings_for(tmp_path), stack)
    records: list[dict[str, Any]] = []
    ctx = JobContext("job1", records.append)
    original = stack._run

    def cancel_midway(name: str, on_event, **kwargs: Any) -> None:
        ctx.request_cancel()  # what POST /jobs/{id}/cancel does while the update runs
        original(name, on_event, **kwargs)

    stack._run = cancel_midway  # type: ignore[method-assign]
    with pytest.raises(OperationCancelled):
        engine.run("demo", "up", ctx)
    for thread in threading.enumerate():  # a `pulumi cancel` sent in the background has had its say
        if thread.name == "raypd-pulumi-cancel":
            thread.join(PATIENCE_S)
    assert stack.cancelled == 0


def test_pulumi_destroy_that_finishes_after_a_cancel_request_is_reported_done(tmp_path):
    # File backend: `pulumi cancel` only drops the lock and the destroy runs to the end. The stack
    # is gone then, so the job must not claim it was cancelled (the deployment would stay behind).
    stack = FakeStack()
    engine = SteppedEngine(settings_for(tmp_path), stack)
    ctx = JobContext("job1", lambda record: None)
    original = stack._run

    def cancel_midway(name: str, on_event, **kwargs: Any) -> None:
        ctx.request_cancel()
        original(name, on_event, **kwargs)

    stack._run = cancel_midway  # type: ignore[method-assign]
    result = engine.run("demo", "destroy", ctx)
    assert result.resources == [] and stack.removed == ["demo"]


PENDING_EKS = {"resource": {"urn": EKS, "type": "eks:index:Cluster", "custom": True,
                             "inputs": {"token": HF_TOKEN}, "outputs": {"kubeconfig": HF_TOKEN}},
               "type": "creating"}


def test_pending_operations_keep_only_what_is_safe_to_show():
    listed = pending_from_deployment({
        "resources": [{"urn": VPC, "outputs": {"secret": HF_TOKEN}}],
        "pending_operations": [PENDING_EKS, {"resource": {"urn": VPC, "type": "aws:ec2/vpc:Vpc"},
                                             "type": "deleting"}],
    })
    assert [set(op) for op in listed] == [{"urn", "type", "name", "operation", "check"}] * 2
    assert [(op["operation"], op["name"]) for op in listed] == [("creating", "cluster-eks"),
                                                                ("deleting", "network-vpc")]
    assert listed[0]["check"].startswith("EKS console > Clusters") and "cluster-eks" in listed[0]["check"]
    assert "VPC console" in listed[1]["check"]
    assert HF_TOKEN not in json.dumps(listed)
    assert pending_from_deployment({"resources": []}) == [] and pending_from_deployment(None) == []


@pytest.mark.parametrize("operation", ["up", "destroy"])
def test_pending_operations_stop_up_and_destroy_before_the_cli_runs(tmp_path, operation):
    stack = FakeStack()
    stack.pending = [PENDING_EKS]
    with pytest.raises(PendingOperations) as raised:
        run_job(SteppedEngine(settings_for(tmp_path), stack), operation)
    assert raised.value.http_status == 409
    assert [op["name"] for op in raised.value.operations] == ["cluster-eks"]
    assert "cluster-eks" in raised.value.message and HF_TOKEN not in raised.value.message
    assert [name for name, _ in stack.calls] == ["export"] and stack.removed == []


def test_a_stack_with_pending_operations_is_never_removed(tmp_path):
    stack = FakeStack()
    stack.pending_after = [PENDING_EKS]  # the destroy itself left one behind
    with pytest.raises(PendingOperations):
        run_job(SteppedEngine(settings_for(tmp_path), stack), "destroy")
    assert stack.removed == []


def test_clear_pending_is_a_refresh_that_clears_pending_creates(tmp_path):
    stack = FakeStack()
    stack.refresh = lambda on_event, **kwargs: (  # type: ignore[attr-defined]
        stack._run("refresh", on_event, **kwargs),
        auto.RefreshResult("", "", auto.UpdateSummary(
            kind="refresh", start_time=datetime(2025, 1, 1), message="", environment={}, config={},
            result="succeeded", version=4, resource_changes={"same": 3})))[1]
    result, _, _ = run_job(SteppedEngine(settings_for(tmp_path), stack), "clear-pending")
    name, kwargs = stack.calls[0]
    assert name == "refresh" and kwargs["clear_pending_creates"] is True
    assert result.summary["kind"] == "refresh"


def test_destroy_of_a_stack_the_backend_does_not_have_is_already_done(tmp_path):
    missing = create_command_error(CommandResult("", "error: no stack named 'demo' found", 255))
    result, records, _ = run_job(SteppedEngine(settings_for(tmp_path), FakeStack(fail=missing)), "destroy")
    assert result.resources == [] and result.summary["alreadyDestroyed"] is True
    assert any("already destroyed" in r["message"] for r in records if r["kind"] == "diagnostic")
    with pytest.raises(EngineNotFound):  # any other operation on it is still a 404
        run_job(SteppedEngine(settings_for(tmp_path), FakeStack(fail=missing)), "up")


# ---- work dir, backend, passphrase ----

class FakeCommand:
    command = "pulumi"
    version = None


def test_a_start_sweeps_the_work_dirs_a_killed_server_left_and_keeps_the_young_ones(tmp_path):
    from webui.app import close_app, create_app

    settings = settings_for(tmp_path / "home")
    prepare_home(settings)
    old, young = settings.work_root / "demo.left", settings.work_root / "demo.running"
    for path in (old, young):
        path.mkdir()
        (path / "Pulumi.demo.yaml").write_text("encryptionsalt: v1:x\n")
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(old, (two_days_ago, two_days_ago))
    app = create_app(settings)
    try:
        assert not old.exists() and (young / "Pulumi.demo.yaml").is_file()
    finally:
        close_app(app)
    assert sweep_stale_work_dirs(settings.work_root / "missing") == 0


def test_each_call_gets_a_fresh_work_dir_with_the_stored_settings_and_runs_the_project_program(tmp_path):
    settings = settings_for(tmp_path / "home")
    prepare_home(settings)
    store = Store(settings.db_path)
    store.save_stack_file("demo", "encryptionsalt: v1:c2FsdA==:v1:x:y\nconfig:\n  aws:region: us-east-2\n")
    engine = PulumiEngine(settings, FakeCommand(), stack_files=store)
    seen: list[Path] = []
    with stack_work_dir(settings.work_root, "demo", store) as first:
        workspace = engine.workspace(first)
        seen.append(first)
        assert (first / "Pulumi.demo.yaml").read_text() == store.stack_file("demo")
        assert stat.S_IMODE((first / "Pulumi.demo.yaml").stat().st_mode) == 0o600
        project = yaml.safe_load((first / "Pulumi.yaml").read_text())
        (first / "Pulumi.demo.yaml").write_text("config:\n  aws:region: us-west-2\n")  # what a CLI wrote
    with pytest.raises(OperationFailed), stack_work_dir(settings.work_root, "demo", store) as second:
        seen.append(second)
        (second / "Pulumi.demo.yaml").write_text("config: {}\n")
        raise OperationFailed("the CLI failed")  # a failed call saves nothing back
    assert seen[0] != seen[1] and not any(path.exists() for path in seen)
    assert store.stack_file("demo") == "config:\n  aws:region: us-west-2\n"
    assert project["name"] == "raypd"
    assert Path(project["main"]) == settings.project_dir
    assert (Path(project["main"]) / "__main__.py").is_file()
    assert project["runtime"]["name"] == "python"
    assert Path(project["runtime"]["options"]["virtualenv"]).is_absolute()
    assert workspace.env_vars["PULUMI_BACKEND_URL"] == (settings.home / "state").as_uri()
    assert workspace.env_vars["PULUMI_CONFIG_PASSPHRASE_FILE"] == str(settings.home / "passphrase")
    assert "PULUMI_CONFIG_PASSPHRASE" not in workspace.env_vars
    store.close()


def test_outside_a_venv_the_language_host_is_not_pointed_at_the_system_prefix(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "base_prefix", sys.prefix)  # as if run by the system python
    engine = PulumiEngine(settings_for(tmp_path / "home"), FakeCommand())
    assert engine.project_settings().runtime.options == {"toolchain": "pip"}


def test_passphrase_file_is_private_and_made_once(tmp_path):
    settings = settings_for(tmp_path / "home")
    prepare_home(settings)
    path = settings.home / "passphrase"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(settings.home.stat().st_mode) == 0o700
    first = path.read_text()
    prepare_home(settings)
    assert path.read_text() == first and len(first) >= 32


def test_given_passphrase_and_backend_are_passed_through(tmp_path):
    settings = settings_for(tmp_path / "home", PULUMI_CONFIG_PASSPHRASE="team-secret",
                            PULUMI_BACKEND_URL="s3://team-bucket/raypd")
    prepare_home(settings)
    assert not (settings.home / "passphrase").exists()
    assert not (settings.home / "state").exists()
    env = pulumi_env(settings)
    assert env["PULUMI_BACKEND_URL"] == "s3://team-bucket/raypd"
    assert env["PULUMI_CONFIG_PASSPHRASE"] == "team-secret"


def test_settings_reject_unknown_engine_and_short_token(tmp_path):
    with pytest.raises(SettingsError, match="RAYPD_ENGINE"):
        Settings.from_env({"RAYPD_HOME": str(tmp_path), "RAYPD_ENGINE": "cloud"})
    with pytest.raises(SettingsError, match="RAYPD_TOKEN"):
        Settings.from_env({"RAYPD_HOME": str(tmp_path), "RAYPD_TOKEN": "short"})
    generated = Settings.from_env({"RAYPD_HOME": str(tmp_path)})
    assert generated.token_generated and len(generated.token) >= 24


# ---- CLI discovery and engine selection ----

def test_no_cli_anywhere_says_so(tmp_path):
    found = find_pulumi_cli(which=lambda _: None, home=tmp_path)
    assert not found.found and found.reason == CLI_NOT_FOUND


def test_cli_from_the_installer_home_is_found(tmp_path):
    binary = tmp_path / ".pulumi" / "bin" / "pulumi"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    made: list[Any] = []

    def make_command(**kwargs: Any) -> Any:
        made.append(kwargs)
        return FakeCommand()

    found = find_pulumi_cli(which=lambda _: None, home=tmp_path, make_command=make_command)
    assert found.found and found.where == str(binary)
    assert made == [{"root": str(tmp_path / ".pulumi")}]


def test_unusable_cli_is_reported_with_the_reason(tmp_path):
    def too_old(**kwargs: Any) -> Any:
        raise auto.InvalidVersionError("Minimum version requirement failed: 3.0.0 < 3.100.0")

    found = find_pulumi_cli(which=lambda _: "/usr/local/bin/pulumi", home=tmp_path, make_command=too_old)
    assert not found.found
    assert "not usable" in found.reason and "Minimum version" in found.reason


def test_auto_falls_back_to_offline_with_a_banner_that_says_why(tmp_path):
    settings = settings_for(tmp_path, engine="auto")
    engines = select_engines(settings, lambda: find_pulumi_cli(which=lambda _: None, home=tmp_path))
    assert engines.default.name == "offline"
    assert "Pulumi CLI not found on PATH" in engines.banner
    assert "nothing in AWS" in engines.banner
    assert "get.pulumi.com" in engines.banner


def test_auto_uses_the_automation_api_when_a_cli_exists(tmp_path):
    settings = settings_for(tmp_path, engine="auto")
    engines = select_engines(settings, lambda: find_pulumi_cli(
        which=lambda _: "/opt/pulumi/bin/pulumi", home=tmp_path, make_command=lambda **_: FakeCommand()))
    assert engines.default.name == "pulumi" and engines.banner is None
    assert set(engines.engines) == {"pulumi", "offline"}


def test_forcing_pulumi_without_a_cli_fails_at_start(tmp_path):
    settings = settings_for(tmp_path, engine="pulumi")
    with pytest.raises(SettingsError, match="Pulumi CLI not found"):
        select_engines(settings, lambda: find_pulumi_cli(which=lambda _: None, home=tmp_path))


# ---- offline engine ----

def test_offline_stack_file_marks_the_token_secret_without_its_value(tmp_path):
    settings = settings_for(tmp_path)
    spec = DeploymentSpec.from_config({"raypd:hfToken": HF_TOKEN}, "demo")
    store = Store(tmp_path / "store.db")
    OfflineEngine(settings, stack_files=store).create(spec, HF_TOKEN)
    text = store.stack_file("demo")
    assert text is not None and not (settings.workspace_dir("demo") / "Pulumi.demo.yaml").exists()
    assert HF_TOKEN not in text
    document = yaml.safe_load(text)
    assert document == stack_file_document(spec)
    assert set(document["config"]["raypd:hfToken"]) == {"secure"}


# ---- with a real CLI only ----

@pytest.mark.needs_pulumi_cli
def test_real_cli_creates_a_stack_with_an_encrypted_token(tmp_path):
    found = find_pulumi_cli()
    if not found.found:
        pytest.skip(f"needs the Pulumi CLI: {found.reason} (install: curl -fsSL https://get.pulumi.com | sh)")
    settings = settings_for(tmp_path / "home", engine="pulumi")
    prepare_home(settings)
    store = Store(settings.db_path)
    engine = PulumiEngine(settings, found.command, stack_files=store)
    spec = DeploymentSpec.from_config({"raypd:hfToken": HF_TOKEN}, "clitest")
    engine.create(spec, HF_TOKEN)
    text = store.stack_file("clitest")
    assert text is not None and HF_TOKEN not in text and "encryptionsalt" in text
    with engine._stack("clitest") as stack:
        config = stack.get_all_config()
        assert config["raypd:hfToken"].secret is True
        assert json.loads(config["raypd:model"].value)["id"] == "qwen3.5-9b"
        stack.workspace.remove_stack("clitest")
    engine.remove("clitest")
    assert store.stack_file("clitest") is None


@pytest.mark.needs_pulumi_cli
def test_real_cli_export_lists_pending_operations_and_blocks_up(tmp_path):
    """The pending-operations flow against the real CLI's own `stack export` (no cloud: the state
    is imported, as `pulumi stack import` would after a crash)."""
    found = find_pulumi_cli()
    if not found.found:
        pytest.skip(f"needs the Pulumi CLI: {found.reason} (install: curl -fsSL https://get.pulumi.com | sh)")
    settings = settings_for(tmp_path / "home", engine="pulumi")
    prepare_home(settings)
    engine = PulumiEngine(settings, found.command, stack_files=Store(settings.db_path))
    engine.create(DeploymentSpec.from_config({}, "pendtest"), None)
    with engine._stack("pendtest") as stack:
        exported = stack.export_stack()
    urn = "urn:pulumi:pendtest::raypd::eks:index:Cluster::cluster-eks"
    deployment = dict(exported.deployment or {})
    deployment["pending_operations"] = [{
        "resource": {"urn": urn, "type": "eks:index:Cluster", "custom": False,
                     "inputs": {"secret": "should-never-leave-the-export"}},
        "type": "creating",
    }]
    with engine._stack("pendtest") as stack:
        stack.import_stack(auto.Deployment(version=exported.version, deployment=deployment))
    pending = engine.pending_operations("pendtest")
    assert [(p["type"], p["name"], p["operation"]) for p in pending] == [
        ("eks:index:Cluster", "cluster-eks", "creating")]
    assert "should-never-leave-the-export" not in json.dumps(pending)
    with pytest.raises(PendingOperations):
        engine.run("pendtest", "up", JobContext("j", lambda record: None))
    with engine._stack("pendtest") as stack:
        stack.workspace.remove_stack("pendtest", force=True)
    engine.remove("pendtest")


@pytest.mark.slow
def test_the_offline_plan_subprocess_gets_only_what_python_needs(tmp_path, monkeypatch):
    import subprocess as real_subprocess

    from webui.engines import offline as offline_module
    from webui.engines.base import JobContext

    for name, value in {"RAYPD_TOKEN": "tok-123", "PULUMI_CONFIG_PASSPHRASE": "pass-123",
                        "AWS_SECRET_ACCESS_KEY": "aws-123", "HF_TOKEN": "hf_123", "SOME_NEW_SECRET": "x"}.items():
        monkeypatch.setenv(name, value)
    seen: list[dict[str, str]] = []
    real_popen = real_subprocess.Popen

    def popen(*args: Any, **kwargs: Any) -> Any:
        seen.append(dict(kwargs["env"]))
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(offline_module.subprocess, "Popen", popen)
    engine = OfflineEngine(settings_for(tmp_path), stack_files=Store(tmp_path / "store.db"))
    engine.create(DeploymentSpec.from_config({}, "demo"), None)
    result = engine.run("demo", "preview", JobContext("j", lambda record: None))
    assert result.resources  # the plan still ran
    assert seen and set(seen[0]) <= {"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ",
                                     "PYTHONPATH", "VIRTUAL_ENV", "SYSTEMROOT"}
    assert "PATH" in seen[0]
