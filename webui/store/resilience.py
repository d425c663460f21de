"""Resilience runs (issue 31 §2): what was asked and the Contract 8 report of each finished check.

The report is stored as it was built (its timeline plot is drawn from it on request, a pure
function: serve/resilience/plot.py), passed through `redact_value` on the way in like every other
stored text: a report holds no credential, and if one slipped into an error it must not be kept."""

from __future__ import annotations

import json
import time
from typing import Any, Optional

from sqlalchemy import insert, select
from sqlalchemy.engine import RowMapping

from webui import db
from webui.redact import redact_value
from webui.store.base import StoreBase, compact_json


class ResilienceRows(StoreBase):
    """Resilience runs, newest first by deployment."""

    def save_resilience(self, run_id: str, deployment: str, actor: Optional[str], settings: dict[str, Any],
                        report: dict[str, Any]) -> None:
        with self._write() as conn:
            conn.execute(insert(db.resilience_runs).values(
                id=run_id, deployment=deployment, created_at=time.time(), actor=actor,
                settings=compact_json(redact_value(settings)), report=compact_json(redact_value(report))))

    @staticmethod
    def _resilience_row(row: RowMapping) -> dict[str, Any]:
        return {"id": row["id"], "deployment": row["deployment"], "createdAt": row["created_at"],
                "actor": row["actor"], "settings": json.loads(row["settings"]), "report": json.loads(row["report"])}

    def resilience_runs(self, deployment: str, limit: int = 50) -> list[dict[str, Any]]:
        c = db.resilience_runs.c
        with self._read() as conn:
            rows = conn.execute(select(db.resilience_runs).where(c.deployment == deployment)
                                .order_by(c.created_at.desc()).limit(limit)).mappings().all()
        return [self._resilience_row(row) for row in rows]

    def resilience_run(self, run_id: str) -> Optional[dict[str, Any]]:
        c = db.resilience_runs.c
        with self._read() as conn:
            row = conn.execute(select(db.resilience_runs).where(c.id == run_id)).mappings().first()
        return None if row is None else self._resilience_row(row)
