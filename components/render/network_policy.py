"""Who may open a connection to the Ray pods: NetworkPolicies, and the namespaces' Pod Security labels.

Why: the Ray dashboard (8265) accepts job submissions, i.e. arbitrary code run with the pods'
IAM role, and the client (10001) and GCS (6379) ports are no safer; Kubernetes lets every pod of
the cluster reach them unless a NetworkPolicy says otherwise. The VPC CNI enforces NetworkPolicies
once its network-policy agent is on (components.stack.cluster turns it on).

Everything here is pure (plain values in, `networking.k8s.io/v1` manifests and namespace labels
out); components.stack.network_policies creates the objects. In the deployment namespace:

- every pod: ingress denied unless a policy below admits it (a policy that selects a pod and
  lists Ingress makes everything it does not allow a denial; Kubernetes "Network Policies",
  "Default deny all ingress traffic");
- the Ray pods (head and workers, by raypd's `rayservice.RAY_SERVICE_LABEL`, set on both pod
  templates): every port from the Ray pods of the same RayService. Not by KubeRay's
  `ray.io/cluster`: KubeRay (common/pod.go `labelPod`, v1.4.0) sets it to the RayCluster's name,
  which a NewCluster upgrade changes, and the old and new clusters' pods must keep talking
  during the switch. Ray picks worker, object-manager and NIXL side-channel ports at random, so
  the cluster's own traffic is admitted on every port;
- the Ray head's dashboard (8265): from the KubeRay operator (it submits the Serve config and
  reads its status there: rayservice_controller.go `FetchHeadServiceURL(..., DashboardPortName)`),
  from raypd's rollout-check Jobs (components.render.rollout polls the Serve REST API there), from
  raypd's benchmark Jobs (a scheduled load samples each phase's replicas from the same API:
  serve/benchmark/replicas.py), and from the Kubernetes API server (`api_server_cidrs`, below).
  Those Jobs are raypd's own pods in this namespace, as trusted as the rollout check. 10001 and
  6379: the Ray pods only;
- the Serve port (8000) on the Ray pods: from the gateway's Envoy proxies
  (components.render.endpoint_names: their namespace and owning-gateway labels), the KubeRay
  operator (it checks
  the head's Serve proxy at the head pod's IP on every reconcile and labels the head ray.io/serve
  by the answer: rayservice_controller.go `updateHeadPodServeLabel`, `CheckProxyActorHealth`,
  v1.4.0), the benchmark Jobs
  (serve/benchmark/job.py labels), the namespaces the user lists in raypd:inClusterClients
  (components.config.serve_clients) and the API server;
- the metrics port (8080) on the Ray pods: from the API server (verify reads engine metrics through
  the pod proxy) and Prometheus (issue 18, `metrics_peers`), which also reaches the head's
  autoscaler (44217) and dashboard (44227) metrics ports.

The API server: verify and the live status reach the dashboard, Serve and metrics ports through
the Kubernetes API's service/pod proxy, and on EKS the API server opens those connections from
the control plane's cross-account ENIs in the cluster's subnets. Those subnets are the ones the
VPC CNI also gives pod addresses from, so the VPC CIDR (or a subnet) would admit every pod of the
cluster on the dashboard, which is what these policies exist to stop. So the rule names the
ENIs' own addresses (/32 each), read at deploy time (components.stack.cluster). EKS may move the ENIs
when it updates the control plane; the next `pulumi up` reads them again (until then verify's
dashboard checks cannot reach the head and say so; serving is not affected).

Egress stays open: the pods download model weights (Hugging Face, S3), pull images, call the STS
and EKS endpoints through IRSA and talk to each other on random ports; a useful egress allow-list
would be a list of moving CDN addresses. What these policies defend is who can reach the pods.

Kubelet probes are not affected: KubeRay's probes are exec probes run inside the container
(common/pod.go, `initLivenessAndReadinessProbe`, v1.4.0).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from components.config import defaults
from components.render import endpoint_names
from components.render.rayservice import RAY_SERVICE_LABEL

API_VERSION = "networking.k8s.io/v1"
# The label the API server sets on every namespace (Kubernetes "Well-Known Labels",
# kubernetes.io/metadata.name, immutable, since 1.22): a namespace selector that names one.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# KubeRay's labels (ray-operator/controllers/ray/utils/constant.go, v1.4.0).
RAY_NODE_TYPE_LABEL = "ray.io/node-type"
# The operator's pod label in KubeRay's chart (helm-chart/kuberay-operator/templates/
# deployment.yaml: app.kubernetes.io/name: {{ include "kuberay-operator.name" . }}).
KUBERAY_OPERATOR_POD_LABELS = {"app.kubernetes.io/name": defaults.KUBERAY_CHART}
# Pod labels of raypd's Jobs (components.render.rollout, serve/benchmark/job.py).
ROLLOUT_CHECK_POD_LABELS = {"app.kubernetes.io/component": "serve-rollout-check"}
BENCHMARK_POD_LABELS = {"app.kubernetes.io/part-of": "raypd", "app.kubernetes.io/component": "benchmark"}

# Pod Security admission (Kubernetes "Pod Security Admission", labels pod-security.kubernetes.io/
# <mode> and <mode>-version).
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")
POD_SECURITY_MODES = ("enforce", "audit", "warn")


def pod_security_labels(level: str, version: str = "latest") -> dict[str, str]:
    """Namespace labels that enforce `level` (and audit and warn at it), pinned to `version`
    ("v1.35", or "latest"): pinning keeps a cluster upgrade from tightening the rules under
    running pods."""
    if level not in POD_SECURITY_LEVELS:
        raise ValueError(f"unknown Pod Security level {level!r}; one of {', '.join(POD_SECURITY_LEVELS)}")
    labels: dict[str, str] = {}
    for mode in POD_SECURITY_MODES:
        labels[f"pod-security.kubernetes.io/{mode}"] = level
        labels[f"pod-security.kubernetes.io/{mode}-version"] = version
    return labels


def kubernetes_policy_version(kubernetes_version: str) -> str:
    """The Pod Security version label for a cluster's Kubernetes minor ("1.35" -> "v1.35")."""
    return f"v{kubernetes_version}"


