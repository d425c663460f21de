"""`Evidence`: what a deployed stack runs, as the Kubernetes API tells it, each piece fetched once.

It asks the Kubernetes API (objects, logs, the service and pod proxies) for what does run against
the plan (serve/evidence/plan.py), caching every answer (errors too) so ten checks cost one call
per object, and an unreachable cluster costs one timeout, not ten.

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
from typing import Any, Callable, Mapping, Optional

from components.config import defaults
from components.render.rayservice import WORKER_CONTAINER
from serve.evidence.objects import (
    RAY_CLUSTER_LABEL,
    RAY_CR_NAME_LABEL,
    RAY_NODE_TYPE_LABEL,
    labels_of,
    name_of,
    shorten,
)
from serve.evidence.plan import VerifyPlan
from serve.kube import KubeClient, KubeError, KubeUnreachable

log = logging.getLogger(__name__)

LOG_LINES = 5000
WORKER_ACTOR_CLASS = "RayWorkerWrapper"  # vllm/v1/executor/ray_utils.py
STATE_API_LIMIT = 1000


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
