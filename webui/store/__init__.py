"""The job store: deployments, jobs, progress events, check reports, benchmark runs, resilience
runs, conformance runs, sessions and the audit log.

The list page and the API read only this database, never the Pulumi CLI, so listing hundreds of
deployments costs one query. Every progress event is a row, so the SSE stream can replay a job from
any point (Last-Event-ID) and a restarted server still shows what happened. Nothing secret is ever
handed to the store; text from outside (engine messages, errors) passes through `redact` anyway.

It lives in SQLite (WAL) under RAYPD_HOME by default, or in PostgreSQL (RAYPD_DATABASE_URL, team
mode: several servers share it). SQL is built with SQLAlchemy Core from `webui.db`'s tables, so one
code path serves both; the schema is migrated by Alembic when the store opens.

A job's status only moves along `webui.status.TRANSITIONS`, checked in the UPDATE
itself (so a second server or a late worker cannot move it backwards), and a job's final status, its "end"
event and its audit line are committed in one transaction: whoever sees the final status can read
the end event, and the other way round.
"""

from __future__ import annotations

from webui.db import STORE_ERRORS, error_text
from webui.status import ACTIVE, FINAL, JobStatus
from webui.store.access import AccessRows
from webui.store.base import AuditLine, JobActive, NameTaken, StoreError
from webui.store.conformance import ConformanceRows
from webui.store.deployed import DeployedRows
from webui.store.deployments import DeploymentRows
from webui.store.events import EventRows
from webui.store.instances import InstanceRows
from webui.store.jobs import INSTANCE_STALE_SECONDS, INTERRUPTED_HINT, JobRows, interrupted_hint
from webui.store.resilience import ResilienceRows
from webui.store.results import ResultRows

ACTIVE_STATUSES: tuple[JobStatus, ...] = ACTIVE
FINAL_STATUSES: tuple[JobStatus, ...] = FINAL

__all__ = [
    "ACTIVE_STATUSES", "FINAL_STATUSES", "INSTANCE_STALE_SECONDS", "INTERRUPTED_HINT", "STORE_ERRORS",
    "AuditLine", "JobActive", "NameTaken", "Store", "StoreError", "error_text", "interrupted_hint",
]


class Store(DeploymentRows, DeployedRows, JobRows, InstanceRows, EventRows, ResultRows, AccessRows,
            ResilienceRows, ConformanceRows):
    """The job store, every table's rows on one connection (see StoreBase for `location`)."""
