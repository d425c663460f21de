"""Who did what: browser sessions (the cookie carries only the id; logging out ends it here) and
the audit log."""

from __future__ import annotations

import secrets
import time
from typing import Any, Optional

from sqlalchemy import and_, insert, select, update

from webui import db
from webui.store.base import AuditLine, StoreBase


class AccessRows(StoreBase):
    """Sessions and audit lines."""

    # ---- browser sessions (the cookie carries the id; logging out ends it here) ----

    def start_session(self) -> str:
        session_id = secrets.token_urlsafe(24)
        with self._write() as conn:
            conn.execute(insert(db.sessions).values(id=session_id, created=time.time()))
        return session_id

    def session_active(self, session_id: str, max_age_seconds: float) -> bool:
        s = db.sessions.c
        with self._read() as conn:
            created = conn.execute(
                select(s.created).where(and_(s.id == session_id, s.ended.is_(None)))
            ).scalar()
        return created is not None and time.time() - created <= max_age_seconds

    def end_session(self, session_id: str) -> None:
        with self._write() as conn:
            conn.execute(update(db.sessions).where(db.sessions.c.id == session_id).values(ended=time.time()))

    # ---- audit ----

    def add_audit(
        self, actor: str, action: str, target: str, result: str, detail: Optional[str] = None,
    ) -> None:
        with self._write() as conn:
            self._append_audit(conn, AuditLine(actor, action, target, result, detail), time.time())

    def audit_entries(self, limit: int = 100) -> list[dict[str, Any]]:
        with self._read() as conn:
            rows = conn.execute(select(db.audit).order_by(db.audit.c.id.desc()).limit(limit)).mappings().all()
        return [dict(row) for row in rows]
