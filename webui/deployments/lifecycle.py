"""A deployment's status: its closed vocabulary, and the one table of where each job leaves it.

The words are Contract 4's (the API and the pages show them, scripts compare them) and have not
changed since the first store version, so no stored value needs migrating: `parse` reads every one
raypd ever wrote, and anything else (a row edited by hand) reads as unknown, never as a guess by
substring. Job statuses and operations are webui.jobstate's enums.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional

from webui.jobstate import ACTIVE, OBSERVING_OPERATIONS, JobStatus, Operation  # checks, benchmarks: they only look


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
