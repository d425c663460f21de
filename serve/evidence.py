"""What verify and the live status read from a deployed stack, each piece fetched once.

`VerifyPlan` is what the stack outputs (Contract 3) say should run; `Evidence` asks the Kubernetes
API (objects, logs, the service and pod proxies) for what does run, caching every answer (errors
too) so ten checks cost one call per object, and an unreachable cluster costs one timeout, not ten.

Formats, as their sources define them:
- RayService status (KubeRay 1.4, ray-operator/apis/ray/v1/rayservice_types.go): condition type
  `Ready` (reasons NonZeroServeEndpoints, ZeroServeEndpoints, Initializing, ...),
  `status.activeServiceStatus.applicationStatuses.<app>.{status, message, serveDeploymentStatuses}`.
- Pod labels (KubeRay utils/constant.go): ray.io/cluster, ray.io/group, ray.io/node-type,
  ray.io/originated-from-cr-name; metrics port 8080 (DefaultMetricsPort).
- Serve deployments (Ray 2.58 ray.llm, `_get_deployment_name`): `<prefix><model id>` with "/" ->
  "--" and "." -> "_"; prefixes `Prefill:`/`Decode:` (build_pd_openai_app) or `LLMServer:`
  (build_openai_app), ingress `OpenAiIngress`.
- `GET /api/serve/applications/` (ray.serve.schema.ServeInstanceDetails): applications -> name ->
  deployments -> name -> replicas[] {node_id, node_ip, actor_id, log_file_path, replica_id, state}.
- `GET /api/v0/logs/file` (ray.util.state GetLogOptions: node_id, filename, actor_id, suffix,
  lines; ray/dashboard/modules/state/state_head.py `get_logs`, the same in Ray 2.58 and 2.60): the
  file's raw bytes with HTTP 200; an error before the first chunk (an unknown actor: "Actor ID
  ActorID(...) not found." from dashboard/modules/log/log_manager.py) is HTTP 500 with the error's
  text; an error after it closes the stream early. By actor id it is that actor's worker `.out`
  (default suffix) or `.err` file. Ray before 2.45 answered 200 with each chunk prefixed "1"
  (success) or "0" (error text); ray PR #51787 removed that byte, and raypd does not strip it: a
  real log line may start with "0" or "1" (tqdm's `0it [00:00, ?it/s]`).
- `GET /api/v0/actors` (state_head.py `list_actors`, ray/dashboard/state_api_utils.py
  `options_from_req`: repeated `filter_keys`/`filter_predicates`/`filter_values`, `limit`,
  `detail`): `{"result": true, "msg": "", "data": {"result": {"total", "num_after_truncation",
  "result": [ActorState {actor_id, class_name, state, node_id, pid, name, ...}], ...}}}`
  (ray.util.state.common.ActorState; class_name, node_id and state are filterable).

Where the engines' lines are (the reason for the two log readers below): on GPUs Ray Serve LLM
runs vLLM with `distributed_executor_backend="ray"` (ray/llm/_internal/serve/engines/vllm/
vllm_models.py), so the vLLM worker that creates the NIXL agent is a `RayWorkerWrapper` actor
(vllm/v1/executor/ray_utils.py) with its own worker log files, on the replica's node; on CPU vLLM
uses its multiprocessing executor and the worker is a subprocess of the replica, writing into the
replica's own files. Verify reads both: the replica actor's `.out`/`.err`, and those of the ALIVE
`RayWorkerWrapper` actors on the replica's node.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from components import defaults
from components.outputs import KUBECONFIG_KEY, OutputsError, validate_outputs
from components.rayservice import WORKER_CONTAINER
from components.safe_documents import DocumentError, load_json
from components.serve_config import APP_NAME, serve_deployment_name
from components.spec import SECRET_PLACEHOLDER
from serve.kube import KubeClient, KubeError, KubeUnreachable

log = logging.getLogger(__name__)

MAX_OUTPUTS_BYTES = 10 * 1024 * 1024
LOG_LINES = 5000

ZONE_LABEL = defaults.ZONE_LABEL
INSTANCE_TYPE_LABEL = defaults.INSTANCE_TYPE_LABEL
EKS_NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
RAY_GROUP_LABEL = "ray.io/group"
RAY_NODE_TYPE_LABEL = "ray.io/node-type"
RAY_CLUSTER_LABEL = "ray.io/cluster"
RAY_CR_NAME_LABEL = "ray.io/originated-from-cr-name"
INGRESS_DEPLOYMENT = "OpenAiIngress"
WORKER_ACTOR_CLASS = "RayWorkerWrapper"  # vllm/v1/executor/ray_utils.py
STATE_API_LIMIT = 1000


class VerifyInputError(ValueError):
    """Input verify cannot work with: the CLI's exit 2, one readable line."""


