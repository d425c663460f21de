"""The load balancer and the charts behind the endpoint, as pure values: raypd's NLB Service, the AWS
Load Balancer Controller and Envoy Gateway.

- The AWS Load Balancer Controller (scopes vpc and internet only) turns raypd's LoadBalancer
  Service for the Envoy proxy pods (`nlb_service`) into a Network Load Balancer. It calls the ELB
  and EC2 APIs with an IAM role of its own through IRSA (its ServiceAccount's
  `eks.amazonaws.com/role-arn` annotation, the trust policy of
  components.render.model_access.irsa_trust_policy), whose permissions are the controller's
  published policy, kept verbatim in components/data/ (source below). It is told the cluster,
  region and VPC rather than asking the instance metadata service (IMDS hop limit 1 on the nodes
  hides it from pods).
- Envoy Gateway, from its OCI chart, with its controller on the system nodes.

Both charts ship CRDs in Helm's crds/ directory, which Helm installs on first install only: raypd
applies each pinned version's CRD files itself, before the release, and the releases skip CRDs,
exactly as components.stack.addons does for KubeRay.

NLB annotations (kubernetes-sigs/aws-load-balancer-controller docs/guide/service/annotations.md,
v3.5.0): type `external` with target type `ip` (the proxy pods' IPs are the targets, no NodePort
hop); scheme `internal` or `internet-facing`; the subnets by id (private ones for internal, public
ones for internet-facing); client IP preservation on, because the controller applies the Service's
loadBalancerSourceRanges only when it is (the annotation doc's warning: "disabled by default for IP
targets"); a TLS listener on 443 with the ACM certificate when one is set, else a TCP listener on 80
with its idle timeout raised to NLB_TCP_IDLE_TIMEOUT_SECONDS (the listener-attributes annotation;
AWS allows 60-6000 s; TLS listeners keep a fixed 350 s).

Why the NLB has a Service of raypd's own rather than being Envoy Gateway's proxy Service (issue 29
§1): only the running controller deletes an NLB, its target groups and security groups, when the
Service goes (its finalizer service.k8s.aws/resources, aws-load-balancer-controller
controllers/service/service_controller.go `cleanupLoadBalancerResources`). A Service Pulumi owns
is deleted by Pulumi, which waits until it is gone (pulumi-kubernetes await.go `Deletion`), and the
Service depends on the controller's release, so the controller is removed only after that, on a
change to scope cluster and on destroy alike. Envoy Gateway's Service would go whenever its
controller got round to it, with nothing waiting. Its status is also the NLB that serves now: a
scope change is a new Service (the name holds the scope), so `pulumi up` reads a new NLB's name
instead of keeping a stored one.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Sequence

from components.config import defaults
from components.config.spec import DeploymentSpec
from components.render import endpoint_names
from components.render.endpoint import (
    TIMEOUT_ANNOTATION,
    listener_port,
    proxy_container_port,
)
from components.render.model_access import ROLE_ARN_ANNOTATION

# kubernetes-sigs/aws-load-balancer-controller docs/install/iam_policy.json at tag v3.5.0
# (the policy the controller's installation guide tells users to create), stored unchanged.
IAM_POLICY_PATH = (Path(__file__).resolve().parent / "data"
                   / f"aws-load-balancer-controller-iam-policy-v{defaults.LB_CONTROLLER_VERSION}.json")
ANNOTATION_PREFIX = "service.beta.kubernetes.io/"
# A modern TLS policy (TLS 1.3 and 1.2 only) instead of the controller's ELBSecurityPolicy-2016-08.
TLS_POLICY = "ELBSecurityPolicy-TLS13-1-2-2021-06"
# The controller's default LoadBalancerClass (docs/guide/service/nlb.md). Set by raypd rather than
# by the controller's mutating webhook, which fills it in on create only
# (webhooks/core/service_mutator.go): a field Pulumi did not send would be one it removes on the
# next update, and the field is immutable.
NLB_CLASS = "service.k8s.aws/nlb"
# How long pulumi-kubernetes waits for the NLB's name on create, and for the Service to be gone on
# delete (the controller deletes the NLB, its target groups and security groups first).
NLB_SERVICE_WAIT_SECONDS = 900


@lru_cache(maxsize=1)
def lb_controller_iam_policy() -> dict[str, Any]:
    """The controller's published IAM policy document."""
    document: dict[str, Any] = json.loads(IAM_POLICY_PATH.read_text(encoding="utf-8"))
    return document


