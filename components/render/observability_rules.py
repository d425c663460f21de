"""The PrometheusRule of a deployment (issue 18 §1, §3): phase labels for the engine series, the
few aggregates the dashboard and alerts share, and the alerts of PD serving.

Why recording rules: vLLM's series under Ray Serve carry `ReplicaId` and `model_name` but not the
Serve deployment, so nothing says whether an engine prefills or decodes. Ray Serve's own series
carry `deployment` and `replica`, and `replica` holds the same `ReplicaID.unique_id` as vLLM's
`ReplicaId` (components/render/metric_names.py cites both sources). One rule turns the replicas of this
deployment's Serve deployments (`Prefill:<model>`, `Decode:<model>`, or the colocated
`LLMServer:<model>`) into `replica:raypd_phase:info{ReplicaId, deployment, phase}`; one rule per
engine metric joins it on: `engine:<metric>:phase`. Only this deployment's replicas join, so the
phase-labelled series are this deployment's engines and no other app's.

The same Serve series also say which pod each replica runs on (their `namespace` and `pod` target
labels: a replica's series come out of the metrics agent of its own Ray pod), so
`pod:raypd_phase:info{namespace, pod, phase}` gives a phase to whatever else is labelled by pod:
dcgm-exporter labels each GPU with the pod holding it, so the GPU panels join on the pod. Not on a
node label: only per-phase node groups carry `raypd.io/phase`, the reference layout's shared group
does not (components.plan.topology), and there only Ray knows which node prefills.

Names follow Prometheus's level:metric:operations convention: level `engine` keeps every engine
label (the join adds `phase` and `deployment`), `phase` is aggregated by phase, and `raypd_` marks
the metrics raypd derives itself.

Counters that Ray only exports once non-zero (NIXL's failure and expiry counters: the real Ray
capture has no `ray_vllm_nixl_num_failed_transfers*` series while the count is 0) appear already
at 1, so `increase()` alone never sees the first failure; their alerts also fire on a series that
is new within the window (`x unless x offset 5m`).
"""

from __future__ import annotations

from typing import Any

from components.config import defaults
from components.config.spec import DeploymentSpec
from components.plan.slo import slo_for
from components.render import metric_names as m
from components.render.observability_faults import (
    HEAD_WINDOW,
    KUBE_STATE_POD_LABELS,
    REPLICA_WINDOW,
    gpu_node_not_ready_expr,
    head_restarted_expr,
    replica_failed_expr,
    system_node_not_ready_expr,
)
from components.render.observability_scaling import PINNED_FOR, pinned_at_max_expr
from components.render.serve_config import APP_NAME, serve_deployment_name

# The runbooks, relative to the repository root: raypd has no canonical public URL to point at.
RUNBOOK = "docs/troubleshooting.md"
PHASE_INFO = "replica:raypd_phase:info"
POD_PHASE_INFO = "pod:raypd_phase:info"
# Engine metrics the dashboard and alerts read by phase; histograms get _bucket, _sum and _count.
ENGINE_GAUGES = (m.RUNNING, m.WAITING, m.KV_CACHE_USAGE)
ENGINE_COUNTERS = (m.PROMPT_TOKENS, m.GENERATION_TOKENS, m.REQUEST_SUCCESS, m.PREEMPTIONS,
                   m.PREFIX_CACHE_QUERIES, m.PREFIX_CACHE_HITS, m.NIXL_FAILED_TRANSFERS,
                   m.NIXL_KV_EXPIRED)
ENGINE_HISTOGRAMS = (m.TTFT, m.ITL, m.TPOT, m.QUEUE_TIME, m.PREFILL_TIME, m.NIXL_XFER_TIME,
                     m.NIXL_BYTES)
