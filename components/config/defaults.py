"""Reference values: the AWS multi-node Ray LLM DLC deployment, written once.

Every default of the stack configuration (Contract 1) and every pinned version lives here, so the
spec, the renderers, the web form and the docs cannot disagree about what "the reference" is.
"""

from __future__ import annotations

from typing import Final

REGION = "us-east-2"
KUBERNETES_VERSION = "1.35"

# Kubernetes minor versions on Amazon EKS: (end of standard support, end of extended support).
# Standard support lasts 14 months from the EKS release, extended support 12 more; after that EKS
# creates no cluster of the version and auto-upgrades existing ones. Source: the EKS user guide,
# "Understand the Kubernetes version lifecycle on EKS", release calendar
# (https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html), as mirrored by
# endoflife.date/amazon-eks. As of 2026-12-01; 1.36 is out on EKS but its dates were not
# confirmed, so versions newer than the table are let through (EKS itself refuses unknown ones).
EKS_VERSIONS_AS_OF = "2026-12-01"
EKS_VERSIONS_SOURCE = "https://docs.aws.amazon.com/eks/latest/userguide/kubernetes-versions.html"
EKS_KUBERNETES_VERSIONS: dict[str, tuple[str, str]] = {
    "1.29": ("2025-03-23", "2026-03-23"),
    "1.30": ("2025-07-23", "2026-07-23"),
    "1.31": ("2025-11-26", "2026-11-26"),
    "1.32": ("2026-03-23", "2027-03-23"),
    "1.33": ("2026-07-29", "2027-07-29"),
    "1.34": ("2026-12-02", "2027-12-02"),
    "1.35": ("2027-03-27", "2028-03-27"),
}

# The EKS control plane (components/stack/cluster.py). Who may reach the cluster's PUBLIC Kubernetes API
# endpoint (raypd:apiAccessCidrs): EKS's own default, every address, which the spec warns about. EKS
# takes at most 40 such ranges per cluster, a quota that cannot be raised (Service Quotas
# L-93A74D60, "Public endpoint access CIDR ranges per cluster").
OPEN_CIDR = "0.0.0.0/0"
API_ACCESS_CIDRS: tuple[str, ...] = (OPEN_CIDR,)
MAX_API_ACCESS_CIDRS = 40
# Control-plane logs sent to CloudWatch Logs (/aws/eks/<cluster>/cluster): who called the API
# (api, audit) and how they authenticated (authenticator). controllerManager and scheduler are
# left off: they cost CloudWatch ingestion and answer no question about access.
CONTROL_PLANE_LOG_TYPES = ("api", "audit", "authenticator")
# EKS upgradePolicy.supportType while a cluster's version is in standard support: at the end of
# standard support EKS upgrades the control plane instead of moving it into the paid extended
# support (EKS's own default for clusters created through its API is EXTENDED).
SUPPORT_STANDARD: Final = "STANDARD"
SUPPORT_EXTENDED: Final = "EXTENDED"

SYSTEM_INSTANCE_TYPE = "m7i.xlarge"
SYSTEM_NODE_COUNT = 1
MODE: Final = "disaggregated"

MODEL_ID = "qwen3.5-9b"
MODEL_SOURCE = "Qwen/Qwen3.5-9B"
MAX_MODEL_LEN = 4096
DTYPE = "bfloat16"
GPU_MEMORY_UTILIZATION = 0.9
ENFORCE_EAGER = True

GPU_INSTANCE_TYPE = "g6.8xlarge"
PHASE_REPLICAS = 1
COLOCATED_REPLICAS = 2
# The most engines one phase may run (raypd:<phase>.replicas and autoscaling.maxReplicas).
MAX_PHASE_REPLICAS = 64
# Ray Serve's own delays before it adds or removes a replica (Ray 2.58 ray/serve/config.py
# AutoscalingConfig: upscale_delay_s 30.0, downscale_delay_s 600.0): what a phase's `autoscaling`
# block gets when it leaves a delay out. raypd writes them into the rendered autoscaling_config, so
# the deployed config says what runs whatever a later Ray defaults to (docs/scaling.md).
SERVE_UPSCALE_DELAY_SECONDS = 30.0
SERVE_DOWNSCALE_DELAY_SECONDS = 600.0

