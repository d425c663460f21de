"""The status vocabularies and the tables over them: a job's, and a deployment's.

Jobs: the status words and the one table of which status may follow which. (A check's outcome is
`components.config.checks.CheckStatus`, beside the report it belongs to.) The words are an API contract
(job JSON, SSE "end" records, the audit log), so the enums are `str` enums whose values never
change: `JobStatus.RUNNING == "running"`, and a row read back compares equal to its member. The
store enforces `TRANSITIONS` on every write of a job's status, so no code path (a late worker, a
second server, a cancel racing a start) can move a job backwards.

Deployments: a closed vocabulary, and the one table of where each job leaves one (`settle`). The
words are Contract 4's (the API and the pages show them, scripts compare them) and have not changed
since the first store version, so no stored value needs migrating: `parse` reads every one raypd
ever wrote, and anything else (a row edited by hand) reads as unknown, never as a guess by substring.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Iterable, Optional


class JobStatus(str, Enum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"

    def __str__(self) -> str:  # f-strings and logs show the word, not "JobStatus.RUNNING"
        return self.value


class Operation(str, Enum):
    """What a job does: the engine operations, the two checks and a benchmark run."""

    PREVIEW = "preview"
    UP = "up"
    REFRESH = "refresh"
    DESTROY = "destroy"
    CLEAR_PENDING = "clear-pending"
    PREFLIGHT = "preflight"
    VERIFY = "verify"
    BENCHMARK = "benchmark"
    RESILIENCE = "resilience"
    CONFORMANCE = "conformance"  # serve.conformance against the endpoint (webui/conformance_runs.py)

    def __str__(self) -> str:
        return self.value


# The operations an engine runs, and the checks the web app runs itself (one list each, from above).
CHECK_OPERATIONS: tuple[str, ...] = (Operation.PREFLIGHT.value, Operation.VERIFY.value)
ENGINE_OPERATIONS: tuple[str, ...] = tuple(op.value for op in Operation
                                          if op.value not in CHECK_OPERATIONS
                                          and op not in (Operation.BENCHMARK, Operation.RESILIENCE,
                                                         Operation.CONFORMANCE))
# Jobs that only look at what exists: whatever their outcome, the deployment stays as it was.
# (A resilience run deletes a pod or drains a node, but KubeRay replaces it: what the stack is stays.)
OBSERVING_OPERATIONS: tuple[str, ...] = (*CHECK_OPERATIONS, Operation.BENCHMARK.value, Operation.RESILIENCE.value,
                                         Operation.CONFORMANCE.value)

# Which status may follow which. "interrupted" is a job a stopped server left behind: it is not
# over for the user until closed (cancelled), because the stack's lock may still be held.
TRANSITIONS: dict[JobStatus, frozenset[JobStatus]] = {
    JobStatus.QUEUED: frozenset({JobStatus.RUNNING, JobStatus.CANCELLED, JobStatus.FAILED,
                                 JobStatus.INTERRUPTED}),
    JobStatus.RUNNING: frozenset({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED,
                                  JobStatus.INTERRUPTED}),
    JobStatus.INTERRUPTED: frozenset({JobStatus.CANCELLED}),
    JobStatus.SUCCEEDED: frozenset(),
    JobStatus.FAILED: frozenset(),
    JobStatus.CANCELLED: frozenset(),
}
INITIAL = JobStatus.QUEUED
# Holding the deployment's lock: at most one such job per deployment (a unique index says so).
ACTIVE: tuple[JobStatus, ...] = (JobStatus.QUEUED, JobStatus.RUNNING)
# Every status that ends a job's run; each is written together with the job's "end" event.
FINAL: tuple[JobStatus, ...] = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED,
                                JobStatus.INTERRUPTED)


class IllegalTransition(ValueError):
    """A status change the table forbids: a bug in the caller, never a user's mistake."""


def predecessors(target: JobStatus | str) -> tuple[JobStatus, ...]:
    """The statuses `target` may follow, in the enum's order."""
    target = JobStatus(target)
    return tuple(status for status in JobStatus if target in TRANSITIONS[status])


def allowed_from(target: JobStatus | str, wanted: Iterable[JobStatus | str] | None = None) -> tuple[str, ...]:
    """The statuses a move to `target` may start from: all its predecessors, or the subset a caller
    asks for (`wanted`). Asking for a move the table forbids raises IllegalTransition."""
    legal = predecessors(target)
    if not legal:
        raise IllegalTransition(f"no status may become {JobStatus(target).value}")
    if wanted is None:
        return tuple(status.value for status in legal)
    chosen = tuple(JobStatus(status) for status in wanted)
    for status in chosen:
        if status not in legal:
            raise IllegalTransition(f"a job cannot go from {status.value} to {JobStatus(target).value}")
    return tuple(status.value for status in chosen)


def can_follow(current: JobStatus | str, target: JobStatus | str) -> bool:
    return JobStatus(target) in TRANSITIONS[JobStatus(current)]


# ---- a deployment's status ----

