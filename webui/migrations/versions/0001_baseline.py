"""Version 1: the schema raypd wrote before migrations existed (webui/store.py's `_SCHEMA`).

Every statement is "if not exists": a raypd.db written by that code already has all of it, so
upgrading it only records that it is at version 1; a new store is created from scratch.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_ACTIVE = ("queued", "running")


def upgrade() -> None:
    # One function per table, in the order this version has always created them.
    _deployments()
    _jobs()
    _events()
    _checks()
    _deployed_configs()
    _sessions()
    _audit()


def _deployments() -> None:
    op.create_table(
        "deployments",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("engine", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("outputs", sa.Text),
        sa.Column("resources", sa.Text),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
        sa.Column("last_operation", sa.Text),
        sa.Column("last_operation_at", sa.Float),
        sa.Column("last_result", sa.Text),
        sa.Column("last_job", sa.Text),
        if_not_exists=True,
    )


def _jobs() -> None:
    """With its indexes: by deployment, by status, and the lock (one active job per deployment)."""
    op.create_table(
        "jobs",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("deployment", sa.Text, nullable=False),
        sa.Column("operation", sa.Text, nullable=False),
        sa.Column("engine", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("previous_status", sa.Text),
        sa.Column("done", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("total", sa.Integer, nullable=False, server_default=sa.text("0")),
        sa.Column("error", sa.Text),
        sa.Column("hint", sa.Text),
        sa.Column("actor", sa.Text),
        sa.Column("summary", sa.Text),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("started_at", sa.Float),
        sa.Column("finished_at", sa.Float),
        if_not_exists=True,
    )
    op.create_index("jobs_by_deployment", "jobs", ["deployment", "created_at"], if_not_exists=True)
    op.create_index("jobs_by_status", "jobs", ["status"], if_not_exists=True)
    active = sa.column("status").in_(_ACTIVE)
    op.create_index(
        "one_active_job_per_deployment", "jobs", ["deployment"], unique=True, if_not_exists=True,
        sqlite_where=active, postgresql_where=active,
    )


def _events() -> None:
    op.create_table(
        "events",
        sa.Column("job", sa.Text, primary_key=True),
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True,
                  autoincrement=False),
        sa.Column("time", sa.Float, nullable=False),
        sa.Column("data", sa.Text, nullable=False),
        if_not_exists=True,
    )


def _checks() -> None:
    op.create_table(
        "checks",
        sa.Column("deployment", sa.Text, primary_key=True),
        sa.Column("kind", sa.Text, primary_key=True),
        sa.Column("job", sa.Text),
        sa.Column("time", sa.Float, nullable=False),
        sa.Column("report", sa.Text, nullable=False),
        if_not_exists=True,
    )


def _deployed_configs() -> None:
    op.create_table(
        "deployed_configs",
        sa.Column("deployment", sa.Text, primary_key=True),
        sa.Column("config", sa.Text, nullable=False),
        sa.Column("time", sa.Float, nullable=False),
        if_not_exists=True,
    )


def _sessions() -> None:
    op.create_table(
        "sessions",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("ended", sa.Float),
        if_not_exists=True,
    )


def _audit() -> None:
    op.create_table(
        "audit",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("time", sa.Float, nullable=False),
        sa.Column("actor", sa.Text, nullable=False),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("target", sa.Text, nullable=False),
        sa.Column("result", sa.Text, nullable=False),
        sa.Column("detail", sa.Text),
        sqlite_autoincrement=True,
        if_not_exists=True,
    )


def downgrade() -> None:
    for table in ("audit", "sessions", "deployed_configs", "checks", "events", "jobs", "deployments"):
        op.drop_table(table)
