"""How each Contract 1 key looks on the deployment form: its label, help, section and any choices
the type alone does not give, and the sections and groups the page draws.

The one home of the form's words. Which keys exist, their types, defaults and Literal choices come
from DeploymentSpec (webui.forms derives the fields), so the page cannot drift from the spec: a key
the spec gains without an entry in PRESENTATION fails at import.
"""

from __future__ import annotations

from typing import Any

from components.config import catalogue, defaults
from components.config.spec import VLLM_DTYPES


def _gpu_choices() -> tuple[tuple[str, str], ...]:
    choices = []
    for item in catalogue.gpu_instance_types():
        efa = f", {item.max_efa_interfaces} EFA" if item.efa_supported else ", no EFA"
        price = (f", ${item.usd_per_hour:.2f}/h in {catalogue.PRICE_REGION}" if item.usd_per_hour is not None
                 else "")
        choices.append((item.name, f"{item.name} ({item.gpus}× {item.gpu_model}{efa}{price})"))
    return tuple(choices)


def _cpu_choices() -> tuple[tuple[str, str], ...]:
    return tuple((t.name, f"{t.name} ({t.vcpus} vCPU, {t.memory_gib} GiB)")
                 for t in catalogue.CATALOGUE.values() if t.gpus == 0)


PHASES = ("prefill", "decode", "colocated")

