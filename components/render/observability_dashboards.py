"""The Grafana dashboards raypd provisions (issue 18 §2), as JSON models: pure, no Grafana.

One raypd dashboard per deployment, read top to bottom as a request travels: the SLO strip (what
the client sees), the prefill column, the KV handoff (NIXL), the decode column, and capacity. Every
engine query reads the phase-labelled series of components/render/observability_rules.py
(`engine:<metric>:phase`), so a panel shows prefill or decode, never a mix.

Ray's own dashboards (Serve, Serve Deployment, Serve LLM with its NIXL row, Default) are not
rendered here and not copied: Ray generates them for its running version into
`/tmp/ray/session_latest/metrics/grafana/dashboards/` on the head node, and KubeRay's Prometheus
and Grafana guide loads them from there (copy them out of the head pod into the Grafana
dashboards ConfigMap). Hand-copied, they would drift from the Ray version the cluster runs.

Windows are fixed (`5m`, not Grafana's `$__rate_interval`) so the expressions run unchanged in the
PromQL tests; the only template variable is the data source.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.config import catalogue, defaults
from components.config.spec import DeploymentSpec
from components.plan.slo import Slo, slo_for
from components.render import metric_names as m
from components.render import observability_scaling as scaling
from components.render.observability_faults import kube_label
from components.render.observability_rules import (
    PHASE_INFO,
    POD_PHASE_INFO,
    WINDOW,
    guarded_quantile,
    phased,
)
from components.render.serve_config import APP_NAME

SCHEMA_VERSION = 39
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
DECODING = 'phase=~"decode|colocated"'   # the engines that stream tokens to the client
PREFILLING = 'phase=~"prefill|colocated"'


@dataclass(frozen=True)
class Panel:
    title: str
    description: str
    unit: str
    targets: tuple[tuple[str, str], ...]   # (PromQL, legend)
    kind: str = "timeseries"
    thresholds: tuple[float, ...] = ()
    width: int = 8


def _rate(series: str, where: str = "", by: str = "") -> str:
    sel = f"{series}{{{where}}}" if where else series
    return f"sum{f' by ({by})' if by else ''} (rate({sel}[{WINDOW}]))"


def _quantile(q: float, histogram: str, where: str, by: str = "") -> str:
    labels = f"{by}, le" if by else "le"
    return f"histogram_quantile({q}, {_rate(phased(histogram + '_bucket'), where, labels)})"


def _within(histogram: str, seconds: float) -> str:
    """Share of the decoding engines' observations at or under `seconds` (a bucket boundary)."""
    bucket = f'{DECODING},le="{Slo.bucket_label(seconds)}"'
    return (f"{_rate(phased(histogram + '_bucket'), bucket)} / "
            f"{_rate(phased(histogram + '_count'), DECODING)}")


def _gpu_active(phase_regex: str) -> str:
    """DCGM's engine activity of the GPUs the phase's Ray pods hold, averaged per pod: DCGM labels
    each GPU with the pod using it, and POD_PHASE_INFO says which phase's replica that pod runs
    (components/render/observability_rules.py: on the reference layout no node carries a phase)."""
    pod = f"{m.POD_NAMESPACE_LABEL}, {m.POD_LABEL}"
    return (f"avg by ({m.PHASE_LABEL}, {m.POD_LABEL}) ({m.DCGM_GPU_ACTIVE} * on({pod}) "
            f'group_left({m.PHASE_LABEL}) {POD_PHASE_INFO}{{{m.PHASE_LABEL}=~"{phase_regex}"}})')


@dataclass(frozen=True)
class StripNumber:
    """One number of the SLO strip: the dashboard graphs it, the web app shows it live."""

    key: str
    label: str
    unit: str      # "reqps", "s" or "percentunit" (Grafana's unit ids)
    expr: str      # an instant query answering one sample, or none when nothing was observed
    slo: float | None = None   # a time to stay under (TTFT p95, ITL p95)


def strip_numbers(slo: Slo) -> list[StripNumber]:
    """The SLO strip's single numbers, each one expression the panels and the live strip share."""
    app = f'application="{APP_NAME}"'
    ttft = [StripNumber(f"ttft_p{int(q * 100)}", f"TTFT p{int(q * 100)}", "s",
                        f"sum({guarded_quantile(q, m.TTFT, 'phase')})",
                        slo.ttft_p95_seconds if q == 0.95 else None) for q in (0.5, 0.95, 0.99)]
    return [
        StripNumber("requests_per_s", "Requests/s", "reqps", _rate(m.SERVE_HTTP_REQUESTS, app)),
        StripNumber("errors_per_s", "Errors/s", "reqps", _rate(m.SERVE_HTTP_ERRORS, app)),
        *ttft,
        StripNumber("itl_p95", "ITL p95", "s", _quantile(0.95, m.ITL, DECODING), slo.itl_p95_seconds),
        StripNumber("ttft_within_slo", "TTFT within SLO", "percentunit", _within(m.TTFT, slo.ttft_p95_seconds)),
        StripNumber("itl_within_slo", "ITL within SLO", "percentunit", _within(m.ITL, slo.itl_p95_seconds)),
    ]


