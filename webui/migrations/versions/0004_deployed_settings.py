"""Version 4: what is deployed lives in the store, beside what is pending (issue 14).

`deployed_configs` held only the config of the last successful up. A change writes the new
settings to the stack at once, and until an up deploys them the list, the deployment page, the
Benchmark tab and the API must keep showing what runs. So the row now also keeps:
- `summary`: that config's summary (webui/summary.py), so the list shows the deployed topology and
  cost from one query, without validating a spec per row;
- `plan`: offline engine, the plan that up made (Contract 2 JSON, secrets already "[secret]"): what
  a change's preview compares with. It used to be a file under one server's RAYPD_HOME, which a
  second server sharing a PostgreSQL store could not read;
- `job`: the up job that deployed it;
- `token_replaced`: a new HF token was written to the stack since (the store never holds the token
  itself, so this is all that can be known, and Discard cannot bring the old token back).

Rows written before this version get NULL summary and plan and no token flag; the app fills the
summaries in at start (it needs the app's code to compute them) and moves old last-plan.json files
into `plan` (webui/deployments/upgrades.py, complete_deployed_records).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deployed_configs") as batch:
        batch.add_column(sa.Column("summary", sa.Text, nullable=True))
        batch.add_column(sa.Column("plan", sa.Text, nullable=True))
        batch.add_column(sa.Column("job", sa.Text, nullable=True))
        batch.add_column(sa.Column("token_replaced", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("deployed_configs") as batch:
        batch.drop_column("token_replaced")
        batch.drop_column("job")
        batch.drop_column("plan")
        batch.drop_column("summary")
