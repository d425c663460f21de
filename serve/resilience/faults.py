"""The faults and the deployment of `python -m serve.resilience`, through the Kubernetes API only.

What may be touched is read from the stack outputs (serve/evidence/plan.py `VerifyPlan`, as verify
reads them) and checked again on the object itself just before it is touched: a pod only in the
stack's namespace, with the KubeRay labels of this RayService (`ray.io/originated-from-cr-name`)
and of its active Ray cluster, and, for an engine, the node-type and worker group of its phase;
a node only when it carries the GPU role label and belongs to one of the stack's node groups.
A pod is deleted with a `preconditions.uid` (the API server answers 409 rather than delete another
pod that took the same name meanwhile).

- `prefill-pod` / `decode-pod`: the worker pod hosting a RUNNING replica of that phase (the Ray
  dashboard's Serve API gives the replica's node IP, as verify's kv-transfer finds the decode);
  without the Serve API, the pod of the phase's worker group when that group hosts only that phase.
- `head-pod`: the head pod of the active Ray cluster (without GCS fault tolerance this restarts
  every worker: the fault issue 31's GCS FT is for).
- `node`: the GPU node hosting a decode replica, cordoned (merge patch `spec.unschedulable: true`,
  as `kubectl cordon` sets it: k8s.io/kubectl/pkg/drain/cordon.go) and drained of this
  deployment's pods only, by the Eviction API (`POST .../pods/<name>/eviction`, policy/v1; a 429
  "Cannot evict pod as it would violate the pod's disruption budget" is retried every 5 s as
  kubectl drain does: k8s.io/kubectl/pkg/drain/drain.go, pkg/registry/core/pod/storage/
  eviction.go). Pods of other namespaces (DaemonSets, the device plugins) are left alone. A node
  already cordoned is refused (someone else's maintenance). `restore` uncordons it; the CLI calls
  it on every exit path, Ctrl-C and SIGTERM included.

RBAC: before any load is sent, the act is tried with `dryRun=All` (the API server authorizes a
dry run exactly as the real request and persists nothing: Kubernetes API concepts, "Dry-run"),
so a forbidden delete, eviction or patch is refused up front with what to grant (RBAC_NEEDED).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import replace
from typing import Any, Optional
from urllib.parse import quote

from components.config import defaults
from serve.evidence import (
    RAY_CLUSTER_LABEL,
    RAY_CR_NAME_LABEL,
    RAY_GROUP_LABEL,
    RAY_NODE_TYPE_LABEL,
    Evidence,
    VerifyPlan,
    condition_of,
    labels_of,
    name_of,
)
from serve.kube import MERGE_PATCH, KubeClient, KubeError
from serve.kv_evidence import KvReading, expired_only, kv_series, parse_vllm_samples, replica_filter
from serve.resilience.limits import FAULTS
from serve.resilience.run import FaultRefused
from serve.verify.kv_transfer import read_kv

log = logging.getLogger(__name__)

RBAC_NEEDED = ("pods: get, list, delete; pods/eviction: create (for --fault node); nodes: get, patch "
               "(for --fault node), in the stack's namespace and on its GPU nodes")
EVICTION_RETRY_S = 5.0
DRAIN_TIMEOUT_S = 300.0


def _refused(what: str, exc: KubeError) -> FaultRefused:
    if exc.status == 403:
        return FaultRefused(f"not allowed to {what} (HTTP 403, RBAC): serve.resilience needs {RBAC_NEEDED}")
    return FaultRefused(f"could not {what}: {exc}")


__all__ = ["FAULTS", "RBAC_NEEDED", "KubeDeployment", "KubeFault", "serve_proxy"]


def serve_proxy(client: KubeClient, plan: VerifyPlan) -> tuple[str, dict[str, Any]]:
    """The Serve Service behind the API server's service proxy, with the kubeconfig's TLS and
    credentials (as `serve.benchmark run --outputs` sends its load); raises KubeError when the
    credentials cannot be minted."""
    client.auth_headers()  # mint the token now: a credential problem is said before any load
    proxy = (f"{client.server}/api/v1/namespaces/{quote(plan.namespace, safe='')}/services/"
             f"{quote(plan.serve_service, safe='')}:{defaults.SERVE_PORT}/proxy")
    return proxy, {"headers": client.auth_headers, "ssl_context": client.ssl_context}


def pod_path(namespace: str, name: str, sub: str = "") -> str:
    return f"/api/v1/namespaces/{quote(namespace, safe='')}/pods/{quote(name, safe='')}{sub}"


def node_path(name: str) -> str:
    return f"/api/v1/nodes/{quote(name, safe='')}"


class KubeDeployment:
    """The stack as `Target`: readiness of its pods, the decode's KV counters (as verify reads them)."""

    def __init__(self, client: KubeClient, plan: VerifyPlan):
        self.client, self.plan = client, plan

    def describe(self) -> str:
        return f"RayService {self.plan.namespace}/{self.plan.rayservice}"

    def evidence(self) -> Evidence:
        return Evidence(self.client, self.plan)  # fresh: Evidence caches every answer

    def pods(self) -> list[dict[str, Any]]:
        """This RayService's head and worker pods (of its active cluster)."""
        pods = self.client.list_pods(self.plan.namespace, f"{RAY_CR_NAME_LABEL}={self.plan.rayservice}")
        active = self.active_cluster()
        return [p for p in pods if not active or labels_of(p).get(RAY_CLUSTER_LABEL) == active]

    def active_cluster(self) -> Optional[str]:
        try:
            status = self.client.get_rayservice(self.plan.namespace, self.plan.rayservice).get("status") or {}
        except KubeError:
            return None
        return (status.get("activeServiceStatus") or {}).get("rayClusterName")

    def ready(self) -> Optional[bool]:
        try:
            pods = self.pods()
        except KubeError:
            return None
        return bool(pods) and all((condition_of(p, "Ready") or {}).get("status") == "True" for p in pods)

    def kv_reading(self) -> Optional[KvReading]:
        """Decode's counters as verify reads them, plus the expired leases prefill counts (the
        producer frees a request's blocks when its lease runs out) from its replicas' pages."""
        ev = self.evidence()
        try:
            reading = read_kv(ev)
        except Exception:  # noqa: BLE001 - no counters is "not read", said in the report
            log.debug("the decode's KV counters could not be read", exc_info=False)
            return None
        pages = dict(reading.pages)
        try:
            replicas = [r for r in ev.engine_replicas().get("prefill", []) if r.get("state") == "RUNNING"]
            ips = {str(r.get("node_ip")) for r in replicas}
            keep = replica_filter(str(r.get("replica_id") or "") for r in replicas)
            for pod in ev.worker_pods():
                if str((pod.get("status") or {}).get("podIP")) in ips:
                    samples = expired_only(parse_vllm_samples(ev.metrics_page(pod)))
                    pages[f"pod {name_of(pod)} prefill leases"] = kv_series(samples, keep)
        except KubeError:
            pass  # prefill's leases unread: the decode's counters still stand
        return replace(reading, pages=pages)


