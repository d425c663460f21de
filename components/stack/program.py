"""The raypd Pulumi program: a validated spec in, components wired, stack outputs out.

`build(spec)` is the whole program after configuration; `__main__.py` calls it for `pulumi up`,
and the offline plan calls the very same function under Pulumi's mock runtime. `main()` is what
`__main__.py` runs: Pulumi config -> DeploymentSpec -> build -> exports, failing with readable
`raypd:key: why` lines (and no traceback) before any resource exists when the config is invalid.
The availability zones are asked of AWS in components.stack.zone_lookup.
"""

from __future__ import annotations

from typing import Any, Optional

import pulumi
from pulumi.runtime import config as runtime_config

from components.config import defaults
from components.config.errors import FieldError, SpecError
from components.config.spec import NAMESPACE, REGION_KEY, DeploymentSpec
from components.plan import zones
from components.plan.scaling import scaling_warnings
from components.plan.scaling_bounds import group_node_bounds
from components.plan.topology import DeploymentPlan, plan_deployment
from components.render import rayservice
from components.render.disruption import disruption_budgets
from components.render.endpoint import endpoint_output
from components.render.gcs_fault_tolerance import redis_secret_name, replication_group_settings
from components.render.model_access import s3_location, service_account_name
from components.render.network_policy import ADDON_NAMESPACE_LEVELS, kubernetes_policy_version
from components.render.observability import prometheus_peers
from components.render.observability_dashboards import dashboards
from components.render.observability_rules import prometheus_rule_groups
from components.render.outputs import API_KEY_OUTPUT, KUBECONFIG_KEY, render_stack_outputs
from components.render.scaling_policy.rendering import mounted_config_maps
from components.stack.addons import Addons, AddonsArgs
from components.stack.cluster import Cluster, ClusterArgs, SystemNodesArgs, aws_partition
from components.stack.endpoint_stack import (
    Endpoint,
    EndpointArgs,
    LoadBalancerController,
    LoadBalancerControllerArgs,
    creation_time,
)
from components.stack.gcs_store import GcsStore, GcsStoreArgs
from components.stack.image_lookup import resolve_for_deploy
from components.stack.model_read_role import ModelReadRole, ModelReadRoleArgs
from components.stack.network import Network, NetworkArgs
from components.stack.network_policies import NetworkPoliciesArgs, label_addon_namespace
from components.stack.node_autoscaler import NodeAutoscaler, NodeAutoscalerArgs
from components.stack.node_groups import GpuNodeGroup, GpuNodeGroupArgs, node_group_resource_name
from components.stack.observability_stack import Observability, ObservabilityArgs
from components.stack.pd_service import GcsRedisArgs, PdService, PdServiceArgs
from components.stack.zone_lookup import resolve_zones


def resource_tags(spec: DeploymentSpec) -> dict[str, str]:
    return {
        "app.kubernetes.io/part-of": "raypd",
        "raypd.io/stack": spec.stack,
        "raypd.io/cluster": spec.effective_cluster_name,
    }


def build(spec: DeploymentSpec, created_at: Optional[str] = None) -> dict[str, Any]:
    """Create every resource of a raypd stack; return the stack outputs (Contract 3).

    `created_at` is the first API key's creation time (default: now; the offline plan passes a
    fixed one so its documents repeat). Raises SpecError before creating anything when the region
    cannot host the spec.
    """
    # ---- lock-down: every Ray pod runs the image pinned by digest (components.config.image) ----
    image = resolve_for_deploy(spec.image_uri)  # SpecError (nothing created) for a missing tag
    if image.warning is not None:
        pulumi.log.warn(image.warning)
    spec = spec.model_copy(update={"image": image.image})
    # ---- end of the image block ----
    plan = plan_deployment(spec)  # the one plan of this run; every component below takes it
    for warning in scaling_warnings(plan):  # with the spec's (main), components.plan.scaling.plan_warnings
        pulumi.log.warn(warning)
    gpu_zone, second_zone = resolve_zones(plan)
    tags = resource_tags(spec)
    network, cluster = _network_and_cluster(spec, (gpu_zone, second_zone), tags)
    kubernetes = pulumi.ResourceOptions(providers=[cluster.provider])
    pd_service = _ray_service(plan, gpu_zone, network, cluster, tags, kubernetes)

    outputs: dict[str, Any] = render_stack_outputs(
        plan, availability_zone=gpu_zone, cluster_name=spec.effective_cluster_name,
        image_provenance=image.as_output(), system_zone=zones.system_zone(gpu_zone, second_zone),
    )
    outputs[KUBECONFIG_KEY] = pulumi.Output.secret(cluster.kubeconfig_json)
    outputs.update(_endpoint(spec, cluster, network, pd_service, tags, kubernetes, created_at))
    _observability(spec, cluster, tags, kubernetes, zones.system_zone(gpu_zone, second_zone))
    return outputs