class Standing(str, Enum):
    """A status that is not about a job: what exists (or nothing yet)."""

    CREATED = "created"  # settings saved, nothing planned or deployed
    PREVIEWED = "previewed"  # previewed, never deployed
    PLANNED = "planned (offline)"  # offline up: the plan is what "deployed" means offline
    DEPLOYED = "deployed"

    def __str__(self) -> str:
        return self.value


# What exists: a preview or refresh leaves these as they were.
STANDING: tuple[str, ...] = (Standing.PLANNED.value, Standing.DEPLOYED.value)
# Shown while a job runs, per operation.
RUNNING_STATUS: dict[str, str] = {
    Operation.PREVIEW.value: "previewing", Operation.UP.value: "updating",
    Operation.REFRESH.value: "refreshing", Operation.DESTROY.value: "destroying",
    Operation.PREFLIGHT.value: "checking", Operation.VERIFY.value: "verifying",
    Operation.CLEAR_PENDING.value: "clearing pending operations", Operation.BENCHMARK.value: "benchmarking",
    Operation.RESILIENCE.value: "testing resilience",
    Operation.CONFORMANCE.value: "checking conformance",
}
# Operations that change nothing in the cloud: whatever their outcome, a failed or cancelled one
# leaves the deployment's status as it was (a deployed stack stays "deployed"; the job shows why).
READ_ONLY_OPERATIONS: tuple[str, ...] = (Operation.PREVIEW.value, Operation.REFRESH.value,
                                         Operation.CLEAR_PENDING.value)
_UNSETTLED = (JobStatus.FAILED, JobStatus.CANCELLED, JobStatus.INTERRUPTED)


@dataclass(frozen=True)
class Status:
    """A stored status read back: a standing, a job running, or how an operation's job ended."""

    text: str
    standing: Optional[Standing] = None
    operation: Optional[str] = None  # running or ended ("job" for a job row's own status)
    ended: Optional[JobStatus] = None  # FAILED / CANCELLED / INTERRUPTED ("up failed"); a job row: any final

    @property
    def tone(self) -> str:
        """The badge colour: ok | bad | busy | warn | neutral."""
        if self.standing in (Standing.PLANNED, Standing.DEPLOYED) or self.ended is JobStatus.SUCCEEDED:
            return "ok"
        if self.ended in (JobStatus.FAILED, JobStatus.INTERRUPTED):
            return "bad"
        if self.ended is JobStatus.CANCELLED:
            return "warn"
        if self.operation is not None:
            return "busy"
        return "neutral"


def ended_status(operation: str, job_status: JobStatus | str) -> str:
    """"up failed", "destroy cancelled", ...: how an operation that did not succeed left it."""
    return f"{operation} {JobStatus(job_status).value}"


def parse(text: Optional[str]) -> Status:
    """Read a stored deployment status (or a job status, which the pages show with the same badges)."""
    text = text or ""
    for standing in Standing:
        if text == standing.value:
            return Status(text, standing=standing)
    for operation, word in RUNNING_STATUS.items():
        if text == word:
            return Status(text, operation=operation)
    operation, _, ended = text.rpartition(" ")
    if operation in RUNNING_STATUS and ended in {status.value for status in _UNSETTLED}:
        return Status(text, operation=operation, ended=JobStatus(ended))
    if text in {status.value for status in JobStatus}:  # a job's own status on a job row
        job = JobStatus(text)
        return Status(text, operation="job", ended=None if job in ACTIVE else job)
    return Status(text)


def tone(text: Optional[str]) -> str:
    """The Jinja `tone` filter: a status's badge colour."""
    return parse(text).tone


@dataclass(frozen=True)
class Settlement:
    """Where a finished job leaves the deployment: its new status (None: removed), and whether what
    the job handed back (outputs, resources, the deployed record) may be recorded."""

    status: Optional[str]
    records: bool = False

    @property
    def removed(self) -> bool:
        return self.status is None


def settle(operation: str, job_status: JobStatus | str, previous: str, *, real: bool,
           blocked: bool = False, has_result: bool = True) -> Settlement:
    """The one outcome table. `previous` is the status before the job started; `blocked`: a launch
    its preflight stopped before any cloud action; `has_result`: the engine handed back a result
    (a succeeded job without one is treated as not succeeded)."""
    succeeded = JobStatus(job_status) is JobStatus.SUCCEEDED
    if operation in OBSERVING_OPERATIONS or blocked or (operation in READ_ONLY_OPERATIONS and not succeeded):
        return Settlement(previous)  # nothing that exists changed, whatever the job found
    if not succeeded or not has_result:
        return Settlement(ended_status(operation, job_status))
    if operation == Operation.DESTROY.value:
        return Settlement(None)
    if operation == Operation.UP.value:
        return Settlement((Standing.DEPLOYED if real else Standing.PLANNED).value, records=True)
    if operation == Operation.PREVIEW.value:
        return Settlement(previous if previous in STANDING else Standing.PREVIEWED.value, records=True)
    return Settlement(previous, records=True)  # refresh, clear-pending: only what is recorded changed
