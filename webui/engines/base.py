"""The engine interface, its errors, and the job context engines report progress through.

Both engines speak the same progress-record vocabulary (plain dicts, persisted and streamed as-is):

    {"kind": "resource", "state": "started"|"finished"|"failed", "op": "create", "type": "...",
     "name": "...", "done": 3, "total": 40, "message": "..."}
    {"kind": "diagnostic", "severity": "info"|"warning"|"error", "message": "..."}
    {"kind": "summary", "changes": {"create": 40}, "message": "..."}
    {"kind": "status", "status": "running", "message": "..."}        (written by the job runner)
    {"kind": "end", "status": "succeeded", "error": null, ...}        (written by the job runner)

so the pages and the SSE stream do not care which engine ran.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

from components.config.spec import DeploymentSpec
from webui.deployments.lifecycle import ENGINE_OPERATIONS

logger = logging.getLogger(__name__)

OPERATIONS = ENGINE_OPERATIONS  # preview, up, refresh, destroy, clear-pending
OFFLINE_NOTICE = "offline plan: nothing was created in AWS"


class EngineError(Exception):
    """An engine call that cannot be done; `http_status` is what the API answers."""

    http_status = 500

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class EngineConflict(EngineError):
    """Another update holds the stack (Pulumi's ConcurrentUpdateError, or it already exists)."""

    http_status = 409


class EngineNotFound(EngineError):
    """The backend has no such stack (Pulumi's StackNotFoundError)."""

    http_status = 404


class EngineUnavailable(EngineError):
    """This deployment's engine cannot run here (e.g. a real stack, but no Pulumi CLI now)."""

    http_status = 503


class OperationFailed(EngineError):
    """The operation ran and failed; the message is cleaned for people (no traceback, no secret)."""

    http_status = 500


class PendingOperations(EngineError):
    """The state holds operations a crashed update left pending: resources that may exist in AWS
    with no record. Up, destroy and stack removal stop until a person checked them and cleared
    them (`clear-pending`, a refresh with clear_pending_creates)."""

    http_status = 409

    def __init__(self, operations: list[dict[str, Any]]):
        self.operations = list(operations)
        listed = "; ".join(f"{op.get('operation')} {op.get('type')} {op.get('name')}" for op in self.operations)
        super().__init__(
            f"{len(self.operations)} pending operation(s) left by an interrupted update: {listed}. "
            "Check these resources in the AWS console, then clear the pending operations"
        )


class OperationCancelled(Exception):
    """Raised inside a job after a cancel request stopped the engine."""


@dataclass
class OperationResult:
    outputs: Optional[dict[str, Any]] = None  # secrets already masked
    resources: Optional[list[dict[str, Any]]] = None  # [{"type", "name", "dependsOn"?}]
    summary: dict[str, Any] = field(default_factory=dict)  # e.g. {"changes": {"create": 40}}
    # Offline `up`: the plan it made (Contract 2, secrets masked). The service keeps it in the store
    # with the deployed config; a later preview gets it back as `deployed_plan`.
    plan: Optional[dict[str, Any]] = None


class JobContext:
    """What an engine gets while a job runs: emit progress, learn about and react to cancel.

    `emit` never raises: progress reporting must not be able to fail an operation, and the
    Automation API calls `on_event` on a gRPC thread that swallows exceptions anyway.
    """

    def __init__(self, job_id: str, sink: Callable[[dict[str, Any]], None]):
        self.job_id = job_id
        self._sink = sink
        self._cancel = threading.Event()
        self._cancel_hooks: list[Callable[[], object]] = []
        self._lock = threading.Lock()
        # What the job found along the way (check reports), kept whether or not it succeeds:
        # a launch refused by its preflight must still show the report that refused it.
        self.findings: dict[str, Any] = {}
        self._decorators: list[Callable[[dict[str, Any]], dict[str, Any]]] = []
        # Set when the job store could not record this job's progress (a full disk, a dead
        # database): the work is stopped and the job ends failed with this reason.
        self.storage_error: Optional[str] = None

    def storage_failed(self, reason: str) -> None:
        if self.storage_error is None:
            self.storage_error = reason
            self.request_cancel()

    def decorate(self, decorator: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """Let the service add to every record on its way out (an ETA), whichever engine emits."""
        self._decorators.append(decorator)

    def emit(self, record: dict[str, Any]) -> None:
        try:
            for decorator in self._decorators:
                record = decorator(record)
            self._sink(record)
        except Exception:  # noqa: BLE001 - see class docstring
            logger.exception("could not record a progress event for job %s", self.job_id)

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def on_cancel(self, hook: Callable[[], object]) -> None:
        """Register how to stop the running work (kill a subprocess, cancel a Pulumi update)."""
        with self._lock:
            run_now = self._cancel.is_set()
            if not run_now:
                self._cancel_hooks.append(hook)
        if run_now:
            _call_quietly(hook)

    def request_cancel(self) -> None:
        with self._lock:
            self._cancel.set()
            hooks, self._cancel_hooks = self._cancel_hooks, []
        for hook in hooks:
            _call_quietly(hook)


def _call_quietly(hook: Callable[[], object]) -> None:
    try:
        hook()
    except Exception:  # noqa: BLE001 - cancelling is best effort; the job still ends as cancelled
        logger.exception("cancel hook failed")


class Engine(Protocol):
    name: str  # "offline" | "pulumi"
    real: bool  # True when operations touch the cloud

    def create(self, spec: DeploymentSpec, hf_token: Optional[str]) -> None:
        """Create the stack and write its config (no cloud action)."""

    def run(
        self, stack: str, operation: str, ctx: JobContext,
        known_resources: Optional[list[dict[str, Any]]] = None,
        deployed_plan: Optional[dict[str, Any]] = None,
    ) -> OperationResult:
        """Run one operation; raise OperationFailed / OperationCancelled / EngineError.

        `deployed_plan`: the plan of the last successful up, as the store keeps it (offline engine:
        what a preview compares the new plan with; the real engine's preview asks Pulumi instead).
        """

    def configure(self, spec: DeploymentSpec, hf_token: Optional[str], removed: list[str]) -> None:
        """Write a changed config to the stack (no cloud action). `hf_token` None keeps the token
        the stack has; `removed` are Contract 1 keys to drop (reset to their defaults)."""

    def remove(self, stack: str) -> None:
        """Forget the stack after a successful destroy (stack record, work dir)."""

    def release(self, stack: str) -> None:
        """Release a lock left by an interrupted update (best effort)."""

    def live_outputs(self, stack: str) -> Optional[dict[str, Any]]:
        """Stack outputs with secrets in plain text (for verify), or None where nothing runs."""

    def pending_operations(self, stack: str) -> list[dict[str, Any]]:
        """Operations an interrupted update left pending: [{urn, type, name, operation, check}]."""


def resource_record(
    state: str, op: str, type_: str, name: str, done: int, total: int, message: str,
) -> dict[str, Any]:
    return {
        "kind": "resource", "state": state, "op": op, "type": type_, "name": name,
        "done": done, "total": total, "message": message,
    }
