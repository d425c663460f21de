"""`python -m serve.verify --outputs FILE|- [--kubeconfig FILE] [--endpoint URL] [--api-key-file FILE] [--json]`.

Post-deploy verification (Contract 5, kind "verify") through the Kubernetes API only: no kubectl,
no exec into pods, no port-forward. Everything is read from the API server (nodes, the RayService,
pods, container logs) or through its service and pod proxies (the Ray dashboard's Serve and log
APIs on the head Service, the OpenAI endpoint on the Serve Service, Ray's metrics on the worker
pods). Each check says where its evidence came from; a check that could not get evidence is warn or
skip, never pass.

What is checked and how is in docs/troubleshooting.md; where the evidence is and its formats in
serve/evidence.py (Kubernetes, the Ray dashboard's Serve, State and log APIs) and
serve/kv_evidence.py (NIXL's and vLLM's log lines, vLLM's metrics under their vLLM and Ray names).
The KV transfer is judged on the decode's own counters read before and after a test request:
transfers and external_kv_transfer prompt tokens must rise while local_compute does not.

Exit 0 when no check failed, 1 when one did, 2 on invalid input (one line on stderr).
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import secrets
import sys
import time
from dataclasses import dataclass, fields
from typing import Any, Callable, Mapping, Optional, Sequence

from components import defaults
from components.checks import Check, Report, write_report
from components.rayservice import EFA_RESOURCE, GPU_RESOURCE
from components.safe_documents import shown_name
from components.serve_config import KV_LOAD_FAILURE_POLICY
from serve.evidence import (
    LOG_LINES,
    MAX_OUTPUTS_BYTES,
    RAY_GROUP_LABEL,
    ZONE_LABEL,
    Endpoint,
    Evidence,
    VerifyInputError,
    VerifyPlan,
    allocatable,
    check_outputs,
    condition_of,
    direct_endpoint,
    labels_of,
    name_list,
    name_of,
    node_ready,
    parse_outputs_text,
    proxied_endpoint,
    resolve_kubeconfig,
    shorten,
)
from serve.kube import (
    DEFAULT_TIMEOUT,
    KubeClient,
    KubeConfigError,
    KubeError,
    KubeNotFound,
    client_from_kubeconfig,
    read_kubeconfig_file,
)
from serve.kv_evidence import (
    KvChange,
    KvCounters,
    KvSeries,
    backends_in,
    is_kv_line,
    kv_load_failures,
    kv_log_counts,
    kv_series,
    nixl_failures,
    parse_vllm_samples,
    replica_filter,
    unsupported_backends_in,
)
from serve.live_status import cluster_status
from serve.verify import exposure as exposure_check
from serve.verify import metrics_flowing as metrics_check
from serve.verify.external import TITLES as ENDPOINT_TITLES
from serve.verify.external import endpoint_checks, read_api_key

__all__ = ["VerifyInputError", "cluster_status", "main", "run_verify"]

log = logging.getLogger(__name__)
EXIT_INVALID = 2
CHAT_TIMEOUT = 60.0
KV_WAIT_SECONDS = 20.0  # Ray exports metrics every ~10 s: wait up to two rounds for the counters
KV_POLL_SECONDS = 5.0
CHAT_PROMPT = "Reply with the single word: ready"

TITLES = {
    "gpu-nodes": "GPU nodes present, Ready and advertising their GPUs",
    "efa-devices": "GPU nodes advertise EFA devices",
    "one-zone": "all GPU nodes in the stack's one availability zone",
    "rayservice-ready": "RayService condition Ready",
    "serve-app-running": "Serve application RUNNING, deployments HEALTHY",
    "replica-placement": "engine replicas running on their planned node groups",
    "nixl-backend": "NIXL uses the requested KV transfer backend",
    "endpoint-models": "OpenAI endpoint lists the model",
    "endpoint-chat": "OpenAI endpoint answers a chat completion",
    "kv-transfer": "KV cache moved from prefill to decode for a real request",
    **ENDPOINT_TITLES,  # endpoint-external, endpoint-auth: serve/verify/external.py
    exposure_check.CHECK_ID: exposure_check.TITLE,
    metrics_check.CHECK_ID: metrics_check.TITLE,
}


# ---- the checks ----

def _api_unavailable(check_id: str, exc: KubeError) -> Check:
    return Check.skipped(check_id, TITLES[check_id],
                         f"no evidence: the Kubernetes API did not answer ({exc})")


def check_gpu_nodes(ev: Evidence) -> Check:
    cid, title = "gpu-nodes", TITLES["gpu-nodes"]
    try:
        nodes = ev.gpu_nodes()
    except KubeError as exc:
        return Check.failed(cid, title, f"cannot list the GPU nodes: {exc}",
                            "check the kubeconfig and that the cluster's API endpoint is reachable")
    problems: list[str] = []
    evidence: list[str] = []
    by_group: dict[str, list[dict[str, Any]]] = {name: [] for name in ev.plan.groups}
    stray: list[str] = []
    for node in nodes:
        group_name = ev.plan.group_of_node(node)
        if group_name in by_group:
            by_group[group_name].append(node)
        else:
            stray.append(name_of(node))
    for name, planned in ev.plan.groups.items():
        members = by_group[name]
        if len(members) < planned.nodes:
            problems.append(f"node group {name}: {len(members)} of {planned.nodes} planned "
                            f"{planned.instance_type} node(s) registered")
        not_ready = [name_of(n) for n in members if not node_ready(n)]
        if not_ready:
            problems.append(f"node group {name}: not Ready: {name_list(not_ready)}")
        want = planned.gpus_per_node
        short = [f"{name_of(n)} ({allocatable(n, GPU_RESOURCE)})" for n in members
                 if (allocatable(n, GPU_RESOURCE) != want if want else allocatable(n, GPU_RESOURCE) < 1)]
        if short:
            problems.append(f"node group {name}: {GPU_RESOURCE} allocatable is not "
                            f"{want or '>= 1'} on {name_list(short)}")
        if members:
            evidence.append(f"{name}: {len(members)}/{planned.nodes} Ready node(s) "
                            f"({name_list([name_of(n) for n in members], 4)}), {GPU_RESOURCE}="
                            f"{want or allocatable(members[0], GPU_RESOURCE)} each")
    if stray and ev.plan.pinned:
        problems.append(f"GPU node(s) without a {defaults.PHASE_LABEL_KEY} label of a planned "
                        f"group: {name_list(stray)}")
    if problems:
        return Check.failed(cid, title, "; ".join(problems),
                            "look at the node groups in the EKS console (capacity, health); a "
                            "missing nvidia.com/gpu means the NVIDIA device plugin is not running "
                            "on the node")
    extra = sum(len(m) for m in by_group.values()) - sum(g.nodes for g in ev.plan.groups.values())
    if extra > 0:
        return Check.warned(cid, title, "; ".join(evidence) + f"; {extra} more GPU node(s) than "
                            "planned", "an earlier node group may still be draining")
    return Check.passed(cid, title, "; ".join(evidence))


def check_efa_devices(ev: Evidence) -> Check:
    cid, title = "efa-devices", TITLES["efa-devices"]
    if ev.plan.kv_backend is None:
        return Check.skipped(cid, title, "colocated mode: no KV cache moves between nodes")
    if ev.plan.kv_backend != "LIBFABRIC":
        return Check.skipped(cid, title, f"kvTransfer.backend is {ev.plan.kv_backend}: EFA is "
                             "only needed for LIBFABRIC")
    try:
        nodes = ev.gpu_nodes()
    except KubeError as exc:
        return _api_unavailable(cid, exc)
    if not nodes:
        return Check.skipped(cid, title, "no GPU nodes to look at (see gpu-nodes)")
    missing = [name_of(n) for n in nodes if allocatable(n, EFA_RESOURCE) < 1]
    if missing:
        return Check.failed(
            cid, title, f"{EFA_RESOURCE} is not advertised (allocatable 0 or absent) on "
            f"{name_list(missing)}: NIXL's LIBFABRIC backend cannot use EFA there",
            "check that the aws-efa-k8s-device-plugin daemonset runs on the GPU nodes and that "
            "the node group was created with EFA interfaces (enable_efa_support)")
    counts = ", ".join(f"{name_of(n)}={allocatable(n, EFA_RESOURCE)}" for n in nodes[:6])
    return Check.passed(cid, title, f"{EFA_RESOURCE} allocatable on every GPU node: {counts}")


def check_one_zone(ev: Evidence) -> Check:
    cid, title = "one-zone", TITLES["one-zone"]
    try:
        nodes = ev.gpu_nodes()
    except KubeError as exc:
        return _api_unavailable(cid, exc)
    if not nodes:
        return Check.skipped(cid, title, "no GPU nodes to look at (see gpu-nodes)")
    zones: dict[str, list[str]] = {}
    unlabelled = []
    for node in nodes:
        zone = labels_of(node).get(ZONE_LABEL)
        if zone:
            zones.setdefault(zone, []).append(name_of(node))
        else:
            unlabelled.append(name_of(node))
    want = ev.plan.availability_zone
    if len(zones) > 1 or (zones and want not in zones):
        spread = "; ".join(f"{zone}: {name_list(names, 3)}" for zone, names in sorted(zones.items()))
        return Check.failed(cid, title, f"GPU nodes are in {spread}; the stack's zone is {want} "
                            "(EFA traffic cannot cross availability zones)",
                            "every GPU node group must use the one private subnet of the GPU zone; "
                            "run `pulumi up` again to replace the stray group")
    if unlabelled or not zones:
        return Check.warned(cid, title, f"no {ZONE_LABEL} label on {name_list(unlabelled)}")
    return Check.passed(cid, title, f"all {len(nodes)} GPU node(s) in {want} ({ZONE_LABEL})")


def check_rayservice_ready(ev: Evidence) -> Check:
    cid, title = "rayservice-ready", TITLES["rayservice-ready"]
    target = f"{ev.plan.namespace}/{ev.plan.rayservice}"
    try:
        service = ev.rayservice()
    except KubeNotFound:
        return Check.failed(cid, title, f"RayService {target} does not exist",
                            "run `pulumi up`; check that the KubeRay operator is installed")
    except KubeError as exc:
        return _api_unavailable(cid, exc)
    ready = condition_of(service, "Ready")
    if ready is None:
        legacy = (service.get("status") or {}).get("serviceStatus")
        return Check.warned(cid, title, f"RayService {target} has no Ready condition (KubeRay older "
                            f"than 1.3?); serviceStatus={legacy!r}",
                            "upgrade the KubeRay operator to 1.4 or later")
    reason, message = ready.get("reason", ""), shorten(ready.get("message", ""))
    if ready.get("status") == "True":
        return Check.passed(cid, title, f"RayService {target}: Ready=True ({reason})"
                            + (f": {message}" if message else ""))
    return Check.failed(cid, title, f"RayService {target}: Ready={ready.get('status')} "
                        f"({reason}){': ' + message if message else ''}",
                        "the model may still be loading: see `kubectl describe rayservice` and the "
                        "Ray dashboard; the KubeRay operator's log says why it is not ready")


def check_serve_app(ev: Evidence) -> Check:
    cid, title = "serve-app-running", TITLES["serve-app-running"]
    try:
        service = ev.rayservice()
    except KubeNotFound:
        return Check.skipped(cid, title, "no RayService (see rayservice-ready)")
    except KubeError as exc:
        return _api_unavailable(cid, exc)
    apps = (((service.get("status") or {}).get("activeServiceStatus") or {})
            .get("applicationStatuses") or {})
    app = apps.get(ev.plan.app)
    if not isinstance(app, Mapping):
        return Check.failed(cid, title, f"no Serve application {ev.plan.app!r} in the RayService's "
                            f"active status (applications: {sorted(apps) or 'none'})",
                            "the Serve config may have failed to deploy: see the Ray dashboard")
    problems = []
    if app.get("status") != "RUNNING":
        problems.append(f"application {ev.plan.app} is {app.get('status')!r}"
                        + (f": {shorten(app.get('message', ''))}" if app.get("message") else ""))
    statuses = app.get("serveDeploymentStatuses") or {}
    for name in ev.plan.deployments:
        deployment = statuses.get(name)
        if not isinstance(deployment, Mapping):
            problems.append(f"deployment {name} missing (has: {name_list(sorted(statuses))})")
        elif deployment.get("status") != "HEALTHY":
            problems.append(f"deployment {name} is {deployment.get('status')!r}"
                            + (f": {shorten(deployment.get('message', ''), 200)}"
                               if deployment.get("message") else ""))
    if problems:
        return Check.failed(cid, title, "; ".join(problems),
                            "read the replicas' logs in the Ray dashboard (model download, GPU "
                            "memory, NIXL handshake errors)")
    return Check.passed(cid, title, f"application {ev.plan.app} RUNNING; "
                        + ", ".join(f"{name} HEALTHY" for name in ev.plan.deployments))


def check_replica_placement(ev: Evidence) -> Check:
    cid, title = "replica-placement", TITLES["replica-placement"]
    try:
        replicas = ev.engine_replicas()
        pods = ev.worker_pods()
        nodes = ev.gpu_nodes()
    except KubeError as exc:
        return Check.warned(cid, title, f"no evidence of placement: {exc}",
                            "check that the Ray head pod runs and its dashboard (8265) answers")
    pod_by_ip = {str((p.get("status") or {}).get("podIP")): p for p in pods}
    node_by_name = {name_of(n): n for n in nodes}
    problems: list[str] = []
    warnings: list[str] = []
    evidence: list[str] = []
    phases_on_node: dict[str, set[str]] = {}
    for phase, plan in ev.plan.phases.items():
        running = [r for r in replicas.get(phase, []) if r.get("state") == "RUNNING"]
        if len(running) < plan.replicas:
            problems.append(f"{plan.deployment}: {len(running)} of {plan.replicas} replica(s) RUNNING")
        elif len(running) > plan.replicas:
            warnings.append(f"{plan.deployment}: {len(running)} RUNNING, {plan.replicas} planned")
        places = []
        for replica in running:
            ip = str(replica.get("node_ip"))
            pod = pod_by_ip.get(ip)
            if pod is None:
                problems.append(f"{plan.deployment} replica {replica.get('replica_id', '?')} runs on "
                                f"Ray node {ip}, which is no worker pod of {ev.plan.rayservice}")
                continue
            node_name = str((pod.get("spec") or {}).get("nodeName"))
            group = labels_of(pod).get(RAY_GROUP_LABEL)
            node = node_by_name.get(node_name)
            node_group = ev.plan.group_of_node(node) if node else None
            if group != plan.group or (node_group is not None and node_group != plan.group):
                problems.append(f"{plan.deployment} replica on pod {name_of(pod)} (worker group "
                                f"{group}, node {node_name}) instead of node group {plan.group}")
            phases_on_node.setdefault(node_name, set()).add(phase)
            places.append(f"{node_name} ({group})")
        if running:
            evidence.append(f"{plan.deployment}: {len(running)}/{plan.replicas} RUNNING on "
                            f"{name_list(places, 4)}")
    # The plan gives every phase nodes of its own (components.topology sizes each group as the sum
    # of its phases' nodes): two phases on one node halve its GPUs and take PD's gain away.
    shared = {node_name: sorted(p) for node_name, p in phases_on_node.items() if len(p) > 1}
    for node_name, phases in shared.items():
        problems.append(f"{' and '.join(phases)} engines share node {node_name}, but the plan gives "
                        "each its own node (prefill/decode disaggregation gains nothing this way)")
    remedy = ("engines go where the placement groups find GPUs: check the worker groups' "
              "rayStartParams and that every planned node joined the Ray cluster; if a restart "
              "packed the engines onto one node, restart the packed replica once the other node "
              "is Ready")
    if problems:
        return Check.failed(cid, title, "; ".join(problems + warnings), remedy)
    if warnings:
        return Check.warned(cid, title, "; ".join(evidence + warnings),
                            "more replicas than planned: an autoscaler or an old deployment's "
                            "replicas may still be running")
    return Check.passed(cid, title, "; ".join(evidence)
                        + " (Ray dashboard /api/serve/applications/, pod IPs, node labels)")


def check_nixl_backend(ev: Evidence) -> Check:
    cid, title = "nixl-backend", TITLES["nixl-backend"]
    want = ev.plan.kv_backend
    if want is None:
        return Check.skipped(cid, title, "colocated mode: no NIXL transfer")
    seen: dict[str, set[str]] = {}
    refused: set[str] = set()
    sources: set[str] = set()
    try:
        for phase, replicas in ev.engine_replicas().items():
            for replica in replicas:
                if replica.get("state") != "RUNNING":
                    continue
                label = f"{ev.plan.phases[phase].deployment} {replica.get('replica_id', '?')}"
                text, where = ev.engine_log(replica)
                seen[label] = backends_in(text)
                refused.update(unsupported_backends_in(text))
                sources.add(where)
        if not seen:
            raise KubeError("no RUNNING engine replica to read")
        source = f"Ray log API ({'; '.join(sorted(sources))})"
    except KubeError as ray_error:
        source = f"worker pods' container logs (Ray log API: {shorten(str(ray_error), 120)})"
        seen = {}
        try:
            for pod in ev.worker_pods():
                text = ev.pod_log(pod)
                seen[f"pod {name_of(pod)}"] = backends_in(text)
                refused.update(unsupported_backends_in(text))
        except KubeError as exc:
            return Check.warned(cid, title, f"no logs to read: {exc}",
                                "check the Ray dashboard's logs for 'Backend ... was instantiated'")
    wrong = {label: sorted(b - {want}) for label, b in seen.items() if b - {want}}
    silent = [label for label, b in seen.items() if not b]
    if want in refused and not wrong:
        return Check.failed(cid, title, f"NIXL could not create the {want} backend ('createBackend: "
                            f"unsupported backend '{want}''): the engine cannot start its KV "
                            f"connector; source: {source}",
                            "LIBFABRIC needs the EFA device and libfabric in the image (and on NIXL 1.5 "
                            "its plugin loads CUDA): check efa-devices and the image's NIXL build")
    if wrong:
        detail = "; ".join(f"{label}: Backend {', '.join(b)} was instantiated" for label, b in wrong.items())
        fallback = " (UCX is the silent TCP-speed fallback)" if want == "LIBFABRIC" else ""
        return Check.failed(cid, title, f"{detail}, but {want} was asked{fallback}; source: {source}",
                            "set kv_connector_extra_config.backends to [LIBFABRIC] and FI_PROVIDER=efa "
                            "on the workers, and make sure the pods request vpc.amazonaws.com/efa")
    found = [label for label, b in seen.items() if want in b]
    if not found or silent:
        return Check.warned(cid, title, f"no 'Backend {want} was instantiated' line for "
                            f"{name_list(silent) or 'any engine'}; source: {source}",
                            "the line is printed once at engine start and may have rotated out of "
                            "the log tail; look in the Ray dashboard's logs of the engine's worker")
    return Check.passed(cid, title, f"'Backend {want} was instantiated' in the logs of "
                        f"{name_list(found)}; no other backend; source: {source}")


def check_endpoint_models(endpoint: Optional[Endpoint], ev: Evidence, timeout: float) -> Check:
    cid, title = "endpoint-models", TITLES["endpoint-models"]
    if endpoint is None:
        return Check.skipped(cid, title, "no endpoint: the Kubernetes API is not reachable")
    try:
        status, body = endpoint.get("/v1/models", timeout)
    except KubeError as exc:
        return Check.failed(cid, title, str(exc), "check the Serve Service and the Ray head pod")
    if status != 200:
        return Check.failed(cid, title, f"GET /v1/models on {endpoint.describe} answered HTTP "
                            f"{status}: {shorten(body.decode('utf-8', 'replace'), 200)}",
                            "the Serve application may not be RUNNING yet (see serve-app-running)")
    try:
        ids = [str(m.get("id")) for m in json.loads(body.decode("utf-8")).get("data") or []
               if isinstance(m, Mapping)]
    except (ValueError, AttributeError, UnicodeDecodeError):
        return Check.failed(cid, title, f"GET /v1/models on {endpoint.describe} is not an OpenAI "
                            "model list", "is --endpoint the OpenAI server of this stack?")
    if ev.plan.model_id not in ids:
        return Check.failed(cid, title, f"GET /v1/models on {endpoint.describe} lists "
                            f"{name_list(ids) or 'no models'}, not {ev.plan.model_id}",
                            "is --endpoint the OpenAI server of this stack?")
    return Check.passed(cid, title, f"GET /v1/models on {endpoint.describe} lists {ev.plan.model_id}")


@dataclass(frozen=True)
class ChatOutcome:
    """What the test chat request got: an HTTP status and body, or no answer at all (`error`)."""

    status: Optional[int]
    body: bytes = b""
    error: str = ""


def send_chat(endpoint: Optional[Endpoint], ev: Evidence, timeout: float) -> ChatOutcome:
    """One short chat completion. The prompt carries a fresh nonce, so neither engine's prefix
    cache can serve it and the decode has to get its KV cache from prefill (or recompute it)."""
    if endpoint is None:
        return ChatOutcome(None, error="no endpoint: the Kubernetes API is not reachable")
    body = {"model": ev.plan.model_id,
            "messages": [{"role": "user", "content": f"{CHAT_PROMPT} (check {secrets.token_hex(4)})"}],
            "max_tokens": 8, "temperature": 0, "stream": False}
    try:
        status, answer = endpoint.post_json("/v1/chat/completions", body, timeout)
    except KubeError as exc:
        return ChatOutcome(None, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - reported by endpoint-chat, like _guarded does
        scrub = ev.client.scrub if ev.client is not None else (lambda text: text)
        return ChatOutcome(None, error=f"could not be sent: {shorten(scrub(f'{type(exc).__name__}: {exc}'), 200)}")
    return ChatOutcome(status, answer)


def check_endpoint_chat(outcome: ChatOutcome, endpoint: Optional[Endpoint]) -> Check:
    cid, title = "endpoint-chat", TITLES["endpoint-chat"]
    if outcome.status is None:
        if endpoint is None:
            return Check.skipped(cid, title, outcome.error)
        return Check.failed(cid, title, outcome.error, "check the Serve Service and the engines' logs")
    text = shorten(outcome.body.decode("utf-8", "replace"), 200)
    if outcome.status >= 500:
        return Check.failed(
            cid, title, f"POST /v1/chat/completions answered HTTP {outcome.status}: {text}. raypd's "
            f"engines run with kv_load_failure_policy: {KV_LOAD_FAILURE_POLICY}, so a request whose KV "
            "cache decode could not load from prefill answers 500 instead of being recomputed "
            "(kv-transfer says whether NIXL transfers failed)",
            "read the decode replica's log for 'KV load failure' and the NIXL handshake; otherwise "
            "the OpenAiIngress and engine replicas' logs in the Ray dashboard")
    if outcome.status != 200:
        return Check.failed(cid, title, f"POST /v1/chat/completions answered HTTP {outcome.status}: "
                            f"{text}", "read the OpenAiIngress and engine replicas' logs in the Ray "
                            "dashboard")
    try:
        document = json.loads(outcome.body.decode("utf-8"))
        choice = document["choices"][0]
        content = (choice.get("message") or {}).get("content")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, UnicodeDecodeError):
        return Check.failed(cid, title, "POST /v1/chat/completions answered 200 without a choice",
                            "read the OpenAiIngress replica's log")
    usage = document.get("usage") or {}
    tokens = usage.get("completion_tokens") if isinstance(usage, Mapping) else None
    where = endpoint.describe if endpoint is not None else "the endpoint"
    return Check.passed(cid, title, f"POST /v1/chat/completions on {where}: 200, "
                        f"finish_reason={choice.get('finish_reason')}, "
                        f"{tokens if tokens is not None else '?'} token(s): {shorten(str(content), 80)!r}")


# ---- KV transfer evidence: the decode's counters and log lines, before and after the chat ----

@dataclass(frozen=True)
class KvReading:
    """One reading of the decode engines: each metrics page that answered, keyed by where it was
    read (a page that did not answer is absent; one that answered without vLLM series holds none,
    i.e. zeros), and the KV lines (`KV Transfer metrics: ...`, `Failing N request(s) ...`, `NIXL
    transfer failure: ...`) of each log that could be read, keyed the same way. Only what was read
    both times is compared (KvComparison): a page or log read once is missing evidence.

    `decode_known` is False when the decode replicas could not be told apart (the Serve API did not
    answer): the pages are then every pod of the decode's worker group, which may host prefill too,
    so local_compute and generated tokens there are not decode's."""

    metrics_source: str
    pages: Mapping[str, KvSeries]
    log_source: str
    logs: Mapping[str, frozenset[str]]
    decode_known: bool = True

    @property
    def counters(self) -> Optional[KvCounters]:
        """The totals of the pages read (None: none answered), for people and tests to look at."""
        totals = [page.totals for page in self.pages.values()]
        return sum(totals[1:], totals[0]) if totals else None

    @classmethod
    def of_engine(cls, name: str, metrics_page: Optional[str], log_text: str) -> "KvReading":
        """A reading of one engine read directly (its /metrics text, None if it did not answer,
        and its log), as tests and tools read a plain vLLM engine."""
        pages = {} if metrics_page is None else {name: kv_series(parse_vllm_samples(metrics_page))}
        lines = frozenset(line for line in log_text.splitlines() if is_kv_line(line))
        return cls(f"{name} /metrics", pages, f"{name} log", {name: lines})


