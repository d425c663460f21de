"""Version 5: each stack's Pulumi settings file lives in the store (issue 16).

The settings file (`Pulumi.<stack>.yaml`: config, encrypted secrets, the secrets provider's
state) was written under the RAYPD_HOME of the server that created the deployment, so a second
server sharing the PostgreSQL store could not operate it ("the stack file ... is missing"), and
with the real engine would have run `up` with no settings. Pulumi's DIY backends (s3://, file://)
do not keep stack config (the CLI reads it from the work dir, never from the state; only the
secrets provider may fall back to the state, pkg/cmd/pulumi/stack/secrets.go), so the store keeps it.

Files an older raypd left under RAYPD_HOME/workspaces/ are moved in at start
(webui/deployments/upgrades.py, complete_stack_files).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "stack_files",
        sa.Column("stack", sa.Text, primary_key=True),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("stack_files")
