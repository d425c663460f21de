"""The raypd Pulumi program: a validated spec in, components wired, stack outputs out.

`build(spec)` is the whole program after configuration; `__main__.py` calls it for `pulumi up`,
and the offline plan calls the very same function under Pulumi's mock runtime. `main()` is what
`__main__.py` runs: Pulumi config -> DeploymentSpec -> build -> exports, failing with readable
`raypd:key: why` lines (and no traceback) before any resource exists when the config is invalid.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import pulumi

from components.config import defaults
from components.config.errors import FieldError, SpecError
from components.config.spec import NAMESPACE, REGION_KEY, DeploymentSpec
from components.plan import zones
from components.plan.topology import DeploymentPlan, plan_deployment
from components.plan.zones import AZ_FIELD, gpu_instance_types, zones_offering_all
from components.render.outputs import API_KEY_OUTPUT, KUBECONFIG_KEY, render_stack_outputs


def _offerings(types: Sequence[str], zone: Optional[str]) -> list[tuple[str, str]]:
    import pulumi_aws as aws

    filters = [aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=list(types))]
    if zone is not None:
        filters.append(aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="location", values=[zone]))
    result = aws.ec2.get_instance_type_offerings(location_type="availability-zone", filters=filters)
    return list(zip(result.instance_types or [], result.locations or [], strict=True))


def _region_zones() -> list[tuple[str, str]]:
    """(name, zone id) of the region's available zones that need no opt-in."""
    import pulumi_aws as aws

    result = aws.get_availability_zones(
        state="available",
        filters=[aws.GetAvailabilityZonesFilterArgs(
            name="opt-in-status", values=["opt-in-not-required"]
        )],
    )
    return list(zip(result.names or [], result.zone_ids or [], strict=True))


def previous_zones(spec: DeploymentSpec) -> Optional[zones.PreviousZones]:
    """The zones this stack was deployed to, from its VPC's tags; None on a first deploy.

    EC2 DescribeVpcs by the stack's own tags (see components.plan.zones for why not a StackReference).
    Offline (the mock runtime) no VPC exists, so the plan is a first deploy's.
    """
    import pulumi_aws as aws

    found = aws.ec2.get_vpcs(filters=[
        aws.ec2.GetVpcsFilterArgs(name=f"tag:{zones.STACK_TAG}", values=[spec.stack]),
        aws.ec2.GetVpcsFilterArgs(
            name=f"tag:{zones.CLUSTER_TAG}", values=[spec.effective_cluster_name]
        ),
    ])
    if not found.ids:
        return None
    return zones.previous_zones_from_tags(aws.ec2.get_vpc(id=sorted(found.ids)[0]).tags)


def resolve_zones(plan: DeploymentPlan) -> tuple[str, str]:
    """(GPU zone, second zone): the configured GPU zone, else the zones the stack already uses,
    else the first zone offering every GPU type where EKS can place cluster subnets, and the
    first other EKS-usable zone. Never re-picked on its own (see components.plan.zones).

    Asks EC2 (DescribeInstanceTypeOfferings), like the reference guide. A configured AZ that
    lacks one of the types is an error here, before anything is created, not 20 minutes into a
    node group; a remembered one that EC2 stopped listing is kept with a warning (its nodes run).
    """
    spec = plan.spec
    types = gpu_instance_types(plan)
    previous = previous_zones(spec)
    region_zones = _region_zones()
    usable = zones.eks_usable(spec.region, region_zones)
    ask_zone = spec.availability_zone or (previous.gpu if previous is not None else None)
    offering = zones_offering_all(spec.region, _offerings(types, ask_zone), types)
    gpu_zone = zones.pick_gpu_zone(spec.availability_zone, previous, offering, usable)
    if gpu_zone is None:
        raise SpecError.single(AZ_FIELD, (
            f"no availability zone of {spec.region} offers all of {', '.join(types)} where EKS "
            "can place cluster subnets; the GPU node groups must share one AZ (EFA cannot cross "
            "AZs): pick instance types offered together, or another aws:region"
        ))
    if spec.availability_zone is not None:
        if gpu_zone not in offering:
            raise SpecError.single(AZ_FIELD, (
                f"{gpu_zone} does not offer all of {', '.join(types)} (EC2 "
                "DescribeInstanceTypeOfferings); leave raypd:availabilityZone unset to pick one "
                "that does"
            ))
        if region_zones and gpu_zone not in usable:
            raise SpecError.single(AZ_FIELD, (
                f"{gpu_zone} is {dict(region_zones).get(gpu_zone, 'not an available zone')}, where "
                f"EKS cannot place cluster subnets; EKS-usable zones: {', '.join(usable)}"
            ))
        if (previous is not None and previous.gpu and previous.second
                and gpu_zone not in (previous.gpu, previous.second)):
            raise SpecError.single(AZ_FIELD, (
                f"{gpu_zone} is outside the zones this stack's EKS cluster was created in "
                f"({previous.gpu}, {previous.second}): EKS only accepts new cluster subnets in the "
                "zones a cluster was created with (aws/containers-roadmap#2330), so the GPU nodes "
                f"can move onto {previous.second} (the zones swap) but not elsewhere; another zone "
                "needs a new stack. Nothing was changed"
            ))
        if previous is not None and previous.gpu and previous.gpu != gpu_zone:
            pulumi.log.warn(
                f"{AZ_FIELD} moves the GPU nodes from {previous.gpu} to {gpu_zone}: the GPU node "
                "groups, their subnets and the cluster's subnets there will be replaced"
            )
    elif gpu_zone not in offering:
        pulumi.log.warn(
            f"{gpu_zone}, where this stack's GPU nodes are, is no longer listed by EC2 as offering "
            f"all of {', '.join(types)}; raypd keeps it (moving would replace the nodes and "
            f"subnets), but new nodes may fail to launch: set {AZ_FIELD} to move on purpose"
        )
    second = zones.pick_second_zone(gpu_zone, previous, usable)
    if second is None:
        raise SpecError.single(REGION_KEY, (
            f"{spec.region} has no second availability zone where EKS can place cluster subnets; "
            "EKS needs subnets in two"
        ))
    return gpu_zone, second


