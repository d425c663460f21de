"""Verify check `dashboard-exposure`: nothing outside the Ray cluster is routed to the head's
dashboard (8265), client (10001) or GCS (6379) port.

The Ray dashboard runs submitted jobs as code with the pods' IAM role; the NetworkPolicies
(components.render.network_policy) keep other pods away, but a LoadBalancer or NodePort Service, an
Ingress or a Gateway API route pointed at the head would bring the port to whoever reaches the
load balancer or the nodes. Through the Kubernetes API (list calls, all namespaces) this reads:

- Services (core/v1) of type LoadBalancer or NodePort, or with `spec.externalIPs`: exposing when
  the Service selects a Ray head pod of the stack (its selector matches a head pod's labels, in
  the head's namespace) on a control port (a port's targetPort, or its port when targetPort is
  unset; numbers or the head container's port names);
- Ingresses (networking.k8s.io/v1): a rule's or the default backend's `service` naming a head
  Service (the stack's `dashboardService`, or any Service that selects a head pod) on a control
  port (by number or name);
- Gateway API routes (gateway.networking.k8s.io: HTTPRoute, GRPCRoute, TCPRoute, TLSRoute, at
  the versions the API serves them): a `backendRefs` entry of kind Service naming a head Service
  on a control port. A 404 for a route type means its CRD is not installed: that is evidence of
  no such route, not a failure.
Formats: the Kubernetes API reference (ServiceList, IngressList; `Status` for errors) and
kubernetes-sigs/gateway-api apis/v1 (HTTPRoute `spec.rules[].backendRefs[]`: group "" and kind
Service by default, namespace the route's own by default). A list the API refuses (403...) is
missing evidence: warn, never pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional

from components.config import defaults
from components.config.checks import Check
from serve.evidence import RAY_NODE_TYPE_LABEL, Evidence
from serve.kube import KubeClient, KubeError, KubeNotFound, KubeUnreachable

CHECK_ID = "dashboard-exposure"
TITLE = "no load balancer, Ingress or route reaches the Ray dashboard, client or GCS port"
CONTROL_PORTS = frozenset(defaults.RAY_HEAD_CONTROL_PORTS)
# The head container's names for those ports (components.render.rayservice; KubeRay adds "client").
CONTROL_PORT_NAMES = frozenset({"dashboard", "client", "gcs", "gcs-server"})
EXPOSING_TYPES = ("LoadBalancer", "NodePort")
GATEWAY_GROUP = "gateway.networking.k8s.io"
# Route kinds and the versions to ask, newest first (gateway-api v1.2-v1.4: HTTPRoute and GRPCRoute
# are v1; TCPRoute is v1alpha2; TLSRoute v1alpha2, and v1alpha3 from v1.3's experimental channel).
ROUTES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("HTTPRoute", "httproutes", ("v1", "v1beta1")),
    ("GRPCRoute", "grpcroutes", ("v1", "v1alpha2")),
    ("TCPRoute", "tcproutes", ("v1alpha2",)),
    ("TLSRoute", "tlsroutes", ("v1alpha3", "v1alpha2")),
)


def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '?')}"


def _is_control(port: Any) -> bool:
    if isinstance(port, bool):
        return False
    if isinstance(port, int):
        return port in CONTROL_PORTS
    return isinstance(port, str) and (port in CONTROL_PORT_NAMES or (port.isdigit() and int(port) in CONTROL_PORTS))


@dataclass
class Head:
    """The stack's Ray head: its namespace, its pods' labels and the Services that reach it."""
    namespace: str
    pod_labels: list[dict[str, str]]
    services: set[str] = field(default_factory=set)  # names in `namespace`

    def selected_by(self, service: Mapping[str, Any]) -> bool:
        selector = (service.get("spec") or {}).get("selector") or {}
        namespace = (service.get("metadata") or {}).get("namespace")
        return bool(selector) and namespace == self.namespace and any(
            all(labels.get(k) == v for k, v in selector.items()) for labels in self.pod_labels)


def exposing_services(services: Iterable[Mapping[str, Any]], head: Head) -> tuple[list[str], list[str]]:
    """(problems, externally reachable Services seen): a problem names the Service and the port."""
    problems, external = [], []
    for service in services:
        spec = service.get("spec") or {}
        kind = spec.get("type") or "ClusterIP"
        reachable = kind in EXPOSING_TYPES or bool(spec.get("externalIPs"))
        if not reachable:
            continue
        how = kind if kind in EXPOSING_TYPES else "externalIPs"
        external.append(f"{_name(service)} ({how})")
        if not head.selected_by(service):
            continue
        for port in spec.get("ports") or []:
            target = port.get("targetPort", port.get("port"))
            if _is_control(target) or _is_control(port.get("port")) or _is_control(port.get("name")):
                problems.append(f"Service {_name(service)} ({how}) sends port {port.get('port')} to "
                                f"the Ray head's {target}")
    return problems, external


def _ingress_backends(ingress: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    spec = ingress.get("spec") or {}
    default = (spec.get("defaultBackend") or {}).get("service")
    if default:
        yield default
    for rule in spec.get("rules") or []:
        for path in ((rule.get("http") or {}).get("paths") or []):
            service = (path.get("backend") or {}).get("service")
            if service:
                yield service


def exposing_ingresses(ingresses: Iterable[Mapping[str, Any]], head: Head) -> list[str]:
    problems = []
    for ingress in ingresses:
        if (ingress.get("metadata") or {}).get("namespace") != head.namespace:
            continue  # an Ingress backend is a Service of the Ingress's own namespace
        for backend in _ingress_backends(ingress):
            port = backend.get("port") or {}
            if backend.get("name") in head.services and (_is_control(port.get("number"))
                                                         or _is_control(port.get("name"))):
                problems.append(f"Ingress {_name(ingress)} routes to Service {backend.get('name')} "
                                f"port {port.get('number') or port.get('name')}")
    return problems


def exposing_routes(kind: str, routes: Iterable[Mapping[str, Any]], head: Head) -> list[str]:
    problems = []
    for route in routes:
        own = (route.get("metadata") or {}).get("namespace")
        for rule in ((route.get("spec") or {}).get("rules") or []):
            for ref in rule.get("backendRefs") or []:
                if (ref.get("group") or "") != "" or (ref.get("kind") or "Service") != "Service":
                    continue
                if (ref.get("namespace") or own) != head.namespace or ref.get("name") not in head.services:
                    continue
                if _is_control(ref.get("port")):
                    problems.append(f"{kind} {_name(route)} routes to Service {ref.get('name')} "
                                    f"port {ref.get('port')}")
    return problems


def _items(client: KubeClient, path: str) -> list[dict[str, Any]]:
    document = client.get_json(path)
    items = document.get("items") if isinstance(document, dict) else None
    if not isinstance(items, list):
        raise KubeError(f"GET {path} answered no list")
    return [item for item in items if isinstance(item, dict)]


def _routes(client: KubeClient, plural: str, versions: tuple[str, ...]) -> Optional[list[dict[str, Any]]]:
    """The routes of a kind at the first version the API serves; None when none is (no CRD)."""
    for version in versions:
        try:
            return _items(client, f"/apis/{GATEWAY_GROUP}/{version}/{plural}")
        except KubeNotFound:
            continue
    return None


def check_dashboard_exposure(client: Optional[KubeClient], namespace: str, dashboard_service: str,
                             head_pods: list[dict[str, Any]]) -> Check:
    """The check itself (see the module docstring); `head_pods` are the stack's Ray head pods."""
    if client is None:
        return Check.skipped(CHECK_ID, TITLE, "no evidence: no Kubernetes API client")
    head = Head(namespace, [dict((p.get("metadata") or {}).get("labels") or {}) for p in head_pods],
                {dashboard_service})
    problems: list[str] = []
    missing: list[str] = []
    seen: list[str] = []
    try:
        services = _items(client, "/api/v1/services")
    except KubeError as exc:
        return Check.warned(CHECK_ID, TITLE, f"could not list Services in all namespaces: {exc}",
                            "give verify's identity list access to services, ingresses and routes")
    head.services |= {(s.get("metadata") or {}).get("name", "") for s in services if head.selected_by(s)}
    found, external = exposing_services(services, head)
    problems += found
    seen.append(f"{len(services)} Services ({len(external)} reachable from outside: "
                f"{', '.join(external) or 'none'})")
    try:
        ingresses = _items(client, "/apis/networking.k8s.io/v1/ingresses")
        problems += exposing_ingresses(ingresses, head)
        seen.append(f"{len(ingresses)} Ingresses")
    except KubeNotFound:
        seen.append("no Ingress API")
    except KubeError as exc:
        missing.append(f"Ingresses ({exc})")
    for kind, plural, versions in ROUTES:
        try:
            routes = _routes(client, plural, versions)
        except KubeError as exc:
            missing.append(f"{kind}s ({exc})")
            continue
        if routes is None:
            seen.append(f"{kind}: not installed")
        else:
            problems += exposing_routes(kind, routes, head)
            seen.append(f"{len(routes)} {kind}s")
    heads = ", ".join(sorted(head.services))
    if problems:
        return Check.failed(CHECK_ID, TITLE, "; ".join(problems) + f" (head Services: {heads})",
                            "delete these objects or point them at the Serve port "
                            f"{defaults.SERVE_PORT} (the endpoint's gateway); the dashboard accepts "
                            "job submissions, i.e. code run with the pods' IAM role")
    evidence = f"checked {'; '.join(seen)}: none reaches the Ray head ({heads}) on " \
               f"{'/'.join(str(p) for p in defaults.RAY_HEAD_CONTROL_PORTS)}"
    if missing:
        return Check.warned(CHECK_ID, TITLE, f"{evidence}; could not list {', '.join(missing)}",
                            "give verify's identity list access to services, ingresses and routes")
    return Check.passed(CHECK_ID, TITLE, evidence)


def check_exposure(ev: Evidence) -> Check:
    """`dashboard-exposure` for verify's evidence: the head pods by KubeRay's node-type label."""
    if ev.down is not None:
        return Check.skipped(CHECK_ID, TITLE, f"no evidence: the Kubernetes API did not answer ({ev.down})")
    client = ev.client
    if client is None:
        return Check.skipped(CHECK_ID, TITLE, "no evidence: no Kubernetes API client")
    try:
        heads = client.list_pods(ev.plan.namespace, f"{RAY_NODE_TYPE_LABEL}=head")
    except KubeUnreachable as exc:
        return Check.skipped(CHECK_ID, TITLE, f"no evidence: the Kubernetes API did not answer ({exc})")
    except KubeError:
        heads = []  # the head Service by name still identifies the head
    return check_dashboard_exposure(client, ev.plan.namespace, ev.plan.dashboard_service, heads)
