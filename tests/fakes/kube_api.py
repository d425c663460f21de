"""A fake Kubernetes API server for a deployed raypd stack: real HTTP on 127.0.0.1, real formats.

It serves the paths `serve.verify` and the web app's live status use, with objects shaped as the
real components produce them:
- Kubernetes core/v1 NodeList and PodList, pod logs, the service proxy and pod proxy;
- the KubeRay 1.4 `ray.io/v1` RayService (condition `Ready`, `activeServiceStatus`);
- Ray's dashboard on the head Service (`/api/serve/applications/` = ServeInstanceDetails;
  `/api/v0/actors` = the State API's list, equality filters as state_api_utils.do_filter applies
  them; `/api/v0/logs/file?actor_id=&suffix=out|err` = the file's raw bytes, 200, or HTTP 500 with
  the error's text, e.g. "Actor ID ActorID(...) not found.", as Ray 2.58 and 2.60 answer
  (ray/dashboard/modules/state/state_head.py `get_logs`: the first chunk is read before the
  response starts, an error there is `HTTPInternalServerError(text=str(e))`;
  dashboard/modules/log/log_manager.py `resolve_actor_filename` raises the "not found"; ray PR
  #51787 dropped the old leading "1"/"0" byte of every chunk), in the shapes of the real Ray 2.60
  answers in tests/fixtures/real/ray/;
- the OpenAI endpoint on the Serve Service: a vLLM-shaped stand-in (tests/fakes/vllm_openai.py,
  started at the first request), so every feature of verify's api-parity is answered, streamed
  answers included; a chat completion first plays on the engines' counters (`record_chat`), and
  its 500 (failed-transfers) is the answer;
- vLLM's metrics as Ray exports them on each worker pod's port 8080 (see `metrics_text`);
- Secrets: GET and JSON merge PATCH with resourceVersion preconditions (the API keys' Secret;
  `put_secret`, `secret_data`, and the knobs in FakeKubeApi's Secrets block);
- serve.resilience's acts: a pod's GET and DELETE, its eviction, a node's GET and merge PATCH,
  dry runs, RBAC refusals (`forbidden`) and disruption budgets (`eviction_blocked`):
  tests/fakes/kube_faults.py.

Where the engines' lines are, by `executor` (vllm/v1/executor; ray/llm vllm_models.py): "ray"
(default, the GPU layout: each engine replica has TP x PP `RayWorkerWrapper` actors on its node,
listed by the State API, and NIXL's `Backend ... was instantiated` is in their `.out`) or "mp" (the
CPU layout of the real captures: no worker actors, NIXL's line in the replica's own `.out`).
`metric_prefix` "ray_vllm_" (default), "ray_vllm:" (older Ray) or "vllm:" (plain vLLM: no
ReplicaId, zeros exported, and the `KV Transfer metrics:` log line that Ray's logger never prints);
`state_api=False` answers 404 for `/api/v0/actors`; `dashboard=False`: the head Service's proxy
answers 503 for every dashboard path (the API server's "error trying to reach service" when the
dashboard does not answer), so the Serve, State and log APIs are all unreadable.
Flaky reads, as plain attributes a test sets between calls: `metrics_failures[pod]` = how many of
the next metrics requests of that pod the proxy answers 503; `log_failures[actor_id]` = how many of
the next log requests of that actor Ray answers 500.

    with FakeKubeApi("healthy") as kube:
        report = run_verify(kube.outputs())
        kube.requests        # [{"method", "path", "query"}, ...] (never the token)

Scenarios: see SCENARIOS. The stack is the reference (2 x g6.8xlarge, prefill + decode in node
group "gpu") unless `config` (Contract 1 keys) says otherwise; scenario "colocated" uses
`raypd:mode: colocated`. A chat completion through the Serve Service (or `record_chat()`, e.g. as
an OpenAIServer's `on_chat`) moves the KV counters and log lines as the scenario says.

Batch Jobs really run (what serve.benchmark.incluster needs):
- `POST /api/v1/namespaces/{ns}/configmaps` and `POST /apis/batch/v1/namespaces/{ns}/jobs` store
  the object (201 with it; 409 AlreadyExists when the name is taken; 400 when the body is not a
  ConfigMap/Job of that namespace; 422 for a ConfigMap over 1 MiB or a Job without containers);
  GET of either object, DELETE of either (404 Status when absent).
- A Job starts one pod `{job}-xxxxx` at once: the pod template's labels (plus the Job controller's
  `job-name` labels), `metadata.creationTimestamp`, one containerStatuses entry, phase Pending
  (waiting ContainerCreating) -> Running -> Succeeded/Failed. Running means a real process: the
  container's volumes are made under a private temp root (a ConfigMap volume's data files written
  at `<root>/<mountPath>/<key>`, an emptyDir as an empty directory), absolute paths in the command
  and env values that lead to a mount are rewritten into that root (PYTHONPATH=/opt/raypd becomes
  `<root>/opt/raypd`, `--out /tmp/benchmark` the emptyDir), "python" becomes sys.executable, and
  the command runs with cwd=<root>, env = the container's `value` env + PATH, stdout and stderr
  merged into the pod's log as it arrives (`GET .../pods/{pod}/log`, honouring `tailLines` then
  `limitBytes`; 400 while the container is waiting, as the real API answers). A ConfigMap volume
  whose ConfigMap does not exist fails the pod with the kubelet's `MountVolume.SetUp failed ...
  configmap "..." not found` as its log.
- The Job's status: `{"active": 1}` while its pod is pending or running, then `{"succeeded": 1,
  "conditions": [Complete]}` or `{"failed": 1, "conditions": [Failed, BackoffLimitExceeded]}`.
- DELETE of a Job with `propagationPolicy` Background or Foreground kills its process (SIGKILL to
  its process group, waited for) and removes its pods; without one (or Orphan) the pods stay and
  keep running, as the real API's default for batch/v1 Jobs orphans them.
- A Job's `spec.activeDeadlineSeconds` is kept as the Job controller keeps it: when it passes
  before the pod ended, the pod is killed and deleted and the Job fails with reason
  DeadlineExceeded.
- Pods of Jobs are listed with the stack's pods by `GET /api/v1/namespaces/{ns}/pods`
  (`labelSelector=raypd.io/benchmark=<name>`).

Knobs for Job tests (constructor keyword arguments, also plain attributes read at the moment they
matter, so a test may change them between calls):
- `job_pending_s` (default 0): how long a Job's pod stays Pending (ContainerCreating) before it runs;
- `job_waiting_reason` (default None), e.g. "ImagePullBackOff" or "InvalidImageName": the pod stays
  Pending for ever with that waiting reason (and a kubelet-like message) and never runs;
- `refuse_jobs` (default None), 403 or 422: `POST .../jobs` answers that Status (Forbidden by
  RBAC, or Invalid) and stores nothing; `refuse_config_maps` (default None), e.g. 403: the same for
  `POST .../configmaps`, to test that a Job created first is cleaned up.
- `dashboard_upstream` and `metrics_upstream` (attributes, default None): a real Ray dashboard's
  URL (http://127.0.0.1:8265) and a real Ray metrics export URL: the head Service's proxy on 8265
  and every worker pod's proxy on 8080 then pass requests to them (query string as sent, repeated
  keys kept), as the API server proxies to the pods. With `worker_pod_ip="127.0.0.1"` the worker
  pods carry the real Ray node's IP, so replicas map onto them.
- `prometheus_upstream` (attribute, default None): a real Prometheus's URL; the metrics
  namespace's Prometheus Service proxy (`/api/v1/namespaces/monitoring/services/raypd-prometheus:
  9090/proxy/...`) then passes requests to it; without one that Service has no ready endpoint
  (503). `scrape_config()` is the Prometheus scrape job that reads every worker pod's page through
  this API's pod proxy, as the worker PodMonitor reads them in a cluster.
- `serve_upstream` (attribute, default None): an OpenAI server's URL; the Serve Service's proxy
  (`.../services/<serve>:8000/proxy/...`) then passes requests to it and streams the answer back,
  instead of to the built-in stand-in (and without `record_chat`).
Looking in: `objects()` -> {"configmaps": [names], "jobs": [names], "pods": [Job pod names]} of
what exists now; `runs` -> every Job pod ever started (JobRun: `.process`, `.killed`, `.log()`,
`.rootfs`). `stop()` (and leaving the `with`) kills every process still running and removes the
temp roots.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import http.client
import io
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional
from urllib.parse import parse_qs, parse_qsl, unquote, urlencode, urlsplit

import yaml

from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment
from components.render import observability_names
from components.render.outputs import render_stack_outputs
from serve.kube import ALLOW_HTTP_CREDENTIALS_EXTENSION
from tests.fakes import LoopbackServer, kube_faults
from tests.fakes.openai_server import error_document, validate_chat_request
from tests.fakes.vllm_openai import VllmStandIn

CONTROLLER_LOG = "/serve/controller_1200.log"  # controller_info.log_file_path
SCENARIOS = (
    "healthy",
    "ucx-fallback",          # NIXL logs "Backend UCX was instantiated" (the TCP-speed fallback)
    "mixed-backends",        # the decode's NIXL agent instantiated UCX as well as LIBFABRIC (one log, both lines)
    "efa-not-advertised",    # no vpc.amazonaws.com/efa in the GPU nodes' allocatable
    "two-zones",             # the second GPU node sits in another availability zone
    "rayservice-not-ready",  # Ready=False (Initializing), app DEPLOYING, Serve Service no endpoints
    "no-kv-transfer",        # chat answers 200 but decode recomputed the prompt (local_compute rises)
    "partial-recompute",     # the KV cache moved, but decode computed 5 prompt tokens itself (local_compute rises too)
    "failed-transfers",      # every chat's KV load fails: 2 failed NIXL transfers, HTTP 500 (policy fail)
    "metrics-stale",         # chat answers 200 but no counter moves (an exporter that stopped)
    "colocated",             # colocated mode: one engine deployment, no KV transfer
    "missing-node",          # one planned GPU node never joined
    "shared-node",           # prefill and decode replicas both on the first GPU node
)
EXECUTORS = ("ray", "mp")  # vLLM's Ray executor (GPU: RayWorkerWrapper actors) or multiprocessing (CPU)
METRIC_PREFIXES = ("ray_vllm_", "ray_vllm:", "vllm:")
WORKER_ACTOR_CLASS = "RayWorkerWrapper"
DEFAULT_TOKEN = "fake-bearer-token-7f3c9a1e5b"
ZONE = "us-east-2a"
OTHER_ZONE = "us-east-2b"
RAY_VERSION = "2.58.0"
SESSION = "session_2026-12-01_12-00-03_412345_1"


CONFIG_MAP_MAX_BYTES = 1024 * 1024
MAX_REQUEST_BYTES = 3 * 1024 * 1024  # the API server's own limit on a request body
_CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*").fullmatch
_POD_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # what the API server's generateName draws from
# What a kubelet says next to a waiting reason (the `job_waiting_reason` knob); {image} is the container's.
WAITING_MESSAGES = {
    "ImagePullBackOff": 'Back-off pulling image "{image}"',
    "ErrImagePull": 'failed to pull and unpack image "{image}": failed to resolve reference "{image}": '
                    "not found",
    "InvalidImageName": 'Failed to apply default image tag "{image}": couldn\'t parse image name '
                        '"{image}": invalid reference format',
    "ErrImageNeverPull": 'Container image "{image}" is not present with pull policy of Never',
    "CreateContainerConfigError": 'configmap "missing" not found',
}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _uuid(seed: str) -> str:
    h = _hex(seed, 32)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


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


# ---- cluster-wide lists for verify's dashboard-exposure check (serve/verify/exposure.py) ----
# Formats: the Kubernetes API reference's ServiceList / IngressList (kind, apiVersion,
# metadata.resourceVersion, items) and Gateway API's <Kind>List under
# /apis/gateway.networking.k8s.io/<version>/<plural>; a resource type the API server does not
# serve answers 404 with the Status "the server could not find the requested resource", as
# kube-apiserver does for an unknown group/version/resource (k8s.io/apiserver, NotFound handler).
# The stack's Services are the ones KubeRay 1.4 creates for a RayService (ray-operator/controllers/
# ray/common/service.go): `<rayservice>-head-svc` and `<cluster>-head-svc` selecting the head by
# ray.io/cluster, ray.io/node-type and ray.io/identifier, with the head's port names (gcs-server,
# dashboard, client, serve, metrics); `<rayservice>-serve-svc` selecting ray.io/serve=true pods.

_EXPOSURE_LIST_KINDS = {"services": ("v1", "ServiceList"),
                        "ingresses": ("networking.k8s.io/v1", "IngressList")}


class ExposureObjects:
    """What the fake lists cluster-wide. Tests add objects to `services` / `ingresses`, install a
    route type with `routes[(version, plural)] = [...]` (absent: its CRD is not installed), or
    make a list refused with `forbidden.add(path)` (403 Status, as RBAC answers)."""

    def __init__(self, services: list[dict[str, Any]]):
        self.services = services
        self.ingresses: list[dict[str, Any]] = []
        self.routes: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.forbidden: set[str] = set()

    @classmethod
    def of_stack(cls, fake: "FakeKubeApi") -> "ExposureObjects":
        ns, name, cluster = fake.spec.namespace, fake.spec.service_name, fake.ray_cluster
        head_selector = {"ray.io/cluster": cluster, "ray.io/identifier": f"{cluster}-head",
                         "ray.io/node-type": "head"}
        head_ports = [{"name": "gcs-server", "port": 6379}, {"name": "dashboard", "port": 8265},
                      {"name": "client", "port": 10001}, {"name": "serve", "port": 8000},
                      {"name": "metrics", "port": 8080}]
        return cls([
            service_object(ns, f"{name}-head-svc", head_selector, head_ports),
            service_object(ns, f"{cluster}-head-svc", head_selector, head_ports),
            service_object(ns, f"{name}-serve-svc", {"ray.io/cluster": cluster, "ray.io/serve": "true"},
                           [{"name": "serve", "port": 8000}]),
            service_object("default", "kubernetes", None, [{"name": "https", "port": 443, "targetPort": 443}]),
            service_object("kube-system", "kube-dns", {"k8s-app": "kube-dns"},
                           [{"name": "dns-tcp", "port": 53, "protocol": "TCP"}]),
        ])

    def answer(self, path: str) -> Optional[tuple[int, dict[str, Any]]]:
        parts = path.strip("/").split("/")
        if path in self.forbidden:
            resource = parts[-1]
            return 403, _status(403, "Forbidden", f'{resource} is forbidden: User "verify" cannot list '
                                                  f'resource "{resource}" at the cluster scope')
        if path == "/api/v1/services":
            return 200, self._list("services", self.services)
        if path == "/apis/networking.k8s.io/v1/ingresses":
            return 200, self._list("ingresses", self.ingresses)
        if len(parts) == 4 and parts[:2] == ["apis", "gateway.networking.k8s.io"]:
            items = self.routes.get((parts[2], parts[3]))
            if items is not None:
                kind = {"httproutes": "HTTPRouteList", "grpcroutes": "GRPCRouteList",
                        "tcproutes": "TCPRouteList", "tlsroutes": "TLSRouteList"}[parts[3]]
                return 200, {"kind": kind, "apiVersion": f"gateway.networking.k8s.io/{parts[2]}",
                             "metadata": {"resourceVersion": "81790"}, "items": copy.deepcopy(items)}
        return None

    @staticmethod
    def _list(plural: str, items: list[dict[str, Any]]) -> dict[str, Any]:
        api_version, kind = _EXPOSURE_LIST_KINDS[plural]
        # List items carry no kind/apiVersion of their own (the list's say it).
        return {"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": "81789"},
                "items": [{k: v for k, v in copy.deepcopy(item).items() if k not in ("kind", "apiVersion")}
                          for item in items]}


def service_object(namespace: str, name: str, selector: Optional[dict[str, str]],
                   ports: list[dict[str, Any]], kind: str = "ClusterIP", **spec: Any) -> dict[str, Any]:
    """A core/v1 Service as the API server returns it (defaults filled: protocol TCP, targetPort =
    port, a node port for NodePort/LoadBalancer)."""
    filled = []
    for index, port in enumerate(ports):
        entry = {"protocol": "TCP", "targetPort": port["port"], **port}
        if kind in ("NodePort", "LoadBalancer"):
            entry.setdefault("nodePort", 30000 + index + int(_hex(name, 3), 16) % 2000)
        filled.append(entry)
    body: dict[str, Any] = {"type": kind, "ports": filled, "clusterIP": f"172.20.{len(name)}.{len(ports)}",
                            "sessionAffinity": "None", **spec}
    if selector is not None:
        body["selector"] = selector
    return {"kind": "Service", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": namespace, "uid": _hex(namespace + name, 32),
                         "resourceVersion": "81700"},
            "spec": body, "status": {"loadBalancer": {}}}


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 section 2, as written: objects merge key by key, a null removes the key, anything
    else (arrays too) replaces the target."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


class FakeKubeApi(LoopbackServer):
    """A stack's Kubernetes API on 127.0.0.1:<free port>; use as a context manager."""

    def __init__(self, scenario: str = "healthy", *, config: Optional[dict[str, Any]] = None,
                 stack: str = "dev", token: str = DEFAULT_TOKEN,
                 accept_token: Optional[Callable[[str], bool]] = None,
                 metrics: bool = True, ray_logs: bool = True, executor: str = "ray",
                 metric_prefix: str = "ray_vllm_", state_api: bool = True, dashboard: bool = True,
                 worker_pod_ip: Optional[str] = None,
                 job_pending_s: float = 0.0, job_waiting_reason: Optional[str] = None,
                 refuse_jobs: Optional[int] = None, refuse_config_maps: Optional[int] = None):
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
        self.scenario = scenario
        self.token = token
        self.accept_token = accept_token or (lambda candidate: candidate == token)
        if executor not in EXECUTORS or metric_prefix not in METRIC_PREFIXES:
            raise ValueError(f"executor is one of {EXECUTORS}, metric_prefix one of {METRIC_PREFIXES}")
        self.worker_pod_ip = worker_pod_ip
        self.metrics_enabled = metrics
        self.ray_logs_enabled = ray_logs
        self.state_api_enabled = state_api
        self.dashboard_enabled = dashboard
        self.metrics_failures: dict[str, int] = {}
        self.log_failures: dict[str, int] = {}
        self.executor = executor
        self.metric_prefix = metric_prefix
        self.requests: list[dict[str, Any]] = []
        self.chats = 0
        # serve.resilience's acts (tests/fakes/kube_faults.py): RBAC refusals as (verb, resource),
        # pods a disruption budget keeps from eviction, and every write made.
        self.forbidden: set[tuple[str, str]] = set()
        self.eviction_blocked: set[str] = set()
        self.fault_writes: list[dict[str, Any]] = []
        # Scaling (issue 30 §3), set by a test: each phase's running requests per RUNNING replica
        # (Serve's `ray_serve_replica_processing_queries` on the replica's pod), fields of a
        # deployment's Serve status to override ({deployment: {"status": ..., "target_num_replicas":
        # ..., "replica_states": [...]}}; the states are those of the replicas the Serve API lists
        # and the metrics pages carry: `serve_replicas`) and the Serve controller log's lines
        # (`scaling_log`).
        self.serve_load: dict[str, int] = {}
        self.serve_overrides: dict[str, dict[str, Any]] = {}
        self.scaling_log: list[str] = []
        if config is None:
            config = {"raypd:mode": "colocated"} if scenario == "colocated" else {}
        self.spec = DeploymentSpec.from_config(config, stack)
        self.cluster_name = f"raypd-{stack}"
        self._base_outputs = render_stack_outputs(self.spec, availability_zone=ZONE,
                                                  cluster_name=self.cluster_name)
        self._lock = threading.Lock()
        self.job_pending_s = job_pending_s
        self.job_waiting_reason = job_waiting_reason
        self.refuse_jobs = refuse_jobs
        self.refuse_config_maps = refuse_config_maps
        # An OpenAI server (http://127.0.0.1:port) the Serve Service's proxy passes requests to,
        # streaming its answer through as the API server does; None: the canned documents below.
        self.serve_upstream: Optional[str] = None
        self._engines_standin: Optional[VllmStandIn] = None  # the built-in one, started when first asked
        self.dashboard_upstream: Optional[str] = None
        self.metrics_upstream: Optional[str] = None
        self.prometheus_upstream: Optional[str] = None
        self.runs: list[JobRun] = []
        self._jobs_lock = threading.RLock()
        self._config_maps: dict[tuple[str, str], dict[str, Any]] = {}
        self._jobs: dict[tuple[str, str], dict[str, Any]] = {}
        self._job_pods: dict[tuple[str, str], JobRun] = {}
        self._serial = itertools.count(1)
        self._init_secrets()
        self._build_cluster()
        self.exposure = ExposureObjects.of_stack(self)  # Services, Ingresses, routes (verify)
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # ---- the public face ----

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def kubeconfig(self, *, fmt: str = "yaml", exec_command: Optional[str] = None,
                   token: Optional[str] = None, user: Optional[dict[str, Any]] = None,
                   allow_http: bool = True) -> str:
        """Kubeconfig text pointing here: a bearer token, or an `aws eks get-token` exec user.

        `exec_command` is the path of the program the exec entry names (verify must never run it:
        tests point it at a script that leaves a mark); `user` replaces the user entry (e.g.
        `{"tokenFile": path}`); `allow_http=False` leaves out the extension that allows
        credentials over this plain-HTTP server.
        """
        name = self.cluster_name
        if user is not None:
            pass
        elif exec_command is not None:
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
            # The stand-in serves plain HTTP on loopback: its kubeconfig says so explicitly, as a
            # user would have to (serve.kube sends no credentials to http:// otherwise).
            "clusters": [{"name": name, "cluster": {"server": self.url, **({"extensions": [
                {"name": ALLOW_HTTP_CREDENTIALS_EXTENSION, "extension": True}]} if allow_http else {})}}],
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

    def objects(self) -> dict[str, list[str]]:
        """The names of the ConfigMaps, Jobs and Job pods that exist now (every namespace)."""
        with self._jobs_lock:
            return {"configmaps": sorted(name for _, name in self._config_maps),
                    "jobs": sorted(name for _, name in self._jobs),
                    "pods": sorted(name for _, name in self._job_pods)}

    def engines_url(self) -> str:
        """The built-in OpenAI server behind the Serve Service (started at the first request)."""
        with self._lock:
            if self._engines_standin is None:
                self._engines_standin = VllmStandIn(self.spec.model.id, max_model_len=4096).start()
            return self._engines_standin.url

    def stop(self) -> None:
        """Stop serving, kill every Job process still running, remove the pods' temp roots."""
        super().stop()
        with self._lock:
            standin, self._engines_standin = self._engines_standin, None
        if standin is not None:
            standin.stop()
        with self._jobs_lock:
            runs = list(self.runs)
            self._job_pods.clear()
            self._jobs.clear()
            self._config_maps.clear()
        for run in runs:
            run.kill()
        for run in runs:
            run.join()

    def record_chat(self, request: Optional[dict[str, Any]] = None) -> int:
        """What one chat completion does to the engines' counters and logs in this scenario; the
        HTTP status the request gets (500 for a KV load failure under kv_load_failure_policy: fail)."""
        with self._lock:
            self.chats += 1
            prompt = 17  # tokens of the short test prompt after the chat template
            if not all(self.replicas.values()):
                return 200  # an engine is missing; the scenario is about something else
            if not self.disaggregated:
                engine = self._engines[self.replicas["colocated"][0]["replica_id"]]
                engine["local"] += prompt
                engine["generated"] += 8
                return 200
            prefill = self._engines[self.replicas["prefill"][0]["replica_id"]]
            decode_replicas = self.replicas["decode"]
            decode_replica = decode_replicas[(self.chats - 1) % len(decode_replicas)]
            decode = self._engines[decode_replica["replica_id"]]
            stamp = f"12-01 12:4{self.chats % 10}:07"
            if self.scenario == "metrics-stale":
                return 200
            prefill["local"] += prompt  # prefill computes the prompt in every scenario
            prefill["generated"] += 1
            if self.scenario == "failed-transfers":
                decode["failed"] += 2  # the handshake is retried once: two failures for one request
                self._actor_logs[decode_replica["actor_id"]]["err"].append(
                    f"(EngineCore pid=2187) ERROR {stamp} [scheduler.py:1412] Failing 1 request(s) due "
                    "to KV load failure (failure_policy=fail, 1 tokens affected)")
                return 500
            if self.scenario == "no-kv-transfer":
                decode["local"] += prompt
                decode["generated"] += 8
                return 200
            decode["transfers"] += 1
            decode["xfer_seconds"] += 0.00248
            decode["bytes"] += 12.5 * 1024 * 1024
            recomputed = 5 if self.scenario == "partial-recompute" else 0
            decode["external"] += prompt - recomputed
            decode["local"] += recomputed
            decode["generated"] += 8
            if self.metric_prefix == "vllm:":  # plain vLLM prints its own line; Ray's logger does not
                self._actor_logs[decode_replica["actor_id"]]["out"].append(
                    f"(APIServer pid=2101) INFO {stamp} [metrics.py:108] KV Transfer metrics: Num "
                    "successful transfers=1, Avg xfer time (ms)=2.481, P90 xfer time (ms)=2.481, Avg "
                    "post time (ms)=0.311, P90 post time (ms)=0.311, Avg MB per transfer=12.5, "
                    "Throughput (MB/s)=5038.291, Avg number of descriptors=448, Num failed "
                    "transfers=0, Num failed notifications=0, Num KV expired reqs=0")
            return 200

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
                                group.name, "worker", node,
                                self.worker_pod_ip or f"10.0.{g_index + 2}.{100 + n}")
                self.pods.append(pod)
                pool[group.name].append((node, pod))

        # Engines: each phase takes its nodes from its group's pool, replicas round-robin.
        self.replicas: dict[str, list[dict[str, Any]]] = {}
        taken: dict[str, int] = {}
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
            self.replicas[phase_name] = replicas

        self._worker_pods = {p["metadata"]["name"] for p in self.pods
                             if p["metadata"]["labels"]["ray.io/node-type"] == "worker"}
        backend = "UCX" if self.scenario == "ucx-fallback" else spec.kv_transfer.backend
        # Each engine replica's counters, keyed by its Serve replica id (Ray's ReplicaId tag).
        self._engines: dict[str, dict[str, float]] = {}
        self._actor_logs: dict[str, dict[str, list[str]]] = {}
        self.worker_actors: list[dict[str, Any]] = []
        for phase_name, replicas in self.replicas.items():
            phase = spec.phases[phase_name]
            for replica in replicas:
                self._engines[replica["replica_id"]] = dict.fromkeys(
                    ("transfers", "xfer_seconds", "bytes", "failed", "external", "local", "generated", "expired"), 0.0)
                nixl = [f"2026-12-01 12:03:11 NIXL INFO    _api.py:405 Backend {backend} was instantiated",
                        "2026-12-01 12:03:11 NIXL INFO    _api.py:281 Initialized NIXL agent: "
                        f"{_uuid(replica['actor_id'])}"] if self.disaggregated else []
                if self.scenario == "mixed-backends" and phase_name == "decode":
                    nixl.insert(1, "2026-12-01 12:03:11 NIXL INFO    _api.py:405 Backend UCX was instantiated")
                replica_out = [
                    "(APIServer pid=2101) INFO 12-01 12:02:40 [core.py:95] Initializing a V1 LLM engine "
                    f"(v0.26.0) with config: model='{spec.model.source}'",
                    "(EngineCore pid=2187) INFO 12-01 12:04:02 [gpu_model_runner.py:2320] Model loading "
                    "took 17.66 GiB memory and 141.2 seconds"]
                replica_err = [f"[2026-12-01 12:01:0{i},000 I 2101 2101] core_worker.cc:{300 + i}: "
                               "worker startup" for i in range(3)]
                if self.executor == "mp":  # CPU: the vLLM worker is a subprocess of the replica
                    replica_out += nixl
                self._actor_logs[replica["actor_id"]] = {"out": replica_out, "err": replica_err}
                if self.executor != "ray":
                    continue
                # GPU: Ray Serve LLM runs vLLM's Ray executor; one RayWorkerWrapper per GPU of the
                # engine (TP x PP), on the replica's node; NIXL's stdout goes to the actor's .out file.
                for rank in range(max(1, phase.tensor_parallel_size * phase.pipeline_parallel_size)):
                    actor_id = _hex(f"worker-actor{replica['actor_id']}{rank}", 32)
                    self.worker_actors.append({
                        "actor_id": actor_id, "class_name": WORKER_ACTOR_CLASS, "state": "ALIVE",
                        "job_id": "02000000", "name": "", "node_id": replica["node_id"],
                        "pid": 2300 + rank, "ray_namespace": _uuid("serve-namespace"),
                        "_replica": replica["replica_id"]})
                    self._actor_logs[actor_id] = {
                        "out": [f"INFO 12-01 12:02:5{rank % 10} [parallel_state.py:1208] rank {rank} in "
                                f"world size {phase.tensor_parallel_size} is assigned as DP rank 0, "
                                f"PP rank 0, TP rank {rank}", *nixl],
                        "err": [f"[2026-12-01 12:02:50,000 I {2300 + rank} {2300 + rank}] "
                                "core_worker.cc:512: Actor created"]}

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
                    "rayClusterStatus": {"state": "ready", "readyWorkerReplicas": len(self._worker_pods),
                                         "availableWorkerReplicas": len(self._worker_pods),
                                         "desiredWorkerReplicas": len(self._worker_pods)},
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
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastTransitionTime": "2026-12-01T12:04:30Z"}],
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

    # ---- ConfigMaps and Jobs ----

    def _stamp(self, document: dict[str, Any], namespace: str) -> dict[str, Any]:
        stored = copy.deepcopy(document)
        metadata = stored.setdefault("metadata", {})
        serial = next(self._serial)
        metadata.update({"namespace": namespace, "uid": _uuid(f"{namespace}/{metadata['name']}/{serial}"),
                         "resourceVersion": str(90000 + serial), "creationTimestamp": _now()})
        return stored

    def create_object(self, kind: str, namespace: str, body: bytes) -> tuple[int, dict[str, Any]]:
        """POST of a ConfigMap or a Job: (HTTP status, the stored object or a Status)."""
        resource = "configmaps" if kind == "ConfigMap" else "jobs.batch"
        try:
            document = json.loads(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return 400, _status(400, "BadRequest", "the request body is not JSON")
        metadata = document.get("metadata") if isinstance(document, dict) else None
        metadata = metadata if isinstance(metadata, dict) else {}
        name = metadata.get("name")
        if not isinstance(document, dict) or document.get("kind") != kind or not isinstance(name, str):
            return 400, _status(400, "BadRequest", f"the body is not a {kind} with metadata.name")
        if str(metadata.get("namespace") or namespace) != namespace:
            return 400, _status(400, "BadRequest", "the namespace of the provided object does not match "
                                                   "the namespace sent on the request")
        if not _DNS_SUBDOMAIN(name):
            return 422, _status(422, "Invalid", f'{kind} "{name}" is invalid: metadata.name: Invalid value')
        if kind == "Job" and self.refuse_jobs is not None:
            code = int(self.refuse_jobs)
            if code == 403:
                return 403, _status(403, "Forbidden", f'jobs.batch is forbidden: User "system:serviceaccount:'
                                    f'raypd:webui" cannot create resource "jobs" in API group "batch" in '
                                    f'the namespace "{namespace}"')
            if code == 422:
                return 422, _status(422, "Invalid", f'Job.batch "{name}" is invalid: '
                                    "spec.template.spec.containers[0].image: Required value")
            return code, _status(code, "InternalError", f'the fake refuses to create Job "{name}"')
        if kind == "ConfigMap" and self.refuse_config_maps is not None:
            code = int(self.refuse_config_maps)
            return code, _status(code, "Forbidden" if code == 403 else "InternalError",
                                 f'configmaps is forbidden: User "system:serviceaccount:raypd:webui" cannot '
                                 f'create resource "configmaps" in the namespace "{namespace}"')
        with self._jobs_lock:
            store = self._config_maps if kind == "ConfigMap" else self._jobs
            if (namespace, name) in store:
                status = _status(409, "AlreadyExists", f'{resource} "{name}" already exists')
                status["details"] = {"name": name, "group": "" if kind == "ConfigMap" else "batch",
                                     "kind": resource.split(".")[0]}
                return 409, status
            if kind == "ConfigMap":
                data = document.get("data") or {}
                size = sum(len(str(k)) + len(str(v).encode("utf-8")) for k, v in data.items()) \
                    if isinstance(data, dict) else 0
                bad = [k for k in data if not _CONFIG_MAP_KEY.fullmatch(str(k)) or str(k) in (".", "..")] \
                    if isinstance(data, dict) else ["data"]
                if bad:
                    return 422, _status(422, "Invalid", f'ConfigMap "{name}" is invalid: data[{bad[0]}]: Invalid '
                                                        "value: a valid config key must consist of "
                                                        "alphanumeric characters, '-', '_' or '.'")
                if size > CONFIG_MAP_MAX_BYTES:
                    return 422, _status(422, "Invalid", f'ConfigMap "{name}" is invalid: []: Too long: must '
                                                        f"have at most {CONFIG_MAP_MAX_BYTES} bytes")
                stored = self._stamp(document, namespace)
                self._config_maps[(namespace, name)] = stored
                return 201, copy.deepcopy(stored)
            template = ((document.get("spec") or {}).get("template") or {})
            containers = (template.get("spec") or {}).get("containers")
            if not isinstance(containers, list) or not containers:
                return 422, _status(422, "Invalid", f'Job.batch "{name}" is invalid: '
                                                    "spec.template.spec.containers: Required value")
            stored = self._stamp(document, namespace)
            uid = stored["metadata"]["uid"]
            controller = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                          "controller-uid": uid, "job-name": name}
            spec = stored["spec"]
            spec.setdefault("selector", {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
            labels = spec["template"].setdefault("metadata", {}).setdefault("labels", {})
            labels.update(controller)
            stored["status"] = {"active": 1, "startTime": _now()}
            self._jobs[(namespace, name)] = stored
            run = JobRun(self, namespace, stored)
            self._job_pods[(namespace, run.name)] = run
            self.runs.append(run)
            created = copy.deepcopy(stored)
        run.start()
        return 201, created

    def delete_object(self, kind: str, namespace: str, name: str, propagation: Optional[str]
                      ) -> tuple[int, dict[str, Any]]:
        resource = "configmaps" if kind == "ConfigMap" else "jobs.batch"
        doomed: list[JobRun] = []
        with self._jobs_lock:
            store = self._config_maps if kind == "ConfigMap" else self._jobs
            stored = store.pop((namespace, name), None)
            if stored is None:
                return 404, _status(404, "NotFound", f'{resource} "{name}" not found')
            if kind == "Job" and propagation in ("Background", "Foreground"):
                for key, run in list(self._job_pods.items()):
                    if key[0] == namespace and run.job_name == name:
                        del self._job_pods[key]
                        doomed.append(run)
                # The garbage collector: objects the Job owns (ownerReferences by uid) go with it.
                uid = stored["metadata"].get("uid")
                for key, config_map in list(self._config_maps.items()):
                    owners = (config_map.get("metadata") or {}).get("ownerReferences") or []
                    if key[0] == namespace and any(o.get("uid") == uid for o in owners if isinstance(o, dict)):
                        del self._config_maps[key]
        for run in doomed:
            run.kill()
        stored["metadata"]["deletionTimestamp"] = _now()
        return 200, stored

    def get_object(self, kind: str, namespace: str, name: str) -> tuple[int, dict[str, Any]]:
        with self._jobs_lock:
            store = self._config_maps if kind == "ConfigMap" else self._jobs
            stored = store.get((namespace, name))
            if stored is not None:
                return 200, copy.deepcopy(stored)
        resource = "configmaps" if kind == "ConfigMap" else "jobs.batch"
        return 404, _status(404, "NotFound", f'{resource} "{name}" not found')

    def job_pods(self, namespace: str, selector: Optional[str]) -> list[dict[str, Any]]:
        with self._jobs_lock:
            return [copy.deepcopy(run.pod) for (ns, _), run in self._job_pods.items()
                    if ns == namespace and _matches(run.pod["metadata"]["labels"], selector)]

    def job_pod(self, namespace: str, name: str) -> Optional[JobRun]:
        with self._jobs_lock:
            return self._job_pods.get((namespace, name))

    def _job_finished(self, run: JobRun, code: int) -> None:
        """The Job controller's part: the pod ended, so the Job is complete or failed (backoffLimit 0)."""
        job = self._jobs.get((run.namespace, run.job_name))
        if job is None or job["metadata"]["uid"] != run.job_uid or job["status"].get("conditions"):
            return  # deleted, or already ended (its deadline passed)
        now = _now()
        if code == 0:
            job["status"] = {"startTime": job["status"].get("startTime"), "completionTime": now,
                             "succeeded": 1, "conditions": [
                                 {"type": "Complete", "status": "True", "lastProbeTime": now,
                                  "lastTransitionTime": now}]}
        else:
            job["status"] = {"startTime": job["status"].get("startTime"), "failed": 1, "conditions": [
                {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                 "message": "Job has reached the specified backoff limit", "lastProbeTime": now,
                 "lastTransitionTime": now}]}

    def _deadline_passed(self, run: JobRun) -> None:
        """activeDeadlineSeconds: the Job fails with DeadlineExceeded and its active pod is deleted."""
        with self._jobs_lock:
            job = self._jobs.get((run.namespace, run.job_name))
            if job is None or job["metadata"]["uid"] != run.job_uid or job["status"].get("conditions"):
                return
            now = _now()
            job["status"] = {"startTime": job["status"].get("startTime"), "failed": 1, "conditions": [
                {"type": "Failed", "status": "True", "reason": "DeadlineExceeded",
                 "message": "Job was active longer than specified deadline", "lastProbeTime": now,
                 "lastTransitionTime": now}]}
            self._job_pods.pop((run.namespace, run.name), None)
        run.kill()

    # ---- Secrets (the endpoint's API keys, issue 17): GET and JSON merge PATCH ----
    # Built from the API server's behaviour: k8s.io/apiserver/pkg/endpoints/handlers/patch.go (a
    # patch is applied to the stored object's JSON, then written as an update of the result, so a
    # `metadata.resourceVersion` in the patch is a precondition), registry/generic/registry/store.go
    # (a stale resourceVersion is `NewConflict(..., OptimisticLockErrorMsg)`: 409, reason Conflict,
    # "Operation cannot be fulfilled on secrets \"N\": the object has been modified; please apply
    # your changes to the latest version and try again"; an update that changes nothing keeps the
    # resourceVersion), and RFC 7386 for `application/merge-patch+json` (a null deletes the key).
    # The stand-in accepts only that patch type (the real one also takes JSON Patch, strategic
    # merge and apply) and answers others 415 as the real one answers an unknown type.
    # Knobs: `before_secret_patch` (attribute, default None): a callable run inside a PATCH after
    # the request arrived and before it is applied (a test writes there to lose a race on purpose);
    # `secrets_refused` (attribute, default None), e.g. 403: every Secret call answers that Status.

    def _init_secrets(self) -> None:
        self._secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self._secret_versions = itertools.count(5000)
        self._secrets_lock = threading.RLock()
        self.before_secret_patch: Optional[Callable[[], None]] = None
        self.secrets_refused: Optional[int] = None
        self.secret_patches: list[dict[str, Any]] = []  # {"name", "contentType", "status"} per PATCH

    def put_secret(self, namespace: str, name: str, data: dict[str, str],
                   annotations: Optional[dict[str, str]] = None) -> dict[str, Any]:
        """Create (or replace) an Opaque Secret as the Pulumi program would; `data` in plain text."""
        with self._secrets_lock:
            secret = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                      "metadata": {"name": name, "namespace": namespace, "uid": _uuid(f"secret/{name}"),
                                   "creationTimestamp": _now(),
                                   "resourceVersion": str(next(self._secret_versions)),
                                   "annotations": dict(annotations or {})},
                      "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}
            self._secrets[(namespace, name)] = secret
            return copy.deepcopy(secret)

    def delete_secret(self, namespace: str, name: str) -> None:
        """The Secret gone (a stack deployed before the program made one)."""
        with self._secrets_lock:
            self._secrets.pop((namespace, name), None)

    def secret(self, namespace: str, name: str) -> Optional[dict[str, Any]]:
        """The stored Secret (a copy), None when absent."""
        with self._secrets_lock:
            found = self._secrets.get((namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def secret_data(self, namespace: str, name: str) -> dict[str, str]:
        """The Secret's data decoded ({} when absent): what Envoy Gateway would read."""
        found = self.secret(namespace, name) or {}
        return {k: base64.b64decode(v).decode() for k, v in (found.get("data") or {}).items()}

    def patch_secret_object(self, namespace: str, name: str, content_type: str,
                            body: bytes) -> tuple[int, dict[str, Any]]:
        media = content_type.split(";")[0].strip().lower()
        if media != "application/merge-patch+json":
            return 415, _status(415, "UnsupportedMediaType", "the body of the request was in an unknown "
                                "format - accepted media types include: application/merge-patch+json")
        try:
            patch = json.loads(body.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            return 400, _status(400, "BadRequest", f"error decoding patch: {exc}")
        if self.before_secret_patch is not None:
            self.before_secret_patch()
        with self._secrets_lock:
            stored = self._secrets.get((namespace, name))
            if stored is None:
                return 404, _status(404, "NotFound", f'secrets "{name}" not found')
            merged = _merge_patch(copy.deepcopy(stored), patch)
            if not isinstance(merged, dict) or not isinstance(merged.get("metadata"), dict):
                return 400, _status(400, "BadRequest", "the patch does not leave a Secret object")
            wanted = merged["metadata"].get("resourceVersion")
            current = stored["metadata"]["resourceVersion"]
            if wanted != current:
                return 409, _status(409, "Conflict", f'Operation cannot be fulfilled on secrets "{name}": the '
                                    "object has been modified; please apply your changes to the latest "
                                    "version and try again")
            data = merged.get("data") or {}
            if not isinstance(data, dict):
                return 400, _status(400, "BadRequest", "Secret.data must be an object")
            for key, value in data.items():
                if not _CONFIG_MAP_KEY.fullmatch(key) or len(key) > 253:
                    return 422, _status(422, "Invalid", f'Secret "{name}" is invalid: data[{key}]: Invalid '
                                        "value: a valid config key must consist of alphanumeric "
                                        "characters, '-', '_' or '.'")
                try:
                    base64.b64decode(str(value), validate=True)
                except ValueError:
                    return 400, _status(400, "BadRequest", f"Secret in version \"v1\" cannot be handled as "
                                        f"a Secret: illegal base64 data in data[{key}]")
            merged["metadata"]["name"], merged["metadata"]["namespace"] = name, namespace
            if merged != stored:
                merged["metadata"]["resourceVersion"] = str(next(self._secret_versions))
                self._secrets[(namespace, name)] = merged
            return 200, copy.deepcopy(self._secrets[(namespace, name)])

    # ---- documents served ----

    def serve_details(self) -> dict[str, Any]:
        ready = self.scenario != "rayservice-not-ready"
        deployments: dict[str, Any] = {}
        for phase, name in self.deployment_names.items():
            count = next(p.replicas for n, p in self.spec.phases.items() if n == phase)
            deployments[name] = {
                "name": name, "status": "HEALTHY" if ready else "UPDATING",
                "status_trigger": "CONFIG_UPDATE_COMPLETED" if ready else "CONFIG_UPDATE_STARTED",
                "message": "", "deployment_config": {"name": name, **self._replica_config(phase)},
                "target_num_replicas": count, "required_resources": {"CPU": 1, "GPU": 1},
                "replicas": [{k: v for k, v in r.items() if not k.startswith("_")}
                             for r in self.serve_replicas(phase)],
            }
            self._override_serve(deployments[name])
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
                                "log_file_path": CONTROLLER_LOG},
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

    def _replica_config(self, phase: str) -> dict[str, Any]:
        """The deployment_config's count part as Serve's DeploymentSchema dumps it (ray/serve/schema.py
        `_deployment_info_to_schema`: an autoscaling_config, AutoscalingConfig.model_dump() with its
        defaults, Ray 2.58 and 2.60 alike; or num_replicas)."""
        settings = self.spec.phases[phase]
        block = settings.autoscaling
        if block is None:
            return {"num_replicas": settings.replicas}
        return {"autoscaling_config": {
            "min_replicas": block.minimum, "initial_replicas": settings.replicas, "max_replicas": block.maximum,
            "target_ongoing_requests": float(block.target), "metrics_interval_s": 10.0,
            "look_back_period_s": 30.0, "smoothing_factor": 1.0, "upscale_smoothing_factor": None,
            "downscale_smoothing_factor": None, "upscaling_factor": None, "downscaling_factor": None,
            "downscale_delay_s": float(block.downscale_delay), "downscale_to_zero_delay_s": None,
            "upscale_delay_s": float(block.upscale_delay), "aggregation_function": "mean",
            "policy": {"policy_function": "ray.serve.autoscaling_policy:default_autoscaling_policy",
                       "policy_kwargs": {}}}}

    def _override_serve(self, deployment: dict[str, Any]) -> None:
        """A test's `serve_overrides` for one deployment's status fields (its replicas' states are
        `serve_replicas`' part)."""
        override = {k: v for k, v in self.serve_overrides.get(deployment["name"], {}).items()
                    if k != "replica_states"}
        deployment.update(override)

    def serve_replicas(self, phase: str) -> list[dict[str, Any]]:
        """The replicas of a phase as the Serve API lists them, and as the metrics pages carry them:
        the built ones, or, with a test's `serve_overrides[deployment]["replica_states"]`, the built
        ones in turn with those states, then new replicas (on the first one's pod) beyond them. One
        list for both, so every id the Serve API lists has its Serve series (see `metrics_text`)."""
        built = self.replicas.get(phase, [])
        states = self.serve_overrides.get(self.deployment_names[phase], {}).get("replica_states")
        if states is None or not built:
            return list(built)
        listed = []
        for index, state in enumerate(states):
            replica = built[index] if index < len(built) else self._replica_beside(phase, index, built[0])
            listed.append({**replica, "state": state})
        return listed

    def _replica_beside(self, phase: str, index: int, first: dict[str, Any]) -> dict[str, Any]:
        """A replica Serve adds to a phase (a scale-up), on the pod of the phase's first replica."""
        pod = next(p for p in self.pods if p["metadata"]["name"] == first["_pod"])
        node = next(n for n in self.nodes if n["metadata"]["name"] == pod["spec"]["nodeName"])
        return self._replica(phase, index, node, pod)

    def metrics_text(self, pod: str) -> str:
        """Ray's metrics export page of one worker pod (Prometheus text), as Ray 2.58-2.60 write it
        for vLLM's RayPrometheusStatLogger (vllm/v1/metrics/ray_wrappers.py): names sanitized and
        prefixed `ray_`, every series tagged ReplicaId, and no series for a counter or histogram
        that was never incremented (RayCounterWrapper.inc skips 0; Ray exports recorded tag sets
        only), so an engine that served nothing yet has no series at all, as
        tests/fixtures/real/ray/metrics-export-idle.txt shows; and no gauge for an engine idle now
        (Ray 2.60 exports a gauge only for rounds in which it was set: real Ray Serve LLM showed
        one num_requests_running sample after a request, then none). `metric_prefix="vllm:"` gives plain
        vLLM's own page (prometheus_client keeps zeros: tests/fixtures/real/pair/)."""
        prefix = self.metric_prefix
        plain = prefix == "vllm:"
        lines = [
            "# HELP ray_node_cpu_utilization Total CPU usage on a ray node",
            "# TYPE ray_node_cpu_utilization gauge",
            f'ray_node_cpu_utilization{{InstanceId="",SessionName="{SESSION}",ip="10.0.2.100"}} 3.1',
        ]
        pod_ip = next(p["status"]["podIP"] for p in self.pods if p["metadata"]["name"] == pod)
        for phase in self.replicas:
            for replica in self.serve_replicas(phase):
                if replica["node_ip"] != pod_ip:
                    continue
                if not plain:  # Ray Serve's own per-replica counter, from the replica's start on
                    lines.append(self._serve_replica_series(pod_ip, phase, replica))
                engine = self._engines.get(replica["replica_id"])
                if engine is None or (not plain and (replica["state"] != "RUNNING" or not any(engine.values()))):
                    # Ray exports an engine's series on first use (tests/fixtures/real/ray); a
                    # replica still STARTING has served nothing (Serve routes to RUNNING ones only)
                    continue
                labels = f'engine="0",model_name="{self.spec.model.id}"'
                if not plain:
                    labels = (f'Component="core_worker",NodeAddress="{pod_ip}",SessionName="{SESSION}",'
                              f'Version="{RAY_VERSION}",WorkerId="{_hex(replica["actor_id"], 56)}",'
                              f'{labels},ReplicaId="{replica["replica_id"]}"')

                def series(name: str, value: float, kind: str, extra: str = "", labels: str = labels) -> None:
                    if value == 0 and not plain and kind != "gauge":
                        return
                    label_text = labels + (f",{extra}" if extra else "")
                    lines.append(f"{prefix}{name}{{{label_text}}} {float(value)}")

                if plain:  # Ray exports a gauge only for rounds the engine set it in: busy ones
                    series("num_requests_running", 0, "gauge")  # (an idle engine's is absent)
                series("generation_tokens_total", engine["generated"], "counter")
                for source, key in (("local_compute", "local"), ("external_kv_transfer", "external")):
                    series("prompt_tokens_by_source_total", engine[key], "counter", f'source="{source}"')
                if self.disaggregated:
                    series("nixl_xfer_time_seconds_count", engine["transfers"], "histogram")
                    series("nixl_xfer_time_seconds_sum", engine["xfer_seconds"], "histogram")
                    series("nixl_bytes_transferred_sum", engine["bytes"], "histogram")
                    series("nixl_bytes_transferred_count", engine["transfers"], "histogram")
                    series("nixl_num_failed_transfers_total", engine["failed"], "counter")
                    series("nixl_num_kv_expired_reqs_total", engine["expired"], "counter")
        return "\n".join(lines) + "\n"

    def _serve_replica_series(self, pod_ip: str, phase: str, replica: dict[str, Any]) -> str:
        """`ray_serve_deployment_replica_starts_total` as Ray 2.60 exports it for a replica from its
        start on (tests/fixtures/real/ray/serve-metrics-probe.txt: `replica` is the replica id vLLM
        tags its series with as ReplicaId), STARTING replicas included. Ray's
        python/ray/serve/_private/replica.py: `ReplicaBase.__init__` makes the ReplicaMetricsManager
        before `initialize_and_get_metadata` runs the deployment's constructor (the engine's model
        load, the STARTING time); `ReplicaMetricsManager.__init__` increments
        `serve_deployment_replica_starts` at once, and its cached-metrics loop sets
        `serve_replica_processing_queries` to the replica's ongoing requests: 0 until Serve routes
        to it, once RUNNING (`serve_load` is the load of each RUNNING replica)."""
        load = self.serve_load.get(phase, 0) if replica["state"] == "RUNNING" else 0
        labels = (f'Component="core_worker",NodeAddress="{pod_ip}",SessionName="{SESSION}",'
                  f'Version="{RAY_VERSION}",WorkerId="{_hex(replica["actor_id"], 56)}",application="llm",'
                  f'deployment="{self.deployment_names[phase]}",'
                  'otel_scope_name="ray._private.telemetry.open_telemetry_metric_recorder",'
                  f'otel_scope_schema_url="",otel_scope_version="",replica="{replica["replica_id"]}"')
        return (f"ray_serve_deployment_replica_starts_total{{{labels}}} 1.0\n"
                f"ray_serve_replica_processing_queries{{{labels}}} {float(load)}")

    def scrape_configs(self) -> list[dict[str, Any]]:
        """Prometheus scrape jobs reading every worker pod's metrics page through this API's pod
        proxy with the stack's token: in a cluster the worker PodMonitor scrapes the same pages
        from the pods themselves; `honor_labels`, as it sets (components/render/observability.py)."""
        host = urlsplit(self.url).netloc
        namespace = self.spec.namespace
        return [{"job_name": f"pod-{pod}", "honor_labels": True, "scrape_interval": "1s",
                 "metrics_path": f"/api/v1/namespaces/{namespace}/pods/{pod}:8080/proxy/metrics",
                 "authorization": {"type": "Bearer", "credentials": self.token},
                 "static_configs": [{"targets": [host]}]} for pod in sorted(self._worker_pods)]

    def take_failure(self, failures: dict[str, int], key: str) -> bool:
        """True (and one fewer to come) when the next read of `key` is to fail."""
        with self._lock:
            left = failures.get(key, 0)
            if left > 0:
                failures[key] = left - 1
            return left > 0

    def ray_log(self, query: dict[str, str]) -> Optional[str]:
        """`/api/v0/logs/file?actor_id=...&suffix=out|err&lines=N` (state_head.get_logs: suffix
        defaults to out); None when the actor is unknown. `?node_id=&filename=serve/controller_1200.log`
        is the Serve controller's log (`scaling_log`)."""
        if query.get("filename") == CONTROLLER_LOG.lstrip("/"):
            return "\n".join(self.scaling_log[-int(query.get("lines", "1000")):]) + "\n"
        logs = self._actor_logs.get(query.get("actor_id", ""))
        if logs is None:
            return None
        lines = int(query.get("lines", "1000"))
        return "\n".join(logs["err" if query.get("suffix", "out") == "err" else "out"][-lines:]) + "\n"

    def list_actors(self, filters: list[tuple[str, str, str]]) -> dict[str, Any]:
        """`/api/v0/actors` as state_head.list_actors answers (rest_response of a ListApiResponse):
        equality filters, case-insensitive for strings (state_api_utils.do_filter)."""
        rows = [{k: v for k, v in a.items() if not k.startswith("_")} for a in self.worker_actors]
        for replicas in self.replicas.values():
            for replica in replicas:
                rows.append({"actor_id": replica["actor_id"], "class_name": "ServeReplica:llm:"
                             + replica["actor_name"].split("#")[1], "state": "ALIVE", "job_id": "02000000",
                             "name": replica["actor_name"], "node_id": replica["node_id"],
                             "pid": replica["pid"], "ray_namespace": "serve"})
        for key, predicate, value in filters:
            if predicate == "=":
                rows = [r for r in rows if str(r.get(key, "")).lower() == value.lower()]
            elif predicate == "!=":
                rows = [r for r in rows if str(r.get(key, "")).lower() != value.lower()]
        return {"result": True, "msg": "", "data": {"result": {
            "total": len(rows), "num_after_truncation": len(rows), "num_filtered": len(rows),
            "result": rows, "partial_failure_warning": "", "warnings": None}}}

    def container_log(self, pod: str, tail: Optional[int]) -> Optional[str]:
        """A Ray worker pod's container log: `ray start` and the raylet's lines. The engines' own
        lines are in Ray's log files, not here, except what a worker prints to the pod's stdout
        while it starts (kept here for the fallback reader, as `RAY_LOG_TO_STDERR`-style images do)."""
        if pod not in self._worker_pods:
            return None
        pod_ip = next(p["status"]["podIP"] for p in self.pods if p["metadata"]["name"] == pod)
        lines = [
            "[2026-12-01 12:00:58,102 I 1 1] ray start --address=ray-llm-head-svc:6379 --block",
            f"Local node IP: {pod_ip}",
            "Ray runtime started.",
        ]
        node_ids = {r["node_id"] for replicas in self.replicas.values() for r in replicas
                    if r["node_ip"] == pod_ip}
        for actor in [*self.worker_actors, *(r for rs in self.replicas.values() for r in rs)]:
            if actor["node_id"] in node_ids:
                logs = self._actor_logs[actor["actor_id"]]
                lines += [*logs["err"], *logs["out"]]
        return "\n".join(lines[-tail:] if tail else lines) + "\n"


class _StartFailure(Exception):
    """The container cannot start: its log gets this line and the pod fails with `code`."""

    def __init__(self, message: str, code: int = 128, reason: str = "ContainerCannotRun"):
        super().__init__(message)
        self.code, self.reason = code, reason


class JobRun:
    """A Job's pod in the fake: its Kubernetes object and, once it runs, its real process.

    `process` is the subprocess.Popen (None until it starts, and for a pod that never runs),
    `killed` whether a DELETE (or the fake's stop) killed it while it ran, `log()` its output so far.
    """

    def __init__(self, fake: FakeKubeApi, namespace: str, job: dict[str, Any]):
        self.fake = fake
        self.namespace = namespace
        self.job_name = str(job["metadata"]["name"])
        self.job_uid = str(job["metadata"]["uid"])
        template = job["spec"]["template"]
        self.spec: dict[str, Any] = copy.deepcopy(template.get("spec") or {})
        self.container: dict[str, Any] = self.spec["containers"][0]
        digest = int(_hex(self.job_uid, 16), 16)
        suffix = ""
        for _ in range(5):
            digest, index = divmod(digest, len(_POD_SUFFIX_ALPHABET))
            suffix += _POD_SUFFIX_ALPHABET[index]
        self.name = f"{self.job_name}-{suffix}"
        now = _now()
        self.pod: dict[str, Any] = {
            "kind": "Pod", "apiVersion": "v1",
            "metadata": {
                "name": self.name, "generateName": f"{self.job_name}-", "namespace": namespace,
                "uid": _uuid(f"pod/{self.job_uid}"), "creationTimestamp": now,
                "labels": dict((template.get("metadata") or {}).get("labels") or {}),
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": self.job_name,
                                     "uid": self.job_uid, "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": {**copy.deepcopy(self.spec), "nodeName": fake.nodes[0]["metadata"]["name"]},
            "status": {
                "phase": "Pending", "hostIP": "10.0.1.20", "startTime": now,
                "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now}],
                "containerStatuses": [{
                    "name": str(self.container.get("name") or ""), "image": str(self.container.get("image") or ""),
                    "imageID": "", "ready": False, "started": False, "restartCount": 0,
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                }],
            },
        }
        self.process: Optional[subprocess.Popen[bytes]] = None
        self.rootfs: Optional[str] = None
        self.killed = False
        self._deleted = threading.Event()
        self._output = bytearray()
        self._thread = threading.Thread(target=self._run, name=f"fake-pod-{self.name}", daemon=True)
        deadline = job["spec"].get("activeDeadlineSeconds")
        self._deadline = (threading.Timer(float(deadline), fake._deadline_passed, (self,))
                          if isinstance(deadline, (int, float)) and deadline > 0 else None)
        if self._deadline is not None:
            self._deadline.daemon = True

    # -- what the API serves --

    def log(self, tail_lines: Optional[int] = None, limit_bytes: Optional[int] = None) -> str:
        """The container's output so far: the last `tail_lines` lines, then at most `limit_bytes`."""
        with self.fake._jobs_lock:
            data = bytes(self._output)
        if tail_lines is not None:
            data = b"".join(data.splitlines(keepends=True)[-tail_lines:]) if tail_lines > 0 else b""
        if limit_bytes is not None:
            data = data[:limit_bytes]
        return data.decode("utf-8", errors="replace")

    def waiting_reason(self) -> Optional[str]:
        with self.fake._jobs_lock:
            state = self.pod["status"]["containerStatuses"][0]["state"]
            return str(state["waiting"].get("reason")) if "waiting" in state else None

    def snapshot(self) -> dict[str, Any]:
        with self.fake._jobs_lock:
            return copy.deepcopy(self.pod)

    # -- the kubelet's part --

    def start(self) -> None:
        self._thread.start()
        if self._deadline is not None:
            self._deadline.start()

    def kill(self) -> None:
        """Stop the pod: it never starts if it has not yet; a running process is killed and reaped."""
        self._deleted.set()
        if self._deadline is not None and threading.current_thread() is not self._deadline:
            self._deadline.cancel()
        with self.fake._jobs_lock:
            process = self.process
        if process is not None and process.poll() is None:
            self.killed = True
            try:
                os.killpg(process.pid, signal.SIGKILL)  # its own session: the process and its children
            except ProcessLookupError:
                pass
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def join(self) -> None:
        if self._thread.is_alive():
            self._thread.join(timeout=15)
        self._remove_rootfs()

    def _remove_rootfs(self) -> None:
        if self.rootfs is not None:
            shutil.rmtree(self.rootfs, ignore_errors=True)

    def _set_state(self, state: dict[str, Any], phase: Optional[str] = None) -> None:
        status = self.pod["status"]
        container = status["containerStatuses"][0]
        container["state"] = state
        container["ready"] = container["started"] = "running" in state
        if phase is not None:
            status["phase"] = phase
        if "running" in state:
            status["podIP"] = "10.0.1.77"
            status["conditions"] = [*status["conditions"], {"type": "Ready", "status": "True",
                                                            "lastTransitionTime": _now()}]

    def _terminate(self, code: int, reason: Optional[str] = None) -> None:
        exit_code = code if code >= 0 else 128 - code  # killed by signal 9: 137, as a runtime reports
        previous = self.pod["status"]["containerStatuses"][0]["state"]
        started = (previous.get("running") or {}).get("startedAt") or _now()
        self._set_state({"terminated": {"exitCode": exit_code,
                                        "reason": reason or ("Completed" if exit_code == 0 else "Error"),
                                        "startedAt": started, "finishedAt": _now()}},
                        "Succeeded" if exit_code == 0 else "Failed")
        self.pod["status"]["conditions"] = [c for c in self.pod["status"]["conditions"] if c["type"] != "Ready"]
        self.fake._job_finished(self, exit_code)

    def _inside(self, value: str, mounts: list[str]) -> str:
        """An absolute path (or a :-list of them) that is, or leads to, a mount: the same path in the root."""
        assert self.rootfs is not None
        if not value.startswith("/"):
            return value

        def one(path: str) -> str:
            base = path.rstrip("/")
            for mount in mounts:
                mount = mount.rstrip("/")
                if base == mount or base.startswith(mount + "/") or mount.startswith(base + "/"):
                    return os.path.join(self.rootfs or "", path.lstrip("/"))
            return path

        return ":".join(one(part) for part in value.split(":"))

    def _in_root(self, *parts: str) -> str:
        assert self.rootfs is not None
        path = os.path.normpath(os.path.join(self.rootfs, *(p.lstrip("/") for p in parts)))
        if path != self.rootfs and not path.startswith(self.rootfs + os.sep):
            raise _StartFailure(f"path {os.path.join(*parts)!r} leaves the container's file system")
        return path

    def _missing_config_map(self) -> Optional[tuple[str, str]]:
        """(volume, ConfigMap) of the first required ConfigMap volume that does not exist yet."""
        for volume in self.spec.get("volumes") or []:
            source = volume.get("configMap") if isinstance(volume, dict) else None
            if isinstance(source, dict) and not source.get("optional") and (
                    self.namespace, str(source.get("name"))) not in self.fake._config_maps:
                return str(volume.get("name")), str(source.get("name"))
        return None

    def _materialise(self) -> tuple[list[str], dict[str, str], str]:
        """The volumes made under the root; the command, environment and working directory to run."""
        volumes = {v.get("name"): v for v in self.spec.get("volumes") or [] if isinstance(v, dict)}
        mounts: list[str] = []
        for mount in self.container.get("volumeMounts") or []:
            mount_path = str(mount.get("mountPath") or "")
            target = self._in_root(mount_path)
            os.makedirs(target, exist_ok=True)
            mounts.append(mount_path)
            source = (volumes.get(mount.get("name")) or {}).get("configMap")
            if not isinstance(source, dict):
                continue  # emptyDir and anything else: an empty directory
            config_map = self.fake._config_maps.get((self.namespace, str(source.get("name"))))
            if config_map is None:
                if source.get("optional"):
                    continue
                raise _StartFailure(f'MountVolume.SetUp failed for volume "{mount.get("name")}" : configmap '
                                    f'"{source.get("name")}" not found')
            data = config_map.get("data") or {}
            items = source.get("items")
            pairs = ([(str(i.get("key")), str(i.get("path") or i.get("key"))) for i in items] if items
                     else [(str(key), str(key)) for key in data])
            for key, relative in pairs:
                if key in data:
                    path = self._in_root(mount_path, relative)
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    with open(path, "w", encoding="utf-8") as handle:
                        handle.write(str(data[key]))
        argv = [str(a) for a in [*(self.container.get("command") or []), *(self.container.get("args") or [])]]
        if not argv:
            raise _StartFailure("the fake runs only containers that name their command", reason="StartError")
        if argv[0] in ("python", "python3"):
            argv[0] = sys.executable
        argv = [argv[0], *(self._inside(a, mounts) for a in argv[1:])]
        env = {"PATH": os.environ.get("PATH", os.defpath)}
        for item in self.container.get("env") or []:
            if isinstance(item, dict) and isinstance(item.get("value"), str):
                env[str(item["name"])] = self._inside(item["value"], mounts)
        working = self.container.get("workingDir")
        cwd = self._in_root(str(working)) if working else self.rootfs
        assert cwd is not None
        os.makedirs(cwd, exist_ok=True)
        return argv, env, cwd

    def _run(self) -> None:
        fake, lock = self.fake, self.fake._jobs_lock
        if self._deleted.wait(max(float(fake.job_pending_s or 0.0), 0.0)):
            return
        while True:  # the kubelet retries a volume whose ConfigMap does not exist yet; the pod waits
            with lock:
                missing = None if fake.job_waiting_reason else self._missing_config_map()
                if missing is None:
                    break
                self._set_state({"waiting": {"reason": "ContainerCreating", "message": (
                    f'MountVolume.SetUp failed for volume "{missing[0]}" : configmap "{missing[1]}" not found')}})
            if self._deleted.wait(0.05):
                return
        with lock:
            if self._deleted.is_set():
                return
            reason = fake.job_waiting_reason
            if reason:
                message = WAITING_MESSAGES.get(reason, f"{reason} (the fake's job_waiting_reason)")
                self._set_state({"waiting": {"reason": reason,
                                             "message": message.format(image=self.container.get("image"))}})
                return
            self.rootfs = tempfile.mkdtemp(prefix="fake-kube-pod-")
            try:
                argv, env, cwd = self._materialise()
                self.process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                                start_new_session=True)
            except (_StartFailure, OSError) as exc:
                failure = exc if isinstance(exc, _StartFailure) else _StartFailure(
                    f"failed to create containerd task: exec: {exc}", reason="StartError")
                self._output += (str(failure) + "\n").encode("utf-8")
                self._terminate(failure.code, failure.reason)
                self._remove_rootfs()
                return
            self._set_state({"running": {"startedAt": _now()}}, "Running")
        process = self.process
        stdout = process.stdout
        assert isinstance(stdout, io.BufferedReader)
        with stdout:
            while True:
                chunk = stdout.read1(65536)
                if not chunk:
                    break
                with lock:
                    self._output += chunk
        code = process.wait()
        with lock:
            self._terminate(code)
        self._remove_rootfs()


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as a real API server: a streamed chunk goes out when written

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

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def _handle(self, method: str) -> None:
        fake = self.server.fake
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, MAX_REQUEST_BYTES)) if length else b""
        fake.requests.append({"method": method, "path": path, "query": query})
        auth = self.headers.get("Authorization", "")
        if not (auth.startswith("Bearer ") and fake.accept_token(auth[len("Bearer "):])):
            self._json(401, _status(401, "Unauthorized", "Unauthorized"))
            return
        if self._secrets_route(fake, method, path, body):
            return
        self._route(fake, method, path, query, body)

    # ---- Secrets (the endpoint's API keys): see FakeKubeApi's Secrets block ----

    def _secrets_route(self, fake: FakeKubeApi, method: str, path: str, body: bytes) -> bool:
        parts = path.strip("/").split("/")
        if not (len(parts) == 6 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "secrets"):
            return False
        namespace, name = parts[3], parts[5]
        if fake.secrets_refused is not None:
            code = fake.secrets_refused
            self._json(code, _status(code, "Forbidden" if code == 403 else "Failure",
                                     f'secrets "{name}" is forbidden: User "raypd" cannot {method.lower()} '
                                     f'resource "secrets" in API group "" in the namespace "{namespace}"'))
        elif method == "GET":
            found = fake.secret(namespace, name)
            if found is None:
                self._json(404, _status(404, "NotFound", f'secrets "{name}" not found'))
            else:
                self._json(200, found)
        elif method == "PATCH":
            status, document = fake.patch_secret_object(namespace, name,
                                                        self.headers.get("Content-Type", ""), body)
            fake.secret_patches.append({"name": name, "contentType": self.headers.get("Content-Type"),
                                        "status": status})
            self._json(status, document)
        else:
            self._json(405, _status(405, "MethodNotAllowed", f"{method} is not supported here"))
        return True

    def _route(self, fake: FakeKubeApi, method: str, path: str, query: dict[str, str],
               body: bytes) -> None:
        spec = fake.spec
        ns = spec.namespace
        parts = path.strip("/").split("/")
        faulted = kube_faults.answer(fake, method, parts, query, body, _merge_patch)
        if faulted is not None:
            self._json(*faulted)
            return
        if self._workloads(fake, method, parts, query, body):
            return
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
        if method == "GET" and len(parts) == 5 and parts[:3] == ["api", "v1", "namespaces"] \
                and parts[4] == "pods":
            selector = query.get("labelSelector")
            items = [p for p in fake.pods if _matches(p["metadata"]["labels"], selector)
                     and kube_faults.field_selected(p, query.get("fieldSelector"))] if parts[3] == ns else []
            items += fake.job_pods(parts[3], selector)
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
        if (len(parts) >= 7 and parts[:4] == ["api", "v1", "namespaces", observability_names.NAMESPACE]
                and parts[4] == "services" and parts[6] == "proxy"):
            self._prometheus_proxy(fake, method, parts[5], "/".join(parts[7:]), query, body)
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
        if method == "GET":
            listed = fake.exposure.answer(path)
            if listed is not None:
                self._json(*listed)
                return
        self._json(404, _status(404, "NotFound", "the server could not find the requested resource"))

    def _workloads(self, fake: FakeKubeApi, method: str, parts: list[str], query: dict[str, str],
                   body: bytes) -> bool:
        """ConfigMaps, Jobs and the Jobs' pods (one and its log); False when the path is another's."""
        n = len(parts)
        if n in (6, 7) and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods" and method == "GET" \
                and (n == 6 or parts[6] == "log"):
            run = fake.job_pod(parts[3], parts[5])
            if run is None:
                return False  # the stack's pods
            if n == 6:
                self._json(200, run.snapshot())
                return True
            container = str(run.container.get("name") or "")
            if query.get("container") not in (None, container):
                self._json(400, _status(400, "BadRequest", f"container {query['container']} is not valid for "
                                                           f"pod {run.name}"))
                return True
            try:
                tail = int(query["tailLines"]) if query.get("tailLines") else None
                limit = int(query["limitBytes"]) if query.get("limitBytes") else None
            except ValueError:
                self._json(400, _status(400, "BadRequest", "tailLines and limitBytes must be integers"))
                return True
            if (tail is not None and tail < 0) or (limit is not None and limit < 1):
                self._json(422, _status(422, "Invalid", "tailLines must be >= 0 and limitBytes >= 1"))
                return True
            waiting = run.waiting_reason()
            if waiting is not None:
                self._json(400, _status(400, "BadRequest", f'container "{container}" in pod "{run.name}" is '
                                                           f"waiting to start: {waiting}"))
                return True
            self._text(200, run.log(tail, limit))
            return True
        if n in (5, 6) and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "configmaps":
            kind, namespace, rest = "ConfigMap", parts[3], parts[5:]
        elif n in (6, 7) and parts[:4] == ["apis", "batch", "v1", "namespaces"] and parts[5] == "jobs":
            kind, namespace, rest = "Job", parts[4], parts[6:]
        else:
            return False
        if not rest and method == "POST":
            self._json(*fake.create_object(kind, namespace, body))
        elif not rest and method == "GET":
            with fake._jobs_lock:
                store = fake._config_maps if kind == "ConfigMap" else fake._jobs
                items = [copy.deepcopy(o) for (ns, _), o in store.items() if ns == namespace]
            self._json(200, {"kind": f"{kind}List", "apiVersion": "v1" if kind == "ConfigMap" else "batch/v1",
                             "metadata": {"resourceVersion": "81725"}, "items": items})
        elif rest and method == "GET":
            self._json(*fake.get_object(kind, namespace, rest[0]))
        elif rest and method == "DELETE":
            self._json(*fake.delete_object(kind, namespace, rest[0], query.get("propagationPolicy")))
        else:
            self._json(405, _status(405, "MethodNotAllowed", f"{method} is not supported here"))
        return True

    def _service_proxy(self, fake: FakeKubeApi, method: str, service: str, port: str, rest: str,
                       query: dict[str, str], body: bytes) -> None:
        outputs = fake._base_outputs
        if service == outputs["dashboardService"] and port in ("8265", "dashboard") and fake.dashboard_upstream:
            self._pass_through(fake.dashboard_upstream, method, rest, query, body)
            return
        if service == outputs["dashboardService"] and port in ("8265", "dashboard") and not fake.dashboard_enabled:
            self._json(503, _status(503, "ServiceUnavailable", "error trying to reach service: dial tcp "
                                    "10.0.1.10:8265: connect: connection refused"))
            return
        if service == outputs["dashboardService"] and port in ("8265", "dashboard"):
            if rest == "api/serve/applications/":
                self._json(200, fake.serve_details())
            elif rest == "api/v0/actors" and fake.state_api_enabled:
                pairs = parse_qsl(urlsplit(self.path).query)
                keys = [v for k, v in pairs if k == "filter_keys"]
                predicates = [v for k, v in pairs if k == "filter_predicates"]
                values = [v for k, v in pairs if k == "filter_values"]
                self._json(200, fake.list_actors(list(zip(keys, predicates, values, strict=False))))
            elif rest == "api/v0/logs/file" and fake.ray_logs_enabled:
                actor = query.get("actor_id", "")
                text = fake.ray_log(query)
                if fake.take_failure(fake.log_failures, actor):
                    self._send(500, b"Failed to get the log file: the node's log agent did not answer",
                               "text/plain; charset=utf-8")
                elif text is None:
                    # log_manager.resolve_actor_filename: ValueError(f"Actor ID {actor_id} not found."),
                    # the id being a ray ActorID, whose str() is ActorID(<hex>)
                    self._send(500, f"Actor ID ActorID({actor}) not found.".encode(), "text/plain; charset=utf-8")
                else:
                    self._send(200, text.encode("utf-8"), "text/plain")
            else:
                self._text(404, "404: Not Found")
            return
        if service == outputs["serveService"] and port in ("8000", "serve") and fake.serve_upstream:
            self._pass_through(fake.serve_upstream, method, rest, query, body)
            return
        if service == outputs["serveService"] and port in ("8000", "serve"):
            if fake.scenario == "rayservice-not-ready":
                self._json(503, _status(503, "ServiceUnavailable",
                                        f'no endpoints available for service "{service}"'))
                return
            if method == "POST" and rest == "v1/chat/completions":
                try:
                    request = json.loads(body.decode("utf-8"))
                except (ValueError, UnicodeDecodeError):
                    request = None
                error = validate_chat_request(fake.spec.model.id, request)
                if error is not None:
                    self._json(*error)
                    return
                if fake.record_chat(request) == 500:
                    self._json(500, error_document("Request failed: KV cache load failed for request "
                                                   "chatcmpl-fake (kv_load_failure_policy=fail)",
                                                   "InternalServerError", 500))
                    return
            self._pass_through(fake.engines_url(), method, rest, query, body)
            return
        self._json(404, _status(404, "NotFound", f'services "{service}" not found'))

    def _prometheus_proxy(self, fake: FakeKubeApi, method: str, target: str, rest: str,
                          query: dict[str, str], body: bytes) -> None:
        """The metrics namespace's Prometheus Service: passed to `prometheus_upstream` (a real
        Prometheus) when set; otherwise the Service exists with no ready pod, and the API server
        answers as its service proxy does then (503 Status, `no endpoints available for service`)."""
        service, _, port = target.partition(":")
        if service != observability_names.PROMETHEUS_SERVICE or port not in ("9090", "http-web"):
            self._json(404, _status(404, "NotFound", f'services "{service}" not found'))
        elif fake.prometheus_upstream:
            self._pass_through(fake.prometheus_upstream, method, rest, query, body)
        else:
            self._json(503, _status(503, "ServiceUnavailable",
                                    f'no endpoints available for service "{service}"'))

    def _pass_through(self, upstream: str, method: str, rest: str, query: dict[str, str], body: bytes) -> None:
        """The API server's proxy: the request to the upstream, its answer streamed back chunk by chunk."""
        target = urlsplit(upstream)
        # as long as the slowest real answer here (a CPU engine stalled for minutes under load): a
        # shorter cut would turn a slow answer into a reset connection the real proxy never makes
        connection = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=600)
        raw_query = urlsplit(self.path).query  # as sent: repeated keys (State API filters) kept
        try:
            path = "/" + rest + ("?" + (raw_query or urlencode(query)) if query or raw_query else "")
            connection.request(method, path, body=body or None,
                               headers={"Content-Type": self.headers.get("Content-Type", "application/json")})
            answer = connection.getresponse()
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.getheader("Content-Type", "application/octet-stream"))
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while True:
                piece = answer.read1(65536)
                if not piece:
                    break
                self.wfile.write(f"{len(piece):x}\r\n".encode("ascii") + piece + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True
        finally:
            connection.close()

    def _pod_proxy(self, fake: FakeKubeApi, pod: str, port: str, rest: str) -> None:
        if pod in fake._worker_pods and port in ("8080", "metrics") and fake.take_failure(fake.metrics_failures, pod):
            self._json(503, _status(503, "ServiceUnavailable",
                                    "error trying to reach service: dial tcp: connection refused"))
            return
        if pod in fake._worker_pods and port in ("8080", "metrics") and fake.metrics_upstream:
            self._pass_through(fake.metrics_upstream, "GET", rest, {}, b"")
            return
        if pod in fake._worker_pods and port in ("8080", "metrics") and rest == "metrics" \
                and fake.metrics_enabled:
            self._send(200, fake.metrics_text(pod).encode("utf-8"),
                       "text/plain; version=0.0.4; charset=utf-8")
            return
        if pod in fake._worker_pods:
            self._json(503, _status(503, "ServiceUnavailable",
                                    "error trying to reach service: dial tcp: connection refused"))
            return
        self._json(404, _status(404, "NotFound", f'pods "{pod}" not found'))


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeKubeApi):
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _Handler)