def resolve_gpu_zone(plan: DeploymentPlan) -> str:
    """The AZ of every GPU node (see resolve_zones)."""
    return resolve_zones(plan)[0]


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
    # Imported here: the web app and CLIs import this module without paying for the SDKs.
    from components.config.image import resolve_for_deploy
    from components.render import rayservice
    from components.stack.addons import Addons, AddonsArgs
    from components.stack.cluster import Cluster, ClusterArgs, SystemNodesArgs
    from components.stack.network import Network, NetworkArgs
    from components.stack.node_groups import GpuNodeGroup, GpuNodeGroupArgs, node_group_resource_name
    from components.stack.pd_service import PdService, PdServiceArgs

    # ---- lock-down: every Ray pod runs the image pinned by digest (components.config.image) ----
    image = resolve_for_deploy(spec.image_uri)  # SpecError (nothing created) for a missing tag
    if image.warning is not None:
        pulumi.log.warn(image.warning)
    spec = spec.model_copy(update={"image": image.image})
    # ---- end of the image block ----
    plan = plan_deployment(spec)  # the one plan of this run; every component below takes it
    gpu_zone, second_zone = resolve_zones(plan)
    groups = plan.groups
    cluster_name = spec.effective_cluster_name
    tags = resource_tags(spec)

    network = Network("network", NetworkArgs(
        cluster_name=cluster_name,
        availability_zones=(gpu_zone, second_zone),
        tags=tags,
        # Read back by the next run, so the zones never move on their own (components.plan.zones).
        vpc_tags=zones.zone_tags(gpu_zone, second_zone),
    ))
    cluster = Cluster("cluster", ClusterArgs(
        cluster_name=cluster_name,
        kubernetes_version=spec.kubernetes_version,
        region=spec.region,
        vpc_id=network.vpc_id,
        public_subnet_ids=network.public_subnet_ids,
        private_subnet_ids=network.private_subnet_ids,
        node_subnet_ids=network.node_subnet_ids,
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
        ))
        for group in groups
    ]
    kubernetes = pulumi.ResourceOptions(providers=[cluster.provider])
    addons = Addons("addons", AddonsArgs(
        gpu_groups=tuple(groups),
        kuberay_version=spec.kuberay_version,
        wait_for=(cluster.system_node_group,),
    ), opts=kubernetes)
    model_reader = _model_read_role(spec, cluster, tags)
    # ---- lock-down (issue 17 §3): who may reach the Ray pods, namespaces' Pod Security ----
    from components.render.network_policy import (
        ADDON_NAMESPACE_LEVELS,
        NetworkPoliciesArgs,
        kubernetes_policy_version,
        label_addon_namespace,
    )

    policy_version = kubernetes_policy_version(spec.kubernetes_version)
    for addon_namespace, level in ADDON_NAMESPACE_LEVELS.items():
        label_addon_namespace(f"{addon_namespace}-pod-security", addon_namespace, level,
                              policy_version, opts=pulumi.ResourceOptions.merge(
                                  kubernetes, pulumi.ResourceOptions(depends_on=[addons.kuberay])))
    network_policies = NetworkPoliciesArgs(
        namespace=spec.namespace,
        service_name=spec.service_name,
        api_server_cidrs=cluster.control_plane_cidrs,
        client_namespaces=spec.in_cluster_clients,
        metrics_peers=_metrics_peers(spec),
    )
    # ---- end of lock-down ----
    pd_service = PdService("pd-service", PdServiceArgs(
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
        network_policies=network_policies,
        pod_security_version=policy_version,
    ), opts=kubernetes)

    outputs: dict[str, Any] = render_stack_outputs(
        plan, availability_zone=gpu_zone, cluster_name=cluster_name,
        image_provenance=image.as_output(),
    )
    outputs[KUBECONFIG_KEY] = pulumi.Output.secret(cluster.kubeconfig_json)
    outputs.update(_endpoint(spec, cluster, network, pd_service, tags, kubernetes, created_at))
    _observability(spec, cluster, tags, kubernetes)
    return outputs