KV_CONNECTOR: Final = "NixlConnector"
KV_BACKEND: Final = "LIBFABRIC"
# What decode does when it cannot load a request's KV cache from prefill (raypd:kvTransfer.
# loadFailurePolicy, vLLM's kv_transfer_config.kv_load_failure_policy): "fail" ends the request with
# an error (HTTP 500, counted in vllm:nixl_num_failed_transfers) that the client and the alerts see;
# "recompute" makes decode redo the prefill and answer 200, which hides the failure, costs decode a
# prefill's compute, and has a reported wrong-output bug (vllm#49250). vLLM 0.26's own default is
# "fail" (vllm/config/kv_transfer.py); raypd writes it out so an image whose vLLM defaults otherwise
# cannot change it silently.
KV_LOAD_FAILURE_POLICY: Final = "fail"
KV_LOAD_FAILURE_POLICIES = ("fail", "recompute")
# How long prefill keeps a finished request's KV blocks for decode to read (raypd:kvTransfer.
# leaseSeconds, NIXL's kv_connector_extra_config.kv_lease_duration; vLLM's default 30 s). 300 s, not
# 30: when the lease runs out before decode reads, prefill frees the blocks and decode reads whatever
# is there, logged but answered HTTP 200 with wrong text (aws-samples/aws-do-eks PR #84: 8 of 42
# requests, vLLM 0.26 on p6-b200, fixed with 300 s). A lease too long only keeps blocks of a request
# whose decode died until it runs out (prefill KV capacity, visible in its queue and freed on its
# own). docs/resilience.md says how the value was chosen and when to raise it.
KV_LEASE_SECONDS = 300
# vLLM sends a lease heartbeat every lease // 6 seconds (nixl/base_scheduler.py): below 6 that is 0.
MIN_KV_LEASE_SECONDS = 6
# An hour: beyond it, a dead decode's requests would pin prefill KV blocks for hours.
MAX_KV_LEASE_SECONDS = 3600
# vLLM's own default lease, below which raypd warns.
VLLM_KV_LEASE_SECONDS = 30

# How a change that restarts the engines or rebuilds the Ray cluster is rolled out (components/changes/assess.py):
# "inPlace" takes the downtime of a model load and no extra nodes; "newCluster" (KubeRay's
# upgradeStrategy NewCluster) starts a second Ray cluster on extra GPU nodes and switches to it.
UPGRADE_STRATEGY: Final = "inPlace"
UPGRADE_STRATEGIES = ("inPlace", "newCluster")

RAY_VERSION = "2.58.0"
KUBERAY_VERSION = "1.4.0"
NAMESPACE = "inference"
SERVICE_NAME = "ray-llm"

# The Ray LLM Deep Learning Container, pulled from the DLC registry account of the stack's region.
# Source: aws/deep-learning-containers docs/reference/region_availability.md ("Private ECR account
# IDs by region", commit e0ecedea, 2026-08-21). A region missing here (GovCloud, the ISO
# partitions, regions newer than the table) has no DLC registry: such a stack must name its own
# image in raypd:image (components.config.spec refuses it otherwise).
DLC_REPOSITORY_TAG = "ray:serve-llm-cuda-v1.0"
DLC_ACCOUNTS_AS_OF = "2026-08-21"
DLC_ACCOUNTS: dict[str, str] = {
    **dict.fromkeys((
        "us-east-1", "us-east-2", "us-west-1", "us-west-2", "ap-south-1", "ap-northeast-1",
        "ap-northeast-2", "ap-southeast-1", "ap-southeast-2", "ca-central-1", "eu-central-1",
        "eu-west-1", "eu-west-2", "eu-west-3", "eu-north-1", "sa-east-1",
    ), "763104351884"),
    "af-south-1": "626614931356",
    "ap-east-1": "871362719292",
    "ap-east-2": "975050140332",
    "ap-south-2": "772153158452",
    "ap-southeast-3": "907027046896",
    "ap-southeast-4": "457447274322",
    "ap-southeast-5": "550225433462",
    "ap-southeast-6": "633930458069",
    "ap-southeast-7": "590183813437",
    "ap-northeast-3": "364406365360",
    "ca-west-1": "204538143572",
    "eu-south-1": "692866216735",
    "eu-south-2": "503227376785",
    "eu-central-2": "380420809688",
    "il-central-1": "780543022126",
    "mx-central-1": "637423239942",
    "me-south-1": "217643126080",
    "me-central-1": "914824155844",
    "cn-north-1": "727897471807",
    "cn-northwest-1": "727897471807",
}
# The public mirror of the same image, for regions without a DLC registry.
DLC_PUBLIC_IMAGE = "public.ecr.aws/deep-learning-containers/ray:serve-llm-cuda"


