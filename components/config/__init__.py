"""The config layer: what a raypd stack is asked to be, read and judged before anything is planned.

It holds the stack configuration of Contract 1: `spec` (DeploymentSpec, the only way config enters
raypd) and its sub-specs (`serving_spec`: model, phases, KV transfer, system nodes; `endpoint_spec`;
`observability_spec`; `serve_clients`), `reading` (Contract 1 keys to the spec's fields and errors
back to those keys), `defaults` (every reference value and pinned version), `catalogue` (the EC2
hardware facts), `model_catalogue` (the shapes of the models raypd knows, and the parallelism
vLLM takes for them), `regions` (real AWS regions, offline), `errors` (SpecError, the one error type for
user mistakes), `rules` (the generic rules every spec shares: text, DNS-1123, stack and cluster
names, EKS versions, CIDRs, the SpecModel base), `safe_documents` (reading YAML and JSON nobody
vetted), `stack_file` (Pulumi.<stack>.yaml without the Pulumi CLI) and `image` (image reference
rules and digest pinning); and, because every layer answers checks in it, `checks`: the
check-report shape of Contract 5. Config is the bottom layer: its modules import nothing of
components but components.config, so plan, render, stack, changes and preflight can all read it
and it can never reach back into them.
"""
