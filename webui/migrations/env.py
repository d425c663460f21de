"""Alembic environment: run on the connection `webui.db.upgrade` hands over (never a URL from a
config file, so no credentials live in a migrations config)."""

from __future__ import annotations

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=None, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
