"""Reads of jobs and their progress events for the views: one place between them and the store.

A view asks for "this deployment's job" rather than a row by id: a job id from a URL that belongs to
another deployment is treated as no job, here, once, instead of in every view.
"""

from __future__ import annotations

from typing import Any, Optional

from webui.store import ACTIVE_STATUSES, FINAL_STATUSES, STORE_ERRORS, Store

# What views compare job statuses with, and the store's failures the event stream rides out: the
# store's own, handed on so no view imports the store.
__all__ = ["ACTIVE_STATUSES", "FINAL_STATUSES", "STORE_ERRORS", "Reads"]


class Reads:
    def __init__(self, store: Store):
        self._store = store

    def job(self, job_id: str) -> Optional[dict[str, Any]]:
        return self._store.get_job(job_id) if job_id else None

    def job_of(self, deployment: str, job_id: Optional[str]) -> Optional[dict[str, Any]]:
        """The job with this id if it is one of `deployment`'s, else None."""
        job = self.job(job_id or "")
        return job if job is not None and job["deployment"] == deployment else None

    def exists(self, deployment: str) -> bool:
        return self._store.get_deployment(deployment) is not None

    def events_after(self, job_id: str, after: int = 0, limit: int = 500) -> list[dict[str, Any]]:
        return self._store.events_after(job_id, after, limit=limit)

    def latest_events(self, job_id: str, limit: int = 500) -> list[dict[str, Any]]:
        return self._store.latest_events(job_id, limit=limit)