def lb_controller_values(cluster_name: str, region: str, vpc_id: str, role_arn: str) -> dict[str, Any]:
    return {
        "clusterName": cluster_name,
        "region": region,
        "vpcId": vpc_id,
        "serviceAccount": {
            "create": True,
            "name": defaults.LB_CONTROLLER_SERVICE_ACCOUNT,
            "annotations": {ROLE_ARN_ANNOTATION: role_arn},
        },
        "nodeSelector": dict(defaults.SYSTEM_LABELS),
        # No IngressClass "alb": raypd makes no Ingress, and an unused class invites one.
        "createIngressClassResource": False,
    }


def envoy_gateway_values() -> dict[str, Any]:
    return {"deployment": {"pod": {"nodeSelector": dict(defaults.SYSTEM_LABELS)}}}


def _crd_urls(template: str, version: str, files: Sequence[str]) -> list[str]:
    return [template.format(version=version, file=name) for name in files]


def envoy_gateway_crd_urls() -> list[str]:
    """The Gateway API and Envoy Gateway CRDs the pinned gateway-helm chart carries."""
    return _crd_urls(defaults.ENVOY_GATEWAY_CRDS_URL, defaults.ENVOY_GATEWAY_VERSION,
                     defaults.ENVOY_GATEWAY_CRD_FILES)


def lb_controller_crd_urls() -> list[str]:
    return _crd_urls(defaults.LB_CONTROLLER_CRDS_URL, defaults.LB_CONTROLLER_VERSION,
                     defaults.LB_CONTROLLER_CRD_FILES)


def nlb_annotations(spec: DeploymentSpec, subnet_ids: Sequence[str]) -> dict[str, str]:
    """The NLB Service's annotations for scopes vpc and internet ({} for cluster)."""
    endpoint = spec.endpoint
    if not endpoint.load_balanced:
        return {}
    a = ANNOTATION_PREFIX
    annotations = {
        f"{a}aws-load-balancer-type": "external",
        f"{a}aws-load-balancer-nlb-target-type": "ip",
        f"{a}aws-load-balancer-scheme": "internet-facing" if endpoint.scope == "internet" else "internal",
        f"{a}aws-load-balancer-subnets": ",".join(subnet_ids),
        f"{a}aws-load-balancer-target-group-attributes": "preserve_client_ip.enabled=true",
    }
    if endpoint.tls:
        assert endpoint.certificate_arn is not None
        annotations.update({
            f"{a}aws-load-balancer-ssl-cert": endpoint.certificate_arn,
            f"{a}aws-load-balancer-ssl-ports": "443",
            f"{a}aws-load-balancer-ssl-negotiation-policy": TLS_POLICY,
        })
    else:
        annotations[f"{a}aws-load-balancer-listener-attributes.TCP-80"] = (
            f"tcp.idle_timeout.seconds={defaults.NLB_TCP_IDLE_TIMEOUT_SECONDS}")
    return annotations


def nlb_service(spec: DeploymentSpec, subnet_ids: Sequence[str]) -> Optional[dict[str, Any]]:
    """The LoadBalancer Service of scopes vpc and internet (None for cluster): the proxy pods of
    the deployment's Gateway behind an NLB, the listener's port on the NLB to the port Envoy listens
    on (components.render.endpoint.proxy_container_port).

    Its labels must not be the proxy pods' labels: Envoy Gateway deletes every Service in its
    namespace that carries the labels of a Gateway's proxy infrastructure except its own
    (envoyproxy/gateway v1.9.0 internal/infrastructure/kubernetes/infra_resource.go
    `createOrUpdateService`, `DeleteAllExcept` by `LabelSelector`)."""
    endpoint = spec.endpoint
    if not endpoint.load_balanced:
        return None
    port = listener_port(spec)
    annotations = {**nlb_annotations(spec, subnet_ids), TIMEOUT_ANNOTATION: str(NLB_SERVICE_WAIT_SECONDS)}
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {
            "name": endpoint_names.nlb_service_name(spec.service_name, endpoint.scope),
            "namespace": endpoint_names.GATEWAY_NAMESPACE,
            "labels": {"app.kubernetes.io/part-of": "raypd"},
            "annotations": annotations,
        },
        "spec": {
            "type": "LoadBalancer",
            "loadBalancerClass": NLB_CLASS,
            "selector": endpoint_names.proxy_pod_labels(spec.namespace, spec.service_name),
            "ports": [{"name": "https" if endpoint.tls else "http", "protocol": "TCP", "port": port,
                       "targetPort": proxy_container_port(spec)}],
            "loadBalancerSourceRanges": list(endpoint.effective_allowed_cidrs),
        },
    }