WINDOW = "5m"
# The series that says an engine is there. Not a gauge: Ray 2.60 exports a vLLM gauge only for the
# export rounds in which the engine set it, so an idle engine's num_requests_running, waiting and
# KV cache usage have no series at all (seen on real Ray Serve LLM: one sample after verify's
# chat, then none; tests/real/ray/test_verify_on_real_ray.py). Counters stay exported once born,
# and every engine that served has generated tokens (prefill one per request).
ENGINE_PRESENCE = m.GENERATION_TOKENS
# The node labels kube-state-metrics must export in kube_node_labels for the GPU- and system-node
# alerts (both roles share the key `role`) and the dashboard's per-type node panel (its
# --metric-labels-allowlist=nodes=[...]).
KUBE_STATE_NODE_LABELS = (next(iter(defaults.GPU_ROLE_LABEL)), defaults.INSTANCE_TYPE_LABEL)
# How long a Ray pod may be unschedulable before it counts as waiting for a node that is not coming:
# a new GPU node launches, boots, joins and gets its device plugins in a few minutes
# (docs/scaling.md, "GPU nodes"); the node autoscaler gives up on one after 15 (its
# --max-node-provision-time).
PENDING_FOR_NODES_FOR = "10m"


def phased(metric: str) -> str:
    """The recorded, phase-labelled form of an engine series."""
    return f"engine:{metric}:phase"


def ttft_p95() -> str:
    return f"phase:raypd_ttft_seconds:p95_{WINDOW}"


def _replica_phases(spec: DeploymentSpec, by: str) -> list[str]:
    """One expression per phase: this deployment's live Serve replicas of that phase, one series
    per (deployment, `by`), with the `phase` label added."""
    parts = []
    for phase in spec.phases:
        deployment = serve_deployment_name(phase, spec.model.id)
        where = (f'{{{m.SERVE_APPLICATION_LABEL}="{APP_NAME}",'
                 f'{m.SERVE_DEPLOYMENT_LABEL}="{deployment}"}}')
        # Either per-replica Serve series will do: one missing in some Ray version loses nothing.
        selector = f"{m.SERVE_REPLICA_STARTS}{where} or {m.SERVE_REPLICA_QUERIES}{where}"
        parts.append(f'label_replace(max by ({m.SERVE_DEPLOYMENT_LABEL}, {by}) ({selector}), '
                     f'"{m.PHASE_LABEL}", "{phase}", "", "")')
    return parts


def _phase_info(spec: DeploymentSpec) -> str:
    parts = [f'label_replace({part}, "{m.REPLICA_ID_LABEL}", "$1", "{m.SERVE_REPLICA_LABEL}", "(.+)")'
             for part in _replica_phases(spec, m.SERVE_REPLICA_LABEL)]
    # `* 0 + 1`: an info series (value 1) whatever the counter's value; `max by` one per replica.
    return (f"max by ({m.REPLICA_ID_LABEL}, {m.SERVE_DEPLOYMENT_LABEL}, {m.PHASE_LABEL}) ("
            + " or ".join(parts) + ") * 0 + 1")


def _pod_phase_info(spec: DeploymentSpec) -> str:
    """One info series per Ray pod running a replica of a phase (see the module docstring)."""
    pod = f"{m.POD_NAMESPACE_LABEL}, {m.POD_LABEL}"
    return (f"max by ({pod}, {m.PHASE_LABEL}) ("
            + " or ".join(_replica_phases(spec, pod)) + ") * 0 + 1")


def _join(metric: str) -> str:
    return (f"{metric} * on({m.REPLICA_ID_LABEL}) group_left({m.PHASE_LABEL}, "
            f"{m.SERVE_DEPLOYMENT_LABEL}) {PHASE_INFO}")


def engine_series() -> list[str]:
    """Every raw engine series name the rules give a phase."""
    names = list(ENGINE_GAUGES) + list(ENGINE_COUNTERS)
    for base in ENGINE_HISTOGRAMS:
        names += [f"{base}_bucket", f"{base}_sum", f"{base}_count"]
    return names


def recording_rules(spec: DeploymentSpec) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = [{"record": PHASE_INFO, "expr": _phase_info(spec)},
                                   {"record": POD_PHASE_INFO, "expr": _pod_phase_info(spec)}]
    rules += [{"record": phased(name), "expr": _join(name)} for name in engine_series()]
    return rules


