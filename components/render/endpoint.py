"""What the OpenAI endpoint's gateway objects look like: pure functions, spec in, manifests out.

Envoy Gateway (the Gateway API implementation, components.render.endpoint_lb installs it) runs one Envoy
proxy fleet per Gateway; raypd renders:

- a GatewayClass `raypd` whose parametersRef is an EnvoyProxy: the proxy Service (a ClusterIP in
  every scope) and the proxy pods on the system nodes;
- a Gateway with one HTTP listener (port 80, or 443 when the NLB terminates TLS);
- an HTTPRoute that sends ONLY PathPrefix /v1 to the Serve Service's port 8000: the Ray
  dashboard (8265), client (10001) and GCS (6379) ports are never a backend;
- a SecurityPolicy (auth apiKey) checking `Authorization: Bearer <key>` against the keys in the
  Secret endpoint_names.api_keys_secret_name (the header is removed before Serve sees it);
- a ClientTrafficPolicy and a BackendTrafficPolicy with the stream timeouts below.

For scopes vpc and internet, the NLB is NOT Envoy Gateway's proxy Service: raypd makes a LoadBalancer
Service of its own for the proxy pods (components.render.endpoint_lb.nlb_service), so that Pulumi
owns the object the NLB lives and dies with. Its status names the NLB that serves (the `endpoint.url`
output reads it), and deleting it waits for the AWS Load Balancer Controller to delete the NLB
(its finalizer), which the stack orders before the controller's own removal (issue 29 §1).

Timeouts on the path of one streamed completion (every one that can end a silent stream is at
least 600 s; `path_timeouts` reads them back from the rendered objects for the tests):

- NLB TCP listener idle (plain HTTP, port 80): 900 s; AWS default 350 s, 60-6000 allowed (AWS ELB
  guide, "Update the TCP idle timeout"; the controller's listener-attributes.TCP-80 annotation).
- NLB TLS listener idle (port 443): fixed at 350 s, it cannot be changed (same page); the proxy's
  TCP keepalive probes (every 60 s, ClientTrafficPolicy tcpKeepalive) keep the flow from going idle.
- Envoy client stream idle: 900 s; default 5 min (Envoy Gateway api/v1alpha1/timeout_types.go,
  HTTPClientTimeout.StreamIdleTimeout).
- Envoy client connection idle: 3600 s; default 1 h (same file, HTTPClientTimeout.IdleTimeout).
- Envoy client request received: left unset; default disabled (RequestReceivedTimeout).
- Envoy route, the whole response: 3600 s; default 15 s (HTTPRoute timeouts.request; Envoy
  Gateway internal/gatewayapi/route.go HTTPRequestTimeout).
- Envoy upstream stream idle: 900 s; default the listener's (HTTPTimeout.StreamIdleTimeout).
- Envoy max stream duration: left unset; default unlimited (HTTPTimeout.MaxStreamDuration).
- Ray Serve request timeout: unset; default none (raypd's serve config sets http_options host and
  port only, components.render.serve_config).

Safe retries (issue 31; `retry_policy`): the BackendTrafficPolicy retries a request ONCE, on another
Serve proxy pod (Envoy Gateway adds the previous_hosts predicate: internal/xds/translator/route.go
`buildRetryPolicy`), when the connection failed, the upstream reset before any response, or it
answered 503 (Serve's "no replica available" / back-pressure, a proxy going away). Envoy never
retries once it has started the response to the client (source/common/router/router.cc
`Filter::maybeRetryReset`: "We don't retry if we already started the response"; a retriable status
is judged on the upstream's headers before they are forwarded), so a stream that has sent a byte is
never repeated. No per-try timeout: Envoy ignores one after the response started, but before that
it would cut a healthy completion that is slow to its first byte (a non-streamed answer sends its
headers only when it is complete) and send it again. docs/resilience.md says what a retry may cost
(the engine may have started the first attempt's work) and what it cannot cover (request bodies
over Envoy's 32 KiB buffer are sent once).

One timeout is short on purpose: Envoy closes an upstream connection idle BETWEEN requests after
60 s (BackendTrafficPolicy connectionIdleTimeout, default 1 h), below Ray Serve's 90 s keep-alive,
so Envoy never reuses a connection Serve is closing (a 503 race). It cannot end a stream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from components.config import defaults
from components.config.spec import DeploymentSpec
from components.render import endpoint_names
from components.render.outputs import serve_service_name

GATEWAY_API = "gateway.networking.k8s.io/v1"
ENVOY_API = "gateway.envoyproxy.io/v1alpha1"
ENVOY_CONTROLLER_NAME = "gateway.envoyproxy.io/gatewayclass-controller"
ENVOY_PROXY_NAME = "raypd"
LISTENER_NAME = "http"
API_PREFIX = "/v1"
# Ports that must never be reachable through the endpoint: Ray dashboard (job submission), Ray
# client, GCS.
FORBIDDEN_PORTS = (defaults.DASHBOARD_PORT, 10001, defaults.GCS_PORT)
# pulumi-kubernetes awaits a custom resource only when told to: the Gateway is Programmed once its
# proxies run and their Service has an address, so the NLB Service made after it finds them ready.
WAIT_FOR_ANNOTATION = "pulumi.com/waitFor"
TIMEOUT_ANNOTATION = "pulumi.com/timeoutSeconds"
GATEWAY_WAIT_SECONDS = 600  # the proxy pods start on the system nodes (image pull included)
# Envoy Gateway shifts a privileged listener port (below 1024) by this much for the proxy container,
# which then needs no CAP_NET_BIND_SERVICE (envoyproxy/gateway v1.9.0 internal/gatewayapi/listener.go
# `servicePortToContainerPort`, translator.go `wellKnownPortShift`; raypd leaves the EnvoyProxy's
# useListenerPortAsContainerPort unset, so the shift applies).
WELL_KNOWN_PORT_SHIFT = 10000
MIN_EPHEMERAL_PORT = 1024


def _seconds(value: int) -> str:
    return f"{value}s"


def listener_port(spec: DeploymentSpec) -> int:
    """443 when the NLB terminates TLS (it forwards plain HTTP to Envoy), else 80."""
    return 443 if spec.endpoint.tls else 80


def proxy_container_port(spec: DeploymentSpec) -> int:
    """The port the Envoy proxy container listens on for the listener (the NLB's target port)."""
    port = listener_port(spec)
    return port + WELL_KNOWN_PORT_SHIFT if port < MIN_EPHEMERAL_PORT else port


def proxy_service_name(spec: DeploymentSpec) -> str:
    """The Envoy proxy Service's fixed name (EnvoyProxy envoyService.name) in GATEWAY_NAMESPACE."""
    return endpoint_names.proxy_service_name(spec.service_name)


def route_name(spec: DeploymentSpec) -> str:
    return f"{spec.service_name}-openai"


def _meta(name: str, namespace: Optional[str] = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/part-of": "raypd"}}
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update(extra)
    return meta


def gateway_class() -> dict[str, Any]:
    return {
        "apiVersion": GATEWAY_API, "kind": "GatewayClass",
        "metadata": _meta(endpoint_names.GATEWAY_CLASS_NAME),
        "spec": {
            "controllerName": ENVOY_CONTROLLER_NAME,
            "parametersRef": {"group": "gateway.envoyproxy.io", "kind": "EnvoyProxy",
                              "name": ENVOY_PROXY_NAME, "namespace": endpoint_names.GATEWAY_NAMESPACE},
        },
    }


def envoy_proxy(spec: DeploymentSpec) -> dict[str, Any]:
    """The proxy fleet: its Service, a ClusterIP in every scope (the NLB's Service is raypd's own,
    see the module docstring), and its pods on the system nodes."""
    service: dict[str, Any] = {"name": proxy_service_name(spec), "type": "ClusterIP"}
    return {
        "apiVersion": ENVOY_API, "kind": "EnvoyProxy",
        "metadata": _meta(ENVOY_PROXY_NAME, endpoint_names.GATEWAY_NAMESPACE),
        "spec": {"provider": {"type": "Kubernetes", "kubernetes": {
            "envoyService": service,
            "envoyDeployment": {"pod": {"nodeSelector": dict(defaults.SYSTEM_LABELS)}},
        }}},
    }


def gateway(spec: DeploymentSpec) -> dict[str, Any]:
    return {
        "apiVersion": GATEWAY_API, "kind": "Gateway",
        "metadata": _meta(endpoint_names.gateway_name(spec.service_name), spec.namespace, annotations={
            WAIT_FOR_ANNOTATION: "condition=Programmed",
            TIMEOUT_ANNOTATION: str(GATEWAY_WAIT_SECONDS),
        }),
        "spec": {
            "gatewayClassName": endpoint_names.GATEWAY_CLASS_NAME,
            "listeners": [{
                "name": LISTENER_NAME, "protocol": "HTTP", "port": listener_port(spec),
                "allowedRoutes": {"namespaces": {"from": "Same"}},
            }],
        },
    }


def http_route(spec: DeploymentSpec) -> dict[str, Any]:
    """Only /v1 (and below) reaches Serve; every other path gets Envoy's 404."""
    return {
        "apiVersion": GATEWAY_API, "kind": "HTTPRoute",
        "metadata": _meta(route_name(spec), spec.namespace),
        "spec": {
            "parentRefs": [{"name": endpoint_names.gateway_name(spec.service_name),
                            "sectionName": LISTENER_NAME}],
            "rules": [{
                "matches": [{"path": {"type": "PathPrefix", "value": API_PREFIX}}],
                "backendRefs": [{"name": serve_service_name(spec), "port": defaults.SERVE_PORT}],
                "timeouts": {"request": _seconds(defaults.ENDPOINT_REQUEST_TIMEOUT_SECONDS)},
            }],
        },
    }


def _route_target(spec: DeploymentSpec) -> list[dict[str, str]]:
    return [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": route_name(spec)}]


def security_policy(spec: DeploymentSpec) -> Optional[dict[str, Any]]:
    """API-key authentication on the route (None with auth none: nothing checks callers)."""
    if spec.endpoint.auth != "apiKey":
        return None
    return {
        "apiVersion": ENVOY_API, "kind": "SecurityPolicy",
        "metadata": _meta(f"{spec.service_name}-api-keys", spec.namespace),
        "spec": {
            "targetRefs": _route_target(spec),
            "apiKeyAuth": {
                "credentialRefs": [{"group": "", "kind": "Secret",
                                    "name": endpoint_names.api_keys_secret_name(spec.service_name)}],
                "extractFrom": [{"headers": [endpoint_names.API_KEY_HEADER]}],
                # Serve and its logs never see the key.
                "sanitize": True,
            },
        },
    }


def client_traffic_policy(spec: DeploymentSpec) -> dict[str, Any]:
    return {
        "apiVersion": ENVOY_API, "kind": "ClientTrafficPolicy",
        "metadata": _meta(f"{spec.service_name}-clients", spec.namespace),
        "spec": {
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway",
                            "name": endpoint_names.gateway_name(spec.service_name)}],
            "timeout": {"http": {
                "idleTimeout": _seconds(defaults.ENDPOINT_REQUEST_TIMEOUT_SECONDS),
                "streamIdleTimeout": _seconds(defaults.ENDPOINT_STREAM_IDLE_TIMEOUT_SECONDS),
            }},
            "tcpKeepalive": {
                "idleTime": _seconds(defaults.ENVOY_TCP_KEEPALIVE_IDLE_SECONDS),
                "interval": _seconds(defaults.ENVOY_TCP_KEEPALIVE_INTERVAL_SECONDS),
                "probes": defaults.ENVOY_TCP_KEEPALIVE_PROBES,
            },
        },
    }


# Envoy Gateway v1.9.0 api/v1alpha1/retry_types.go TriggerEnum values (Envoy's x-envoy-retry-on):
# the connection could not be made; the upstream reset or disconnected without a response; the
# response's status is one of RETRY_STATUS_CODES. Not "5xx"/"gateway-error": a 500 is an engine's
# own error (a failed KV load with loadFailurePolicy fail among them), which a second try would
# repeat or hide; a 502/504 comes from Envoy's own timeouts, after the request ran long.
RETRY_TRIGGERS = ("connect-failure", "reset", "retriable-status-codes")
RETRY_STATUS_CODES = (503,)
RETRIES = 1
# Envoy's default base is 25 ms; a replica that just died needs Serve's router a moment to drop it.
RETRY_BACKOFF = {"baseInterval": "250ms", "maxInterval": "1s"}


def retry_policy() -> dict[str, Any]:
    """The BackendTrafficPolicy's `retry` (see the module docstring: once, before any byte)."""
    return {
        "numRetries": RETRIES,
        "retryOn": {"triggers": list(RETRY_TRIGGERS), "httpStatusCodes": list(RETRY_STATUS_CODES)},
        "perRetry": {"backOff": dict(RETRY_BACKOFF)},
    }


def backend_traffic_policy(spec: DeploymentSpec) -> dict[str, Any]:
    return {
        "apiVersion": ENVOY_API, "kind": "BackendTrafficPolicy",
        "metadata": _meta(f"{spec.service_name}-serve", spec.namespace),
        "spec": {
            "targetRefs": _route_target(spec),
            "timeout": {"http": {
                "streamIdleTimeout": _seconds(defaults.ENDPOINT_STREAM_IDLE_TIMEOUT_SECONDS),
                "connectionIdleTimeout": _seconds(defaults.ENVOY_UPSTREAM_IDLE_TIMEOUT_SECONDS),
            }},
            "retry": retry_policy(),
        },
    }


def gateway_objects(spec: DeploymentSpec) -> dict[str, dict[str, Any]]:
    """Every gateway object by a short role name (no SecurityPolicy with auth none)."""
    objects = {
        "gateway-class": gateway_class(),
        "envoy-proxy": envoy_proxy(spec),
        "gateway": gateway(spec),
        "route": http_route(spec),
        "client-policy": client_traffic_policy(spec),
        "backend-policy": backend_traffic_policy(spec),
    }
    policy = security_policy(spec)
    if policy is not None:
        objects["security-policy"] = policy
    return objects


# ---- the endpoint as users see it (Contract 3 `endpoint`) ----

def endpoint_url(spec: DeploymentSpec, lb_hostname: Optional[str]) -> str:
    """The OpenAI base URL: the configured host or the NLB's name, or the in-cluster Service."""
    if not spec.endpoint.load_balanced:
        return (f"http://{proxy_service_name(spec)}.{endpoint_names.GATEWAY_NAMESPACE}"
                f".svc.cluster.local{API_PREFIX}")
    host = spec.endpoint.host or lb_hostname or "unknown-load-balancer"
    return f"{'https' if spec.endpoint.tls else 'http'}://{host}{API_PREFIX}"


def endpoint_output(spec: DeploymentSpec, lb_hostname: Optional[str]) -> dict[str, str]:
    return {"url": endpoint_url(spec, lb_hostname), "scope": spec.endpoint.scope,
            "auth": spec.endpoint.auth}


# ---- the timeouts on the path, read back from what was rendered (docstring table) ----

@dataclass(frozen=True)
class PathTimeout:
    where: str
    seconds: Optional[int]  # None: no limit


def _parse(text: str) -> int:
    assert text.endswith("s"), text
    return int(text[:-1])


def path_timeouts(objects: dict[str, dict[str, Any]],
                  nlb_service: Optional[dict[str, Any]] = None) -> list[PathTimeout]:
    """Every Envoy and NLB timeout that can end a silent stream, as rendered (`nlb_service`:
    components.render.endpoint_lb.nlb_service, None without a load balancer)."""
    found: list[PathTimeout] = []
    client = objects["client-policy"]["spec"]["timeout"]["http"]
    found += [PathTimeout(f"client {k}", _parse(v)) for k, v in client.items()]
    backend = objects["backend-policy"]["spec"]["timeout"]["http"]
    found += [PathTimeout(f"backend {k}", _parse(v)) for k, v in backend.items()
              if k != "connectionIdleTimeout"]  # idle between requests only (module docstring)
    for rule in objects["route"]["spec"]["rules"]:
        found += [PathTimeout(f"route {k}", _parse(v)) for k, v in rule.get("timeouts", {}).items()]
    annotations = (nlb_service or {}).get("metadata", {}).get("annotations") or {}
    for key, value in annotations.items():
        if "listener-attributes" in key:
            for pair in value.split(","):
                name, _, number = pair.partition("=")
                if name.strip() == "tcp.idle_timeout.seconds":
                    found.append(PathTimeout(f"nlb {key.rsplit('.', 1)[-1]}", int(number)))
    return found