def dlc_image(region: str) -> str | None:
    """The DLC image in `region`'s own registry (ECR in China is under amazonaws.com.cn), or None
    where AWS publishes no DLC registry."""
    account = DLC_ACCOUNTS.get(region)
    if account is None:
        return None
    suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
    return f"{account}.dkr.ecr.{region}.{suffix}/{DLC_REPOSITORY_TAG}"


# Helm charts (repository, chart, pinned version). The KubeRay chart version comes from the spec.
KUBERAY_CHART_REPO = "https://ray-project.github.io/kuberay-helm/"
KUBERAY_CHART = "kuberay-operator"
KUBERAY_NAMESPACE = "kuberay-operator"
# Helm installs a chart's CRDs on first install only, so raypd applies the CRDs of the chart's
# version itself (components.stack.addons): kuberay's helm-chart/kuberay-operator/crds at tag v<version>.
KUBERAY_CRDS_URL = (
    "https://raw.githubusercontent.com/ray-project/kuberay/v{version}/helm-chart/kuberay-operator/"
    "crds/{file}"
)
# CRD files of that directory: v1.4.0 has these three; raycronjobs joined in v1.6.0.
KUBERAY_CRD_FILES = ("ray.io_rayclusters.yaml", "ray.io_rayjobs.yaml", "ray.io_rayservices.yaml")
KUBERAY_CRONJOB_CRD_FILE = "ray.io_raycronjobs.yaml"
KUBERAY_CRONJOB_CRD_SINCE = (1, 6, 0)
NVIDIA_DEVICE_PLUGIN_REPO = "https://nvidia.github.io/k8s-device-plugin"
NVIDIA_DEVICE_PLUGIN_CHART = "nvidia-device-plugin"
# NVIDIA/k8s-device-plugin release v0.20.0 (2026-08-19; deployments/helm/nvidia-device-plugin/
# Chart.yaml version 0.20.0), the newest release tag as of 2026-12-01.
NVIDIA_DEVICE_PLUGIN_VERSION = "0.20.0"
EFA_DEVICE_PLUGIN_REPO = "https://aws.github.io/eks-charts"
EFA_DEVICE_PLUGIN_CHART = "aws-efa-k8s-device-plugin"
# aws/eks-charts stable/aws-efa-k8s-device-plugin/Chart.yaml: version v0.5.30 (appVersion v0.5.20,
# master of 2026-08-03, the chart EKS documents for EFA), newest as of 2026-12-01.
EFA_DEVICE_PLUGIN_VERSION = "v0.5.30"
DEVICE_PLUGIN_NAMESPACE = "kube-system"

