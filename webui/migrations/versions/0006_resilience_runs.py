"""Version 6: resilience runs (issue 31 §2). A finished resilience check keeps what was asked and
its Contract 8 report, so the Resilience tab lists the last runs and draws their timelines later
(no foreign key to deployments, as benchmark_runs: a torn-down deployment's runs stay readable).

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "resilience_runs",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("deployment", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("actor", sa.Text),
        sa.Column("settings", sa.Text, nullable=False),
        sa.Column("report", sa.Text, nullable=False),
    )
    op.create_index("resilience_runs_by_deployment", "resilience_runs", ["deployment", "created_at"])


def downgrade() -> None:
    op.drop_index("resilience_runs_by_deployment", table_name="resilience_runs")
    op.drop_table("resilience_runs")