class KubeFault:
    """One of FAULTS against the deployment; `choose` before the load, `inject` under it."""

    def __init__(self, name: str, deployment: KubeDeployment, *, eviction_retry_s: float = EVICTION_RETRY_S,
                 drain_timeout_s: float = DRAIN_TIMEOUT_S):
        if name not in FAULTS:
            raise FaultRefused(f"--fault must be one of {', '.join(FAULTS)}")
        self.name, self.deployment = name, deployment
        self.client, self.plan = deployment.client, deployment.plan
        self.eviction_retry_s, self.drain_timeout_s = eviction_retry_s, drain_timeout_s
        self.pod: Optional[dict[str, Any]] = None
        self.node: Optional[str] = None
        self.cordoned = False
        self._closing = threading.Event()
        self._lock = threading.Lock()

    # ---- choosing, and checking, what is hit ----

    def _phase_pod(self, phase: str) -> dict[str, Any]:
        plan = self.plan
        if phase not in plan.phases:
            raise FaultRefused(f"--fault {phase}-pod: this stack has no {phase} phase (mode {plan.mode})")
        group = plan.phases[phase].group
        workers = [p for p in self.deployment.pods() if labels_of(p).get(RAY_NODE_TYPE_LABEL) == "worker"
                   and labels_of(p).get(RAY_GROUP_LABEL) == group]
        try:
            replicas = self.deployment.evidence().engine_replicas().get(phase, [])
        except KubeError:
            replicas = []
        ips = {str(r.get("node_ip")) for r in replicas if r.get("state") == "RUNNING"}
        hosting = sorted((p for p in workers if str((p.get("status") or {}).get("podIP")) in ips), key=name_of)
        if not hosting and not replicas and plan.groups[group].phases == (phase,):
            hosting = sorted(workers, key=name_of)  # the group runs only this phase
        if not hosting:
            raise FaultRefused(f"--fault {phase}-pod: no pod of worker group {group} could be shown to host a "
                               f"RUNNING {phase} replica (the Ray dashboard's Serve API lists them)")
        return hosting[0]

    def _head_pod(self) -> dict[str, Any]:
        heads = [p for p in self.deployment.pods() if labels_of(p).get(RAY_NODE_TYPE_LABEL) == "head"]
        if not heads:
            raise FaultRefused(f"--fault head-pod: no head pod of RayService {self.plan.rayservice} in "
                               f"namespace {self.plan.namespace}")
        return sorted(heads, key=name_of)[0]

    def _ours(self, pod: dict[str, Any]) -> bool:
        """The pod is the deployment's: its namespace and KubeRay labels say so."""
        labels = labels_of(pod)
        return ((pod.get("metadata") or {}).get("namespace") in (None, self.plan.namespace)
                and labels.get(RAY_CR_NAME_LABEL) == self.plan.rayservice
                and labels.get(RAY_NODE_TYPE_LABEL) in ("head", "worker"))

    def _node_is_ours(self, node: dict[str, Any]) -> bool:
        labels = labels_of(node)
        return (all(labels.get(k) == v for k, v in defaults.GPU_ROLE_LABEL.items())
                and self.plan.group_of_node(node) in self.plan.groups)

    def choose(self) -> str:
        """Pick the pod (or node) and try the act as a dry run: RBAC refusals come before any load."""
        try:
            if self.name == "head-pod":
                self.pod = self._head_pod()
            else:
                self.pod = self._phase_pod("prefill" if self.name == "prefill-pod" else "decode")
            if not self._ours(self.pod):
                raise FaultRefused(f"pod {name_of(self.pod)} is not this deployment's: not touched")
            if self.name != "node":
                self._delete_pod(self.pod, dry_run=True)
                return f"pod {self.plan.namespace}/{name_of(self.pod)}"
            self.node = str((self.pod.get("spec") or {}).get("nodeName") or "")
            node = self.client.get_json(node_path(self.node))
            if not self._node_is_ours(node):
                raise FaultRefused(f"node {self.node} is not one of the stack's GPU node groups: not touched")
            if (node.get("spec") or {}).get("unschedulable"):
                raise FaultRefused(f"node {self.node} is already cordoned (someone else's maintenance): not touched")
            self._patch_node(True, dry_run=True)
            self._evict(self.pod, dry_run=True)
            return f"node {self.node} (hosting pod {name_of(self.pod)})"
        except KubeError as exc:
            raise _refused(f"read or act on the {self.name} target", exc) from None

    # ---- the acts ----

    def _delete_pod(self, pod: dict[str, Any], dry_run: bool = False) -> None:
        uid = (pod.get("metadata") or {}).get("uid")
        body = {"kind": "DeleteOptions", "apiVersion": "v1", **({"preconditions": {"uid": uid}} if uid else {})}
        response = self.client.request("DELETE", pod_path(self.plan.namespace, name_of(pod)),
                                       query={"dryRun": "All"} if dry_run else None,
                                       body=json.dumps(body).encode())
        if not 200 <= response.status < 300:
            raise KubeError(f"DELETE pod {name_of(pod)} answered HTTP {response.status}: "
                            f"{response.text()[:200]}", status=response.status)

    def _patch_node(self, unschedulable: bool, dry_run: bool = False) -> None:
        patch = {"spec": {"unschedulable": True if unschedulable else None}}
        response = self.client.request("PATCH", node_path(str(self.node)), body=json.dumps(patch).encode(),
                                       query={"dryRun": "All"} if dry_run else None,
                                       headers={"Content-Type": MERGE_PATCH})
        if not 200 <= response.status < 300:
            raise KubeError(f"PATCH node {self.node} answered HTTP {response.status}: {response.text()[:200]}",
                            status=response.status)

    def _evict(self, pod: dict[str, Any], dry_run: bool = False) -> int:
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name_of(pod), "namespace": self.plan.namespace},
                **({"deleteOptions": {"dryRun": ["All"]}} if dry_run else {})}
        response = self.client.request("POST", pod_path(self.plan.namespace, name_of(pod), "/eviction"),
                                       query={"dryRun": "All"} if dry_run else None, body=json.dumps(body).encode())
        if response.status not in (200, 201, 404, 429):
            raise KubeError(f"eviction of pod {name_of(pod)} answered HTTP {response.status}: "
                            f"{response.text()[:200]}", status=response.status)
        return response.status

    def inject(self) -> str:
        if self.pod is None:
            raise FaultRefused("nothing was chosen to hit")
        try:
            if self.name != "node":
                fresh = self.client.get_json(pod_path(self.plan.namespace, name_of(self.pod)))
                if not self._ours(fresh) or labels_of(fresh) != labels_of(self.pod):
                    raise FaultRefused(f"pod {name_of(self.pod)} changed since it was chosen: not touched")
                self._delete_pod(self.pod)
                return f"deleted pod {self.plan.namespace}/{name_of(self.pod)}"
            with self._lock:  # restore() waits for this: a cordon never lands after the uncordon
                if self.closing:
                    raise FaultRefused("interrupted before the node was cordoned")
                self._patch_node(True)
                self.cordoned = True
            return self._drain()
        except KubeError as exc:
            raise _refused(f"inject the {self.name} fault", exc) from None

    def _drain(self) -> str:
        on_node = [p for p in self.client.get_json(
            f"/api/v1/namespaces/{quote(self.plan.namespace, safe='')}/pods",
            {"fieldSelector": f"spec.nodeName={self.node}"}).get("items") or [] if self._ours(p)]
        deadline = time.monotonic() + self.drain_timeout_s
        evicted: list[str] = []
        blocked: list[str] = []
        for pod in sorted(on_node, key=name_of):
            status = self._evict(pod)
            while status == 429 and time.monotonic() + self.eviction_retry_s < deadline:
                if self._closing.wait(self.eviction_retry_s):  # a PodDisruptionBudget says not yet: as kubectl drain
                    break
                status = self._evict(pod)
            (blocked if status == 429 else evicted).append(name_of(pod))
        words = f"cordoned node {self.node}, evicted {', '.join(evicted) or 'no pod'}"
        return words + (f"; still blocked by a disruption budget: {', '.join(blocked)}" if blocked else "")

    @property
    def closing(self) -> bool:
        return self._closing.is_set()

    def interrupt(self) -> None:
        """The run is ending (a signal): no cordon after this, and the drain stops waiting."""
        self._closing.set()

    def restore(self) -> None:
        """Uncordon a node this run cordoned; nothing else is undone (a deleted pod is replaced by
        KubeRay). Retried a few times: a node must never be left cordoned by this tool."""
        self.interrupt()
        with self._lock:
            if not self.cordoned:
                return
            for attempt in range(3):
                try:
                    self._patch_node(False)
                    self.cordoned = False
                    return
                except KubeError as exc:
                    log.warning("uncordon of node %s failed (attempt %d): %s", self.node, attempt + 1, exc)
            raise FaultRefused(f"node {self.node} is STILL CORDONED (uncordon failed 3 times): "
                               f"run `kubectl uncordon {self.node}`")
