"""The job state machine: its status words and the one table of which status may follow which.

(A check's outcome is `components.checks.CheckStatus`, beside the report it belongs to.)
The words are an API contract (job JSON, SSE "end" records, the audit log), so the enums are `str`
enums whose values never change: `JobStatus.RUNNING == "running"`, and a row read back compares
equal to its member. The store enforces `TRANSITIONS` on every write of a job's status, so no code
path (a late worker, a second server, a cancel racing a start) can move a job backwards.
"""

from __future__ import annotations

from enum import Enum
from typing import Iterable


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

    def __str__(self) -> str:
        return self.value


# The operations an engine runs, and the checks the web app runs itself (one list each, from above).
CHECK_OPERATIONS: tuple[str, ...] = (Operation.PREFLIGHT.value, Operation.VERIFY.value)
ENGINE_OPERATIONS: tuple[str, ...] = tuple(op.value for op in Operation
                                          if op.value not in CHECK_OPERATIONS and op is not Operation.BENCHMARK)
# Jobs that only look at what exists: whatever their outcome, the deployment stays as it was.
OBSERVING_OPERATIONS: tuple[str, ...] = (*CHECK_OPERATIONS, Operation.BENCHMARK.value)

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
