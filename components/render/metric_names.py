"""Every metric name raypd's recording rules, alerts and dashboards query: the one place they live.

A renamed metric upstream then breaks one line here and the PromQL tests that run these names
against the real captures (tests/unit/test_observability_promql.py), not a dashboard in silence.

Where each name comes from (read in the sources of the versions the captures were made with,
vllm 0.32 and ray 2.60; see tests/fixtures/real/README.md):
- vLLM engines (`vllm/v1/metrics/loggers.py`, NIXL's in
  `vllm/distributed/kv_transfer/kv_connector/v1/nixl/stats.py`) export `vllm:<name>`. Under Ray
  Serve LLM the same metric goes through Ray's metrics agent (`vllm/v1/metrics/ray_wrappers.py`):
  ":" becomes "_" and Ray prefixes `ray_`, so `ray_vllm_<name>`, and every series gets
  `ReplicaId` (the Serve replica's `ReplicaID.unique_id`, e.g. "8i8bsaay"), plus Ray's own
  `WorkerId`, `NodeAddress`, `SessionName`; vLLM's `model_name` and `engine` stay. No series
  says which Serve deployment (prefill or decode) it belongs to.
- Ray Serve (`ray/serve/metrics.py` `_add_serve_metric_default_tags`, `ray/serve/_private/
  replica.py`): every metric a replica records carries `deployment`, `replica` and
  `application`, where `replica` is `replica_context.replica_tag` == `ReplicaID.unique_id`: the
  very value vLLM puts in `ReplicaId`. `serve_deployment_replica_starts` is incremented once when
  a replica starts, so each live replica exports that counter (value >= 1: Ray drops counters that
  never moved) for its whole life: the join the recording rules use to give every engine series
  its deployment, hence its phase; the replica's `serve_replica_processing_queries` gauge (set
  every metrics interval) carries the same labels, and the join reads either. A real Ray 2.60 page shows it:
  tests/fixtures/real/ray/serve-metrics-probe.txt (`replica="<the id the replica reported>"`).
- The HTTP proxy's request counters (`ray/serve/_private/request_ingress_metrics.py`):
  `serve_num_http_requests` {route, method, application, status_code} and
  `serve_num_http_error_requests` {route, error_code, method, application}.
- The controller's `serve_deployment_replica_healthy` {deployment, application}
  (`ray/serve/_private/deployment_state.py`): healthy replicas per deployment.
- Autoscaling (issue 30 §3; read in Ray 2.58's wheel and 2.60's, the same names and tags in both):
  the controller's `serve_autoscaling_target_replicas` {deployment, application}
  (`ray/serve/_private/deployment_state.py`, set whenever the target count changes: the count Serve
  is moving the deployment to, within min/max), and the handles' `serve_deployment_queued_queries`
  {deployment, application, handle, actor_id} (`ray/serve/_private/router.py`: requests a caller
  holds for the deployment, waiting for a replica). With `serve_replica_processing_queries` (a
  replica's running requests) they give the signals raypd's scaling policy computes
  (components/render/observability_scaling.py). No capture holds the two (they were made before
  issue 30): their queries are only parsed by the PromQL tests, and run on typed series.
- NVIDIA's DCGM exporter (`DCGM_FI_PROF_GR_ENGINE_ACTIVE`, 0..1, labelled `Hostname`) and
  kube-state-metrics (`kube_pod_status_phase`, `kube_node_status_condition`, `kube_node_labels`)
  are not in the captures: their panels and alerts are only parsed by the tests.
"""

from __future__ import annotations

# The prefix Ray's metrics agent puts before a vLLM metric (after ":" -> "_").
RAY_VLLM_PREFIX = "ray_vllm_"
REPLICA_ID_LABEL = "ReplicaId"          # vLLM's series under Ray Serve
SERVE_REPLICA_LABEL = "replica"         # Ray Serve's own series
SERVE_DEPLOYMENT_LABEL = "deployment"
SERVE_APPLICATION_LABEL = "application"
PHASE_LABEL = "phase"


def ray_vllm(name: str) -> str:
    """vLLM's metric `vllm:<name>` as Ray Serve LLM exports it."""
    return RAY_VLLM_PREFIX + name


