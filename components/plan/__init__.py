"""The plan: what raypd decides once from a valid configuration, before anything is rendered.

Node groups and engines per phase (topology), whether a model fits its GPUs (model_shapes, from the
model table of components.config.model_catalogue), the zones a stack uses and why they never move
(zones), how long a deployment takes (durations), the SLOs the dashboards compare against (slo), and
the node lines, vCPU quotas and surge a change needs (capacity). Everything here is a pure function
of the spec: no Pulumi, no AWS, no network. It may import components.config and itself, nothing
above; the renderers, the change preview, the Pulumi program and the preflight all read the one
plan. `python -m components.plan` (the offline plan) is a command over all of it and lives in
components/stack/offline_plan.py, where the program runs.
"""