def aggregate_rules() -> list[dict[str, Any]]:
    """By-phase aggregates shared by the SLO strip and the TTFT alert."""
    return [{
        "record": ttft_p95(),
        "expr": guarded_quantile(0.95, m.TTFT, m.PHASE_LABEL),
    }]


def guarded_quantile(q: float, histogram: str, by: str, where: str = "") -> str:
    """histogram_quantile by `by`, only where the histogram saw observations in the window.

    Without the guard an idle phase yields NaN, and a sum over phases (TTFT = prefill's + decode's)
    would be NaN whenever one phase idles: an alert comparing it would never fire."""
    sel = f"{{{where}}}" if where else ""
    return (f"histogram_quantile({q}, sum by ({by}, le) (rate({phased(histogram + '_bucket')}{sel}"
            f"[{WINDOW}]))) and on({by}) (sum by ({by}) (rate({phased(histogram + '_count')}{sel}"
            f"[{WINDOW}])) > 0)")


def _new_or_increased(series: str, where: str) -> str:
    """Increase over the window, or a counter series born inside it (Ray's first export is >= 1)."""
    by = f"sum by ({m.PHASE_LABEL}, {m.SERVE_DEPLOYMENT_LABEL}, {m.REPLICA_ID_LABEL})"
    sel = f"{series}{{{where}}}" if where else series
    return (f"({by} (increase({sel}[{WINDOW}])) > 0) or "
            f"({by} ({sel} unless {sel} offset {WINDOW}) > 0)")


def _alert(name: str, expr: str, for_: str, severity: str, summary: str, description: str,
           anchor: str) -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if for_:
        rule["for"] = for_
    rule["labels"] = {"severity": severity, "raypd_alert": "true"}
    rule["annotations"] = {"summary": summary, "description": description,
                           "runbook_url": f"{RUNBOOK}#{anchor}"}
    return rule


def _pinned_at_max(spec: DeploymentSpec) -> list[dict[str, Any]]:
    """A phase whose Serve target has sat at its maxReplicas for PINNED_FOR: only on a stack where
    some phase autoscales, and only for those phases (components/render/observability_scaling.py)."""
    expr = pinned_at_max_expr(spec)
    if expr is None:
        return []
    return [_alert(
        "RaypdPhaseAtMaxReplicas", expr, PINNED_FOR, "warning",
        "{{ $labels.phase }} ({{ $labels.deployment }}) has wanted its maxReplicas for " + PINNED_FOR,
        "Serve's target replica count of the phase has been at the phase's maxReplicas for "
        f"{PINNED_FOR}: its load asks for at least every engine it may have, so the phase cannot "
        "grow further and a heavier load only queues (TTFT for prefill, ITL and waiting requests "
        "for decode). Raise raypd:<phase>.autoscaling.maxReplicas (the preflight checks the vCPU "
        "quota for the new maximum), or look at the Scaling panel for why the signal is high.",
        "alert-phase-at-max-replicas")]