def _network_and_cluster(spec: DeploymentSpec, availability_zones: tuple[str, str],
                         tags: dict[str, str]) -> tuple[Network, Cluster]:
    """The VPC in the two zones (GPU zone first) and the EKS cluster with its system nodes."""
    cluster_name = spec.effective_cluster_name
    network = Network("network", NetworkArgs(
        cluster_name=cluster_name,
        availability_zones=availability_zones,
        tags=tags,
        # Read back by the next run, so the zones never move on their own (components.plan.zones).
        vpc_tags=zones.zone_tags(*availability_zones),
    ))
    cluster = Cluster("cluster", ClusterArgs(
        cluster_name=cluster_name,
        kubernetes_version=spec.kubernetes_version,
        region=spec.region,
        vpc_id=network.vpc_id,
        public_subnet_ids=network.public_subnet_ids,
        private_subnet_ids=network.private_subnet_ids,
        # The system nodes (and the metrics stack's volumes) in one zone: zones.system_zone.
        system_subnet_id=network.node_subnet_id_by_az[zones.system_zone(*availability_zones)],
        system_nodes=SystemNodesArgs(
            instance_type=spec.system_nodes.instance_type,
            count=spec.system_nodes.count,
            labels=dict(defaults.SYSTEM_LABELS),
        ),
        tags=tags,
        admin_role_arns=spec.admin_role_arns,
        api_access_cidrs=spec.api_access_cidrs,
        support_type=spec.support_type,
    ))
    return network, cluster


def _ray_service(plan: DeploymentPlan, gpu_zone: str, network: Network, cluster: Cluster,
                 tags: dict[str, str], kubernetes: pulumi.ResourceOptions) -> PdService:
    """The GPU node groups, the add-ons, the model's read role, the lock-down and the
    RayService itself, which waits for all of them."""
    spec = plan.spec
    manifest = rayservice.render_rayservice(plan, gpu_zone)
    node_set = rayservice.node_set(plan, gpu_zone)
    gpu_node_groups = [
        GpuNodeGroup(node_group_resource_name(group, node_set), GpuNodeGroupArgs(
            group=group,
            availability_zone=gpu_zone,
            cluster=cluster.eks_cluster,
            node_role_arn=cluster.node_role_arn,
            subnet_id=network.node_subnet_id_by_az[gpu_zone],
            tags=tags,
            node_set=node_set,
            bounds=group_node_bounds(group),
            cluster_name=spec.effective_cluster_name,
        ))
        for group in plan.groups
    ]
    if plan.autoscaling:  # a fixed stack has nothing for it to move
        _node_autoscaler(spec, cluster, tags, kubernetes)
    addons = Addons("addons", AddonsArgs(
        gpu_groups=tuple(plan.groups),
        kuberay_version=spec.kuberay_version,
        wait_for=(cluster.system_node_group,),
    ), opts=kubernetes)
    model_reader = _model_read_role(spec, cluster, tags)
    policy_version = _label_addon_namespaces(spec, addons, kubernetes)
    return PdService("pd-service", PdServiceArgs(
        namespace=spec.namespace,
        manifest=manifest,
        hf_token=spec.hf_token,
        hf_token_secret_name=rayservice.hf_token_secret_name(spec),
        wait_for=(
            addons.kuberay,
            *addons.device_plugins,
            *(group.node_group for group in gpu_node_groups),
        ),
        service_account_name=model_reader[0] if model_reader else None,
        service_account_role_arn=model_reader[1] if model_reader else None,
        upgrade_strategy=spec.upgrade_strategy,
        config_maps=tuple(mounted_config_maps(plan, rayservice.labels(spec))),
        # ---- lock-down (issue 17 §3): who may reach the Ray pods ----
        network_policies=NetworkPoliciesArgs(
            namespace=spec.namespace,
            service_name=spec.service_name,
            api_server_cidrs=cluster.control_plane_cidrs,
            client_namespaces=spec.in_cluster_clients,
            metrics_peers=_metrics_peers(spec),
        ),
        pod_security_version=policy_version,
        gcs_redis=_gcs_redis(spec, network, cluster, tags),
        disruption_budgets=tuple(disruption_budgets(plan)),  # issue 31: one worker pod at a time
    ), opts=kubernetes)


