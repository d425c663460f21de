"""The endpoint's Pulumi components: thin wiring of components.render.endpoint and components.render.endpoint_lb.

- `LoadBalancerController` (scopes vpc and internet): the controller's IAM role (IRSA, the
  published policy inline: it is longer than a managed policy may be), its CRDs, its Helm release.
- `Endpoint`: Envoy Gateway (CRDs, release), the gateway objects, the API-key Secret, and for
  scopes vpc and internet the NLB's Service (components.render.endpoint_lb.nlb_service).

The NLB's Service depends on the controller's release, so Pulumi deletes it first, and
pulumi-kubernetes waits until it is gone, i.e. until the controller has deleted the NLB and
removed its finalizer; only then is the controller's release removed, on `destroy` and when the
scope changes to cluster alike (pulumi's step_generator.go `ScheduleDeletes`: a resource is deleted
after everything that depends on it). Its resource name holds the scope: vpc <-> internet creates
the new Service (Pulumi waits for its NLB's name, the `endpoint.url` output) and then deletes the
old one, waiting for its NLB to be deleted.

The API-key Secret: Pulumi creates it once, holding the first key (endpoint_names.FIRST_KEY_NAME,
a pulumi_random RandomString with a secret result, so the value lives encrypted in the Pulumi state and as the secret
stack output `apiKey`) and that key's creation-time annotation. From then on its data and
annotations belong to the web app and `python -m serve.api_keys` (keys added and revoked through
the Kubernetes API): `ignore_changes` keeps `pulumi up` from ever putting a revoked key back or
removing an added one. If the first key is revoked, the `apiKey` output still shows its old value
(Pulumi's state does not follow the Secret), which the gateway then refuses with 401: programs
should take a key from whoever manages keys, and treat `apiKey` as the key the stack started with.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s
import pulumi_random as random

from components.config import defaults
from components.config.spec import DeploymentSpec
from components.render import endpoint_names
from components.render.endpoint import gateway_objects
from components.render.endpoint_lb import (
    envoy_gateway_crd_urls,
    envoy_gateway_values,
    lb_controller_crd_urls,
    lb_controller_iam_policy,
    lb_controller_values,
    nlb_service,
)
from components.render.network_policy import kubernetes_policy_version
from components.stack.addons import RELEASE_TIMEOUT_SECONDS, force_crd_ownership
from components.stack.irsa import irsa_role
from components.stack.network_policies import label_addon_namespace

GATEWAY_POD_SECURITY = "baseline"

# The first key's creation time in offline plans (mock runs must give identical documents).
OFFLINE_CREATED_AT = "1970-01-01T00:00:00Z"


def creation_time(now: Optional[datetime.datetime] = None) -> str:
    """RFC 3339 UTC, to the second: the form of the key annotations (endpoint_names)."""
    moment = now or datetime.datetime.now(datetime.timezone.utc)
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _crds(name: str, urls: list[str], child: pulumi.ResourceOptions) -> k8s.yaml.v2.ConfigGroup:
    return k8s.yaml.v2.ConfigGroup(name, files=urls, opts=pulumi.ResourceOptions.merge(
        child, pulumi.ResourceOptions(transforms=[force_crd_ownership])))


@dataclass(frozen=True)
class LoadBalancerControllerArgs:
    cluster_name: str
    region: str
    vpc_id: pulumi.Input[str]
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    tags: dict[str, str]
    wait_for: tuple[pulumi.Resource, ...] = ()


class LoadBalancerController(pulumi.ComponentResource):
    """The AWS Load Balancer Controller; Kubernetes children take the provider of `opts`."""

    release: k8s.helm.v3.Release

    def __init__(self, name: str, args: LoadBalancerControllerArgs,
                 opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("raypd:endpoint:LoadBalancerController", name, None, opts)
        child = pulumi.ResourceOptions(parent=self, depends_on=list(args.wait_for))
        namespace, account = defaults.LB_CONTROLLER_NAMESPACE, defaults.LB_CONTROLLER_SERVICE_ACCOUNT
        crds = _crds(f"{name}-crds", lb_controller_crd_urls(), child)
        role_arn = irsa_role(
            f"{name}-role", f"{name}-policy", oidc_provider_arn=args.oidc_provider_arn,
            oidc_issuer=args.oidc_issuer, namespace=namespace, service_account=account,
            policy=lb_controller_iam_policy(), tags=args.tags, opts=pulumi.ResourceOptions(parent=self))
        values = pulumi.Output.all(args.vpc_id, role_arn).apply(lambda v: lb_controller_values(
            args.cluster_name, args.region, v[0], v[1]))
        self.release = k8s.helm.v3.Release(
            f"{name}-release",
            name=defaults.LB_CONTROLLER_CHART,
            chart=defaults.LB_CONTROLLER_CHART,
            version=defaults.LB_CONTROLLER_VERSION,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=defaults.LB_CONTROLLER_CHART_REPO),
            namespace=namespace,
            values=values,
            skip_crds=True,
            atomic=True,
            timeout=RELEASE_TIMEOUT_SECONDS,
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[crds])),
        )
        self.register_outputs({"roleArn": role_arn})


def _hostname(status: Optional[k8s.core.v1.outputs.ServiceStatus]) -> Optional[str]:
    """The NLB's DNS name from a Service's status.loadBalancer.ingress (the controller writes
    exactly one entry, controllers/service/service_controller.go `updateServiceStatus`)."""
    ingress = (status.load_balancer.ingress if status and status.load_balancer else None) or []
    return next((entry.hostname for entry in ingress if entry.hostname), None)


@dataclass(frozen=True)
class EndpointArgs:
    spec: DeploymentSpec
    # The subnets of the NLB: private ones for scope vpc, public ones for internet.
    subnet_ids: pulumi.Input[Sequence[str]]
    namespace: pulumi.Resource  # the serving namespace, where the Gateway and the keys live
    created_at: str
    # What the Envoy Gateway chart needs first (a node to run on).
    install_after: tuple[pulumi.Resource, ...] = ()
    # The AWS Load Balancer Controller's release (scopes vpc and internet): the NLB's Service needs
    # it running to get its NLB, and to lose it (see the module docstring).
    lb_controller: Optional[pulumi.Resource] = None


class Endpoint(pulumi.ComponentResource):
    """Envoy Gateway and the gateway objects in front of Serve (see the module docstring)."""

    lb_hostname: pulumi.Output[Optional[str]]
    api_key: Optional[pulumi.Output[str]]

    def __init__(self, name: str, args: EndpointArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("raypd:endpoint:Endpoint", name, None, opts)
        spec = args.spec
        child = pulumi.ResourceOptions(parent=self, depends_on=list(args.install_after))
        crds = _crds(f"{name}-envoy-gateway-crds", envoy_gateway_crd_urls(), child)
        release = k8s.helm.v3.Release(
            f"{name}-envoy-gateway",
            name=defaults.ENVOY_GATEWAY_RELEASE,
            chart=defaults.ENVOY_GATEWAY_CHART,
            version=defaults.ENVOY_GATEWAY_VERSION,
            namespace=endpoint_names.GATEWAY_NAMESPACE,
            create_namespace=True,
            values=envoy_gateway_values(),
            skip_crds=True,
            atomic=True,
            timeout=RELEASE_TIMEOUT_SECONDS,
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[crds])),
        )
        # Envoy Gateway's controller and proxies run unprivileged: the namespace Helm created
        # admits nothing more than Pod Security's baseline (see components.render.network_policy).
        label_addon_namespace(
            f"{name}-gateway-pod-security", endpoint_names.GATEWAY_NAMESPACE, GATEWAY_POD_SECURITY,
            kubernetes_policy_version(spec.kubernetes_version),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[release]))
        after = pulumi.ResourceOptions(parent=self, depends_on=[crds, release, args.namespace])
        static = gateway_objects(spec)

        def custom(role: str, options: pulumi.ResourceOptions = after) -> k8s.apiextensions.CustomResource:
            return k8s.apiextensions.CustomResource(
                f"{name}-{role}", api_version=static[role]["apiVersion"], kind=static[role]["kind"],
                metadata=static[role]["metadata"], spec=static[role]["spec"], opts=options)

        proxy = custom("envoy-proxy")
        gateway_class = custom("gateway-class")
        # The API keys exist before anything routes to Serve.
        secured: list[pulumi.Resource] = []
        self.api_key = None
        if spec.endpoint.auth == "apiKey":
            secured = self._api_keys(name, spec, args.created_at, after)
        gateway = custom("gateway", pulumi.ResourceOptions.merge(
            after, pulumi.ResourceOptions(depends_on=[proxy, gateway_class])))
        policies = [custom(role) for role in
                    ("client-policy", "backend-policy", "security-policy") if role in static]
        # The route last: it is what makes Serve reachable, once every policy is in place.
        custom_route = k8s.apiextensions.CustomResource(
            f"{name}-route", api_version=static["route"]["apiVersion"], kind=static["route"]["kind"],
            metadata=static["route"]["metadata"], spec=static["route"]["spec"],
            opts=pulumi.ResourceOptions.merge(after, pulumi.ResourceOptions(
                depends_on=[gateway, *policies, *secured])))
        self.lb_hostname = self._nlb(name, args, gateway)
        self.register_outputs({"route": custom_route.id})

    def _nlb(self, name: str, args: EndpointArgs, gateway: pulumi.Resource) -> pulumi.Output[Optional[str]]:
        """The NLB's Service (scopes vpc and internet) after the Gateway's proxies and the
        controller; its NLB's DNS name (None, and no Service, for scope cluster)."""
        spec = args.spec
        if not spec.endpoint.load_balanced:
            return pulumi.Output.from_input(None)
        assert args.lb_controller is not None, "scopes vpc and internet need the LB controller"
        static = nlb_service(spec, [])
        assert static is not None
        # Only the subnet annotation waits for the subnets' ids; the name is known at preview.
        annotations = pulumi.Output.from_input(args.subnet_ids).apply(
            lambda ids: (nlb_service(spec, list(ids)) or {})["metadata"]["annotations"])
        service = k8s.core.v1.Service(
            f"{name}-nlb-{spec.endpoint.scope}",
            metadata={**static["metadata"], "annotations": annotations},
            spec=static["spec"],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[gateway, args.lb_controller]))
        return service.status.apply(_hostname)

    def _api_keys(self, name: str, spec: DeploymentSpec, created_at: str,
                  after: pulumi.ResourceOptions) -> list[pulumi.Resource]:
        # RandomString with a secret result is what RandomPassword is (pulumi-random: "identical
        # to random_string with the exception that the result is treated as sensitive"); its type
        # token is taken because RandomPassword's, random:index/randomPassword:RandomPassword,
        # reads as "password: <value>" to the web app's credential redaction (webui.redact), which
        # masks it in the stored plan, so every change preview would show the key as new.
        key = random.RandomString(f"{name}-first-api-key", length=defaults.API_KEY_LENGTH,
                                  special=False, opts=pulumi.ResourceOptions(
                                      parent=self, additional_secret_outputs=["result"]))
        first = endpoint_names.FIRST_KEY_NAME
        secret = k8s.core.v1.Secret(
            f"{name}-api-keys",
            metadata=k8s.meta.v1.ObjectMetaArgs(
                name=endpoint_names.api_keys_secret_name(spec.service_name),
                namespace=spec.namespace,
                labels={"app.kubernetes.io/part-of": "raypd"},
                annotations={endpoint_names.created_annotation(first): created_at},
            ),
            type="Opaque",
            string_data={first: key.result},
            # Keys added or revoked later (web app, serve.api_keys) are theirs: never reverted.
            opts=pulumi.ResourceOptions.merge(after, pulumi.ResourceOptions(
                ignore_changes=["data", "stringData", "metadata.annotations"])),
        )
        self.api_key = pulumi.Output.secret(key.result)
        return [secret]