# ---- vLLM engine (histograms are base names: add _bucket, _sum, _count) ----
TTFT = ray_vllm("time_to_first_token_seconds")
ITL = ray_vllm("inter_token_latency_seconds")
TPOT = ray_vllm("request_time_per_output_token_seconds")
QUEUE_TIME = ray_vllm("request_queue_time_seconds")
PREFILL_TIME = ray_vllm("request_prefill_time_seconds")
PROMPT_TOKENS = ray_vllm("prompt_tokens_total")
GENERATION_TOKENS = ray_vllm("generation_tokens_total")
REQUEST_SUCCESS = ray_vllm("request_success_total")
RUNNING = ray_vllm("num_requests_running")
WAITING = ray_vllm("num_requests_waiting")
KV_CACHE_USAGE = ray_vllm("kv_cache_usage_perc")        # 0..1, despite the name
PREEMPTIONS = ray_vllm("num_preemptions_total")
PREFIX_CACHE_QUERIES = ray_vllm("prefix_cache_queries_total")
PREFIX_CACHE_HITS = ray_vllm("prefix_cache_hits_total")
# NIXL (per engine rank: each TP/PP worker of an engine reports its own transfers)
NIXL_XFER_TIME = ray_vllm("nixl_xfer_time_seconds")
NIXL_BYTES = ray_vllm("nixl_bytes_transferred")
NIXL_FAILED_TRANSFERS = ray_vllm("nixl_num_failed_transfers_total")
NIXL_KV_EXPIRED = ray_vllm("nixl_num_kv_expired_reqs_total")

# ---- Ray Serve ----
SERVE_REPLICA_STARTS = "ray_serve_deployment_replica_starts_total"
SERVE_REPLICA_QUERIES = "ray_serve_replica_processing_queries"   # gauge, same labels
SERVE_HTTP_REQUESTS = "ray_serve_num_http_requests_total"
SERVE_HTTP_ERRORS = "ray_serve_num_http_error_requests_total"
SERVE_REPLICA_HEALTHY = "ray_serve_deployment_replica_healthy"
SERVE_TARGET_REPLICAS = "ray_serve_autoscaling_target_replicas"   # the controller's, per deployment
SERVE_QUEUED_QUERIES = "ray_serve_deployment_queued_queries"      # per calling handle
# The controller's count of failed replica health checks (Ray 2.58 and 2.60
# `ray/serve/_private/deployment_state.py`, `serve_health_check_failures_total`, tags deployment,
# application and, with RAY_SERVE_CONTROLLER_METRICS_INCLUDE_HIGH_CARDINALITY_TAGS on as it is by
# default, replica): one per check that raised (the replica's actor died: RayActorError ->
# ACTOR_CRASHED, or the replica's check_health raised) or timed out. The Prometheus exporter strips
# the name's `_total` and puts it back (prometheus_client CounterMetricFamily), so the name is
# unchanged after Ray's `ray_` prefix. Not `serve_deployment_replica_starts`: Serve never restarts
# a replica actor in place (max_restarts 0), it starts a new replica under a new id, so that
# counter is 1 on every replica and a replacement looks like a first start or a scale-up.
SERVE_HEALTH_CHECK_FAILURES = "ray_serve_health_check_failures_total"

# ---- GPUs and Kubernetes (not in the captures) ----
DCGM_GPU_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
# The pod a series belongs to. On what raypd's PodMonitors scrape (the Ray pods' own series, Ray
# Serve's and vLLM's among them), the target labels the Prometheus Operator adds to every PodMonitor
# target (prometheus-operator v0.93 pkg/prometheus/promcfg.go, generatePodMonitorConfig:
# __meta_kubernetes_namespace -> namespace, __meta_kubernetes_pod_name -> pod); on dcgm-exporter's
# series, the pod holding the GPU (dcgm-exporter 4.5.3-4.8.2 internal/pkg/transformation/const.go
# `podAttribute`, `namespaceAttribute`, from the kubelet's pod-resources API), kept as they are by
# its ServiceMonitor's honorLabels.
POD_LABEL = "pod"
POD_NAMESPACE_LABEL = "namespace"
KUBE_POD_PHASE = "kube_pod_status_phase"
# 1 while a pod's PodScheduled condition is False (no node fits it), absent otherwise: labels
# namespace, pod, uid (kube-state-metrics internal/store/pod.go
# `createPodStatusUnschedulableFamilyGenerator`, docs/metrics/workload/pod-metrics.md, STABLE).
KUBE_POD_UNSCHEDULABLE = "kube_pod_status_unschedulable"
KUBE_NODE_CONDITION = "kube_node_status_condition"
KUBE_NODE_LABELS = "kube_node_labels"
# Per container, from 0 (labels namespace, pod, uid, container) and the pod's allow-listed labels
# as label_<key> (namespace, pod, uid; NO series at all without a pods= allowlist): both STABLE in
# kube-state-metrics internal/store/pod.go (read at v2.9.2 and v2.20.0;
# docs/metrics/workload/pod-metrics.md).
KUBE_POD_RESTARTS = "kube_pod_container_status_restarts_total"
KUBE_POD_LABELS = "kube_pod_labels"
