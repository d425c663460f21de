"""Version 7: conformance runs (issue 32 section 2). A finished `conformance` job keeps its Contract 7
report (serve.conformance's versioned JSON), the deployment it was compared with and who asked, so
a deployment's Conformance tab shows the last matrix after a restart and on every server sharing the
store. No foreign key to deployments, as with benchmark runs (0003).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "conformance_runs",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("deployment", sa.Text, nullable=False),
        sa.Column("reference", sa.Text),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("actor", sa.Text),
        sa.Column("report", sa.Text, nullable=False),
    )
    op.create_index("conformance_runs_by_deployment", "conformance_runs", ["deployment", "created_at"])


def downgrade() -> None:
    op.drop_index("conformance_runs_by_deployment", table_name="conformance_runs")
    op.drop_table("conformance_runs")