# A phase's autoscaling block (issue 30 §3; components.config.autoscaling_spec, docs/scaling.md). Its
# fields sit in the phase's section, in the "autoscaling" group: all empty = a fixed count.
_AUTOSCALING_WORDS: dict[str, dict[str, Any]] = {
    "minReplicas": dict(label="Min replicas", help="the fewest engines Serve keeps; required to autoscale"),
    "maxReplicas": dict(label="Max replicas", help="the most engines Serve may start; required to autoscale"),
    "targetOngoingRequests": dict(label="Target ongoing requests",
                                  help="requests per engine Serve scales to; required to autoscale"),
    "upscaleDelaySeconds": dict(label="Upscale delay (seconds)",
                                help=f"default {defaults.SERVE_UPSCALE_DELAY_SECONDS:g} (Serve's)"),
    "downscaleDelaySeconds": dict(label="Downscale delay (seconds)",
                                  help=f"default {defaults.SERVE_DOWNSCALE_DELAY_SECONDS:g} (Serve's)"),
}
# How each Contract 1 key looks on the page: the words, the section, choices the type alone does not
# give. Everything else (which keys exist, their types, defaults and Literal choices, which are
# optional) is read from DeploymentSpec, so the form cannot drift from the spec: a key the spec
# gains without an entry here fails at import.
_PHASE_WORDS: dict[str, dict[str, Any]] = {
    "instanceType": dict(label="Instance type", choices=_gpu_choices, wide=True,
                         help="GPU type for this phase's nodes (GPUs, EFA, on-demand price)"),
    "replicas": dict(label="Replicas", help="vLLM engines for this phase; with autoscaling, the count it starts at"),
    "tensorParallelSize": dict(label="Tensor parallel size", help="GPUs per replica split by tensor parallelism"),
    "pipelineParallelSize": dict(label="Pipeline parallel size", help="TP × PP must fit on one node"),
}
PRESENTATION: dict[str, dict[str, Any]] = {
    "aws:region": dict(label="AWS region"),
    "raypd:clusterName": dict(label="EKS cluster name", help="default raypd-<name>"),
    "raypd:kubernetesVersion": dict(label="Kubernetes version"),
    "raypd:availabilityZone": dict(
        label="GPU availability zone",
        help="default: the first zone offering every GPU type (EFA cannot cross zones)"),
    "raypd:systemNodes.instanceType": dict(label="System node type", section="system", choices=_cpu_choices),
    "raypd:systemNodes.count": dict(label="System nodes", section="system"),
    "raypd:mode": dict(label="Mode", section="serving",
                       help="disaggregated splits prefill and decode; colocated is the baseline"),
    "raypd:model.id": dict(label="Served model name", section="model"),
    "raypd:model.source": dict(label="Model source", section="model",
                               help="Hugging Face repo id (org/name) or s3:// URI"),
    "raypd:model.maxModelLen": dict(label="Max model length", section="model"),
    "raypd:model.dtype": dict(label="dtype", section="model",
                              choices=lambda: tuple((d, d) for d in VLLM_DTYPES)),
    "raypd:model.gpuMemoryUtilization": dict(label="GPU memory utilization", section="model",
                                             help="0 < value ≤ 0.98"),
    "raypd:model.enforceEager": dict(label="Enforce eager (no CUDA graphs)", section="model"),
    **{f"raypd:{phase}.{key}": dict(words, section=phase)
       for phase in PHASES for key, words in _PHASE_WORDS.items()},
    **{f"raypd:{phase}.autoscaling.{key}": dict(words, section=phase, group="autoscaling")
       for phase in PHASES for key, words in _AUTOSCALING_WORDS.items()},
    "raypd:upgradeStrategy": dict(label="Rollout of disruptive changes", section="serving", wide=True,
                                  choices=lambda: (
        ("inPlace", "in place: about one model load of downtime, no extra nodes"),
        ("newCluster", "zero downtime: a second Ray cluster on extra GPU nodes during the switch"))),
    "raypd:kvTransfer.connector": dict(label="KV connector", section="kv"),
    "raypd:kvTransfer.backend": dict(label="KV transfer backend", section="kv", choices=lambda: (
        ("LIBFABRIC", "LIBFABRIC (EFA)"), ("UCX", "UCX (TCP speed on EFA)"))),
    # issue 31 (components.config.serving_spec.KvTransferSpec, docs/resilience.md).
    "raypd:kvTransfer.loadFailurePolicy": dict(label="On a failed KV load", section="kv", wide=True, choices=lambda: (
        ("fail", "fail: the request gets an error (seen by clients and alerts)"),
        ("recompute", "recompute: decode redoes the prefill, answers 200 (hides the failure)"))),
    "raypd:kvTransfer.leaseSeconds": dict(label="KV lease (seconds)", section="kv",
                                          help="how long prefill keeps a request's KV blocks for decode; "
                                               "6-3600, default 300"),
    "raypd:image": dict(label="Container image", section="cluster",
                        help="default: the Ray LLM Deep Learning Container of the region"),
    "raypd:rayVersion": dict(label="Ray version", section="cluster"),
    "raypd:kuberayVersion": dict(label="KubeRay version", section="cluster"),
    "raypd:namespace": dict(label="Namespace", section="cluster"),
    "raypd:serviceName": dict(label="RayService name", section="cluster"),
    "raypd:hfToken": dict(label="Hugging Face token", section="cluster",
                          help="for gated models; stored only as an encrypted Pulumi secret, never shown again"),
    "raypd:apiAccessCidrs": dict(label="Kubernetes API access (CIDRs)", section="cluster", wide=True,
                                 help="comma-separated IPv4 CIDRs that may reach the cluster's public "
                                      "API endpoint: where Deploy, the web app and kubectl run; empty: "
                                      "every address (0.0.0.0/0), with a warning"),
    # raypd:endpoint (issue 17; components.config.endpoint_spec, docs/endpoint.md).
    "raypd:endpoint.scope": dict(label="Endpoint reachable from", section="endpoint", choices=lambda: (
        ("vpc", "vpc: an internal load balancer, the VPC (and peered networks) only"),
        ("internet", "internet: an internet-facing load balancer, TLS (needs a certificate)"),
        ("cluster", "cluster: pods in the cluster only, no load balancer"))),
    "raypd:endpoint.auth": dict(label="Endpoint authentication", section="endpoint", choices=lambda: (
        ("apiKey", "API keys (Authorization: Bearer <key>)"),
        ("none", "none (cluster or vpc only; anyone who can reach it may use it)"))),
    "raypd:endpoint.certificateArn": dict(label="TLS certificate (ACM ARN)", section="endpoint", wide=True,
                                          help="required for internet; optional for vpc (HTTPS)"),
    "raypd:endpoint.allowedCidrs": dict(label="Endpoint allowed CIDRs", section="endpoint", wide=True,
                                        help="comma-separated IPv4 CIDRs that may connect; empty: the "
                                             "VPC's range (vpc) or every address (internet)"),
    "raypd:endpoint.host": dict(label="Endpoint host name", section="endpoint",
                                help="optional: the DNS name you point at the load balancer"),
    "raypd:adminRoleArns": dict(label="Admin IAM roles", section="cluster", wide=True,
                                help="comma-separated IAM role ARNs that get cluster-admin (EKS access "
                                     "entries): CI's, teammates'; not the role that deploys (it is admin "
                                     "already, and listing it fails the first Deploy)"),
    # raypd:observability (issue 18; components.config.observability_spec, docs/observability.md).
    "raypd:observability.enabled": dict(label="Metrics stack", section="observability",
                                        help="Prometheus, Grafana, dcgm-exporter and the PodMonitors"),
    "raypd:observability.prometheusStorageSize": dict(label="Prometheus volume", section="observability",
                                                      help="e.g. 50Gi"),
    "raypd:observability.prometheusRetention": dict(label="Prometheus retention", section="observability",
                                                    help="e.g. 15d"),
    "raypd:observability.grafanaStorageSize": dict(label="Grafana volume", section="observability",
                                                   help="e.g. 10Gi"),
    # raypd:faultTolerance (issue 31; components.config.fault_tolerance_spec, docs/resilience.md).
    "raypd:faultTolerance.gcs": dict(label="Head fault tolerance (GCS)", section="faultTolerance", wide=True,
                                     choices=lambda: (
        ("", "default: ElastiCache when disaggregated, off when colocated"),
        ("elasticache", "elasticache: a managed Valkey in the VPC (TLS, auth token)"),
        ("external", "external: your Redis (address and password Secret below)"),
        ("off", "off: a head restart restarts every engine"))),
    "raypd:faultTolerance.cacheNodeType": dict(label="ElastiCache node type", section="faultTolerance",
                                               help="gcs elasticache only; e.g. cache.t4g.small"),
    "raypd:faultTolerance.redisAddress": dict(label="Redis address", section="faultTolerance", wide=True,
                                              help="gcs external only: rediss://host:port"),
    "raypd:faultTolerance.redisPasswordSecret": dict(
        label="Redis password Secret", section="faultTolerance",
        help="gcs external only: <Secret name>/<key> in the deployment's namespace"),
    "raypd:inClusterClients": dict(label="In-cluster client namespaces", section="cluster", wide=True,
                                   help="comma-separated namespaces whose pods may call the Serve port "
                                        "directly, without the gateway or an API key; empty: none"),
}
SECTIONS = (
    ("general", "Deployment"),
    ("system", "System nodes"),
    ("serving", "Serving mode"),
    ("model", "Model"),
    ("prefill", "Prefill"),
    ("decode", "Decode"),
    ("colocated", "Colocated baseline"),
    ("kv", "KV transfer"),
    ("cluster", "Cluster and image"),
    ("endpoint", "Endpoint"),
    ("observability", "Observability"),
    ("faultTolerance", "Head fault tolerance"),
)


# Groups of fields drawn as a fieldset inside their section: (title, one line of help; a "docs/x.md"
# in it becomes a link to the served doc).
GROUPS: dict[str, tuple[str, str]] = {
    "autoscaling": ("Autoscaling", "Empty: the phase runs a fixed count of Replicas. Fill min, max and "
                                   "target for Serve to scale it on its own load, from Replicas "
                                   "(see docs/scaling.md)."),
}
