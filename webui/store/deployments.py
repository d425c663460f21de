"""Deployments' rows (what the list and the pages read) and each stack's settings file."""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Optional, cast

from sqlalchemy import case, delete, insert, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.exc import IntegrityError

from webui import db
from webui.redact import redact_value
from webui.status import Standing
from webui.store.base import NameTaken, StoreBase, compact_json, json_or
from webui.store.records import DeploymentRecord, ListedDeployment

DEPLOYMENT_FIELDS = ("status", "outputs", "resources", "config", "summary", "last_operation",
                     "last_operation_at", "last_result", "last_job")
JSON_FIELDS = ("outputs", "resources", "config", "summary")


def deployment_values(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The columns an update writes: only known fields (KeyError otherwise), JSON ones redacted."""
    values: dict[str, Any] = {}
    for key, value in fields.items():
        if key not in DEPLOYMENT_FIELDS:
            raise KeyError(key)
        if key in JSON_FIELDS:
            value = None if value is None else compact_json(redact_value(value))
        values[key] = value
    values["updated_at"] = time.time()
    return values


def deployment_row(row: RowMapping, full: bool) -> dict[str, Any]:
    """A deployments row as the store hands it back (`full`: with config, outputs, resources)."""
    record: dict[str, Any] = {
        "name": row["name"],
        "engine": row["engine"],
        "status": row["status"],
        "summary": json_or(row["summary"], {}),
        "createdAt": row["created_at"],
        "updatedAt": row["updated_at"],
        "lastOperation": row["last_operation"],
        "lastOperationAt": row["last_operation_at"],
        "lastResult": row["last_result"],
        "lastJob": row["last_job"],
    }
    if full:
        record["config"] = json_or(row["config"], {})
        record["outputs"] = json_or(row["outputs"])
        record["resources"] = json_or(row["resources"])
    return record


@dataclass
class StagedFile:
    """A stack's settings file as an engine wrote it inside `staged_stack_file` (None: it wrote
    none), waiting for `set_config(..., stack_file=...)` to write it with the config."""

    stack: str
    text: Optional[str] = None


class DeploymentRows(StoreBase):
    """Deployments, and the Pulumi.<stack>.yaml every server reads from here (team mode)."""

    def create_deployment(
        self, name: str, engine: str, config: dict[str, Any], summary: dict[str, Any],
        status: str = Standing.CREATED.value,
    ) -> None:
        now = time.time()
        try:
            with self._write() as conn:
                conn.execute(insert(db.deployments).values(
                    name=name, engine=engine, status=status, config=compact_json(config),
                    summary=compact_json(summary), created_at=now, updated_at=now,
                ))
        except IntegrityError:
            raise NameTaken(name) from None

    def get_deployment(self, name: str) -> Optional[DeploymentRecord]:
        with self._read() as conn:
            row = conn.execute(
                select(db.deployments).where(db.deployments.c.name == name)
            ).mappings().first()
        return None if row is None else cast(DeploymentRecord, deployment_row(row, full=True))

    def list_deployments(self) -> list[ListedDeployment]:
        """Every deployment as the list shows it, in one query: `summary` is the deployed settings'
        (None when an older raypd recorded none) once an up recorded what it deployed, else the
        stack's own; `deployed` holds when, the token flag and whether the stack's config differs."""
        d, c = db.deployments.c, db.deployed_configs.c
        deployed = c.deployment.is_not(None)
        with self._read() as conn:
            rows = conn.execute(
                select(d.name, d.engine, d.status, d.created_at, d.updated_at,
                       d.last_operation, d.last_operation_at, d.last_result, d.last_job,
                       case((deployed, c.summary), else_=d.summary).label("summary"),
                       deployed.label("deployed"), c.time.label("deployed_at"),
                       c.token_replaced.label("token_replaced"),
                       # Both configs only where their text differs (one writer dumps both the same
                       # way, so equal text is the common case); then compared as JSON.
                       case((d.config != c.config, d.config)).label("config"),
                       case((d.config != c.config, c.config)).label("deployed_config"))
                .select_from(db.deployments.outerjoin(db.deployed_configs, c.deployment == d.name))
                .order_by(d.name)
            ).mappings().all()
        listed = []
        for row in rows:
            record = deployment_row(row, full=False)
            record["deployed"] = None if not row["deployed"] else {
                "time": row["deployed_at"], "tokenReplaced": bool(row["token_replaced"]),
                "configDiffers": row["config"] is not None
                and json.loads(row["config"]) != json.loads(row["deployed_config"]),
            }
            listed.append(cast(ListedDeployment, record))
        return listed

    def update_deployment(self, name: str, **fields: Any) -> None:
        values = deployment_values(fields)
        with self._write() as conn:
            conn.execute(update(db.deployments).where(db.deployments.c.name == name).values(**values))

    def delete_deployment(self, name: str) -> None:
        with self._write() as conn:
            conn.execute(delete(db.deployments).where(db.deployments.c.name == name))
            # Reports describe what was there; a new deployment of the same name starts clean.
            conn.execute(delete(db.checks).where(db.checks.c.deployment == name))
            conn.execute(delete(db.deployed_configs).where(db.deployed_configs.c.deployment == name))
            conn.execute(delete(db.stack_files).where(db.stack_files.c.stack == name))

    # ---- stack settings files (the engines' StackFiles) ----

    def stack_file(self, stack: str) -> Optional[str]:
        """The stack's Pulumi.<stack>.yaml as its engine last wrote it, or None (inside
        `staged_stack_file`, on its thread: as staged there, once written)."""
        staged = self._staged(stack)
        if staged is not None and staged.text is not None:
            return staged.text
        c = db.stack_files.c
        with self._read() as conn:
            return conn.execute(select(c.text).where(c.stack == stack)).scalar()

    def save_stack_file(self, stack: str, text: str) -> None:
        """Written as given: it holds ciphertext and provider state, which a mask would corrupt.
        Inside `staged_stack_file`, on its thread, it is only staged."""
        staged = self._staged(stack)
        if staged is not None:
            staged.text = text
            return
        with self._write() as conn:
            self._upsert(conn, db.stack_files, {"stack": stack, "text": text, "updated_at": time.time()},
                         ["stack"])

    @contextmanager
    def staged_stack_file(self, stack: str) -> Iterator[StagedFile]:
        """Keep the settings file an engine writes for `stack` on this thread (its `configure`) in
        the StagedFile handed out, instead of the store. A change then writes it with the config in
        one transaction that refuses while a job is active (`set_config(..., stack_file=...)`):
        written at once, a job that another server started meanwhile could run the new file and
        record the old config as deployed (issue 29 §3). A failed or refused change leaves the
        stored file as it was. Per thread, because the engine's calls come back to the store it
        was attached to, which every request thread shares."""
        staged = StagedFile(stack)
        files: Optional[dict[str, StagedFile]] = getattr(self._staging, "files", None)
        if files is None:
            files = self._staging.files = {}
        outer = files.get(stack)
        files[stack] = staged
        try:
            yield staged
        finally:
            if outer is None:
                files.pop(stack, None)
            else:
                files[stack] = outer

    def _staged(self, stack: str) -> Optional[StagedFile]:
        files: Optional[dict[str, StagedFile]] = getattr(self._staging, "files", None)
        return None if files is None else files.get(stack)

    def delete_stack_file(self, stack: str) -> None:
        with self._write() as conn:
            conn.execute(delete(db.stack_files).where(db.stack_files.c.stack == stack))

    def stacks_without_file(self) -> list[dict[str, Any]]:
        """Deployments whose settings file the store lacks (an older raypd kept it in one server's
        RAYPD_HOME): [{name, engine, config}]."""
        d, f = db.deployments.c, db.stack_files.c
        with self._read() as conn:
            rows = conn.execute(
                select(d.name, d.engine, d.config)
                .select_from(db.deployments.outerjoin(db.stack_files, f.stack == d.name))
                .where(f.stack.is_(None)).order_by(d.name)
            ).mappings().all()
        return [{"name": row["name"], "engine": row["engine"], "config": json.loads(row["config"])}
                for row in rows]