@dataclass(frozen=True)
class KvComparison:
    """What moved between two readings, over what was read both times."""

    change: Optional[KvChange]   # over the pages read both times; None when there is none
    new_lines: list[str]         # log lines new in the logs read both times
    once: list[str]              # pages and logs read only once: not compared, missing evidence

    @property
    def moved(self) -> bool:
        return bool(self.new_lines) or (self.change is not None and self.change.anything)


def compare_readings(before: KvReading, after: KvReading) -> KvComparison:
    shared = sorted(set(before.pages) & set(after.pages))
    change = None
    if shared:
        parts = [KvChange.between(before.pages[key], after.pages[key]) for key in shared]
        change = KvChange(*(sum(getattr(part, f.name) for part in parts) for f in fields(KvChange)))
    logs = sorted(set(before.logs) & set(after.logs))
    new_lines = sorted({line for key in logs for line in after.logs[key] - before.logs[key]})
    once = sorted((set(before.pages) ^ set(after.pages)) | (set(before.logs) ^ set(after.logs)))
    return KvComparison(change, new_lines, once)


def _decode_targets(ev: Evidence) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """(decode replicas, the worker pods that host them, their replica ids); without the Serve API,
    every pod of the decode phase's worker group (and no replica ids)."""
    phase = "decode" if "decode" in ev.plan.phases else next(iter(ev.plan.phases))
    pods = ev.worker_pods()
    try:
        replicas = [r for r in ev.engine_replicas().get(phase, []) if r.get("state") == "RUNNING"]
    except KubeError:
        replicas = []
    ips = {str(r.get("node_ip")) for r in replicas}
    hosting = [p for p in pods if str((p.get("status") or {}).get("podIP")) in ips]
    if not hosting:
        group = ev.plan.phases[phase].group
        hosting = [p for p in pods if labels_of(p).get(RAY_GROUP_LABEL) == group]
    # One Ray node, one metrics page: pods that share an IP (host networking) are read once, or
    # every counter would count twice. Sorted, so that each reading picks the same pod.
    by_ip: dict[str, dict[str, Any]] = {}
    for pod in sorted(hosting, key=name_of):
        by_ip.setdefault(str((pod.get("status") or {}).get("podIP") or name_of(pod)), pod)
    return replicas, list(by_ip.values()), [str(r.get("replica_id") or "") for r in replicas]