def slo_strip(spec: DeploymentSpec) -> list[Panel]:
    slo = slo_for(spec)
    app = f'application="{APP_NAME}"'
    number = {n.key: n for n in strip_numbers(slo)}
    return [
        Panel("Requests/s", "Requests the Serve HTTP proxy answered for the app (by status), and "
              "requests the decoding engines completed.", "reqps",
              ((_rate(m.SERVE_HTTP_REQUESTS, app, "status_code"), "ingress {{status_code}}"),
               (_rate(phased(m.REQUEST_SUCCESS), DECODING), "engines completed"))),
        Panel("Errors/s", "Error responses of the Serve HTTP proxy for the app, by error code "
              "(a failed KV load answers 500).", "reqps",
              ((_rate(m.SERVE_HTTP_ERRORS, app, "error_code"), "{{error_code}}"),)),
        Panel("TTFT p50 / p95 / p99", "Time to first token: prefill engine's plus decode engine's "
              "(the sum of the quantiles of the phases that served requests in the window, an "
              "estimate of the ingress's TTFT: Ray Serve LLM measures none at the ingress). SLO "
              f"p95: {slo.ttft_p95_seconds} s.",
              "s", tuple((number[k].expr, k[-3:]) for k in ("ttft_p50", "ttft_p95", "ttft_p99")),
              thresholds=(slo.ttft_p95_seconds,)),
        Panel("ITL p95", "Inter-token latency of the decoding engines, p95: the gap between two "
              f"streamed tokens the client sees. SLO: {slo.itl_p95_seconds} s.", "s",
              ((number["itl_p95"].expr, "ITL p95"),), thresholds=(slo.itl_p95_seconds,)),
        Panel("Goodput against the SLOs", "Share of first tokens the decoding engine produced "
              f"within {slo.ttft_p95_seconds} s of its arrival, and share of tokens within the "
              f"ITL SLO {slo.itl_p95_seconds} s (read from the histogram bucket at the SLO; "
              "prefill's own time is in the TTFT panel).", "percentunit",
              ((number["ttft_within_slo"].expr, "TTFT within SLO"),
               (number["itl_within_slo"].expr, "ITL within SLO")),
              width=16),
    ]


def prefill_column() -> list[Panel]:
    p = PREFILLING
    return [
        Panel("Prefill queue time p95", "How long requests waited in the prefill engine's queue "
              "before their prompt was computed.", "s",
              ((_quantile(0.95, m.QUEUE_TIME, p, "phase"), "{{phase}}"),)),
        Panel("Prefill time p95", "Time the prefill engine spent computing a prompt.", "s",
              ((_quantile(0.95, m.PREFILL_TIME, p, "phase"), "{{phase}}"),)),
        Panel("Prompt tokens/s", "Prompt tokens the prefill engines processed.", "short",
              ((_rate(phased(m.PROMPT_TOKENS), p, "phase"), "{{phase}}"),)),
        Panel("Prefill running / waiting", "Requests running and waiting on each prefill engine.",
              "short",
              ((f"sum by (ReplicaId) ({phased(m.RUNNING)}{{{p}}})", "running {{ReplicaId}}"),
               (f"sum by (ReplicaId) ({phased(m.WAITING)}{{{p}}})", "waiting {{ReplicaId}}"))),
        Panel("Prefix-cache hit rate", "Share of prompt tokens prefill found in its prefix cache.",
              "percentunit",
              ((f"{_rate(phased(m.PREFIX_CACHE_HITS), p)} / {_rate(phased(m.PREFIX_CACHE_QUERIES), p)}",
                "hit rate"),)),
        Panel("Prefill GPU engine active", "DCGM graphics engine activity of the GPUs the prefill "
              "engines' Ray pods hold, per pod (0-1).", "percentunit",
              ((_gpu_active("prefill|colocated"), "{{pod}}"),)),
    ]


