"""Automation API engine: the project's own `__main__.py`, driven through `LocalWorkspace`.

Each call gets a fresh work dir under RAYPD_HOME/work/ (webui/engines/workdir.py) holding a
generated Pulumi.yaml whose `main:` is the absolute project directory, so the CLI runs exactly the
program `pulumi up` runs, with the project's virtualenv, and the stack's settings file (config
and encrypted secrets) from the store, where every server sharing it finds it; what the CLI writes
to that file goes back to the store, and the dir is removed after the call (with the file the
CLI's `stack select` writes for it under PULUMI_HOME/workspaces). Nothing lands in the
checkout, and LocalWorkspace is always given the `work_dir` (without one it leaks a temp dir per call).

Team mode (several servers on one store) needs the state and the secrets shared too: a Pulumi
backend every server reaches (PULUMI_BACKEND_URL=s3://...) and one passphrase
(PULUMI_CONFIG_PASSPHRASE[_FILE], the same on every server) or a cloud secrets provider
(RAYPD_SECRETS_PROVIDER=awskms://...), which `select_engines` insists on. A server that cannot
decrypt (another passphrase) fails the job with the CLI's "incorrect passphrase", and since a
failed call saves nothing back, the stored settings stay as they were.

Config is written from the validated spec: every Contract 1 key, structured values as JSON text
(Pulumi hands object config to programs as JSON strings anyway, and `DeploymentSpec.from_config`
reads both), `raypd:hfToken` as a secret. Results never ask for plaintext secrets
(`show_secrets=False`), and outputs are masked by `OutputValue.secret`.

Cancel: each job runs its CLI calls through a `CliSession` (cli_process.py) that keeps the process,
so a cancel sends SIGINT (the CLI's graceful cancel) and the job, which is the deployment's lock,
ends only after the CLI exited. `pulumi cancel` is used only to clear a stale lock when no CLI of
ours is alive (`release`, after an interruption).

Pending operations (a CLI killed mid-step leaves them in the state; the next `up` would create
those resources again) block up, destroy and stack removal with `PendingOperations` until a person
checked them in the AWS console and ran `clear-pending`. Only URN, type, name and operation are read
from the export, which otherwise holds plaintext secrets.

Needs the Pulumi CLI; `find_pulumi_cli` (pulumi_cli.py) says whether there is one and, if not, why.
The pure parts (config written, outputs masked, errors mapped, pending operations read) are in
pulumi_io.py.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from pulumi import automation as auto

from components.config.spec import DeploymentSpec
from webui.engines.base import (
    EngineError,
    EngineNotFound,
    EngineUnavailable,
    JobContext,
    OperationCancelled,
    OperationFailed,
    OperationResult,
    PendingOperations,
)
from webui.engines.cli_process import CliSession, cli_alive
from webui.engines.events import EventTranslator, expected_total_from
from webui.engines.pulumi_cli import forget_workspace
from webui.engines.pulumi_io import (
    map_command_error,
    masked_outputs,
    pending_from_deployment,
    update_summary,
    write_config,
)
from webui.engines.workdir import StackFiles, UsesStackFiles, stack_file_name, stack_work_dir
from webui.redact import redact
from webui.settings import Settings, pulumi_env

logger = logging.getLogger(__name__)

PROJECT_NAME = "raypd"
# What this engine runs; "clear-pending" is a refresh that drops pending creates (see run()).
ENGINE_OPERATIONS = ("preview", "up", "refresh", "destroy", "clear-pending")
# App shutdown: how long a cancelled CLI gets to finish its in-flight steps before the second
# SIGINT (terminate), and how long after that before SIGKILL.
SHUTDOWN_GRACE_SECONDS = 60.0
TERMINATE_GRACE_SECONDS = 10.0


def _in_background(call: Callable[[], Any], what: str) -> threading.Thread:
    """Run a CLI call off the request thread; log (never raise) how it went."""

    def run() -> None:
        try:
            call()
        except (EngineError, auto.CommandError) as exc:
            logger.info("%s: %s", what, redact(getattr(exc, "message", None) or str(exc)))
        except Exception:  # noqa: BLE001 - a background thread has nobody to raise to
            logger.exception("%s failed", what)

    thread = threading.Thread(target=run, name="raypd-pulumi-cancel", daemon=True)
    thread.start()
    return thread


# ---- the engine ----

class PulumiEngine(UsesStackFiles):
    name = "pulumi"
    real = True
    operations = ENGINE_OPERATIONS

    def __init__(self, settings: Settings, command: Any, stack_files: Optional[StackFiles] = None):
        self.settings = settings
        self.command = command
        self._stack_files = stack_files
        # Bounds of `stop_processes` (app shutdown); tests shorten them.
        self.shutdown_grace = SHUTDOWN_GRACE_SECONDS
        self.terminate_grace = TERMINATE_GRACE_SECONDS
        self._sessions_lock = threading.Lock()
        self._sessions: set[CliSession] = set()

    def project_settings(self) -> auto.ProjectSettings:
        options = {"toolchain": "pip"}
        if self.settings.virtualenv is not None:
            options["virtualenv"] = str(self.settings.virtualenv)
        return auto.ProjectSettings(
            name=PROJECT_NAME,
            runtime=auto.ProjectRuntimeInfo(name="python", options=options),
            main=str(self.settings.project_dir),
            description="raypd (generated by the web app; the program is main:)",
        )

    def workspace(self, work_dir: Path, command: Any = None) -> auto.LocalWorkspace:
        return auto.LocalWorkspace(
            work_dir=str(work_dir),
            project_settings=self.project_settings(),
            env_vars=pulumi_env(self.settings),
            secrets_provider=self.settings.secrets_provider,
            pulumi_command=command or self.command,
        )

    @contextmanager
    def _work_dir(self, stack: str, *, start_empty: bool = False, keep_changes: bool = True) -> Iterator[Path]:
        """A fresh work dir for one call (webui/engines/workdir.py); when it goes, so does the
        bookkeeping file the CLI's `stack select`/`stack init` wrote for it under PULUMI_HOME."""
        with stack_work_dir(self.settings.work_root, stack, self.stack_files,
                            start_empty=start_empty, keep_changes=keep_changes) as work_dir:
            try:
                yield work_dir
            finally:
                forget_workspace(work_dir, PROJECT_NAME, {**os.environ, **pulumi_env(self.settings)})

    @contextmanager
    def _stack(self, stack: str, command: Any = None, keep_changes: bool = True,
               needs_settings: bool = False) -> Iterator[auto.Stack]:
        """The selected stack in a fresh work dir holding its stored settings file.

        `needs_settings`: the call reads or writes the stack's config (configure, every operation),
        so a stack whose settings file is not in the store is refused once it is known to exist
        (a destroy of a stack the backend lost is still "already destroyed"). Without the file the
        CLI would run with no config at all, or write one holding only the keys being set."""
        with self._work_dir(stack, keep_changes=keep_changes) as work_dir:
            try:
                selected = auto.Stack.select(stack, self.workspace(work_dir, command))
            except auto.CommandError as exc:
                raise map_command_error(exc, stack) from None
            if needs_settings and not (work_dir / stack_file_name(stack)).exists():
                raise EngineUnavailable(
                    f"the Pulumi settings file of {stack} is not in the shared store (an older raypd "
                    "kept it under the RAYPD_HOME of the server that created it): start that server "
                    "once with this raypd to move it in, then try again (nothing was run)")
            yield selected

    def create(self, spec: DeploymentSpec, hf_token: Optional[str]) -> None:
        """Create the stack in the backend and keep its settings file (salt, encrypted token) in the
        store. A settings file a failed earlier create left in the store is not read."""
        with self._work_dir(spec.stack, start_empty=True) as work_dir:
            workspace = self.workspace(work_dir)
            try:
                stack = auto.Stack.create(spec.stack, workspace)
            except auto.CommandError as exc:
                raise map_command_error(exc, spec.stack) from None
            try:
                write_config(stack, spec, hf_token)
            except auto.CommandError as exc:
                # Half a stack (no config) would block the name: take back what this call made.
                try:
                    workspace.remove_stack(spec.stack)
                except auto.CommandError:
                    logger.warning("could not remove the half-created stack %s", spec.stack)
                raise map_command_error(exc, spec.stack) from None

    def configure(self, spec: DeploymentSpec, hf_token: Optional[str], removed: list[str]) -> None:
        """Write a changed config (no cloud action): every key of the spec, the token only when a
        new one came (else the stack keeps its encrypted one), and keys reset to their defaults
        removed, so the program falls back to its own defaults for them."""
        with self._stack(spec.stack, needs_settings=True) as stack:
            try:
                write_config(stack, spec, hf_token)
                if removed:
                    stack.remove_all_config(list(removed), path=False)
            except auto.CommandError as exc:
                raise map_command_error(exc, spec.stack) from None

    # ---- operations ----

    def run(
        self, stack: str, operation: str, ctx: JobContext,
        known_resources: Optional[list[dict[str, Any]]] = None,
        deployed_plan: Optional[dict[str, Any]] = None,
    ) -> OperationResult:
        """Run one operation; a cancel SIGINTs the CLI and this returns only after it exited.

        `deployed_plan` is not needed here: Pulumi's preview compares with the real state."""
        del deployed_plan
        if operation not in ENGINE_OPERATIONS:
            raise OperationFailed(f"unknown operation {operation}")
        session = self._open_session(stack)
        try:
            ctx.on_cancel(session.interrupt)
            if ctx.cancelled:
                raise OperationCancelled()  # cancelled before anything started: no CLI runs
            return self._run(stack, operation, ctx, session, known_resources)
        except auto.CommandError as exc:
            if session.died_by_signal is not None:
                self._after_a_killed_cli(stack, ctx, session.died_by_signal)
            if ctx.cancelled or session.cancelled:
                raise OperationCancelled() from None
            if session.died_by_signal is not None:
                raise OperationFailed(
                    f"the Pulumi CLI was killed ({_signal_name(session.died_by_signal)}) during "
                    f"{operation}; steps it had in flight may be left as pending operations"
                ) from None
            raise map_command_error(exc, stack) from None
        finally:
            self._close_session(session)

    def _after_a_killed_cli(self, stack: str, ctx: JobContext, signum: int) -> None:
        """A CLI killed by a signal leaves its lock: ours was the only CLI on the stack (the job is
        the lock), so the lock is stale and `pulumi cancel` drops it. Pending operations stay."""
        ctx.emit({"kind": "diagnostic", "severity": "warning", "message": (
            f"the Pulumi CLI was killed ({_signal_name(signum)}); releasing the lock it left. "
            "Resources it was changing may be pending operations: the next up or destroy lists them"
        )})
        try:
            with self._stack(stack, keep_changes=False) as selected:
                selected.cancel()
        except (EngineError, auto.CommandError) as exc:
            logger.warning("could not release the lock of %s: %s", stack,
                           redact(getattr(exc, "message", None) or str(exc)))

    def _run(
        self, stack: str, operation: str, ctx: JobContext, session: CliSession,
        known_resources: Optional[list[dict[str, Any]]],
    ) -> OperationResult:
        translator = EventTranslator(ctx.emit, expected_total_from(known_resources),
                                     cancel_requested=lambda: ctx.cancelled)
        try:
            with self._stack(stack, session, needs_settings=True) as selected:
                return self._operate(selected, stack, operation, ctx, translator)
        except EngineNotFound:
            if operation == "destroy":
                return _already_destroyed(stack, ctx)
            raise

    def _operate(self, selected: auto.Stack, stack: str, operation: str, ctx: JobContext,
                 translator: EventTranslator) -> OperationResult:
        if operation == "preview":
            preview = selected.preview(on_event=translator, color="never")
            steps = translator.steps()
            # The service says what the steps mean (webui.change, one table for both engines).
            return OperationResult(summary={
                "changes": dict(preview.change_summary or {}),
                "steps": [step for step in steps if step["op"] != "same"],
            })
        if operation == "up":
            self._refuse_pending(selected, stack)
            up = selected.up(on_event=translator, color="never", show_secrets=False)
            return OperationResult(
                outputs=masked_outputs(up.outputs), resources=translator.resources(),
                summary=update_summary(up.summary),
            )
        if operation in ("refresh", "clear-pending"):
            # clear-pending: `refresh --clear-pending-creates`. The CLI drops pending creates from
            # the state first; the refresh's new checkpoint then keeps no pending update, delete
            # or read either (only creates are carried over between checkpoints).
            refresh = selected.refresh(
                on_event=translator, color="never", show_secrets=False,
                clear_pending_creates=True if operation == "clear-pending" else None,
            )
            return OperationResult(
                outputs=masked_outputs(selected.outputs()), resources=translator.resources(),
                summary=update_summary(refresh.summary),
            )
        # destroy
        self._refuse_pending(selected, stack)
        try:
            destroy = selected.destroy(on_event=translator, color="never", show_secrets=False)
        except auto.StackNotFoundError:
            return _already_destroyed(stack, ctx)
        self._refuse_pending(selected, stack)  # never remove a stack while any remain
        try:
            selected.workspace.remove_stack(stack)
        except auto.StackNotFoundError:
            pass
        # Finished although a cancel may have been asked for (it came after the last step): the
        # stack is gone, so the job must not claim it was cancelled; the runner notes the late cancel.
        return OperationResult(outputs=None, resources=[], summary=update_summary(destroy.summary))

    # ---- pending operations ----

    def pending_operations(self, stack: Any) -> list[dict[str, str]]:
        """[{urn, type, name, operation, check}] from the stack's state; nothing else is kept.

        `stack` is a stack name or a selected `auto.Stack`. `stack export` answers with plaintext
        secrets: the document is read here and dropped; only these five fields leave.
        """
        if isinstance(stack, str):
            with self._stack(stack, keep_changes=False) as selected:
                return self.pending_operations(selected)
        try:
            exported = stack.export_stack()
        except auto.CommandError as exc:
            raise map_command_error(exc, getattr(stack, "name", "?")) from None
        return pending_from_deployment(getattr(exported, "deployment", None))

    def _refuse_pending(self, selected: Any, stack: str) -> None:
        operations = self.pending_operations(selected)
        if operations:
            raise PendingOperations(operations)

    # ---- CLI processes ----

    def _open_session(self, stack: str) -> CliSession:
        pid_dir = self.settings.cli_dir(stack)
        pid_dir.mkdir(parents=True, exist_ok=True)
        session = CliSession(self.command, label=stack, pid_dir=pid_dir)
        with self._sessions_lock:
            self._sessions.add(session)
        return session

    def _close_session(self, session: CliSession) -> None:
        with self._sessions_lock:
            self._sessions.discard(session)

    def _live_session(self, stack: str) -> bool:
        with self._sessions_lock:
            return any(s.label == stack and s.running for s in self._sessions)

    def stop_processes(self) -> list[str]:
        """App shutdown: SIGINT every CLI this engine runs and wait, bounded.

        Each CLI gets `shutdown_grace` seconds (60 by default) to finish its in-flight steps and
        exit. One still running then gets a second SIGINT (the CLI's terminate: in-flight steps
        stay as pending operations, which the next up/destroy reports), and after
        `terminate_grace` more seconds (10) SIGKILL, logged as an error. Returns the stacks whose
        CLI needed more than the grace period.
        """
        with self._sessions_lock:
            sessions = list(self._sessions)
        running = [session.label for session in sessions if session.running]
        if running:
            logger.warning("stopping: waiting up to %.0f s for the Pulumi CLI of %s to finish its "
                           "in-flight steps (cancelled)", self.shutdown_grace, ", ".join(running))
        for session in sessions:
            session.interrupt()
        deadline = time.monotonic() + self.shutdown_grace
        for session in sessions:
            session.wait_idle(max(0.0, deadline - time.monotonic()))
        overdue = [session for session in sessions if session.running]
        for session in overdue:
            logger.warning("pulumi %s: still running %.0f s after the cancel; terminating it "
                           "(its in-flight steps stay as pending operations)",
                           session.label, self.shutdown_grace)
            session.terminate()
        deadline = time.monotonic() + self.terminate_grace
        for session in overdue:
            if not session.wait_idle(max(0.0, deadline - time.monotonic())):
                session.kill()
                session.wait_idle(5.0)
        return [session.label for session in overdue]

    # ---- reads and bookkeeping ----

    def live_outputs(self, stack: str) -> dict[str, Any]:
        """The stack outputs WITH secrets (the kubeconfig verify needs), for the caller to use
        at once and drop: never stored, never returned by the API (`stack output --show-secrets`)."""
        with self._stack(stack, keep_changes=False) as selected:
            try:
                outputs = selected.outputs()
            except auto.CommandError as exc:
                raise map_command_error(exc, stack) from None
        return {key: getattr(output, "value", output) for key, output in outputs.items()}

    def history(self, stack: str, limit: int = 20) -> list[dict[str, Any]]:
        """Pulumi's own update history (kind, result, times, changes), secrets never shown."""
        with self._stack(stack, keep_changes=False) as selected:
            try:
                entries = selected.history(page_size=limit, show_secrets=False)
            except auto.CommandError as exc:
                raise map_command_error(exc, stack) from None
        return [
            {
                **update_summary(entry),
                "startTime": entry.start_time.isoformat() if entry.start_time else None,
                "endTime": entry.end_time.isoformat() if entry.end_time else None,
            }
            for entry in entries
        ]

    def remove(self, stack: str) -> None:
        """The stack is gone from the backend: forget its settings file and this server's pid dir."""
        self.stack_files.delete_stack_file(stack)
        shutil.rmtree(self.settings.cli_dir(stack), ignore_errors=True)
        shutil.rmtree(self.settings.workspace_dir(stack), ignore_errors=True)  # an older raypd's

    def release(self, stack: str) -> Optional[threading.Thread]:
        """`pulumi cancel` after an interruption, to drop a lock the dead update left behind.

        Only when no CLI of ours runs on the stack (in this process, or one that outlived the
        previous server): removing the lock under a live CLI would let a second update run beside it.
        """
        pid = cli_alive(self.settings.cli_dir(stack))
        if pid is not None or self._live_session(stack):
            logger.warning("not releasing the lock of %s: its Pulumi CLI%s is still running",
                           stack, f" (pid {pid})" if pid else "")
            return None

        def cancel() -> None:
            with self._stack(stack, keep_changes=False) as selected:
                selected.cancel()

        return _in_background(cancel, f"pulumi cancel {stack}")


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _already_destroyed(stack: str, ctx: JobContext) -> OperationResult:
    """Destroy of a stack the backend no longer has: nothing is left to destroy through Pulumi."""
    ctx.emit({"kind": "diagnostic", "severity": "warning", "message": (
        f"the Pulumi backend has no stack named {stack} (its state is gone): treating it as "
        "already destroyed. Nothing was deleted by this run; if resources of this deployment "
        "still exist in AWS, delete them in the AWS console"
    )})
    return OperationResult(outputs=None, resources=[], summary={
        "changes": {}, "result": "succeeded", "alreadyDestroyed": True,
    })