# Node labels and Ray ports.
SYSTEM_LABELS = {"role": "system"}
GPU_ROLE_LABEL = {"role": "gpu-worker"}
PHASE_LABEL_KEY = "raypd.io/phase"
# Every GPU node carries its node group's name, and every Ray worker selects it: after a layout
# change (shared group <-> per-phase groups, disaggregated <-> colocated) on the same instance type,
# no pod can start on the old group's nodes, which Pulumi drains at the end of the update.
NODE_GROUP_LABEL = "raypd.io/node-group"
# Well-known labels the kubelet sets on every node (kubernetes.io/docs/reference/labels-annotations-taints).
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ZONE_LABEL = "topology.kubernetes.io/zone"
# Zero-downtime stacks label each generation of GPU node groups, so a new Ray cluster's pods land on
# the new nodes only (components.render.rayservice.node_set).
NODE_SET_LABEL = "raypd.io/node-set"
SERVE_PORT = 8000
DASHBOARD_PORT = 8265
# KubeRay adds a container port named "metrics" on 8080 to every Ray pod (DefaultMetricsPort);
# vLLM's engine metrics (NIXL transfers among them) are exported there through Ray's metrics.
RAY_METRICS_PORT = 8080
GCS_PORT = 6379
# Ray Client (`ray.init("ray://...")`): like the dashboard's job API, it runs code on the cluster.
CLIENT_PORT = 10001
# The Ray head's control ports: only the Ray cluster itself (and the few raypd components that
# need the dashboard) may reach them (components.render.network_policy); nothing may expose them
# (verify's dashboard-exposure check).
RAY_HEAD_CONTROL_PORTS = (DASHBOARD_PORT, CLIENT_PORT, GCS_PORT)

# Root volume: the reference's 200 GB holds the image (~30 GB) and one ~18 GiB checkpoint; bigger
# nodes serve bigger models, so grant 100 GB per GPU beyond that.
MIN_ROOT_VOLUME_GB = 200
ROOT_VOLUME_GB_PER_GPU = 100
# System nodes run the CPU-only Ray head, i.e. the same DLC image (~30 GB, kept both compressed and
# unpacked by containerd): EKS's 20 GiB default root volume cannot hold it (eksctl, which the
# reference used, defaults to 80 GiB).
SYSTEM_ROOT_VOLUME_GB = 100

# Limits the Kubernetes/KubeRay side imposes.
MAX_RAYSERVICE_NAME = 47

# ---- The OpenAI endpoint (issue 17): who may reach it, and the pieces that expose it ----
ENDPOINT_SCOPES = ("cluster", "vpc", "internet")
ENDPOINT_SCOPE: Final = "vpc"
ENDPOINT_AUTHS = ("apiKey", "none")
ENDPOINT_AUTH: Final = "apiKey"
# The stack VPC's address range (components.stack.network builds the VPC with it): the default
# raypd:endpoint.allowedCidrs of scope vpc.
VPC_CIDR: Final = "10.0.0.0/16"
# A load balancer's source ranges become security-group rules; keep the list well below the
# 60 inbound rules per security group (VPC quota L-0EA8095F), as the EKS list is capped at 40.
MAX_ENDPOINT_CIDRS = 40
# Envoy Gateway (authentication and routing in front of the Serve port). Tag v1.9.0 of
# envoyproxy/gateway (2026-08-15), its newest release as of 2026-12-01; the chart is published as
# an OCI artifact whose version is the tag (charts/gateway-helm, `helm install eg
# oci://docker.io/envoyproxy/gateway-helm --version v1.9.0`). It bundles the Gateway API CRDs
# (bundle-version v1.6.1, experimental channel) in charts/crds/crds/.
ENVOY_GATEWAY_CHART = "oci://docker.io/envoyproxy/gateway-helm"
ENVOY_GATEWAY_VERSION = "v1.9.0"
ENVOY_GATEWAY_RELEASE = "eg"
# Helm installs a chart's CRDs on first install only (see KUBERAY_CRDS_URL): raypd applies the
# chart version's own CRD files itself, as it does KubeRay's.
ENVOY_GATEWAY_CRDS_URL = (
    "https://raw.githubusercontent.com/envoyproxy/gateway/{version}/charts/gateway-helm/charts/crds/"
    "crds/{file}"
)
ENVOY_GATEWAY_CRD_FILES = (
    "gatewayapi-crds.yaml",
    *(f"generated/gateway.envoyproxy.io_{kind}.yaml" for kind in (
        "backends", "backendtrafficpolicies", "clienttrafficpolicies", "envoyextensionpolicies",
        "envoypatchpolicies", "envoyproxies", "httproutefilters", "securitypolicies",
    )),
)
# The AWS Load Balancer Controller (provisions the NLB of scopes vpc and internet). Chart
# aws-load-balancer-controller 3.5.0 (appVersion v3.5.0, tag v3.5.0 of
# kubernetes-sigs/aws-load-balancer-controller, 2026-08-03, helm/aws-load-balancer-controller/
# Chart.yaml), published to the eks-charts repository; newest as of 2026-12-01.
LB_CONTROLLER_CHART_REPO = "https://aws.github.io/eks-charts"
LB_CONTROLLER_CHART = "aws-load-balancer-controller"
LB_CONTROLLER_VERSION = "3.5.0"
LB_CONTROLLER_NAMESPACE = "kube-system"
LB_CONTROLLER_SERVICE_ACCOUNT = "aws-load-balancer-controller"
LB_CONTROLLER_CRDS_URL = (
    "https://raw.githubusercontent.com/kubernetes-sigs/aws-load-balancer-controller/v{version}/helm/"
    "aws-load-balancer-controller/crds/{file}"
)
LB_CONTROLLER_CRD_FILES = ("crds.yaml", "gateway-crds.yaml")
# Timeouts on the endpoint's path (components.render.endpoint lists each one with its upstream default).
# A request may stream for up to an hour; a stream may stay silent (a long prefill, a queue) for
# up to 15 minutes; the load balancer's TCP idle timeout is set to the same 15 minutes.
ENDPOINT_REQUEST_TIMEOUT_SECONDS = 3600
ENDPOINT_STREAM_IDLE_TIMEOUT_SECONDS = 900
NLB_TCP_IDLE_TIMEOUT_SECONDS = 900
# Ray Serve's proxy closes an idle keep-alive connection after 90 s (ray serve/_private/constants.py
# DEFAULT_UVICORN_KEEP_ALIVE_TIMEOUT_S = 90): Envoy drops its idle upstream connections sooner, so
# it never sends a request down a connection Serve is closing.
ENVOY_UPSTREAM_IDLE_TIMEOUT_SECONDS = 60
# TCP keepalive on the proxy's client side: probes every minute reset the load balancer's idle
# timer while a stream is silent (an NLB TLS listener's idle timeout is fixed at 350 s).
ENVOY_TCP_KEEPALIVE_IDLE_SECONDS = 60
ENVOY_TCP_KEEPALIVE_INTERVAL_SECONDS = 60
ENVOY_TCP_KEEPALIVE_PROBES = 5
# Length of the first API key (letters and digits only: it travels in an Authorization header).
API_KEY_LENGTH = 48