def kv_handoff(spec: DeploymentSpec) -> list[Panel]:
    d = 'phase="decode"'
    line_rate = catalogue.efa_line_rate_gbps(spec.decode.instance_type)
    by = "ReplicaId, engine"
    throughput: list[tuple[str, str]] = [(
        f"{_rate(phased(m.NIXL_BYTES + '_sum'), d, by)} / "
        f"{_rate(phased(m.NIXL_XFER_TIME + '_sum'), d, by)}", "per rank {{ReplicaId}}")]
    if line_rate is not None:  # Gbit/s -> bytes/s, the panel's unit (Grafana scales it to GB/s)
        throughput.append((f"vector({line_rate * 1e9 / 8:.0f})",
                           f"EFA line rate {spec.decode.instance_type}"))
    return [
        Panel("NIXL transfer time p50 / p99", "Time of one NIXL KV read by decode (pull mode: "
              "decode reads prefill's blocks), per transfer.", "s",
              ((_quantile(0.5, m.NIXL_XFER_TIME, d), "p50"),
               (_quantile(0.99, m.NIXL_XFER_TIME, d), "p99"))),
        Panel("NIXL throughput per rank", "Bytes per second of transfer time, averaged over "
              "one engine rank's transfers: vLLM's NIXL throughput is a per-rank average, not the "
              "aggregate of the node's links. Drawn against the EFA line rate of the decode "
              "instance type" + (f" ({line_rate:g} Gbit/s)." if line_rate else " (none on record)."),
              "Bps", tuple(throughput)),
        Panel("NIXL transfers/s", "KV transfers decode completed per second.", "ops",
              ((_rate(phased(m.NIXL_XFER_TIME + "_count"), d, "ReplicaId"), "{{ReplicaId}}"),)),
        Panel("NIXL failed transfers", "Failed NIXL transfers (handshake, transfer and "
              "notification failures) in the window: each is a request that failed or was "
              "recomputed.", "short",
              ((f"sum by (phase, ReplicaId) (increase({phased(m.NIXL_FAILED_TRANSFERS)}[{WINDOW}]))",
                "{{phase}} {{ReplicaId}}"),)),
        Panel("Expired KV", "Requests whose prefilled KV cache prefill freed before decode read "
              "it (wasted prefill work).", "short",
              ((f"sum by (phase, ReplicaId) (increase({phased(m.NIXL_KV_EXPIRED)}[{WINDOW}]))",
                "{{phase}} {{ReplicaId}}"),)),
    ]


def decode_column() -> list[Panel]:
    d = DECODING
    return [
        Panel("ITL / TPOT p95", "Inter-token latency and time per output token of the decode "
              "engines, p95.", "s",
              ((_quantile(0.95, m.ITL, d), "ITL p95"), (_quantile(0.95, m.TPOT, d), "TPOT p95"))),
        Panel("Decode running / waiting", "Requests running and waiting on each decode engine; "
              "waiting means decode is the bottleneck.", "short",
              ((f"sum by (ReplicaId) ({phased(m.RUNNING)}{{{d}}})", "running {{ReplicaId}}"),
               (f"sum by (ReplicaId) ({phased(m.WAITING)}{{{d}}})", "waiting {{ReplicaId}}"))),
        Panel("Decode KV cache usage", "Share of the decode engine's KV cache blocks in use "
              "(alert above 0.9 for 5 min).", "percentunit",
              ((f"max by (ReplicaId) ({phased(m.KV_CACHE_USAGE)}{{{d}}})", "{{ReplicaId}}"),),
              thresholds=(0.9,)),
        Panel("Preemptions/s", "Requests the decode engine preempted (to be recomputed) for lack "
              "of KV cache.", "short",
              ((_rate(phased(m.PREEMPTIONS), d, "ReplicaId"), "{{ReplicaId}}"),)),
        Panel("Generation tokens/s", "Tokens the decode engines generated.", "short",
              ((_rate(phased(m.GENERATION_TOKENS), d, "phase"), "{{phase}}"),)),
        Panel("Decode GPU engine active", "DCGM graphics engine activity of the GPUs the decode "
              "engines' Ray pods hold, per pod (0-1).", "percentunit",
              ((_gpu_active("decode|colocated"), "{{pod}}"),)),
    ]


def capacity(spec: DeploymentSpec) -> list[Panel]:
    return [
        Panel("Replicas per deployment", "Healthy replicas of each Serve deployment (the "
              "controller's count), and the replicas whose engines are joined to a phase.", "short",
              ((f'sum by (deployment) ({m.SERVE_REPLICA_HEALTHY}{{application="{APP_NAME}"}})',
                "healthy {{deployment}}"),
               (f"count by (deployment) ({PHASE_INFO})", "joined {{deployment}}"))),
        Panel("Pending pods", f"Pods of namespace {spec.namespace} waiting to be scheduled (a "
              "replica waiting for a GPU node).", "short",
              ((f'sum({m.KUBE_POD_PHASE}{{namespace="{spec.namespace}",phase="Pending"}})',
                "pending"),)),
        Panel("Nodes by instance type", "Nodes of the cluster by instance type.", "short",
              ((f"count by ({kube_label(defaults.INSTANCE_TYPE_LABEL)}) ({m.KUBE_NODE_LABELS})",
                "{{" + kube_label(defaults.INSTANCE_TYPE_LABEL) + "}}"),)),
    ]


