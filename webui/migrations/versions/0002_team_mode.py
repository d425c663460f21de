"""Version 2: team mode. Jobs record which server runs them and whether someone asked to cancel
them (the request may reach another server than the one running the job); servers record when
they were last seen.

With several servers on one PostgreSQL store, a server starting up must not mark another live
server's jobs interrupted: only jobs whose owner stopped being seen are orphans. Jobs written
before this version have no owner (NULL), which reads as "owner gone".

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("owner", sa.Text, nullable=True))
    op.add_column("jobs", sa.Column("cancel_requested_at", sa.Float, nullable=True))
    op.create_table(
        "instances",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("seen_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("instances")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("cancel_requested_at")
        batch.drop_column("owner")
