"""Pure renderers: what each resource looks like, as plain values from a spec or a plan. The
RayService and its Serve config, the gateway objects, the NetworkPolicies and Pod Security labels,
the IAM policies (IRSA trust, model read, LB controller), the metrics stack's values, rules and
dashboards, the rollout-check Job, the stack outputs, and the names others read them by (endpoint,
metrics, observability). Unit tests, the web app, the serve/ CLIs, change analysis and preflight
call them without Pulumi or a cloud; components.stack turns them into resources. May import
components.config, components.plan and itself; never pulumi, nor a package above it.
"""