def read_kv(ev: Evidence) -> KvReading:
    replicas, pods, replica_ids = _decode_targets(ev)
    keep = replica_filter(replica_ids)
    # A page that answers without vLLM series is zeros, not "unreadable": Ray exports a series only
    # once it was used, so a fresh deployment's page has none before the first request.
    pages: dict[str, KvSeries] = {}
    for pod in pods:
        try:
            pages[f"pod {name_of(pod)} metrics"] = kv_series(parse_vllm_samples(ev.metrics_page(pod)), keep)
        except KubeError:
            continue
    metrics_source = (f"decode's vLLM metrics on {name_list([name_of(p) for p in pods], 3)} port "
                      f"{defaults.RAY_METRICS_PORT} (Ray's export)")
    logs: dict[str, str] = {}
    log_source = "decode replicas' logs (Ray log API)"
    for replica in replicas:
        try:
            logs[f"replica {replica.get('replica_id', '?')} log"] = ev.replica_log(replica)
        except KubeError:
            continue
    if not logs:
        log_source = "decode worker pods' container logs"
        for pod in pods:
            try:
                logs[f"pod {name_of(pod)} log"] = ev.pod_log(pod)
            except KubeError:
                continue
    lines = {key: frozenset(line for line in text.splitlines() if is_kv_line(line))
             for key, text in logs.items()}
    return KvReading(metrics_source, pages, log_source, lines, decode_known=any(replica_ids))


