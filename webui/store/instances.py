"""The servers sharing the store (team mode): each registers and beats, so a job whose server
stopped beating is known to be an orphan."""

from __future__ import annotations

import os
import socket

from sqlalchemy import delete, select, update

from webui import db
from webui.store.base import StoreBase


class InstanceRows(StoreBase):
    """This server's row in `instances`."""

    def register_instance(self) -> None:
        with self._write() as conn:
            now = conn.execute(select(self._clock())).scalar_one()
            self._upsert(conn, db.instances, {
                "id": self.instance_id, "host": socket.gethostname(), "pid": os.getpid(),
                "started_at": float(now), "seen_at": float(now),
            }, ["id"])

    def heartbeat(self) -> None:
        """This server is alive: its running jobs are not orphans."""
        with self._write() as conn:
            seen = conn.execute(update(db.instances).where(db.instances.c.id == self.instance_id)
                                .values(seen_at=self._clock()))
        if not seen.rowcount:  # removed meanwhile (by hand, or a store restored from backup)
            self.register_instance()

    def retire_instance(self) -> None:
        with self._write() as conn:
            conn.execute(delete(db.instances).where(db.instances.c.id == self.instance_id))