def _gcs_redis(spec: DeploymentSpec, network: Network, cluster: Cluster,
               tags: dict[str, str]) -> Optional[GcsRedisArgs]:
    """The Redis the Ray head's GCS survives a restart with (issue 31; components.config.
    fault_tolerance_spec): an ElastiCache replication group raypd creates, a Redis the user runs
    (its address and Secret are in the manifest already), or None with gcs off."""
    if spec.gcs_store == "off":
        return None
    if spec.gcs_store == "external":
        return GcsRedisArgs()
    store = GcsStore("gcs", GcsStoreArgs(
        settings=replication_group_settings(spec),
        vpc_id=network.vpc_id,
        subnet_ids=network.private_subnet_ids,
        node_security_group_id=cluster.eks_cluster.cluster_security_group_id,
        tags=tags,
    ))
    return GcsRedisArgs(host=store.host, auth_token=store.auth_token,
                        secret_name=redis_secret_name(spec), wait_for=(store.replication_group,))


def _node_autoscaler(spec: DeploymentSpec, cluster: Cluster, tags: dict[str, str],
                     kubernetes: pulumi.ResourceOptions) -> NodeAutoscaler:
    """Cluster Autoscaler on the system nodes, moving the GPU groups within their limits
    (issue 30 §2; components.render.node_autoscaler says why this autoscaler and how)."""
    return NodeAutoscaler("node-autoscaler", NodeAutoscalerArgs(
        cluster_name=spec.effective_cluster_name,
        region=spec.region,
        kubernetes_version=spec.kubernetes_version,
        oidc_provider_arn=cluster.oidc_provider_arn,
        oidc_issuer=cluster.oidc_issuer,
        tags=tags,
        wait_for=(cluster.system_node_group,),
    ), opts=kubernetes)


def _label_addon_namespaces(spec: DeploymentSpec, addons: Addons,
                            kubernetes: pulumi.ResourceOptions) -> str:
    """Lock-down (issue 17 §3): Pod Security labels on the namespaces the add-on releases
    created; returns the Pod Security version every raypd namespace is pinned to."""
    policy_version = kubernetes_policy_version(spec.kubernetes_version)
    for addon_namespace, level in ADDON_NAMESPACE_LEVELS.items():
        label_addon_namespace(f"{addon_namespace}-pod-security", addon_namespace, level,
                              policy_version, opts=pulumi.ResourceOptions.merge(
                                  kubernetes, pulumi.ResourceOptions(depends_on=[addons.kuberay])))
    return policy_version


def _model_read_role(spec: DeploymentSpec, cluster: Cluster, tags: dict[str, str]) -> Optional[
    tuple[str, pulumi.Output[str]]
]:
    """(ServiceAccount name, IAM role ARN) that lets the Ray pods read an s3:// model source;
    None, and nothing created, for a Hugging Face source (components.render.model_access)."""
    location = s3_location(spec.model.source)
    account = service_account_name(spec.service_name, spec.model.source)
    if location is None or account is None:
        return None
    role = ModelReadRole("model-reader", ModelReadRoleArgs(
        partition=aws_partition(spec.region),
        location=location,
        namespace=spec.namespace,
        service_account=account,
        oidc_provider_arn=cluster.oidc_provider_arn,
        oidc_issuer=cluster.oidc_issuer,
        tags=tags,
    ))
    return account, role.role_arn


# ---- the metrics stack (issue 18 §1; one block, so other slices' changes merge around it) ----

def _metrics_peers(spec: DeploymentSpec) -> tuple[dict[str, Any], ...]:
    """Who may scrape the Ray pods' metrics ports: Prometheus's pods, when there is one."""
    if not spec.observability.enabled:
        return ()
    return tuple(prometheus_peers())


def _observability(spec: DeploymentSpec, cluster: Cluster, tags: dict[str, str],
                   kubernetes: pulumi.ResourceOptions, system_zone: str) -> None:
    """kube-prometheus-stack, dcgm-exporter, the PodMonitors, rules and dashboards; nothing at
    all with raypd:observability.enabled false. The `observability` output comes from
    render_stack_outputs (the URLs are fixed names, known before anything runs)."""
    if not spec.observability.enabled:
        return
    Observability("observability", ObservabilityArgs(
        spec=spec,
        cluster_name=spec.effective_cluster_name,  # the add-on waits for the system nodes
        partition=aws_partition(spec.region),
        oidc_provider_arn=cluster.oidc_provider_arn,
        oidc_issuer=cluster.oidc_issuer,
        tags=tags,
        rule_groups=tuple(prometheus_rule_groups(spec)),
        dashboards=tuple(sorted(dashboards(spec).items())),
        install_after=(cluster.system_node_group,),
        volume_zone=system_zone,  # where the system nodes are, so Prometheus and Grafana can follow
    ), opts=kubernetes)