def pod_security_level(manifest: Mapping[str, Any]) -> str:
    """The level a RayService's pods need: privileged when a container is (the NIXL workers,
    components.render.rayservice), else baseline. Read from the rendered manifest, so the label follows
    the pods rather than a second copy of the decision."""
    cluster = manifest["spec"]["rayClusterConfig"]
    templates = [cluster["headGroupSpec"]["template"]] + [
        group["template"] for group in cluster.get("workerGroupSpecs") or []
    ]
    for template in templates:
        for container in template["spec"].get("containers") or []:
            if (container.get("securityContext") or {}).get("privileged"):
                return "privileged"
    return "baseline"


def _ports(*numbers: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": number} for number in numbers]


def _in_namespace(namespace: str, pod_labels: Mapping[str, str]) -> dict[str, Any]:
    """A peer: pods with these labels in that namespace (both selectors in one entry: AND)."""
    return {
        "namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}},
        "podSelector": {"matchLabels": dict(pod_labels)},
    }


def _ip_peers(cidrs: Sequence[str]) -> list[dict[str, Any]]:
    return [{"ipBlock": {"cidr": cidr}} for cidr in cidrs]


def _policy(name: str, namespace: str, selector: Mapping[str, str],
            rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"app.kubernetes.io/part-of": "raypd"}},
        "spec": {
            "podSelector": {"matchLabels": dict(selector)},
            "policyTypes": ["Ingress"],
            # A rule with no peers would admit everyone; rules here always list theirs.
            "ingress": [rule for rule in rules if rule["from"]],
        },
    }


