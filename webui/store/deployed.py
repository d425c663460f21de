"""What is deployed: the last successful up (offline: the last plan), kept apart from the stack's
current settings, which may hold changes no up has deployed yet."""

from __future__ import annotations

import json
import time
from typing import Any, Mapping, Optional

from sqlalchemy import and_, or_, select, update
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect

from webui import db
from webui.redact import redact_value
from webui.store.base import JobActive, StoreBase, compact_json, json_or
from webui.store.deployments import deployment_values
from webui.store.records import DeployedRecord


class DeployedRows(StoreBase):
    """The deployed record of each deployment (config, summary, plan, token flag)."""

    def set_deployed_config(
        self, deployment: str, config: dict[str, Any], summary: Optional[dict[str, Any]] = None,
        plan: Optional[dict[str, Any]] = None, job: Optional[str] = None,
    ) -> None:
        """Record what an up deployed. Whatever token the stack had was deployed with it, so the
        "token replaced since" flag starts clear."""
        with self._write() as conn:
            self._upsert(conn, db.deployed_configs, self._deployed_values(deployment, config, summary, plan, job),
                         ["deployment"])

    @staticmethod
    def _deployed_values(deployment: str, config: dict[str, Any], summary: Optional[dict[str, Any]],
                         plan: Optional[dict[str, Any]], job: Optional[str]) -> dict[str, Any]:
        return {
            "deployment": deployment, "config": compact_json(redact_value(config)), "time": time.time(),
            "summary": None if summary is None else compact_json(redact_value(summary)),
            "plan": None if plan is None else compact_json(redact_value(plan)),
            "job": job, "token_replaced": False,
        }

    def record_deployed(
        self, deployment: str, fields: Mapping[str, Any], config: dict[str, Any],
        summary: Optional[dict[str, Any]], plan: Optional[dict[str, Any]] = None, job: Optional[str] = None,
    ) -> None:
        """An up succeeded: the deployment's new status, outputs and resources (`fields`, as for
        update_deployment) and what it deployed, in one transaction, so no reader sees the one
        without the other."""
        values = deployment_values(fields)
        with self._write() as conn:
            conn.execute(update(db.deployments).where(db.deployments.c.name == deployment).values(**values))
            self._upsert(conn, db.deployed_configs, self._deployed_values(deployment, config, summary, plan, job),
                         ["deployment"])

    def deployed(self, deployment: str) -> Optional[DeployedRecord]:
        """{config, summary, plan, job, time, tokenReplaced} of the last successful up, or None
        when nothing was ever deployed (or planned, offline). `summary` and `plan` may be None in
        rows written before version 4."""
        c = db.deployed_configs.c
        with self._read() as conn:
            row = conn.execute(select(db.deployed_configs).where(c.deployment == deployment)).mappings().first()
        if row is None:
            return None
        return {"config": json.loads(row["config"]), "summary": json_or(row["summary"]),
                "plan": json_or(row["plan"]), "job": row["job"], "time": row["time"],
                "tokenReplaced": bool(row["token_replaced"])}

    def deployed_config(self, deployment: str) -> Optional[dict[str, Any]]:
        deployed = self.deployed(deployment)
        return None if deployed is None else deployed["config"]

    def set_config(
        self, deployment: str, config: dict[str, Any], summary: dict[str, Any],
        token_replaced: Optional[bool] = None, stack_file: Optional[str] = None,
    ) -> None:
        """The stack's settings as a change wrote them (or a discard put them back): its config, the
        settings file its engine wrote for it (`stack_file`, from `staged_stack_file`; None: as it
        is), and the deployed record's token flag (True when a new HF token went to the stack since
        the deploy, False when the stack has no token the deploy lacked, None: unchanged), in one
        transaction.

        Refused with JobActive (nothing written) while a job is queued or running on the deployment,
        on any server: the transaction holds the deployment's row as a job's insert does
        (JobRows.create_job), so a change lands either before a job reads the settings, or not at
        all, and an up records as deployed what it ran (issue 29 §3)."""
        now = time.time()
        with self._write() as conn:
            if self._hold_deployment(conn, deployment) is None:
                return  # removed meanwhile: there is nothing to change
            active = self._active_job_in(conn, deployment)
            if active is not None:
                raise JobActive(active)
            if stack_file is not None:
                self._upsert(conn, db.stack_files, {"stack": deployment, "text": stack_file, "updated_at": now},
                             ["stack"])
            conn.execute(update(db.deployments).where(db.deployments.c.name == deployment).values(
                config=compact_json(redact_value(config)), summary=compact_json(redact_value(summary)), updated_at=now))
            if token_replaced is not None:
                conn.execute(update(db.deployed_configs).where(db.deployed_configs.c.deployment == deployment)
                             .values(token_replaced=token_replaced))

    def fill_in_deployed(
        self, deployment: str, *, config: Optional[dict[str, Any]] = None,
        summary: Optional[dict[str, Any]] = None, plan: Optional[dict[str, Any]] = None,
        at: Optional[float] = None,
    ) -> None:
        """Complete a record an older raypd wrote: insert it (with `config`) when there is none,
        and set only what is still missing (NULL), so two servers starting together cannot
        overwrite what an up recorded meanwhile."""
        c = db.deployed_configs.c
        with self._write() as conn:
            exists = conn.execute(select(c.deployment).where(c.deployment == deployment)).scalar()
            if exists is None:
                if config is None:
                    return
                dialect = pg_dialect if conn.dialect.name == "postgresql" else sqlite_dialect
                conn.execute(dialect.insert(db.deployed_configs).values(
                    deployment=deployment, config=compact_json(redact_value(config)), time=at or time.time(),
                    token_replaced=False,
                ).on_conflict_do_nothing(index_elements=["deployment"]))
            for column, value in (("summary", summary), ("plan", plan)):
                if value is not None:
                    conn.execute(update(db.deployed_configs)
                                 .where(c.deployment == deployment, c[column].is_(None))
                                 .values({column: compact_json(redact_value(value))}))

    def incomplete_deployed(self) -> list[dict[str, Any]]:
        """Deployments whose deployed record an older raypd left incomplete: none at all although
        the status says something stands, or no summary, or (offline) no plan."""
        d, c = db.deployments.c, db.deployed_configs.c
        with self._read() as conn:
            rows = conn.execute(
                select(d.name, d.engine, d.status, d.config, d.last_operation_at,
                       c.deployment.label("recorded"), c.config.label("deployed_config"),
                       (c.summary.is_(None)).label("no_summary"), (c.plan.is_(None)).label("no_plan"))
                .select_from(db.deployments.outerjoin(db.deployed_configs, c.deployment == d.name))
                .where(or_(c.deployment.is_(None), c.summary.is_(None),
                           and_(d.engine == "offline", c.plan.is_(None))))
                .order_by(d.name)
            ).mappings().all()
        return [{"name": row["name"], "engine": row["engine"], "status": row["status"],
                 "config": json.loads(row["config"]), "lastOperationAt": row["last_operation_at"],
                 "deployed": None if row["recorded"] is None else {
                     "config": json.loads(row["deployed_config"]), "summary": not row["no_summary"],
                     "plan": not row["no_plan"]}}
                for row in rows]