def alert_rules(spec: DeploymentSpec) -> list[dict[str, Any]]:
    slo = slo_for(spec)
    decodes = f'{m.PHASE_LABEL}=~"decode|colocated"'
    by_engine = f"{m.PHASE_LABEL}, {m.SERVE_DEPLOYMENT_LABEL}, {m.REPLICA_ID_LABEL}"
    return [
        _alert("RaypdNixlTransferFailed", _new_or_increased(phased(m.NIXL_FAILED_TRANSFERS), ""),
               "", "critical",
               "NIXL KV transfers failed on {{ $labels.deployment }} ({{ $labels.ReplicaId }})",
               "A decode engine could not read a request's KV cache from prefill over NIXL "
               "(a handshake, transfer or notification failed). Those requests failed (policy "
               "fail) or were recomputed on decode (policy recompute): TTFT and GPU time suffer. "
               "Check the NIXL side channel between the Prefill and Decode pods, the EFA devices, "
               "and the decode replica's log for `NIXL transfer failure`.",
               "alert-nixl-transfers-failed"),
        _alert("RaypdKvExpired", _new_or_increased(phased(m.NIXL_KV_EXPIRED), ""), "", "warning",
               "Prefill freed KV cache that decode never read ({{ $labels.deployment }})",
               "A prefill engine freed a request's KV blocks when their NIXL lease ran out "
               "(raypd:kvTransfer.leaseSeconds) before every decode worker had read them: "
               "decode was too slow to pick the request up (queueing, a full KV cache), its "
               "decode died, or the request was lost between the two. The prefill work was "
               "wasted, and a decode that reads after the expiry answers 200 with wrong text "
               "(docs/resilience.md): no metric shows that. Look at decode's waiting requests "
               "and KV cache usage; raise leaseSeconds if decode queues for that long.",
               "alert-kv-expired"),
        _alert("RaypdDecodeKvCacheFull",
               f"max by ({m.PHASE_LABEL}, {m.SERVE_DEPLOYMENT_LABEL}, {m.REPLICA_ID_LABEL}) "
               f"({phased(m.KV_CACHE_USAGE)}{{{decodes}}}) > 0.9", "5m", "warning",
               "Decode KV cache above 90% for 5 minutes ({{ $labels.ReplicaId }})",
               "The decode engine's KV cache is nearly full: new requests wait for blocks and "
               "running ones get preempted (recomputed), so ITL and TTFT climb. Add decode "
               "replicas (raypd:decode.replicas) or lower max_model_len / concurrency.",
               "alert-decode-kv-cache-full"),
        _alert("RaypdDecodeRequestsWaiting",
               f"sum by ({m.PHASE_LABEL}, {m.SERVE_DEPLOYMENT_LABEL}, {m.REPLICA_ID_LABEL}) "
               f"({phased(m.WAITING)}{{{decodes}}}) > 0", "2m", "warning",
               "Requests waiting on decode for 2 minutes ({{ $labels.ReplicaId }})",
               "Requests whose prompt was prefilled are queued on decode: decode is the "
               "bottleneck (KV cache or max_num_seqs full), so their prefilled KV may expire. "
               "Scale decode out, or rebalance prefill:decode replicas.",
               "alert-decode-requests-waiting"),
        _alert("RaypdTtftAboveSlo",
               f"sum({ttft_p95()}) > {slo.ttft_p95_seconds}", "5m", "warning",
               f"TTFT p95 above the {slo.ttft_p95_seconds} s SLO",
               "Time to first token at p95 (prefill plus decode engine TTFT, the part of the "
               "ingress TTFT the engines see) is above the deployment's SLO for 5 minutes. Read "
               "the prefill column (queue time, waiting) and the KV handoff (NIXL time) to find "
               "which side is slow; scale prefill when prefill queues.",
               "alert-ttft-above-slo"),
        _alert("RaypdEngineStoppedReporting",
               f"max by ({by_engine}) (present_over_time({phased(ENGINE_PRESENCE)}[1h])) unless "
               f"max by ({by_engine}) ({phased(ENGINE_PRESENCE)})",
               "2m", "critical",
               "Engine {{ $labels.ReplicaId }} ({{ $labels.deployment }}) stopped reporting",
               "An engine that exported metrics in the last hour no longer does: its replica "
               "died or restarted, or Ray's metrics agent on its node stopped. Its phase serves "
               "with fewer engines. Check the RayService and the replica's logs.",
               "alert-engine-stopped-reporting"),
        _alert("RaypdGpuNodeNotReady",
               gpu_node_not_ready_expr(), "5m", "critical",
               "GPU node {{ $labels.node }} is not Ready",
               "A GPU node of the deployment is not Ready: the replicas on it are gone or will "
               "be, and prefill or decode runs short until it returns or is replaced. Check the "
               "node's conditions and the managed node group. Needs kube-state-metrics with "
               f"--metric-labels-allowlist=nodes=[{','.join(KUBE_STATE_NODE_LABELS)}].",
               "alert-gpu-node-not-ready"),
        _alert("RaypdPodsPendingForNodes",
               f'max by ({m.POD_NAMESPACE_LABEL}, {m.POD_LABEL}) '
               f'({m.KUBE_POD_UNSCHEDULABLE}{{{m.POD_NAMESPACE_LABEL}="{spec.namespace}"}}) > 0',
               PENDING_FOR_NODES_FOR, "warning",
               "Pod {{ $labels.pod }} has waited " + PENDING_FOR_NODES_FOR + " for a node",
               "A Ray pod of the deployment fits no node, longer than a new GPU node takes to "
               "join: the node autoscaler cannot add one (its node group is at maxReplicas' size, "
               "the region's vCPU quota is spent, or EC2 has no capacity for the type in the zone "
               "or the placement group: InsufficientInstanceCapacity). The phase serves short of "
               "its target. The pod's events say which (FailedScheduling, NotTriggerScaleUp, "
               "TriggeredScaleUp); so does the kube-system/cluster-autoscaler-status ConfigMap.",
               "alert-pods-pending-for-nodes"),
        *_pinned_at_max(spec),
        *_fault_alerts(spec),
    ]


