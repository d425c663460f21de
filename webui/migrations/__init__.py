"""Alembic migrations of the job store, applied by `webui.db.upgrade` at every start.

Revisions are numbered (0001, 0002, ...) and each one is frozen once released: a later change
is a new revision, never an edit, so any older raypd.db can be brought up to date step by step.
Write new ones by hand with dialect-neutral `op` calls (both SQLite and PostgreSQL run them);
on SQLite, changes to existing columns need `op.batch_alter_table`.
"""
