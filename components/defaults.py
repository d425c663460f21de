"""Reference values: the AWS multi-node Ray LLM DLC deployment, written once.

Every default of the stack configuration (Contract 1) and every pinned version lives here, so the
spec, the renderers, the web form and the docs cannot disagree about what "the reference" is.
"""

from __future__ import annotations

REGION = "us-east-2"
KUBERNETES_VERSION = "1.35"
SYSTEM_INSTANCE_TYPE = "m7i.xlarge"
SYSTEM_NODE_COUNT = 1
MODE = "disaggregated"

MODEL_ID = "qwen3.5-9b"
MODEL_SOURCE = "Qwen/Qwen3.5-9B"
MAX_MODEL_LEN = 4096
DTYPE = "bfloat16"
GPU_MEMORY_UTILIZATION = 0.9
ENFORCE_EAGER = True

GPU_INSTANCE_TYPE = "g6.8xlarge"
PHASE_REPLICAS = 1
COLOCATED_REPLICAS = 2

KV_CONNECTOR = "NixlConnector"
KV_BACKEND = "LIBFABRIC"

RAY_VERSION = "2.58.0"
KUBERAY_VERSION = "1.4.0"
NAMESPACE = "inference"
SERVICE_NAME = "ray-llm"

# The Ray LLM Deep Learning Container. The DLC registry account serves most commercial regions.
DLC_ACCOUNT = "763104351884"
DLC_REPOSITORY_TAG = "ray:serve-llm-cuda-v1.0"
DLC_PUBLIC_MIRROR = "public.ecr.aws/deep-learning-containers/ray:serve-llm-cuda"


def dlc_image(region: str) -> str:
    return f"{DLC_ACCOUNT}.dkr.ecr.{region}.amazonaws.com/{DLC_REPOSITORY_TAG}"


# Helm charts (repository, chart, pinned version). The KubeRay chart version comes from the spec.
KUBERAY_CHART_REPO = "https://ray-project.github.io/kuberay-helm/"
KUBERAY_CHART = "kuberay-operator"
KUBERAY_NAMESPACE = "kuberay-operator"
NVIDIA_DEVICE_PLUGIN_REPO = "https://nvidia.github.io/k8s-device-plugin"
NVIDIA_DEVICE_PLUGIN_CHART = "nvidia-device-plugin"
NVIDIA_DEVICE_PLUGIN_VERSION = "0.17.1"
EFA_DEVICE_PLUGIN_REPO = "https://aws.github.io/eks-charts"
EFA_DEVICE_PLUGIN_CHART = "aws-efa-k8s-device-plugin"
EFA_DEVICE_PLUGIN_VERSION = "v0.5.7"
DEVICE_PLUGIN_NAMESPACE = "kube-system"

# Node labels and Ray ports.
SYSTEM_LABELS = {"role": "system"}
GPU_ROLE_LABEL = {"role": "gpu-worker"}
PHASE_LABEL_KEY = "raypd.io/phase"
SERVE_PORT = 8000
DASHBOARD_PORT = 8265
# KubeRay adds a container port named "metrics" on 8080 to every Ray pod (DefaultMetricsPort);
# vLLM's engine metrics (NIXL transfers among them) are exported there through Ray's metrics.
RAY_METRICS_PORT = 8080
GCS_PORT = 6379

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