def _count(value: float, what: str) -> str:
    number = int(value) if float(value).is_integer() else round(value, 1)
    return f"{number} {what}"


def _not_compared(comparison: KvComparison) -> str:
    """"; not compared: ..." for the pages and logs that answered only once, or ""."""
    if not comparison.once:
        return ""
    return (f"; read only once, so not compared (missing evidence): {name_list(comparison.once, 4)}")


def check_kv_transfer(kv_backend: Optional[str], before: Optional[KvReading],
                      after: Optional[KvReading], chat: ChatOutcome, waited: float) -> Check:
    """Did this request's KV cache come over NIXL? The decode's counters decide (transfers and
    external_kv_transfer prompt tokens up, local_compute not, no failures); the log lines are the
    fallback where no metrics are exported. Only pages and logs read both before and after the
    request are compared: one read once gives lifetime totals, never this request's. No movement at
    all is no evidence; movement without a transfer is evidence of recompute, a failure, unless the
    decode replicas could not be identified (then prefill's own work may be on the pages read)."""
    cid, title = "kv-transfer", TITLES["kv-transfer"]
    if kv_backend is None:
        return Check.skipped(cid, title, "colocated mode: no KV cache moves between engines")
    answered_ok = chat.status == 200
    if chat.status is None:
        return Check.skipped(cid, title, "the chat request got no answer (see endpoint-chat)")
    remedy_none = ("look at the decode's vLLM metrics (nixl_xfer_time_seconds_count, "
                   "prompt_tokens_by_source) on its Ray metrics port, and for 'KV Transfer metrics' "
                   "in the decode replica's log")
    if before is None or after is None:
        if not answered_ok:
            return Check.skipped(cid, title, "the chat request failed (see endpoint-chat) and the "
                                 "decode's counters could not be read")
        return Check.warned(cid, title, "no KV transfer evidence: neither the decode's metrics nor "
                            "its logs could be read; a 200 alone is not proof", remedy_none)
    comparison = compare_readings(before, after)
    unread = _not_compared(comparison)
    new_lines = comparison.new_lines
    log_ok, log_failed = kv_log_counts(new_lines)
    load_failures = kv_load_failures("\n".join(new_lines))
    log_failed = max(log_failed, nixl_failures(new_lines))  # the same failures, told twice
    change = comparison.change
    failed = (change.failed if change else 0.0) + log_failed
    source = after.metrics_source if change is not None else after.log_source
    identified = before.decode_known and after.decode_known
    unidentified = ("" if identified else
                    "; the decode replicas could not be identified (the Ray dashboard's Serve API did not "
                    "answer), so every pod of the decode's worker group was read, prefill's too: "
                    "local_compute and generated tokens there were not judged")
    remedy_failed = ("check the NIXL side channel between the pods (VLLM_HOST_IP, a security group "
                     "that allows all traffic between the GPU nodes), nixl-backend and efa-devices, "
                     "and that both phases use the same model and parallel layout")
    if failed > 0 or load_failures > 0:
        parts = []
        if failed > 0:
            parts.append(_count(failed, "NIXL transfer(s) failed (handshakes and notifications count)"))
        if load_failures > 0:
            parts.append(f"decode failed {load_failures} request(s) for a KV load failure")
        outcome = (f"the request answered HTTP {chat.status}, as kv_load_failure_policy: "
                   f"{KV_LOAD_FAILURE_POLICY} makes it" if not answered_ok else
                   "the request still answered 200, so decode recomputed the prompt (is "
                   "kv_load_failure_policy set to recompute?)")
        return Check.failed(cid, title, f"{'; '.join(parts)} during the chat request: {outcome}; "
                            f"source: {source if change is not None and change.failed else after.log_source}"
                            f"{unread}", remedy_failed)
    if not answered_ok:
        return Check.skipped(cid, title, f"the chat request answered HTTP {chat.status} (see "
                             f"endpoint-chat) and no failed transfer was recorded; source: {source}{unread}")
    if change is not None:
        moved = (f"{_count(change.transfers, 'NIXL transfer(s)')}, "
                 f"{_count(change.external_tokens, 'prompt token(s) from external_kv_transfer')}"
                 + (f", local_compute +{_count(change.local_tokens, '')}".rstrip() if identified else ""))
        if identified and change.local_tokens > 0:
            return Check.failed(cid, title, f"decode computed {_count(change.local_tokens, 'prompt token(s)')} "
                                f"itself during the chat request ({moved}): the KV cache did not (all) "
                                f"come from prefill, PD's gain is gone; source: {source}{unread}", remedy_failed)
        if change.transfers > 0 or change.external_tokens > 0:
            return Check.passed(cid, title, f"during the chat request: {moved}, none failed"
                                + (f", {_count(change.bytes_moved, 'bytes')} moved" if change.bytes_moved else "")
                                + f"; source: {source}{unidentified}{unread}")
        if identified and change.generated > 0:
            return Check.failed(cid, title, f"decode generated {_count(change.generated, 'token(s)')} "
                                "for the chat request but recorded no KV transfer and no "
                                f"external_kv_transfer prompt tokens: it did the prefill work again; "
                                f"source: {source}{unread}", remedy_failed)
        if identified and change.cached_tokens > 0:
            return Check.warned(cid, title, "decode served the prompt from its own prefix cache "
                                f"({_count(change.cached_tokens, 'token(s)')}): no transfer was needed, "
                                f"so none is proven; source: {source}{unread}", remedy_none)
        if not identified:
            return Check.warned(cid, title, f"no NIXL transfer and no external_kv_transfer prompt tokens "
                                f"within {waited:g} s of the chat request: no evidence either way; "
                                f"source: {source}{unidentified}{unread}",
                                "check that the Ray head pod's dashboard (8265) answers, then run verify again")
        return Check.warned(cid, title, f"the decode's counters did not move within {waited:g} s of "
                            "the chat request (Ray exports metrics every ~10 s, or the request went to "
                            f"an engine not read): no evidence either way; source: {source}{unread}", remedy_none)
    if log_ok > 0:
        return Check.passed(cid, title, f"{log_ok} successful NIXL transfer(s), none failed, during "
                            f"the chat request ('KV Transfer metrics' lines in the {after.log_source}){unread}")
    if before.pages or after.pages:
        return Check.warned(cid, title, "no decode metrics page answered both before and after the chat "
                            f"request, and no new 'KV Transfer metrics' line in the {after.log_source}: "
                            f"no evidence either way{unread}", remedy_none)
    return Check.warned(cid, title, f"no decode metrics to read, and no new 'KV Transfer metrics' line "
                        f"in the {after.log_source} (vLLM prints it at INFO only for busy intervals, "
                        f"and never under Ray Serve LLM); a 200 alone is not proof{unread}", remedy_none)