# ---- Observability (issue 18 §1): the metrics stack, on unless raypd:observability.enabled false ----
OBSERVABILITY_ENABLED = True
OBSERVABILITY_NAMESPACE = "monitoring"
# Prometheus keeps 15 days on a 50 GiB volume: a few GPU nodes' DCGM, node and vLLM series take
# well under 1 GiB a day at a 30 s scrape; Grafana's volume holds its SQLite database only.
PROMETHEUS_STORAGE = "50Gi"
PROMETHEUS_RETENTION = "15d"
GRAFANA_STORAGE = "10Gi"
# kube-prometheus-stack 88.5.3 (prometheus-community/helm-charts charts/kube-prometheus-stack/
# Chart.yaml at commit ea930bae, 2026-08-21; appVersion v0.93.1 of the Prometheus Operator), the
# newest in that repository's main branch as of 2026-12-01 (fetched mirror, HEAD cf408a29).
KUBE_PROMETHEUS_STACK_REPO = "https://prometheus-community.github.io/helm-charts"
KUBE_PROMETHEUS_STACK_CHART = "kube-prometheus-stack"
KUBE_PROMETHEUS_STACK_VERSION = "88.5.3"
PROMETHEUS_OPERATOR_VERSION = "v0.93.1"
# Helm installs CRDs on first install only (see KUBERAY_CRDS_URL): raypd applies the operator
# version's own CRD files, the ones the chart bundles (its charts/crds/crds/ name this source).
PROMETHEUS_OPERATOR_CRDS_URL = (
    "https://raw.githubusercontent.com/prometheus-operator/prometheus-operator/{version}/example/"
    "prometheus-operator-crd/monitoring.coreos.com_{kind}.yaml"
)
PROMETHEUS_OPERATOR_CRD_KINDS = (
    "alertmanagerconfigs", "alertmanagers", "podmonitors", "probes", "prometheusagents",
    "prometheuses", "prometheusrules", "scrapeconfigs", "servicemonitors", "thanosrulers",
)
# NVIDIA dcgm-exporter chart 4.8.2 (NVIDIA/dcgm-exporter deployment/Chart.yaml at tag 4.5.3-4.8.2,
# commit 691c9276; image nvcr.io/nvidia/k8s/dcgm-exporter:4.5.3-4.8.2), the newest tag as of
# 2026-12-01. Its Helm repository is NVIDIA's GitHub Pages site.
DCGM_EXPORTER_REPO = "https://nvidia.github.io/dcgm-exporter/helm-charts"
DCGM_EXPORTER_CHART = "dcgm-exporter"
DCGM_EXPORTER_VERSION = "4.8.2"
DCGM_EXPORTER_PORT = 9400
# Ray's own metrics ports on the head (Ray's defaults, as KubeRay's Prometheus guide names them):
# the autoscaler's (AUTOSCALER_METRIC_PORT) and the dashboard's (DASHBOARD_METRIC_PORT).
RAY_AUTOSCALER_METRICS_PORT = 44217
RAY_DASHBOARD_METRICS_PORT = 44227
PROMETHEUS_PORT = 9090
GRAFANA_PORT = 80

