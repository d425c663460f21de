"""A fake Kubernetes API server for a deployed raypd stack: real HTTP on 127.0.0.1, real formats.

It serves the paths `serve.verify` and the web app's live status use, with objects shaped as the
real components produce them:
- Kubernetes core/v1 NodeList and PodList, pod logs, the service proxy and pod proxy;
- the KubeRay 1.4 `ray.io/v1` RayService (condition `Ready`, `activeServiceStatus`);
- Ray 2.58's dashboard on the head Service (`/api/serve/applications/` = ServeInstanceDetails,
  `/api/v0/logs/file` = plain text behind a "1" success byte);
- the OpenAI endpoint on the Serve Service (tests.fakes.openai_server's documents);
- vLLM 0.26 NIXL metrics as Ray exports them on each worker pod's port 8080 (Prometheus text).

    with FakeKubeApi("healthy") as kube:
        report = run_verify(kube.outputs())
        kube.requests        # [{"method", "path", "query"}, ...] (never the token)

Scenarios: see SCENARIOS. The stack is the reference (2 x g6.8xlarge, prefill + decode in node
group "gpu") unless `config` (Contract 1 keys) says otherwise; scenario "colocated" uses
`raypd:mode: colocated`. A chat completion through the Serve Service (or `record_chat()`, e.g. as
an OpenAIServer's `on_chat`) moves the KV counters and log lines as the scenario says.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from components.outputs import render_stack_outputs
from components.spec import DeploymentSpec
from components.topology import plan_deployment
from tests.fakes import LoopbackServer
from tests.fakes.openai_server import (
    chat_completion_document,
    error_document,
    models_document,
    validate_chat_request,
)

SCENARIOS = (
    "healthy",
    "ucx-fallback",          # NIXL logs "Backend UCX was instantiated" (the TCP-speed fallback)
    "efa-not-advertised",    # no vpc.amazonaws.com/efa in the GPU nodes' allocatable
    "two-zones",             # the second GPU node sits in another availability zone
    "rayservice-not-ready",  # Ready=False (Initializing), app DEPLOYING, Serve Service no endpoints
    "no-kv-transfer",        # chat answers 200 but no transfer is recorded anywhere
    "failed-transfers",      # every chat adds a failed NIXL transfer (decode recomputes)
    "colocated",             # colocated mode: one engine deployment, no KV transfer
    "missing-node",          # one planned GPU node never joined
    "shared-node",           # prefill and decode replicas both on the first GPU node
)
DEFAULT_TOKEN = "fake-bearer-token-7f3c9a1e5b"
ZONE = "us-east-2a"
OTHER_ZONE = "us-east-2b"
RAY_VERSION = "2.58.0"
SESSION = "session_2026-12-01_12-00-03_412345_1"


def _hex(seed: str, length: int) -> str:
    out = ""
    counter = 0
    while len(out) < length:
        out += hashlib.sha256(f"{seed}/{counter}".encode()).hexdigest()
        counter += 1
    return out[:length]


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def _matches(labels: dict[str, str], selector: Optional[str]) -> bool:
    if not selector:
        return True
    for term in selector.split(","):
        key, _, value = term.partition("=")
        if labels.get(key.strip()) != value.strip():
            return False
    return True


class FakeKubeApi(LoopbackServer):
    """A stack's Kubernetes API on 127.0.0.1:<free port>; use as a context manager."""

    def __init__(self, scenario: str = "healthy", *, config: Optional[dict[str, Any]] = None,
                 stack: str = "dev", token: str = DEFAULT_TOKEN,
                 accept_token: Optional[Callable[[str], bool]] = None,
                 metrics: bool = True, ray_logs: bool = True):
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
        self.scenario = scenario
        self.token = token
        self.accept_token = accept_token or (lambda candidate: candidate == token)
        self.metrics_enabled = metrics
        self.ray_logs_enabled = ray_logs
        self.requests: list[dict[str, Any]] = []
        self.chats = 0
        if config is None:
            config = {"raypd:mode": "colocated"} if scenario == "colocated" else {}
        self.spec = DeploymentSpec.from_config(config, stack)
        self.cluster_name = f"raypd-{stack}"
        self._base_outputs = render_stack_outputs(self.spec, availability_zone=ZONE,
                                                  cluster_name=self.cluster_name)
        self._lock = threading.Lock()
        self._build_cluster()
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # ---- the public face ----

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def kubeconfig(self, *, fmt: str = "yaml", exec_command: Optional[str] = None,
                   token: Optional[str] = None) -> str:
        """Kubeconfig text pointing here: a bearer token, or an `aws eks get-token` exec user.

        `exec_command` is the path of the program the exec entry names (verify must never run it:
        tests point it at a script that leaves a mark).
        """
        name = self.cluster_name
        if exec_command is not None:
            user: dict[str, Any] = {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": exec_command,
                "args": ["--region", self.spec.region, "eks", "get-token", "--cluster-name", name,
                         "--output", "json"],
                "env": [{"name": "KUBERNETES_EXEC_INFO",
                         "value": '{"apiVersion": "client.authentication.k8s.io/v1beta1"}'}],
            }}
        else:
            user = {"token": token if token is not None else self.token}
        document = {
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": name, "cluster": {"server": self.url}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
            "current-context": name,
            "preferences": {},
            "users": [{"name": name, "user": user}],
        }
        if fmt == "json":
            return json.dumps(document)
        return yaml.safe_dump(document, sort_keys=False)

    def outputs(self, **kubeconfig_options: Any) -> dict[str, Any]:
        """The stack's full Contract 3 outputs document, its kubeconfig pointing here."""
        return {**json.loads(json.dumps(self._base_outputs)),
                "kubeconfig": self.kubeconfig(**kubeconfig_options)}

    def record_chat(self, request: Optional[dict[str, Any]] = None) -> None:
        """What one chat completion does to the engines' counters and logs in this scenario."""
        with self._lock:
            self.chats += 1
            if not self.disaggregated or self.scenario == "no-kv-transfer":
                return
            for pod in self._decode_pods:
                counters = self._counters[pod]
                if self.scenario == "failed-transfers":
                    counters["failed"] += 1
                    line = ("Num successful transfers=0, Avg xfer time (ms)=0, P90 xfer time (ms)=0, "
                            "Avg post time (ms)=0, P90 post time (ms)=0, Avg MB per transfer=0, "
                            "Throughput (MB/s)=0, Avg number of descriptors=0")
                else:
                    counters["count"] += 1
                    counters["sum"] += 0.00248
                    line = ("Num successful transfers=1, Avg xfer time (ms)=2.481, P90 xfer time "
                            "(ms)=2.481, Avg post time (ms)=0.311, P90 post time (ms)=0.311, Avg MB "
                            "per transfer=12.5, Throughput (MB/s)=5038.291, Avg number of "
                            "descriptors=448")
                self._out_logs[pod].append(
                    f"(EngineCore pid=2187) INFO 12-01 12:4{self.chats % 10}:07 [metrics.py:108] "
                    f"KV Transfer metrics: {line}")

    # ---- the cluster's objects ----

    @property
    def disaggregated(self) -> bool:
        return self.spec.mode == "disaggregated"

    def _build_cluster(self) -> None:
        spec = self.spec
        ns, service = spec.namespace, spec.service_name
        self.ray_cluster = f"{service}-{_hex(service, 5)[:5]}"
        model = spec.model.id
        safe = model.replace("/", "--").replace(".", "_")
        prefixes = {"prefill": "Prefill:", "decode": "Decode:", "colocated": "LLMServer:"}
        self.deployment_names = {phase: prefixes[phase] + safe for phase in spec.phases}
        efa = self.scenario != "efa-not-advertised"

        self.nodes: list[dict[str, Any]] = [self._node(
            "ip-10-0-1-20.us-east-2.compute.internal", {"role": "system"}, spec.system_nodes.instance_type,
            ZONE, f"{self.cluster_name}-system-{_hex('system', 8)}", {"cpu": "3920m"})]
        self.pods: list[dict[str, Any]] = [self._pod(
            f"{self.ray_cluster}-head-{_hex('head', 5)}", "headgroup", "head",
            self.nodes[0], "10.0.1.50")]
        pool: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
        index = 0
        skip_last = self.scenario == "missing-node"
        groups = plan_deployment(spec).groups
        for g_index, group in enumerate(groups):
            pool[group.name] = []
            for n in range(group.nodes):
                index += 1
                if skip_last and g_index == len(groups) - 1 and n == group.nodes - 1:
                    continue
                zone = OTHER_ZONE if self.scenario == "two-zones" and index == 2 else ZONE
                extended = {"nvidia.com/gpu": str(group.gpus_per_node)}
                if efa and group.efa_interfaces_per_node:
                    extended["vpc.amazonaws.com/efa"] = str(group.efa_interfaces_per_node)
                node = self._node(f"ip-10-0-{g_index + 2}-{10 + n}.us-east-2.compute.internal",
                                  dict(group.labels), group.instance_type, zone,
                                  f"{group.name}-nodes-group-{_hex(group.name, 8)}", extended)
                self.nodes.append(node)
                pod = self._pod(f"{self.ray_cluster}-{group.name}-worker-{_hex(node['metadata']['name'], 5)}",
                                group.name, "worker", node, f"10.0.{g_index + 2}.{100 + n}")
                self.pods.append(pod)
                pool[group.name].append((node, pod))

        # Engines: each phase takes its nodes from its group's pool, replicas round-robin.
        self.replicas: dict[str, list[dict[str, Any]]] = {}
        taken: dict[str, int] = {}
        self._decode_pods: list[str] = []
        for phase_name, phase in spec.phases.items():
            group = next(g for g in groups if phase_name in g.phases)
            start = taken.get(group.name, 0)
            members = pool[group.name][start:start + phase.nodes] or pool[group.name][:1]
            if self.scenario == "shared-node":
                members = pool[group.name][:1]
            taken[group.name] = start + phase.nodes
            replicas = []
            for r in range(phase.replicas):
                if not members:
                    break
                node, pod = members[r % len(members)]
                replicas.append(self._replica(phase_name, r, node, pod))
                if phase_name == "decode" or (phase_name == "colocated"):
                    self._decode_pods.append(pod["metadata"]["name"])
            self.replicas[phase_name] = replicas
        self._decode_pods = list(dict.fromkeys(self._decode_pods))

        worker_names = [p["metadata"]["name"] for p in self.pods if p["metadata"]["labels"]
                        ["ray.io/node-type"] == "worker"]
        self._counters = {name: {"count": 0, "sum": 0.0, "failed": 0} for name in worker_names}
        backend = "UCX" if self.scenario == "ucx-fallback" else spec.kv_transfer.backend
        self._err_logs: dict[str, list[str]] = {}
        self._out_logs: dict[str, list[str]] = {}
        for name in worker_names:
            err = [f"[2026-12-01 12:01:{i:02d},000 I 512 512] worker startup line {i}" for i in range(3)]
            if self.disaggregated:
                err.append(f"2026-12-01 12:03:11 NIXL INFO    _api.py:390 Backend {backend} was "
                           "instantiated")
                err.append("2026-12-01 12:03:11 NIXL INFO    _api.py:280 Initialized NIXL agent: "
                           f"{_hex(name, 8)}")
            self._err_logs[name] = err
            self._out_logs[name] = [
                "(EngineCore pid=2187) INFO 12-01 12:02:40 [core.py:95] Initializing a V1 LLM engine "
                f"(v0.26.0) with config: model='{spec.model.source}'",
                "(EngineCore pid=2187) INFO 12-01 12:04:02 [gpu_model_runner.py:2320] Model loading "
                "took 17.66 GiB memory and 141.2 seconds",
            ]

        ready = self.scenario != "rayservice-not-ready"
        statuses = {name: {"status": "HEALTHY" if ready else "UPDATING", "message": ""}
                    for name in [*self.deployment_names.values(), "OpenAiIngress"]}
        self.rayservice = {
            "apiVersion": "ray.io/v1", "kind": "RayService",
            "metadata": {"name": service, "namespace": ns, "generation": 1,
                         "uid": f"{_hex('uid', 8)}-{_hex('uid2', 4)}-{_hex('uid3', 4)}-"
                                f"{_hex('uid4', 4)}-{_hex('uid5', 12)}",
                         "creationTimestamp": "2026-12-01T11:58:02Z",
                         "labels": {"app.kubernetes.io/name": "raypd"}},
            "spec": {"serveConfigV2": "applications: []\n"},
            "status": {
                "activeServiceStatus": {
                    "applicationStatuses": {"llm": {
                        "status": "RUNNING" if ready else "DEPLOYING",
                        "message": "" if ready else "Deploying app 'llm'...",
                        "serveDeploymentStatuses": statuses,
                    }},
                    "rayClusterName": self.ray_cluster,
                    "rayClusterStatus": {"state": "ready", "readyWorkerReplicas": len(worker_names),
                                         "availableWorkerReplicas": len(worker_names),
                                         "desiredWorkerReplicas": len(worker_names)},
                },
                "conditions": [
                    {"type": "Ready", "status": "True" if ready else "False",
                     "reason": "NonZeroServeEndpoints" if ready else "Initializing",
                     "message": "Number of serve endpoints is greater than 0" if ready
                     else "RayService is initializing",
                     "lastTransitionTime": "2026-12-01T12:05:12Z", "observedGeneration": 1},
                    {"type": "UpgradeInProgress", "status": "False", "reason": "NoPendingCluster",
                     "message": "No pending cluster exists",
                     "lastTransitionTime": "2026-12-01T12:05:12Z", "observedGeneration": 1},
                ],
                "numServeEndpoints": 1 if ready else 0,
                "observedGeneration": 1,
                "serviceStatus": "Running" if ready else "",
                "lastUpdateTime": "2026-12-01T12:05:12Z",
            },
        }

    def _node(self, name: str, labels: dict[str, str], instance_type: str, zone: str,
              eks_group: str, extended: dict[str, str]) -> dict[str, Any]:
        all_labels = {
            "beta.kubernetes.io/arch": "amd64", "kubernetes.io/arch": "amd64",
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": instance_type,
            "topology.kubernetes.io/region": self.spec.region, "topology.kubernetes.io/zone": zone,
            "eks.amazonaws.com/nodegroup": eks_group, "eks.amazonaws.com/capacityType": "ON_DEMAND",
            **labels,
        }
        resources = {"cpu": "31850m", "ephemeral-storage": "192128045766", "hugepages-1Gi": "0",
                     "hugepages-2Mi": "0", "memory": "127402812Ki", "pods": "234", **extended}
        return {
            "kind": "Node", "apiVersion": "v1",
            "metadata": {"name": name, "uid": _hex(name, 32), "labels": all_labels,
                         "creationTimestamp": "2026-12-01T11:40:00Z"},
            "spec": {"providerID": f"aws:///{zone}/i-0{_hex(name, 16)}"},
            "status": {
                "capacity": dict(resources), "allocatable": dict(resources),
                "conditions": [
                    {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                    {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"},
                    {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID"},
                    {"type": "Ready", "status": "True", "reason": "KubeletReady",
                     "message": "kubelet is posting ready status"},
                ],
                "addresses": [{"type": "InternalIP", "address": "10.0.1.20"},
                              {"type": "Hostname", "address": name}],
                "nodeInfo": {"kubeletVersion": "v1.35.0-eks-1a2b3c4", "containerRuntimeVersion":
                             "containerd://2.1.4"},
            },
        }

    def _pod(self, name: str, group: str, node_type: str, node: dict[str, Any], ip: str) -> dict[str, Any]:
        spec = self.spec
        container = "ray-head" if node_type == "head" else "ray-worker"
        return {
            "kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": spec.namespace, "uid": _hex(name, 32),
                         "labels": {
                             "app.kubernetes.io/created-by": "kuberay-operator",
                             "app.kubernetes.io/name": "kuberay",
                             "ray.io/cluster": self.ray_cluster, "ray.io/group": group,
                             "ray.io/identifier": f"{self.ray_cluster}-{node_type}",
                             "ray.io/is-ray-node": "yes", "ray.io/node-type": node_type,
                             "ray.io/originated-from-cr-name": spec.service_name,
                             "ray.io/originated-from-crd": "RayService",
                         }},
            "spec": {"nodeName": node["metadata"]["name"],
                     "containers": [{"name": container, "image": spec.image_uri,
                                     "ports": [{"containerPort": 8080, "name": "metrics",
                                                "protocol": "TCP"}]}]},
            "status": {"phase": "Running", "podIP": ip, "hostIP": "10.0.1.20",
                       "containerStatuses": [{"name": container, "ready": True, "restartCount": 0,
                                              "state": {"running": {"startedAt": "2026-12-01T12:00:00Z"}}}]},
        }

    def _replica(self, phase: str, index: int, node: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
        deployment = self.deployment_names[phase]
        suffix = _hex(f"{phase}{index}", 8)
        app = "llm"
        return {
            "node_id": _hex(pod["metadata"]["name"], 56),
            "node_ip": pod["status"]["podIP"],
            "node_instance_id": "i-0" + _hex(node["metadata"]["name"], 16),
            "actor_id": _hex(f"actor{phase}{index}", 32),
            "actor_name": f"SERVE_REPLICA::{app}#{deployment}#{suffix}",
            "worker_id": _hex(f"worker{phase}{index}", 56),
            "log_file_path": f"/serve/replica_{app}_{deployment}_{suffix}.log",
            "replica_id": suffix,
            "state": "RUNNING" if self.scenario != "rayservice-not-ready" else "STARTING",
            "pid": 2100 + index,
            "start_time_s": 1764590520.0 + index,
            "_pod": pod["metadata"]["name"],
        }

    # ---- documents served ----

    def serve_details(self) -> dict[str, Any]:
        ready = self.scenario != "rayservice-not-ready"
        deployments: dict[str, Any] = {}
        for phase, name in self.deployment_names.items():
            count = next(p.replicas for n, p in self.spec.phases.items() if n == phase)
            deployments[name] = {
                "name": name, "status": "HEALTHY" if ready else "UPDATING",
                "status_trigger": "CONFIG_UPDATE_COMPLETED" if ready else "CONFIG_UPDATE_STARTED",
                "message": "", "deployment_config": {"name": name, "num_replicas": count},
                "target_num_replicas": count, "required_resources": {"CPU": 1, "GPU": 1},
                "replicas": [{k: v for k, v in r.items() if not k.startswith("_")}
                             for r in self.replicas.get(phase, [])],
            }
        head = next(p for p in self.pods if p["metadata"]["labels"]["ray.io/node-type"] == "head")
        deployments["OpenAiIngress"] = {
            "name": "OpenAiIngress", "status": "HEALTHY" if ready else "UPDATING",
            "status_trigger": "CONFIG_UPDATE_COMPLETED", "message": "",
            "deployment_config": {"name": "OpenAiIngress", "num_replicas": 1},
            "target_num_replicas": 1, "required_resources": {"CPU": 1},
            "replicas": [{"node_id": _hex("head", 56), "node_ip": head["status"]["podIP"],
                          "node_instance_id": "i-0" + _hex("head", 16),
                          "actor_id": _hex("ingress", 32),
                          "actor_name": "SERVE_REPLICA::llm#OpenAiIngress#ab12cd34",
                          "worker_id": _hex("ingressw", 56),
                          "log_file_path": "/serve/replica_llm_OpenAiIngress_ab12cd34.log",
                          "replica_id": "ab12cd34", "state": "RUNNING", "pid": 1800,
                          "start_time_s": 1764590500.0}],
        }
        return {
            "controller_info": {"node_id": _hex("head", 56), "node_ip": head["status"]["podIP"],
                                "node_instance_id": "", "actor_id": _hex("controller", 32),
                                "actor_name": "SERVE_CONTROLLER_ACTOR", "worker_id": _hex("cw", 56),
                                "log_file_path": "/serve/controller_1200.log"},
            "proxy_location": "EveryNode",
            "http_options": {"host": "0.0.0.0", "port": 8000, "root_path": "",
                             "request_timeout_s": None, "keep_alive_timeout_s": 90},
            "grpc_options": {"port": 9000, "grpc_servicer_functions": []},
            "proxies": {},
            "deploy_mode": "MULTI_APP",
            "applications": {"llm": {
                "name": "llm", "route_prefix": "/", "docs_path": "/docs",
                "status": "RUNNING" if ready else "DEPLOYING",
                "message": "" if ready else "Deploying app 'llm'...",
                "last_deployed_time_s": 1764590480.0,
                "deployed_app_config": None,
                "source": "declarative",
                "deployments": deployments,
                "external_scaler_enabled": False,
                "deployment_topology": None,
            }},
            "target_capacity": None,
            "target_groups": [],
        }

    def metrics_text(self, pod: str) -> str:
        counters = self._counters[pod]
        labels = (f'Component="core_worker",NodeAddress="10.0.2.100",SessionName="{SESSION}",'
                  f'Version="{RAY_VERSION}",WorkerId="{_hex(pod, 56)}",engine="0",'
                  f'model_name="{self.spec.model.id}",ReplicaId="{_hex(pod, 8)}"')
        lines = [
            "# HELP ray_node_cpu_utilization Total CPU usage on a ray node",
            "# TYPE ray_node_cpu_utilization gauge",
            f'ray_node_cpu_utilization{{InstanceId="",SessionName="{SESSION}",ip="10.0.2.100"}} 3.1',
        ]
        if self.disaggregated:
            count, total, failed = counters["count"], counters["sum"], counters["failed"]
            lines += [
                "# HELP ray_vllm_nixl_xfer_time_seconds Histogram of transfer duration for NIXL KV "
                "Cache transfers.",
                "# TYPE ray_vllm_nixl_xfer_time_seconds histogram",
            ]
            for bound in ("0.001", "0.005", "0.01", "0.05", "0.1", "+Inf"):
                bucket = count if bound != "0.001" else 0
                lines.append(f'ray_vllm_nixl_xfer_time_seconds_bucket{{{labels},le="{bound}"}} {bucket}.0')
            lines += [
                f"ray_vllm_nixl_xfer_time_seconds_count{{{labels}}} {count}.0",
                f"ray_vllm_nixl_xfer_time_seconds_sum{{{labels}}} {total}",
                "# HELP ray_vllm_nixl_num_failed_transfers_total Number of failed NIXL KV Cache "
                "transfers.",
                "# TYPE ray_vllm_nixl_num_failed_transfers_total counter",
                f"ray_vllm_nixl_num_failed_transfers_total{{{labels}}} {failed}.0",
            ]
        return "\n".join(lines) + "\n"

    def ray_log(self, query: dict[str, str]) -> Optional[str]:
        actor = query.get("actor_id")
        for replicas in self.replicas.values():
            for replica in replicas:
                if replica["actor_id"] == actor:
                    pod = replica["_pod"]
                    logs = self._err_logs if query.get("suffix", "out") == "err" else self._out_logs
                    lines = int(query.get("lines", "1000"))
                    return "\n".join(logs[pod][-lines:]) + "\n"
        return None

    def container_log(self, pod: str, tail: Optional[int]) -> Optional[str]:
        if pod not in self._counters:
            return None
        lines = [
            "[2026-12-01 12:00:58,102 I 1 1] ray start --address=ray-llm-head-svc:6379 --block",
            "Local node IP: 10.0.2.100",
            "Ray runtime started.",
            *self._err_logs[pod], *self._out_logs[pod],
        ]
        return "\n".join(lines[-tail:] if tail else lines) + "\n"


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, document: Any) -> None:
        self._send(status, json.dumps(document).encode("utf-8"), "application/json")

    def _text(self, status: int, text: str) -> None:
        self._send(status, text.encode("utf-8"), "text/plain; charset=utf-8")

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _handle(self, method: str) -> None:
        fake = self.server.fake
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, 1024 * 1024)) if length else b""
        fake.requests.append({"method": method, "path": path, "query": query})
        auth = self.headers.get("Authorization", "")
        if not (auth.startswith("Bearer ") and fake.accept_token(auth[len("Bearer "):])):
            self._json(401, _status(401, "Unauthorized", "Unauthorized"))
            return
        self._route(fake, method, path, query, body)

    def _route(self, fake: FakeKubeApi, method: str, path: str, query: dict[str, str],
               body: bytes) -> None:
        spec = fake.spec
        ns = spec.namespace
        parts = path.strip("/").split("/")
        if method == "GET" and path == "/api/v1/nodes":
            items = [n for n in fake.nodes if _matches(n["metadata"]["labels"], query.get("labelSelector"))]
            self._json(200, {"kind": "NodeList", "apiVersion": "v1",
                             "metadata": {"resourceVersion": "81723"}, "items": items})
            return
        if method == "GET" and path == f"/apis/ray.io/v1/namespaces/{ns}/rayservices/{spec.service_name}":
            self._json(200, fake.rayservice)
            return
        if path.startswith("/apis/ray.io/v1/namespaces/"):
            name = parts[-1]
            self._json(404, _status(404, "NotFound", f'rayservices.ray.io "{name}" not found'))
            return
        if method == "GET" and path == f"/api/v1/namespaces/{ns}/pods":
            items = [p for p in fake.pods if _matches(p["metadata"]["labels"], query.get("labelSelector"))]
            self._json(200, {"kind": "PodList", "apiVersion": "v1",
                             "metadata": {"resourceVersion": "81724"}, "items": items})
            return
        if (method == "GET" and len(parts) == 7 and parts[:4] == ["api", "v1", "namespaces", ns]
                and parts[4] == "pods" and parts[6] == "log"):
            tail = int(query["tailLines"]) if query.get("tailLines") else None
            text = fake.container_log(parts[5], tail)
            if text is None:
                self._json(404, _status(404, "NotFound", f'pods "{parts[5]}" not found'))
            else:
                self._text(200, text)
            return
        if len(parts) >= 7 and parts[:4] == ["api", "v1", "namespaces", ns] and parts[6] == "proxy":
            target, _, port = parts[5].partition(":")
            rest = "/".join(parts[7:]) + ("/" if path.endswith("/") and len(parts) > 7 else "")
            if parts[4] == "services":
                self._service_proxy(fake, method, target, port, rest, query, body)
                return
            if parts[4] == "pods":
                self._pod_proxy(fake, target, port, rest)
                return
        self._json(404, _status(404, "NotFound", "the server could not find the requested resource"))

    def _service_proxy(self, fake: FakeKubeApi, method: str, service: str, port: str, rest: str,
                       query: dict[str, str], body: bytes) -> None:
        outputs = fake._base_outputs
        if service == outputs["dashboardService"] and port in ("8265", "dashboard"):
            if rest == "api/serve/applications/":
                self._json(200, fake.serve_details())
            elif rest == "api/v0/logs/file" and fake.ray_logs_enabled:
                text = fake.ray_log(query)
                if text is None:
                    self._text(200, "0Actor ID " + query.get("actor_id", "") + " not found.")
                else:
                    self._send(200, b"1" + text.encode("utf-8"), "text/plain")
            else:
                self._text(404, "404: Not Found")
            return
        if service == outputs["serveService"] and port in ("8000", "serve"):
            if fake.scenario == "rayservice-not-ready":
                self._json(503, _status(503, "ServiceUnavailable",
                                        f'no endpoints available for service "{service}"'))
                return
            model = fake.spec.model.id
            if method == "GET" and rest == "v1/models":
                self._json(200, models_document(model))
                return
            if method == "POST" and rest == "v1/chat/completions":
                try:
                    request = json.loads(body.decode("utf-8"))
                except (ValueError, UnicodeDecodeError):
                    request = None
                error = validate_chat_request(model, request)
                if error is not None:
                    self._json(*error)
                    return
                fake.record_chat(request)
                self._json(200, chat_completion_document(model, request))
                return
            self._json(404, error_document(f"no route /{rest}", "NotFoundError", 404))
            return
        self._json(404, _status(404, "NotFound", f'services "{service}" not found'))

    def _pod_proxy(self, fake: FakeKubeApi, pod: str, port: str, rest: str) -> None:
        if pod in fake._counters and port in ("8080", "metrics") and rest == "metrics" \
                and fake.metrics_enabled:
            self._send(200, fake.metrics_text(pod).encode("utf-8"),
                       "text/plain; version=0.0.4; charset=utf-8")
            return
        if pod in fake._counters:
            self._json(503, _status(503, "ServiceUnavailable",
                                    "error trying to reach service: dial tcp: connection refused"))
            return
        self._json(404, _status(404, "NotFound", f'pods "{pod}" not found'))


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeKubeApi):
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _Handler)
