"""What checks and benchmarks found: the last report of each kind (Contract 5) and every benchmark
run (Contract 6 summary, records as gzip JSON lines)."""

from __future__ import annotations

import gzip
import json
import time
from typing import Any, Optional

from sqlalchemy import insert, select
from sqlalchemy.engine import RowMapping

from webui import db
from webui.redact import redact_value
from webui.store.base import StoreBase, compact_json


class ResultRows(StoreBase):
    """Check reports and benchmark runs."""

    # ---- check reports (Contract 5): the last one of each kind per deployment ----

    def save_check(self, deployment: str, report: dict[str, Any], job: Optional[str]) -> None:
        with self._write() as conn:
            self._upsert(conn, db.checks, {
                "deployment": deployment, "kind": report["kind"], "job": job, "time": time.time(),
                "report": compact_json(redact_value(report)),
            }, ["deployment", "kind"])

    def last_checks(self, deployment: str) -> dict[str, dict[str, Any]]:
        """{kind: {"report", "job", "time"}} for the kinds that ever ran on this deployment."""
        c = db.checks.c
        with self._read() as conn:
            rows = conn.execute(
                select(c.kind, c.job, c.time, c.report).where(c.deployment == deployment)
            ).mappings().all()
        return {row["kind"]: {"report": json.loads(row["report"]), "job": row["job"],
                              "time": row["time"]} for row in rows}

    # ---- benchmark runs: summary and settings as JSON, records as gzip JSON lines ----

    def save_benchmark(self, run_id: str, deployment: str, label: str, actor: Optional[str],
                       settings: dict[str, Any], summary: dict[str, Any], records: list[dict[str, Any]]) -> None:
        packed = gzip.compress("".join(compact_json(r) + "\n" for r in records).encode("utf-8"), compresslevel=6)
        with self._write() as conn:
            conn.execute(insert(db.benchmark_runs).values(
                id=run_id, deployment=deployment, label=label, created_at=time.time(), actor=actor,
                settings=compact_json(redact_value(settings)), summary=compact_json(redact_value(summary)),
                records=packed))

    def _benchmark_row(self, row: RowMapping) -> dict[str, Any]:
        return {"id": row["id"], "deployment": row["deployment"], "label": row["label"],
                "createdAt": row["created_at"], "actor": row["actor"],
                "settings": json.loads(row["settings"]), "summary": json.loads(row["summary"])}

    def benchmark_runs(self, deployment: Optional[str] = None, limit: int = 200) -> list[dict[str, Any]]:
        """Runs without their records, newest first; one deployment's or everyone's."""
        c = db.benchmark_runs.c
        query = select(c.id, c.deployment, c.label, c.created_at, c.actor, c.settings, c.summary)
        if deployment is not None:
            query = query.where(c.deployment == deployment)
        with self._read() as conn:
            rows = conn.execute(query.order_by(c.created_at.desc()).limit(limit)).mappings().all()
        return [self._benchmark_row(row) for row in rows]

    def benchmark_run(self, run_id: str) -> Optional[dict[str, Any]]:
        c = db.benchmark_runs.c
        with self._read() as conn:
            row = conn.execute(select(c.id, c.deployment, c.label, c.created_at, c.actor, c.settings, c.summary)
                               .where(c.id == run_id)).mappings().first()
        return None if row is None else self._benchmark_row(row)

    def benchmark_records(self, run_id: str) -> Optional[bytes]:
        """The run's requests.jsonl, gzip-compressed as stored."""
        c = db.benchmark_runs.c
        with self._read() as conn:
            packed = conn.execute(select(c.records).where(c.id == run_id)).scalar()
        return None if packed is None else bytes(packed)
