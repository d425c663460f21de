"""Change analysis: what going from the deployed settings to pending ones does to serving, before
anything runs. `assess` (assess.py) gathers the effects each part module finds (cluster, node_groups,
rayservice, addons, endpoint, observability, all in the words of effects.py) and prices the two
rollout strategies; docs_table.py prints docs/infrastructure.md's settings table from it
(`python -m components.changes`); pulumi_diff.py reads a Pulumi preview's diff for the web app.
Pure functions of two plans: it may import components.config, plan, render and itself, never
pulumi, the stack program or the preflight."""