# ---- the plan, as the outputs describe it ----

@dataclass(frozen=True)
class GroupPlan:
    name: str
    nodes: int
    gpus_per_node: Optional[int]
    instance_type: str
    phases: tuple[str, ...]


@dataclass(frozen=True)
class PhasePlan:
    name: str
    deployment: str
    replicas: int
    group: str


@dataclass(frozen=True)
class VerifyPlan:
    namespace: str
    rayservice: str
    serve_service: str
    dashboard_service: str
    app: str
    model_id: str
    mode: str
    availability_zone: str
    region: str
    kv_backend: Optional[str]
    groups: dict[str, GroupPlan]
    phases: dict[str, PhasePlan]

    @property
    def pinned(self) -> bool:
        """More than one GPU node group: each carries raypd.io/phase=<group> (components.topology)."""
        return len(self.groups) > 1

    @property
    def deployments(self) -> list[str]:
        return [phase.deployment for phase in self.phases.values()] + [INGRESS_DEPLOYMENT]

    def group_of_node(self, node: Mapping[str, Any]) -> Optional[str]:
        labels = labels_of(node)
        if defaults.PHASE_LABEL_KEY in labels:
            return labels[defaults.PHASE_LABEL_KEY]
        if len(self.groups) == 1:
            return next(iter(self.groups))
        return None

    @classmethod
    def from_outputs(cls, outputs: Mapping[str, Any]) -> "VerifyPlan":
        groups: dict[str, dict[str, Any]] = {}
        phases: dict[str, PhasePlan] = {}
        for phase, entry in outputs["topology"].items():
            group = groups.setdefault(entry["nodeGroup"], {
                "nodes": 0, "gpus": entry.get("gpusPerNode"), "type": entry["instanceType"],
                "phases": []})
            group["nodes"] += entry["nodes"]
            group["phases"].append(phase)
            phases[phase] = PhasePlan(phase, serve_deployment_name(phase, outputs["modelId"]), entry["replicas"],
                                      entry["nodeGroup"])
        kv = outputs.get("kvTransfer")
        return cls(
            namespace=outputs["namespace"],
            rayservice=outputs["rayServiceName"],
            serve_service=outputs["serveService"],
            dashboard_service=outputs.get("dashboardService") or f"{outputs['rayServiceName']}-head-svc",
            app=outputs.get("serveApplication") or APP_NAME,
            model_id=outputs["modelId"],
            mode=outputs["mode"],
            availability_zone=outputs["availabilityZone"],
            region=outputs["region"],
            kv_backend=kv.get("backend") if isinstance(kv, Mapping) else None,
            groups={name: GroupPlan(name, g["nodes"], g["gpus"], g["type"], tuple(g["phases"]))
                    for name, g in groups.items()},
            phases=phases,
        )


# ---- small readers of Kubernetes objects ----

def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "?")


def quantity(value: Any) -> int:
    """Extended resources are plain integers ("1", "32"); anything else counts as 0."""
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return 0


def allocatable(node: Mapping[str, Any], resource: str) -> int:
    return quantity(((node.get("status") or {}).get("allocatable") or {}).get(resource))


def node_ready(node: Mapping[str, Any]) -> bool:
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def condition_of(obj: Mapping[str, Any], kind: str) -> Optional[dict[str, Any]]:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return dict(condition)
    return None


