"""Names the parts of the endpoint (issue 17) agree on: the gateway, its proxies and the API keys.

The Pulumi program creates these objects, NetworkPolicies admit the gateway's proxies by their
labels, the web app and the CLI manage keys in the Secret, and verify reads them back; one module
keeps the names from drifting apart.

The API keys live in one Kubernetes Secret in the deployment's namespace, in exactly the form
Envoy Gateway's SecurityPolicy `apiKeyAuth.credentialRefs` reads (envoyproxy/gateway
api/v1alpha1/api_key_auth_types.go): every data entry is one client, its key the key's name and
its value the API key itself. Envoy's api_key_auth filter takes the key from a header and drops a
leading "Bearer " (envoy source/extensions/filters/http/api_key_auth/api_key_auth.cc,
`KeySources::Source::getKey`), so the `Authorization: Bearer <key>` that OpenAI clients send works
as is. Each key's creation time is an annotation on the Secret (the value is never listed).
"""

from __future__ import annotations

import re
from typing import Final

# Envoy Gateway's controller namespace; in its default (non-"gateway namespace") mode the Envoy
# proxy Deployment and Service of every Gateway are created here too.
GATEWAY_NAMESPACE: Final = "envoy-gateway-system"
GATEWAY_CLASS_NAME: Final = "raypd"
# Envoy Gateway labels every proxy pod and Service with the Gateway it serves (envoyproxy/gateway's
# OwningGatewayNameLabel / OwningGatewayNamespaceLabel constants); NetworkPolicies select by them.
OWNING_GATEWAY_NAME_LABEL: Final = "gateway.envoyproxy.io/owning-gateway-name"
OWNING_GATEWAY_NAMESPACE_LABEL: Final = "gateway.envoyproxy.io/owning-gateway-namespace"
# The labels Envoy Gateway puts on every proxy pod besides the owning-gateway ones (envoyproxy/gateway
# v1.9.0 internal/infrastructure/kubernetes/proxy/resource.go `EnvoyAppLabel`).
PROXY_APP_LABELS: Final = {
    "app.kubernetes.io/name": "envoy",
    "app.kubernetes.io/component": "proxy",
    "app.kubernetes.io/managed-by": "envoy-gateway",
}

API_KEY_HEADER: Final = "Authorization"  # sent as "Bearer <key>"
FIRST_KEY_NAME: Final = "default"  # the key the Pulumi program creates (stack output apiKey)
# A key's name is a Secret data key and part of an annotation name: lower-case DNS-label style.
KEY_NAME_PATTERN: Final = re.compile(r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$")
CREATED_ANNOTATION_PREFIX: Final = "raypd.io/created-"  # + key name -> RFC 3339 UTC time


def gateway_name(service_name: str) -> str:
    """The Gateway (in the deployment's namespace) that fronts `service_name`'s Serve port."""
    return f"{service_name}-gateway"


def proxy_service_name(service_name: str) -> str:
    """The Envoy proxy Service (in GATEWAY_NAMESPACE) of `service_name`'s Gateway: raypd fixes its
    name through the EnvoyProxy's envoyService.name, instead of Envoy Gateway's generated
    envoy-<namespace>-<gateway>-<hash>. A ClusterIP Service in every scope (in-cluster clients
    use it); the NLB of scopes vpc and internet has a Service of its own, nlb_service_name."""
    return gateway_name(service_name)


def proxy_pod_labels(namespace: str, service_name: str) -> dict[str, str]:
    """The labels of the Envoy proxy pods of `service_name`'s Gateway in `namespace`: the selector
    of Envoy Gateway's own proxy Service, and of raypd's NLB Service."""
    return {**PROXY_APP_LABELS, OWNING_GATEWAY_NAME_LABEL: gateway_name(service_name),
            OWNING_GATEWAY_NAMESPACE_LABEL: namespace}


def nlb_service_name(service_name: str, scope: str) -> str:
    """The LoadBalancer Service (in GATEWAY_NAMESPACE) behind `service_name`'s NLB for scope vpc or
    internet. The scope is part of the name, so a scope change is a new Service with a new NLB
    (components.render.endpoint_lb.nlb_service). At most 47 + 13 characters: a DNS label."""
    return f"{service_name}-nlb-{scope}"


def api_keys_secret_name(service_name: str) -> str:
    """The Secret (in the deployment's namespace) holding `service_name`'s API keys."""
    return f"{service_name}-api-keys"


def created_annotation(key_name: str) -> str:
    return CREATED_ANNOTATION_PREFIX + key_name