# ---- the metrics stack (issue 18 §1; one block, so other slices' changes merge around it) ----

def _metrics_peers(spec: DeploymentSpec) -> tuple[dict[str, Any], ...]:
    """Who may scrape the Ray pods' metrics ports: Prometheus's pods, when there is one."""
    if not spec.observability.enabled:
        return ()
    from components.render.observability import prometheus_peers

    return tuple(prometheus_peers())


def _observability(spec: DeploymentSpec, cluster: Any, tags: dict[str, str],
                   kubernetes: pulumi.ResourceOptions) -> None:
    """kube-prometheus-stack, dcgm-exporter, the PodMonitors, rules and dashboards; nothing at
    all with raypd:observability.enabled false. The `observability` output comes from
    render_stack_outputs (the URLs are fixed names, known before anything runs)."""
    if not spec.observability.enabled:
        return
    from components.render.observability_dashboards import dashboards
    from components.render.observability_rules import prometheus_rule_groups
    from components.stack.cluster import aws_partition
    from components.stack.observability_stack import Observability, ObservabilityArgs

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
    ), opts=kubernetes)


# ---- the endpoint (issue 17 slice A; one block, so other slices' changes merge around it) ----

def _endpoint(spec: DeploymentSpec, cluster: Any, network: Any, pd_service: Any,
              tags: dict[str, str], kubernetes: pulumi.ResourceOptions,
              created_at: Optional[str]) -> dict[str, Any]:
    """The gateway in front of Serve, and the LB controller when a load balancer is wanted;
    returns the `endpoint` output and, with auth apiKey, the secret `apiKey` output."""
    from components.render.endpoint import endpoint_output
    from components.stack.endpoint_stack import (
        Endpoint,
        EndpointArgs,
        LoadBalancerController,
        LoadBalancerControllerArgs,
        creation_time,
    )

    controllers: tuple[pulumi.Resource, ...] = ()
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
        controllers = (controller.release,)
    subnets = (network.public_subnet_ids if spec.endpoint.scope == "internet"
               else network.private_subnet_ids)
    endpoint = Endpoint("endpoint", EndpointArgs(
        spec=spec,
        subnet_ids=subnets,
        namespace=pd_service.namespace,
        created_at=created_at or creation_time(),
        install_after=(cluster.system_node_group,),
        wait_for=controllers,
    ), opts=kubernetes)
    outputs: dict[str, Any] = {
        "endpoint": endpoint.lb_hostname.apply(lambda host: endpoint_output(spec, host)),
    }
    if endpoint.api_key is not None:
        outputs[API_KEY_OUTPUT] = endpoint.api_key
    return outputs


def _model_read_role(spec: DeploymentSpec, cluster: Any, tags: dict[str, str]) -> Optional[
    tuple[str, pulumi.Output[str]]
]:
    """(ServiceAccount name, IAM role ARN) that lets the Ray pods read an s3:// model source;
    None, and nothing created, for a Hugging Face source (components.render.model_access)."""
    from components.render.model_access import (
        ModelReadRole,
        ModelReadRoleArgs,
        s3_location,
        service_account_name,
    )
    from components.stack.cluster import aws_partition

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


def configured_keys() -> set[str]:
    """Every config key the engine handed this program (so unknown raypd keys are reported)."""
    from pulumi.runtime import config as runtime_config

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
        for warning in spec.warnings:
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
