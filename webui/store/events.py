"""Progress events: a row each, so the SSE stream replays a job from any point (Last-Event-ID)
and a restarted server still shows what happened."""

from __future__ import annotations

import json
import time
from typing import Any

from sqlalchemy import select

from webui import db
from webui.status import JobStatus
from webui.store.base import StoreBase


class EventRows(StoreBase):
    """A job's events, and the resource timings measured from them."""

    def add_event(self, job_id: str, record: dict[str, Any]) -> int:
        """Append one progress record; returns its sequence number (1, 2, ...) within the job."""
        with self._write() as conn:
            return self._append_event(conn, job_id, record, time.time())

    def events_after(self, job_id: str, after: int = 0, limit: int = 500) -> list[dict[str, Any]]:
        e = db.events.c
        with self._read() as conn:
            rows = conn.execute(
                select(e.seq, e.time, e.data).where(e.job == job_id, e.seq > after)
                .order_by(e.seq).limit(limit)
            ).mappings().all()
        return self._events(rows)

    def latest_events(self, job_id: str, limit: int = 500) -> list[dict[str, Any]]:
        """The newest `limit` events, oldest first: a long job's page shows where it is now."""
        e = db.events.c
        with self._read() as conn:
            rows = conn.execute(
                select(e.seq, e.time, e.data).where(e.job == job_id).order_by(e.seq.desc()).limit(limit)
            ).mappings().all()
        return self._events(list(reversed(rows)))

    def _events(self, rows: Any) -> list[dict[str, Any]]:
        events = []
        for row in rows:
            event = json.loads(row["data"])
            event["seq"] = row["seq"]
            event["time"] = row["time"]
            events.append(event)
        return events

    def resource_durations(self, engine: str, operation: str = "up", jobs: int = 20) -> list[tuple[str, str, float]]:
        """(name, type, seconds) of every resource step of the last succeeded jobs of an engine: from its
        "started" event to its "finished" one. What this app measured beats any published figure."""
        j, e = db.jobs.c, db.events.c
        recent = (
            select(j.id).where(j.engine == engine, j.operation == operation,
                               j.status == JobStatus.SUCCEEDED.value)
            .order_by(j.created_at.desc()).limit(jobs).subquery()
        )
        with self._read() as conn:
            rows = conn.execute(
                select(e.job, e.time, e.data).join(recent, e.job == recent.c.id)
                .where(e.data.like('%"kind":"resource"%')).order_by(e.job, e.seq)
            ).mappings().all()
        started: dict[tuple[str, str], float] = {}
        samples: list[tuple[str, str, float]] = []
        for row in rows:
            record = json.loads(row["data"])
            key = (row["job"], str(record.get("name")))
            if record.get("state") == "started":
                started[key] = row["time"]
            elif record.get("state") == "finished" and key in started:
                samples.append((key[1], str(record.get("type")), row["time"] - started.pop(key)))
        return samples