# ---- The node autoscaler (issue 30 §2): Cluster Autoscaler on the GPU managed node groups ----
# Chart cluster-autoscaler 9.59.0 (kubernetes/autoscaler cluster-autoscaler/charts/cluster-autoscaler/
# Chart.yaml at tag cluster-autoscaler-chart-9.59.0, 2026-07-21; appVersion 1.35.0), the newest
# chart as of 2026-12-01, from the project's Helm repository.
CLUSTER_AUTOSCALER_CHART_REPO = "https://kubernetes.github.io/autoscaler"
CLUSTER_AUTOSCALER_CHART = "cluster-autoscaler"
CLUSTER_AUTOSCALER_VERSION = "9.59.0"
CLUSTER_AUTOSCALER_NAMESPACE = "kube-system"
CLUSTER_AUTOSCALER_SERVICE_ACCOUNT = "cluster-autoscaler"
CLUSTER_AUTOSCALER_IMAGE = "registry.k8s.io/autoscaling/cluster-autoscaler"
# Upstream recommends "the latest Cluster Autoscaler release that corresponds to the minor version of
# Kubernetes that their cluster is running" (cluster-autoscaler/README.md, Releases): the newest
# patch tag of each minor in kubernetes/autoscaler as of 2026-12-01 (tags cluster-autoscaler-<version>;
# the image is published as v<version>).
CLUSTER_AUTOSCALER_IMAGE_TAGS: dict[str, str] = {
    "1.29": "v1.29.5", "1.30": "v1.30.7", "1.31": "v1.31.5", "1.32": "v1.32.7",
    "1.33": "v1.33.6", "1.34": "v1.34.5", "1.35": "v1.35.2", "1.36": "v1.36.1",
}

# ---- Head fault tolerance (issue 31 §1): GCS fault tolerance with Redis (components.config.fault_tolerance_spec) ----
# The managed store: ElastiCache for Valkey (Redis OSS-compatible; node prices 20% below Redis OSS,
# and AWS's engine for new ElastiCache deployments), one primary and one replica in the stack's two
# zones with automatic failover. cache.t4g.small (2 vCPU, 1.37 GiB): Ray's GCS tables (nodes,
# actors, placement groups, jobs, the internal KV with Serve's checkpoints) stay in the low MiB for
# a serving cluster, and during a newCluster switch two clusters' namespaces live side by side;
# a t4g.micro's 0.5 GiB leaves little room for that, larger types only cost more.
GCS_CACHE_NODE_TYPE = "cache.t4g.small"
GCS_CACHE_ENGINE = "valkey"
GCS_CACHE_ENGINE_VERSION = "8.0"
GCS_CACHE_PARAMETER_GROUP = "default.valkey8"
GCS_CACHE_NODES = 2  # primary + one replica: a node failure fails over instead of losing the GCS
REDIS_PORT = 6379