def gateway_peer(namespace: str, service_name: str) -> dict[str, Any]:
    """The gateway's Envoy proxy pods that front `service_name` (components.render.endpoint_names)."""
    return _in_namespace(endpoint_names.GATEWAY_NAMESPACE, {
        endpoint_names.OWNING_GATEWAY_NAME_LABEL: endpoint_names.gateway_name(service_name),
        endpoint_names.OWNING_GATEWAY_NAMESPACE_LABEL: namespace,
    })


def render_network_policies(
    namespace: str,
    service_name: str,
    *,
    api_server_cidrs: Sequence[str],
    client_namespaces: Sequence[str] = (),
    metrics_peers: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """The deployment namespace's NetworkPolicies (see the module docstring for each rule).

    `api_server_cidrs`: the control plane ENIs' addresses (/32); `client_namespaces`:
    raypd:inClusterClients; `metrics_peers`: NetworkPolicy peers that may scrape the metrics
    ports (issue 18's Prometheus, components.render.observability.prometheus_peers): 8080 on every Ray
    pod, and the head's autoscaler and dashboard metrics ports.
    """
    ray_pods = {RAY_SERVICE_LABEL: service_name}
    head = {**ray_pods, RAY_NODE_TYPE_LABEL: "head"}
    api_server = _ip_peers(api_server_cidrs)
    prefix = f"{service_name}-"
    operator = _in_namespace(defaults.KUBERAY_NAMESPACE, KUBERAY_OPERATOR_POD_LABELS)
    serve_clients = [
        gateway_peer(namespace, service_name),
        operator,
        {"podSelector": {"matchLabels": dict(BENCHMARK_POD_LABELS)}},
        *({"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: client}}}
          for client in client_namespaces),
        *api_server,
    ]
    return [
        _policy(f"{prefix}default-deny-ingress", namespace, {}, []),
        _policy(f"{prefix}ray-cluster", namespace, ray_pods, [
            {"from": [{"podSelector": {"matchLabels": dict(ray_pods)}}]},
        ]),
        _policy(f"{prefix}ray-dashboard", namespace, head, [{
            "from": [
                operator,
                {"podSelector": {"matchLabels": dict(ROLLOUT_CHECK_POD_LABELS)}},
                {"podSelector": {"matchLabels": dict(BENCHMARK_POD_LABELS)}},
                *api_server,
            ],
            "ports": _ports(defaults.DASHBOARD_PORT),
        }]),
        _policy(f"{prefix}serve", namespace, ray_pods, [
            {"from": serve_clients, "ports": _ports(defaults.SERVE_PORT)},
        ]),
        _policy(f"{prefix}ray-metrics", namespace, ray_pods, [
            {"from": [*api_server, *(dict(peer) for peer in metrics_peers)],
             "ports": _ports(defaults.RAY_METRICS_PORT)},
        ]),
        # The head's autoscaler and dashboard metrics (issue 18's head PodMonitor): scrapers only.
        *([_policy(f"{prefix}ray-head-metrics", namespace, head, [
            {"from": [dict(peer) for peer in metrics_peers],
             "ports": _ports(defaults.RAY_AUTOSCALER_METRICS_PORT, defaults.RAY_DASHBOARD_METRICS_PORT)},
        ])] if metrics_peers else []),
    ]


# Namespaces raypd's add-ons run in, and the Pod Security level their pods meet. The KubeRay
# operator's chart (helm-chart/kuberay-operator/values.yaml, v1.4.0) runs it non-root, without
# privilege escalation, all capabilities dropped, seccomp RuntimeDefault: `restricted`. The device
# plugins live in kube-system with EKS's own daemonsets (privileged, host paths), which raypd
# leaves alone. Envoy Gateway's namespace (endpoint_names.GATEWAY_NAMESPACE) is created by the
# endpoint's component, which labels it with pod_security_labels too.
ADDON_NAMESPACE_LEVELS = {defaults.KUBERAY_NAMESPACE: "restricted"}
