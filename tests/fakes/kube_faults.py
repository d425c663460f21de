"""What FakeKubeApi answers to the acts of serve.resilience's faults, shaped as the real API server answers.

- `GET /api/v1/namespaces/{ns}/pods/{name}`: the stack's pod (404 Status when absent).
- `DELETE /api/v1/namespaces/{ns}/pods/{name}` with a DeleteOptions body: 200 and the pod with
  `metadata.deletionTimestamp` set (a graceful delete: the API reference's "delete Pod" answers
  200 or 202 with the Pod); `preconditions.uid` not the pod's: 409 Conflict ("Precondition failed:
  UID in precondition: ..., UID in object meta: ...", k8s.io/apiserver registry/generic/registry/
  store.go); absent: 404.
- `POST /api/v1/namespaces/{ns}/pods/{name}/eviction` (policy/v1 Eviction): 201 and a Status
  `Success` (pkg/registry/core/pod/storage/eviction.go), the pod removed; while `eviction_blocked`
  holds the pod's name: 429 TooManyRequests, "Cannot evict pod as it would violate the pod's
  disruption budget." (the same file).
- `GET /api/v1/nodes/{name}` and `PATCH` with `application/merge-patch+json` (RFC 7386; `kubectl
  cordon` sets `spec.unschedulable`): 200 and the node.
- `?dryRun=All` on any of these writes: authorized and answered alike, nothing changes (Kubernetes
  API concepts, "Dry-run").
- RBAC: `forbidden` holds (verb, resource) pairs, e.g. ("delete", "pods"), ("create", "pods/eviction"),
  ("patch", "nodes"): such a request answers 403 Forbidden with the API server's message
  (`pods "x" is forbidden: User "..." cannot delete resource "pods" in API group "" in the namespace "..."`).
- The pod list takes `fieldSelector=spec.nodeName=<node>` (the one field selector kubectl drain uses).
Every write is kept in `fake.fault_writes` ({"verb", "path", "dryRun", "status"}).
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Optional

VERBS = {"GET": "get", "DELETE": "delete", "PATCH": "patch", "POST": "create"}


def _status(code: int, reason: str, message: str, status: str = "Failure") -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": status, "message": message,
            "reason": reason if status == "Failure" else "", "code": code}


def field_selected(pod: dict[str, Any], selector: Optional[str]) -> bool:
    if not selector:
        return True
    key, _, value = selector.partition("=")
    return key.strip() == "spec.nodeName" and (pod.get("spec") or {}).get("nodeName") == value.strip()


def answer(fake: Any, method: str, parts: list[str], query: dict[str, str], body: bytes,
           merge_patch: Callable[[Any, Any], Any]) -> Optional[tuple[int, dict[str, Any]]]:
    """(status, document) for a fault route, or None when the path is another's."""
    pod_route = len(parts) in (6, 7) and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods"
    node_route = len(parts) == 4 and parts[:3] == ["api", "v1", "nodes"]
    if pod_route and len(parts) == 7 and parts[6] != "eviction":
        return None
    if not (pod_route or node_route) or (pod_route and len(parts) == 6 and method not in ("GET", "DELETE")):
        return None
    resource = "nodes" if node_route else ("pods/eviction" if len(parts) == 7 else "pods")
    name = parts[3] if node_route else parts[5]
    namespace = None if node_route else parts[3]
    verb = VERBS.get(method, method.lower())
    dry = query.get("dryRun") == "All"
    if (verb, resource) in fake.forbidden:
        where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
        group = '"policy"' if resource == "pods/eviction" else '""'
        message = (f'{resource.split("/")[0]} "{name}" is forbidden: User "resilience" cannot {verb} resource '
                   f'"{resource}" in API group {group}{where}')
        return _written(fake, verb, parts, dry, 403, _status(403, "Forbidden", message))
    if node_route:
        return _node(fake, method, name, body, dry, parts, merge_patch)
    pod = next((p for p in fake.pods if p["metadata"]["name"] == name and p["metadata"]["namespace"] == namespace),
               None)
    if pod is None:
        if method == "GET" and fake.job_pod(namespace, name) is not None:
            return None  # a benchmark Job's pod: kube_api's own route
        return _written(fake, verb, parts, dry, 404, _status(404, "NotFound", f'pods "{name}" not found'))
    if method == "GET":
        return 200, pod
    if resource == "pods/eviction":
        if name in fake.eviction_blocked:
            return _written(fake, verb, parts, dry, 429, _status(
                429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget."))
        if not dry:
            fake.pods.remove(pod)
        return _written(fake, verb, parts, dry, 201, _status(201, "", "", status="Success"))
    options = json.loads(body or b"{}")
    wanted = ((options.get("preconditions") or {}).get("uid"))
    if wanted and wanted != pod["metadata"]["uid"]:
        return _written(fake, verb, parts, dry, 409, _status(409, "Conflict", (
            f'Operation cannot be fulfilled on Pod "{name}": Precondition failed: UID in precondition: {wanted}, '
            f'UID in object meta: {pod["metadata"]["uid"]}')))
    deleted = json.loads(json.dumps(pod))
    deleted["metadata"]["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    if not dry:
        fake.pods.remove(pod)
    return _written(fake, verb, parts, dry, 200, deleted)


def _node(fake: Any, method: str, name: str, body: bytes, dry: bool, parts: list[str],
          merge_patch: Callable[[Any, Any], Any]) -> tuple[int, dict[str, Any]]:
    node = next((n for n in fake.nodes if n["metadata"]["name"] == name), None)
    if node is None:
        return 404, _status(404, "NotFound", f'nodes "{name}" not found')
    if method == "GET":
        return 200, node
    if method != "PATCH":
        return 405, _status(405, "MethodNotAllowed", f"{method} is not supported here")
    patched = merge_patch(node, json.loads(body or b"{}"))
    if not dry:
        node.clear()
        node.update(patched)
    return _written(fake, "patch", parts, dry, 200, patched)


def _written(fake: Any, verb: str, parts: list[str], dry: bool, status: int,
             document: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    if verb != "get":
        fake.fault_writes.append({"verb": verb, "path": "/" + "/".join(parts), "dryRun": dry, "status": status})
    return status, document