def _fault_alerts(spec: DeploymentSpec) -> list[dict[str, Any]]:
    """The faults of docs/resilience.md the alerts above do not already name (expressions and
    what each can and cannot tell apart: components/render/observability_faults.py)."""
    return [
        _alert("RaypdReplicaHealthCheckFailed", replica_failed_expr(spec), "", "warning",
               "A {{ $labels.phase }} replica failed its health check ({{ $labels.replica }})",
               "Ray Serve's controller counted a failed health check of a replica of "
               "{{ $labels.deployment }} in the last " + REPLICA_WINDOW + ": its actor was "
               "dead (the replica's pod, node or engine process was lost; Serve starts a "
               "replacement at once) or the check raised or went unanswered for 10 s (three in "
               "a row and Serve replaces it). Requests in flight on a dead replica failed, and "
               "nothing retried a started stream. A first start, a scale-up or a planned roll "
               "fails no check and does not fire this.",
               "alert-replica-health-check-failed"),
        _alert("RaypdHeadRestarted", head_restarted_expr(spec), "", "critical",
               "Ray head pod {{ $labels.pod }} restarted",
               "The Ray head of the deployment restarted in the last " + HEAD_WINDOW + ": its "
               "ray-head container restarted, or KubeRay made a new head pod for the same Ray "
               "cluster (the old one was deleted, evicted or lost with its node). With GCS fault "
               "tolerance serving goes on, but no replica is replaced until the head is back; "
               "without it every engine restarts. A head that keeps restarting with GCS fault "
               "tolerance on is the sign of a lost Redis: the GCS exits when Redis does not "
               "answer. Needs kube-state-metrics with "
               f"--metric-labels-allowlist=pods=[{','.join(KUBE_STATE_POD_LABELS)}].",
               "alert-head-restarted"),
        _alert("RaypdSystemNodeNotReady", system_node_not_ready_expr(), "5m", "critical",
               "System node {{ $labels.node }} is not Ready",
               "A system node (the Ray head, the KubeRay operator, the endpoint's Envoy proxy, "
               "Prometheus and Alertmanager run there) has not been Ready for 5 minutes: what "
               "ran on it moves to another system node, the endpoint is down until its proxy "
               "runs elsewhere, and the head restarts. Check the node's conditions and the "
               "system node group.",
               "alert-system-node-not-ready"),
    ]


def prometheus_rule_groups(spec: DeploymentSpec) -> list[dict[str, Any]]:
    """The `spec.groups` of the deployment's PrometheusRule (prometheus-operator format)."""
    return [
        {"name": "raypd-phase", "rules": recording_rules(spec) + aggregate_rules()},
        {"name": "raypd-alerts", "rules": alert_rules(spec)},
    ]
