"""What each phase scales on, and where it stands, as PromQL (issue 30 §3): the one home of these
expressions, read by the dashboard's Scaling row, the pinned-at-maxReplicas alert and the web
app's Scaling panel (serve.live_scaling).

THE SIGNALS are those raypd's Serve policy computes (components/render/scaling_policy/
raypd_pd_autoscaling.py `phase_signals`, docs/scaling.md), from the Serve series that carry
the same quantities (components/render/metric_names.py cites where each comes from):
- a deployment's *running* requests: `serve_replica_processing_queries` summed over its replicas
  (each replica's requests in flight: the policy's `total_num_requests - total_queued_requests`);
- its *queued* requests: `serve_deployment_queued_queries` summed over the handles that call it
  (requests a caller holds for a free replica: the policy's `total_queued_requests`);
- its *ongoing* requests: running + queued (Serve's `total_num_requests`).
prefill (and colocated, and any phase of an app without prefill) scales on its ongoing requests;
decode on its running requests minus prefill's ongoing ones (each a decode request still waiting
for its prefill), never below 0. Serve averages its inputs over the look-back window (30 s); these
are the values at the query's instant (a scrape every 15 s), so a panel's line and Serve's number
can differ by a burst's edge, never by what they mean.

THE REPLICAS: the controller's `serve_autoscaling_target_replicas` (where Serve is moving the
deployment, within min/max) and `serve_deployment_replica_healthy` (replicas running and healthy).
min and max are the spec's (the PrometheusRule and the dashboard are rendered per stack).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

from components.config.spec import DeploymentSpec
from components.render import metric_names as m
from components.render.serve_config import APP_NAME, serve_deployment_name

PREFILL, DECODE = "prefill", "decode"
# How long Serve's target may sit at maxReplicas before the alert fires: longer than a burst that
# a scale-up answers (a new engine serves ~16 minutes after a cold start, docs/scaling.md), short
# enough that a load the phase cannot catch up with is seen while it lasts.
PINNED_FOR = "10m"


@dataclass(frozen=True)
class ScalingPhase:
    """A phase as the Scaling row and the alert see it: its Serve deployment and its bounds."""

    phase: str
    deployment: str
    autoscaled: bool
    replicas: int            # where it starts (fixed: always)
    min_replicas: int
    max_replicas: int
    target_ongoing_requests: Optional[float]   # None: a fixed count


def scaling_phases(spec: DeploymentSpec) -> list[ScalingPhase]:
    phases = []
    for name, phase in spec.phases.items():
        block = phase.autoscaling
        phases.append(ScalingPhase(
            name, serve_deployment_name(name, spec.model.id), block is not None, phase.replicas,
            phase.min_replicas, phase.max_replicas, block.target if block is not None else None))
    return phases


def _where(deployment: str, app: str) -> str:
    return f'{{{m.SERVE_APPLICATION_LABEL}="{app}",{m.SERVE_DEPLOYMENT_LABEL}="{deployment}"}}'


def running_requests(deployment: str, app: str = APP_NAME) -> str:
    """Requests in flight on the deployment's replicas (no series: no replica reports)."""
    return f"sum({m.SERVE_REPLICA_QUERIES}{_where(deployment, app)})"


def queued_requests(deployment: str, app: str = APP_NAME) -> str:
    """Requests the deployment's callers hold for a free replica (0 when no caller reports)."""
    return f"(sum({m.SERVE_QUEUED_QUERIES}{_where(deployment, app)}) or vector(0))"


def ongoing_requests(deployment: str, app: str = APP_NAME) -> str:
    """Serve's ongoing requests of a deployment: running on its replicas plus queued for them."""
    return f"({running_requests(deployment, app)} + {queued_requests(deployment, app)})"


def signal(phase: str, deployments: Mapping[str, str], app: str = APP_NAME) -> str:
    """The load `phase` scales on, one sample without labels. `deployments`: phase -> its Serve
    deployment, for every phase of the app (decode's signal reads prefill's)."""
    own = deployments[phase]
    if phase == DECODE and PREFILL in deployments:
        prefill = ongoing_requests(deployments[PREFILL], app)
        return f"clamp_min({running_requests(own, app)} - ({prefill} or vector(0)), 0)"
    return ongoing_requests(own, app)


SIGNAL_WORDS = {
    PREFILL: "ongoing requests: running on prefill + queued at decode for a prefill replica",
    DECODE: "requests in decode's own engines: running on decode minus prefill's ongoing, never below 0",
}
SERVE_DEFAULT_WORDS = "ongoing requests: running on its replicas + queued for them (Serve's default)"


def signal_words(phase: str, deployments: Mapping[str, str]) -> str:
    """What `signal` counts, in words (the web page and the dashboard say it beside the number)."""
    if phase == DECODE and PREFILL not in deployments:
        return SERVE_DEFAULT_WORDS
    return SIGNAL_WORDS.get(phase, SERVE_DEFAULT_WORDS)


def target_replicas(deployment: str, app: str = APP_NAME) -> str:
    """Serve's target replica count (the controller's gauge)."""
    return f"max({m.SERVE_TARGET_REPLICAS}{_where(deployment, app)})"


def healthy_replicas(deployment: str, app: str = APP_NAME) -> str:
    """Replicas running and healthy (Ray 2.60 exports one series per replica, so a sum)."""
    return f"sum({m.SERVE_REPLICA_HEALTHY}{_where(deployment, app)})"


def pinned_at_max(phase: ScalingPhase, app: str = APP_NAME) -> str:
    """Serve's target at the phase's maxReplicas, labelled with the phase and its deployment."""
    target = f"max by ({m.SERVE_DEPLOYMENT_LABEL}) ({m.SERVE_TARGET_REPLICAS}{_where(phase.deployment, app)})"
    return f'label_replace({target}, "{m.PHASE_LABEL}", "{phase.phase}", "", "") >= {phase.max_replicas}'


def pinned_at_max_expr(spec: DeploymentSpec) -> Optional[str]:
    """The alert's expression over every AUTOSCALED phase, or None when none autoscales (a fixed
    phase sits at its one count by design: Serve may even report it as min = max)."""
    parts = [pinned_at_max(phase) for phase in scaling_phases(spec) if phase.autoscaled]
    return " or ".join(f"({part})" for part in parts) if parts else None