# ---- running it all ----

def run_verify(
    outputs: Mapping[str, Any],
    kubeconfig: Optional[str] = None,
    endpoint: Optional[str] = None,
    *,
    client: Optional[KubeClient] = None,
    timeout: float = DEFAULT_TIMEOUT,
    chat_timeout: float = CHAT_TIMEOUT,
    kv_wait_seconds: float = KV_WAIT_SECONDS,
    kv_poll_seconds: float = KV_POLL_SECONDS,
    log_lines: int = LOG_LINES,
    aws_session: Any = None,
    api_key: Optional[str] = None,
    metrics_wait_seconds: float = metrics_check.WAIT_SECONDS,
    metrics_poll_seconds: float = metrics_check.POLL_SECONDS,
) -> Report:
    """Every verify check against a deployed stack; raises VerifyInputError on unusable input.

    `kubeconfig` is kubeconfig text (default: the outputs' own); `endpoint` an OpenAI base URL to
    use instead of the Serve Service proxy. Every API call is bounded by `timeout` seconds, the
    chat by `chat_timeout`; after the chat the KV counters are re-read for up to `kv_wait_seconds`.
    `api_key` is the key endpoint-external sends to outputs endpoint.url (default: the outputs'
    apiKey, as the web app's verify job has them); it never appears in the report. After the
    chat, metrics-flowing waits up to `metrics_wait_seconds` for its series to reach Prometheus.
    """
    check_outputs(outputs, have_kubeconfig=kubeconfig is not None or client is not None)
    plan = VerifyPlan.from_outputs(outputs)
    if client is None:
        try:
            client = client_from_kubeconfig(resolve_kubeconfig(outputs, kubeconfig),
                                            region_hint=plan.region, timeout=timeout,
                                            session=aws_session)
        except KubeConfigError as exc:
            raise VerifyInputError(str(exc)) from None
    ev = Evidence(client, plan, log_lines=log_lines)
    target = direct_endpoint(endpoint) if endpoint else proxied_endpoint(ev)
    checks = [_guarded(ev, "gpu-nodes", check_gpu_nodes, ev),
              _guarded(ev, "efa-devices", check_efa_devices, ev),
              _guarded(ev, "one-zone", check_one_zone, ev),
              _guarded(ev, "rayservice-ready", check_rayservice_ready, ev),
              _guarded(ev, "serve-app-running", check_serve_app, ev),
              _guarded(ev, "replica-placement", check_replica_placement, ev),
              _guarded(ev, "nixl-backend", check_nixl_backend, ev),
              _guarded(ev, "endpoint-models", check_endpoint_models, target, ev, timeout)]
    disaggregated = plan.kv_backend is not None
    before = _guarded_reading(ev) if disaggregated else None
    started = time.monotonic()
    chat = send_chat(target, ev, chat_timeout)
    after = None
    if disaggregated and chat.status is not None and before is not None:
        deadline = started + max(0.0, kv_wait_seconds)
        while True:  # bounded: ends at the deadline, and at once when there is news
            after = _guarded_reading(ev)
            if (after is not None and compare_readings(before, after).moved) \
                    or time.monotonic() + kv_poll_seconds > deadline:
                break
            time.sleep(kv_poll_seconds)
    waited = time.monotonic() - started
    checks += [_guarded(ev, "endpoint-chat", check_endpoint_chat, chat, target),
               _guarded(ev, "kv-transfer", check_kv_transfer, plan.kv_backend, before, after, chat,
                        waited)]
    checks += endpoint_checks(outputs, api_key, timeout)
    checks.append(_guarded(ev, exposure_check.CHECK_ID, exposure_check.check_exposure, ev))
    checks.append(_guarded(ev, metrics_check.CHECK_ID, functools.partial(
        metrics_check.check_metrics_flowing, wait_seconds=metrics_wait_seconds,
        poll_seconds=metrics_poll_seconds, timeout=timeout), ev, outputs))
    return Report.of("verify", _nothing_checked_fails(ev, checks))


