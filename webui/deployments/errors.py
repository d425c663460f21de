"""What the deployment operations refuse with: no such deployment or job, a taken name or a busy
deployment, and a launch its preflight stopped. Views map each to its status code and wording."""

from __future__ import annotations

from typing import Optional

from components.config.checks import Report
from webui.engines.base import EngineError
from webui.jobs import Busy


class NotFound(Exception):
    """No deployment or job by that name/id."""


class Conflict(Exception):
    """The name is taken, or another operation runs; `job` is the running job's id when known."""

    def __init__(self, message: str, job: Optional[str] = None, field: str = "name"):
        super().__init__(message)
        self.message = message
        self.job = job
        self.field = field


def busy_conflict(name: str, busy: Busy, advice: str) -> Conflict:
    """The 409 for a deployment whose job is still running: one wording, the job named."""
    return Conflict(f"{name} is busy: job {busy.job_id} is still running; {advice}",
                    job=busy.job_id, field="job")


# The deployment page's box that deploys despite a failed preflight (beside each Deploy button); the
# refusal below names it, so the words live once, here.
FORCE_LABEL = "Deploy anyway (the preflight failed)"


class PreflightBlocked(EngineError):
    """A launch stopped before any cloud action because a preflight check failed."""

    http_status = 409

    def __init__(self, report: Report):
        ids = ", ".join(check.id for check in report.failed)
        super().__init__(
            f"preflight failed ({ids}): nothing was launched. Fix what the report says, or deploy "
            f"anyway (\"force\": true in the API; on the deployment page, tick “{FORCE_LABEL}” beside "
            "Deploy)"
        )
