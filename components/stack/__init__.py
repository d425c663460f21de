"""The Pulumi stack: the program (`program.build`, run by `__main__.py` and by the offline plan) and
its ComponentResources (network, cluster, node groups, add-ons, the RayService, the endpoint, the
metrics stack, the lock-down), the AWS look-ups made at deploy time (zones, the control plane's
addresses), and the mock runtime the offline plan and tests/pulumi run the program under. A
component only wires resources whose shape a pure function decides, in components.render or,
when only that component needs it, beside it here. The only package that imports pulumi; it may
import components.config, components.plan, components.render and itself, and no other package
of components/ imports it (`python -m components.plan` reaches the offline plan as an entry point).
"""