def _nothing_checked_fails(ev: Evidence, checks: list[Check]) -> list[Check]:
    """When the cluster answered nothing verify could use, the report must not read "ok" (nor
    hide why under warnings): the first check (gpu-nodes) fails and says so."""
    if ev.answered or checks[0].status == "fail":
        return checks
    why = str(ev.down) if ev.down is not None else "no call to the Kubernetes API got a usable answer"
    first = checks[0]
    replaced = Check.failed(first.id, first.title, f"nothing was checked: {why} ({first.detail})",
                            "check the kubeconfig and that the cluster's API endpoint is reachable")
    return [replaced, *checks[1:]]


def _guarded(ev: Evidence, check_id: str, check: Callable[..., Check], *args: Any) -> Check:
    """A check that meets an object it cannot read (a malformed API answer) warns, never crashes
    the report; the exception's type and text are shown, scrubbed of the client's credentials."""
    try:
        return check(*args)
    except Exception as exc:  # noqa: BLE001 - one bad answer must not cost the other nine checks
        scrub = ev.client.scrub if ev.client is not None else (lambda text: text)
        log.debug("check %s could not be evaluated: %s", check_id, scrub(f"{type(exc).__name__}: {exc}"))
        return Check.warned(check_id, TITLES[check_id], f"could not be evaluated: "
                            f"{shorten(scrub(f'{type(exc).__name__}: {exc}'), 200)}")


