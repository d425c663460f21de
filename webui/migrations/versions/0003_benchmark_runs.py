"""Version 3: benchmark runs. A finished benchmark keeps what was asked, its Contract 6 summary and
every request's record (gzip-compressed JSON lines), so plots and comparisons can be drawn later,
also against runs of deployments torn down since (no foreign key to deployments, on purpose).

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "benchmark_runs",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("deployment", sa.Text, nullable=False),
        sa.Column("label", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("actor", sa.Text),
        sa.Column("settings", sa.Text, nullable=False),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("records", sa.LargeBinary, nullable=False),
    )
    op.create_index("benchmark_runs_by_deployment", "benchmark_runs", ["deployment", "created_at"])


def downgrade() -> None:
    op.drop_index("benchmark_runs_by_deployment", table_name="benchmark_runs")
    op.drop_table("benchmark_runs")