# ---- the endpoint (issue 17 slice A; one block, so other slices' changes merge around it) ----

def _endpoint(spec: DeploymentSpec, cluster: Cluster, network: Network, pd_service: PdService,
              tags: dict[str, str], kubernetes: pulumi.ResourceOptions,
              created_at: Optional[str]) -> dict[str, Any]:
    """The gateway in front of Serve, and the LB controller when a load balancer is wanted;
    returns the `endpoint` output and, with auth apiKey, the secret `apiKey` output."""
    lb_controller: Optional[pulumi.Resource] = None
    if spec.endpoint.load_balanced:
        controller = LoadBalancerController("lb-controller", LoadBalancerControllerArgs(
            cluster_name=spec.effective_cluster_name,
            region=spec.region,
            vpc_id=network.vpc_id,
            oidc_provider_arn=cluster.oidc_provider_arn,
            oidc_issuer=cluster.oidc_issuer,
            tags=tags,
            wait_for=(cluster.system_node_group,),
        ), opts=kubernetes)
        # The NLB's Service depends on it: Pulumi removes the controller only after that Service,
        # and with it the NLB, is gone (components.stack.endpoint_stack).
        lb_controller = controller.release
    subnets = (network.public_subnet_ids if spec.endpoint.scope == "internet"
               else network.private_subnet_ids)
    endpoint = Endpoint("endpoint", EndpointArgs(
        spec=spec,
        subnet_ids=subnets,
        namespace=pd_service.namespace,
        created_at=created_at or creation_time(),
        install_after=(cluster.system_node_group,),
        lb_controller=lb_controller,
    ), opts=kubernetes)
    outputs: dict[str, Any] = {
        "endpoint": endpoint.lb_hostname.apply(lambda host: endpoint_output(spec, host)),
    }
    if endpoint.api_key is not None:
        outputs[API_KEY_OUTPUT] = endpoint.api_key
    return outputs


def configured_keys() -> set[str]:
    """Every config key the engine handed this program (so unknown raypd keys are reported)."""
    # The language host passes config in PULUMI_CONFIG; tests and mocks set it in-process.
    return set(runtime_config.get_config_env()) | set(runtime_config.CONFIG.get())


def raw_config() -> dict[str, Any]:
    """Contract 1 keys as Pulumi hands them over (objects arrive as JSON text; the spec decodes).

    The HF token is read like any other key: it lives on only as a pydantic SecretStr in the
    spec and, from there, as a Pulumi secret output (PdService), never as a plain value.
    """
    raw: dict[str, Any] = {}
    region = pulumi.Config("aws").get("region")
    if region is not None:
        raw[REGION_KEY] = region
    settings = pulumi.Config(NAMESPACE)
    prefix = f"{NAMESPACE}:"
    for key in sorted(k[len(prefix):] for k in configured_keys() if k.startswith(prefix)):
        value = settings.get(key)
        if value is not None:
            raw[prefix + key] = value
    return raw


def load_spec() -> DeploymentSpec:
    return DeploymentSpec.from_config(raw_config(), pulumi.get_stack())


def _report(errors: list[FieldError]) -> None:
    for error in errors:
        pulumi.log.error(str(error))


def main() -> None:
    """Entry point of `__main__.py` (`pulumi preview/up` and the Automation API)."""
    try:
        spec = load_spec()
        if pulumi.Config("aws").get("region") is None:
            # The AWS provider reads aws:region from the stack, not from raypd's default.
            pulumi.log.warn(
                f"aws:region is not set: raypd assumes {spec.region}, but the AWS provider will "
                "use AWS_REGION or your profile's region; set aws:region to be sure they agree"
            )
        for warning in spec.warnings:  # the plan's own warnings: build() logs them
            pulumi.log.warn(warning)
        outputs = build(spec)
    except SpecError as exc:
        _report(exc.errors)
        # RunError ends the program with its message and no Python traceback.
        raise pulumi.RunError(
            f"invalid raypd configuration ({len(exc.errors)} problem(s) listed above); "
            "nothing was created"
        ) from None
    for key, value in outputs.items():
        pulumi.export(key, value)