def _guarded_reading(ev: Evidence) -> Optional[KvReading]:
    try:
        return read_kv(ev)
    except Exception:  # noqa: BLE001 - no counters is "no evidence", reported by kv-transfer
        log.debug("KV reading failed", exc_info=False)
        return None


# ---- the web app's live status ----


# ---- the CLI ----

def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m serve.verify",
        description="Verify a deployed raypd stack through the Kubernetes API.")
    parser.add_argument("--outputs", required=True,
                        help="stack outputs JSON file (`pulumi stack output --json --show-secrets`), "
                             "or - for stdin")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: the outputs' kubeconfig)")
    parser.add_argument("--endpoint", help="OpenAI base URL to test instead of the Serve Service "
                                           "proxy, e.g. http://localhost:8000/v1")
    parser.add_argument("--api-key-file", help="a file holding an API key for endpoint-external (default: "
                                               "$RAYPD_API_KEY, else the outputs' apiKey)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON (Contract 5)")
    return parser


def _outputs_name(source: str) -> str:
    return "the outputs on stdin" if source == "-" else f"the outputs file {shown_name(source)}"


def _read_outputs(source: str) -> str:
    try:
        if source == "-":
            return sys.stdin.read(MAX_OUTPUTS_BYTES + 1)
        with open(source, encoding="utf-8", errors="replace") as handle:
            return handle.read(MAX_OUTPUTS_BYTES + 1)
    except OSError as exc:
        raise VerifyInputError(f"cannot read the outputs file {shown_name(source)}: {exc.strerror}") from None


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        outputs = parse_outputs_text(_read_outputs(args.outputs), _outputs_name(args.outputs))
        kubeconfig = read_kubeconfig_file(args.kubeconfig) if args.kubeconfig else None
        report = run_verify(outputs, kubeconfig, args.endpoint, api_key=read_api_key(args.api_key_file))
    except (VerifyInputError, KubeConfigError) as exc:
        print(f"verify: {exc}", file=sys.stderr)
        return EXIT_INVALID
    return write_report(report, args.json, sys.stdout)

