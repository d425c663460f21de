"""Conformance runs: each `conformance` job's Contract 7 report, newest first per deployment.

The report is stored as the job made it, after `redact_value` (the store's second line of defence:
the service has already replaced the deployments' API keys, serve.conformance keeps raw exchanges
out of `Report.to_json()`)."""

from __future__ import annotations

import json
import time
from typing import Any, Optional

from sqlalchemy import insert, select

from webui import db
from webui.redact import redact_value
from webui.store.base import StoreBase, compact_json


class ConformanceRows(StoreBase):
    """Conformance runs: the report of each run; pages and the API read the newest."""

    def save_conformance(self, run_id: str, deployment: str, reference: Optional[str], actor: Optional[str],
                         report: dict[str, Any]) -> None:
        with self._write() as conn:
            conn.execute(insert(db.conformance_runs).values(
                id=run_id, deployment=deployment, reference=reference, created_at=time.time(), actor=actor,
                report=compact_json(redact_value(report))))

    def last_conformance(self, deployment: str) -> Optional[dict[str, Any]]:
        """The newest run of this deployment: {id, deployment, reference, createdAt, actor, report}."""
        c = db.conformance_runs.c
        with self._read() as conn:
            row = conn.execute(select(c.id, c.deployment, c.reference, c.created_at, c.actor, c.report)
                               .where(c.deployment == deployment)
                               .order_by(c.created_at.desc()).limit(1)).mappings().first()
        if row is None:
            return None
        return {"id": row["id"], "deployment": row["deployment"], "reference": row["reference"],
                "createdAt": row["created_at"], "actor": row["actor"], "report": json.loads(row["report"])}