def scaling_row(spec: DeploymentSpec) -> list[Panel]:
    """Per phase: its replicas over time against what its signal asks for and its bounds, and its
    signal per replica against its target (components/render/observability_scaling.py)."""
    deployments = {phase.phase: phase.deployment for phase in scaling.scaling_phases(spec)}
    panels = []
    for phase in scaling.scaling_phases(spec):
        name, dep = phase.phase, phase.deployment
        load = scaling.signal(name, deployments)
        replicas: list[tuple[str, str]] = [
            (scaling.healthy_replicas(dep), "running (healthy)"),
            (scaling.target_replicas(dep), "Serve's target"),
        ]
        per_replica: list[tuple[str, str]] = [(f"{load} / {scaling.healthy_replicas(dep)}", "signal per replica")]
        if phase.autoscaled:
            replicas += [(f"{load} / {phase.target_ongoing_requests:g}", "signal / target"),
                         (f"vector({phase.min_replicas})", "minReplicas"),
                         (f"vector({phase.max_replicas})", "maxReplicas")]
            per_replica.append((f"vector({phase.target_ongoing_requests:g})", "targetOngoingRequests"))
            bounds = (f"between {phase.min_replicas} and {phase.max_replicas}; alert after "
                      f"{scaling.PINNED_FOR} at the maximum")
        else:
            bounds = f"fixed at {phase.replicas} (no autoscaling block)"
        panels += [
            Panel(f"{name.capitalize()} replicas", f"Replicas of {dep}: running, Serve's target "
                  f"({bounds}), and the count the signal asks for ({scaling.signal_words(name, deployments)}"
                  " divided by targetOngoingRequests, before Serve's delays and bounds).", "short",
                  tuple(replicas), width=12),
            Panel(f"{name.capitalize()} scaling signal", f"The load {name} scales on, "
                  f"{scaling.signal_words(name, deployments)}, per running replica, against the "
                  "target per replica: above it for upscaleDelaySeconds Serve adds a replica, "
                  "below it for downscaleDelaySeconds it stops one.", "short",
                  tuple(per_replica), width=12),
        ]
    return panels


def rows(spec: DeploymentSpec) -> list[tuple[str, list[Panel]]]:
    """The dashboard's rows, top to bottom."""
    rows_ = [("SLO (ingress)", slo_strip(spec))]
    if spec.mode == "disaggregated":
        rows_ += [("Prefill", prefill_column()), ("KV handoff (NIXL)", kv_handoff(spec))]
    else:
        rows_ += [("Prefill (colocated engines)", prefill_column())]
    rows_ += [("Decode" if spec.mode == "disaggregated" else "Decode (colocated engines)",
               decode_column()), ("Scaling", scaling_row(spec)), ("Capacity", capacity(spec))]
    return rows_


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    steps: list[dict[str, Any]] = [{"color": "green", "value": None}]
    steps += [{"color": "red", "value": t} for t in panel.thresholds]
    return {
        "id": panel_id, "type": panel.kind, "title": panel.title,
        "description": panel.description, "datasource": DATASOURCE,
        "gridPos": {"h": 8, "w": panel.width, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": panel.unit,
                                     "thresholds": {"mode": "absolute", "steps": steps}},
                        "overrides": []},
        "targets": [{"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr,
                     "legendFormat": legend} for i, (expr, legend) in enumerate(panel.targets)],
    }


def dashboard_uid(stack: str) -> str:
    """The deployment dashboard's uid (Grafana caps uids at 40 characters): its URL is /d/<uid>."""
    return f"raypd-{stack}"[:40]


def deployment_dashboard(spec: DeploymentSpec) -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    y, next_id = 0, 1
    for title, row_panels in rows(spec):
        panels.append({"id": next_id, "type": "row", "title": title, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})
        next_id, y, x = next_id + 1, y + 1, 0
        for panel in row_panels:
            if x + panel.width > 24:
                x, y = 0, y + 8
            panels.append(_panel_json(panel, next_id, x, y))
            next_id, x = next_id + 1, x + panel.width
        y += 8
    return {
        "uid": dashboard_uid(spec.stack), "title": f"raypd {spec.stack}: {spec.model.id} ({spec.mode})",
        "tags": ["raypd", spec.mode], "timezone": "utc", "schemaVersion": SCHEMA_VERSION,
        "refresh": "30s", "time": {"from": "now-1h", "to": "now"}, "editable": False,
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus",
                                 "label": "Prometheus"}]},
        "panels": panels,
    }


def panel_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of a dashboard: what the tests run."""
    found: list[tuple[str, str]] = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            found.append((panel["title"], target["expr"]))
    return found


def dashboards(spec: DeploymentSpec) -> dict[str, dict[str, Any]]:
    """File name -> Grafana dashboard JSON model, for the dashboards ConfigMap."""
    return {f"raypd-{spec.stack}.json": deployment_dashboard(spec)}