def shorten(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def name_list(items: Sequence[str], limit: int = 6) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


# ---- evidence gathered once, shared by the checks ----

@dataclass
class Evidence:
    client: Optional[KubeClient]
    plan: VerifyPlan
    log_lines: int = LOG_LINES
    _cache: dict[str, Any] = field(default_factory=dict)

    down: Optional[KubeUnreachable] = None
    answered: int = 0  # calls the cluster answered with something usable: 0 means nothing was checked

    def _once(self, key: str, fetch: Callable[[], Any]) -> Any:
        """Fetch once; errors are cached too, and after one unanswered call the API counts as down,
        so an unreachable cluster costs one timeout, not one per check."""
        if key not in self._cache:
            if self.down is not None:
                raise self.down
            try:
                self._cache[key] = fetch()
                self.answered += 1
            except KubeUnreachable as exc:
                self.down = exc
                self._cache[key] = exc
            except KubeError as exc:
                self._cache[key] = exc
        value = self._cache[key]
        if isinstance(value, KubeError):
            raise value
        return value

    def _require_client(self) -> KubeClient:
        if self.client is None:
            raise KubeError("no Kubernetes API client")
        return self.client

    def gpu_nodes(self) -> list[dict[str, Any]]:
        selector = ",".join(f"{k}={v}" for k, v in defaults.GPU_ROLE_LABEL.items())
        return self._once("nodes", lambda: self._require_client().list_nodes(selector))

    def rayservice(self) -> dict[str, Any]:
        return self._once("rayservice", lambda: self._require_client().get_rayservice(
            self.plan.namespace, self.plan.rayservice))

    def worker_pods(self) -> list[dict[str, Any]]:
        """Ray worker pods of this RayService's active cluster (not a pending upgrade's)."""
        def fetch() -> list[dict[str, Any]]:
            pods = self._require_client().list_pods(
                self.plan.namespace, f"{RAY_NODE_TYPE_LABEL}=worker")
            active = None
            try:
                active = ((self.rayservice().get("status") or {}).get("activeServiceStatus") or {}
                          ).get("rayClusterName")
            except KubeError:
                pass
            mine = [p for p in pods if labels_of(p).get(RAY_CR_NAME_LABEL) in (None, self.plan.rayservice)]
            if active:
                mine = [p for p in mine if labels_of(p).get(RAY_CLUSTER_LABEL) == active] or mine
            return mine
        return self._once("pods", fetch)

    def serve_details(self) -> dict[str, Any]:
        """The dashboard's ServeInstanceDetails, through the head Service proxy."""
        def fetch() -> dict[str, Any]:
            response = self._require_client().service_proxy(
                self.plan.namespace, self.plan.dashboard_service, defaults.DASHBOARD_PORT,
                "api/serve/applications/")
            if response.status != 200:
                raise KubeError(f"the Ray dashboard answered HTTP {response.status} for "
                                f"/api/serve/applications/: {shorten(response.text(), 160)}")
            try:
                document = response.json()
            except ValueError:
                raise KubeError("the Ray dashboard's /api/serve/applications/ is not JSON") from None
            if not isinstance(document, dict):
                raise KubeError("the Ray dashboard's /api/serve/applications/ is not an object")
            return document
        return self._once("serve", fetch)

    def engine_replicas(self) -> dict[str, list[dict[str, Any]]]:
        """phase -> its deployment's replicas, from the dashboard."""
        app = (self.serve_details().get("applications") or {}).get(self.plan.app) or {}
        deployments = app.get("deployments") or {}
        return {phase: list((deployments.get(p.deployment) or {}).get("replicas") or [])
                for phase, p in self.plan.phases.items()}

    def _client(self) -> KubeClient:
        """The client for uncached calls; refuses at once when the API is known to be down."""
        if self.down is not None:
            raise self.down
        return self._require_client()

    def live_client(self) -> KubeClient:
        """The client for a check's own uncached calls (Prometheus); refuses when the API is down."""
        return self._client()

    def ray_log(self, query: Mapping[str, Any]) -> str:
        """A log file through Ray's log API (`/api/v0/logs/file`) on the head Service."""
        response = self._client().service_proxy(
            self.plan.namespace, self.plan.dashboard_service, defaults.DASHBOARD_PORT,
            "api/v0/logs/file", query={**query, "lines": self.log_lines})
        if response.status != 200:
            raise KubeError(f"Ray's log API answered HTTP {response.status}: "
                            f"{shorten(response.text(), 160)}")
        return response.text()  # the file's bytes as they are (see the module docstring)

    def actor_log(self, actor_id: str) -> str:
        """Everything Ray keeps for one actor: its worker's .out and .err files."""
        texts = [self.ray_log({"actor_id": actor_id, "suffix": suffix}) for suffix in ("out", "err")]
        self.answered += 1
        return "\n".join(texts)

    def replica_log(self, replica: Mapping[str, Any]) -> str:
        actor = replica.get("actor_id")
        if not actor:
            raise KubeError("the replica has no actor_id")
        return self.actor_log(str(actor))

    def worker_actors(self, node_id: str) -> list[dict[str, Any]]:
        """The ALIVE vLLM worker actors (RayWorkerWrapper) on one Ray node, from the State API."""
        def fetch() -> list[dict[str, Any]]:
            query = [("filter_keys", "class_name"), ("filter_predicates", "="),
                     ("filter_values", WORKER_ACTOR_CLASS),
                     ("filter_keys", "node_id"), ("filter_predicates", "="), ("filter_values", node_id),
                     ("filter_keys", "state"), ("filter_predicates", "="), ("filter_values", "ALIVE"),
                     ("limit", STATE_API_LIMIT)]
            response = self._require_client().service_proxy(
                self.plan.namespace, self.plan.dashboard_service, defaults.DASHBOARD_PORT,
                "api/v0/actors", query=query)
            try:
                document = response.json()
            except ValueError:
                document = None
            if not isinstance(document, dict) or response.status != 200 or document.get("result") is not True:
                message = document.get("msg") if isinstance(document, dict) else response.text()
                raise KubeError(f"Ray's State API answered HTTP {response.status} for /api/v0/actors: "
                                f"{shorten(str(message), 160)}")
            listing = ((document.get("data") or {}).get("result") or {})
            actors = listing.get("result") if isinstance(listing, dict) else None
            if not isinstance(actors, list):
                raise KubeError("Ray's State API answer for /api/v0/actors has no actor list")
            return [a for a in actors if isinstance(a, dict) and a.get("actor_id")]
        return self._once(f"actors/{node_id}", fetch)

    def engine_log(self, replica: Mapping[str, Any]) -> tuple[str, str]:
        """One engine replica's log text and where it came from: the replica actor's files and
        those of the vLLM worker actors on its node (GPU layout). Raises KubeError when the
        replica's own log cannot be read; worker actors that cannot be listed are only noted."""
        texts = [self.replica_log(replica)]
        node_id = str(replica.get("node_id") or "")
        source = "replica actor"
        try:
            workers = self.worker_actors(node_id) if node_id else []
        except KubeError as exc:
            return texts[0], f"{source}; {WORKER_ACTOR_CLASS} actors not listed: {shorten(str(exc), 100)}"
        for actor in workers:
            try:
                texts.append(self.actor_log(str(actor["actor_id"])))
            except KubeError:
                continue
        if workers:
            source += f" + {len(workers)} {WORKER_ACTOR_CLASS} actor(s) on its node"
        return "\n".join(texts), source

    def metrics_page(self, pod: Mapping[str, Any]) -> str:
        """Ray's metrics export page of one worker pod (uncached: counters are read twice)."""
        response = self._client().pod_proxy(self.plan.namespace, name_of(pod), defaults.RAY_METRICS_PORT,
                                            "metrics")
        if response.status != 200:
            raise KubeError(f"pod {name_of(pod)}:{defaults.RAY_METRICS_PORT}/metrics answered HTTP "
                            f"{response.status}: {shorten(response.text(), 120)}")
        return response.text()

    def pod_log(self, pod: Mapping[str, Any]) -> str:
        return self._client().pod_log(self.plan.namespace, name_of(pod),
                                              container=WORKER_CONTAINER, tail_lines=self.log_lines)


# ---- the inputs: stack outputs and the kubeconfig ----

def parse_outputs_text(text: str, name: str = "the outputs") -> dict[str, Any]:
    """JSON text of `pulumi stack output --json --show-secrets` to a dict; VerifyInputError, one
    line starting with `name` (components.safe_documents: bounded size, nesting and numbers, no
    key twice, no NaN)."""
    try:
        document = load_json(text, max_bytes=MAX_OUTPUTS_BYTES)
    except DocumentError as exc:
        raise VerifyInputError(f"{name} {exc}: give the output of "
                               "`pulumi stack output --json --show-secrets`") from None
    if not isinstance(document, dict):
        raise VerifyInputError(f"{name} must be a JSON object (from `pulumi stack output "
                               "--json --show-secrets`)")
    return document


def check_outputs(outputs: Mapping[str, Any], have_kubeconfig: bool) -> None:
    if not isinstance(outputs, Mapping):
        raise VerifyInputError("the outputs must be a JSON object")
    document = dict(outputs)
    missing = KUBECONFIG_KEY not in document
    if missing or (have_kubeconfig and not isinstance(document.get(KUBECONFIG_KEY), str)):
        document[KUBECONFIG_KEY] = SECRET_PLACEHOLDER  # judged below; only the rest is validated here
    try:
        validate_outputs(document)
    except OutputsError as exc:
        raise VerifyInputError(f"the outputs break the stack-outputs contract: {exc}") from None
    except RecursionError:
        raise VerifyInputError("the outputs are nested too deeply") from None
    if missing and not have_kubeconfig:
        raise VerifyInputError("no kubeconfig: the outputs have none and --kubeconfig was not given")


def resolve_kubeconfig(outputs: Mapping[str, Any], kubeconfig: Optional[str]) -> str:
    text = kubeconfig if kubeconfig is not None else outputs.get(KUBECONFIG_KEY)
    if not isinstance(text, str) or not text.strip():
        raise VerifyInputError("no kubeconfig: the outputs have none and --kubeconfig was not given")
    if text.strip() == SECRET_PLACEHOLDER:
        raise VerifyInputError("the outputs' kubeconfig is masked ([secret]): run `pulumi stack "
                               "output --json --show-secrets`, or pass --kubeconfig FILE")
    return text
