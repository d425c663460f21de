"""The raypd Pulumi program: a validated spec in, components wired, stack outputs out.

`build(spec)` is the whole program after configuration; `__main__.py` calls it for `pulumi up`,
and the offline plan calls the very same function under Pulumi's mock runtime. `main()` is what
`__main__.py` runs: Pulumi config -> DeploymentSpec -> build -> exports, failing with readable
`raypd:key: why` lines (and no traceback) before any resource exists when the config is invalid.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Optional, Sequence

import pulumi

from components import defaults
from components.errors import FieldError, SpecError
from components.outputs import KUBECONFIG_KEY, render_stack_outputs
from components.spec import NAMESPACE, REGION_KEY, DeploymentSpec
from components.topology import plan_gpu_groups

AZ_FIELD = "raypd:availabilityZone"


def gpu_instance_types(spec: DeploymentSpec) -> list[str]:
    return sorted({group.instance_type for group in plan_gpu_groups(spec)})


def is_regular_zone(region: str, zone: str) -> bool:
    """`us-east-2a` yes; Local and Wavelength Zones (`us-west-2-lax-1a`) no: EKS control planes
    cannot use them, and they sort before the regular zones."""
    return re.fullmatch(re.escape(region) + r"[a-z]", zone) is not None


def zones_offering_all(
    region: str, offerings: Iterable[tuple[str, str]], needed: Iterable[str]
) -> list[str]:
    """Regular AZs (sorted) where every needed instance type is offered.

    `offerings` are (instance type, AZ) pairs as DescribeInstanceTypeOfferings returns them.
    """
    wanted = set(needed)
    offered: dict[str, set[str]] = {}
    for instance_type, zone in offerings:
        offered.setdefault(zone, set()).add(instance_type)
    return sorted(
        zone for zone, types in offered.items()
        if wanted <= types and is_regular_zone(region, zone)
    )


def _offerings(types: Sequence[str], zone: Optional[str]) -> list[tuple[str, str]]:
    import pulumi_aws as aws

    filters = [aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=list(types))]
    if zone is not None:
        filters.append(aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="location", values=[zone]))
    result = aws.ec2.get_instance_type_offerings(location_type="availability-zone", filters=filters)
    return list(zip(result.instance_types, result.locations))


def resolve_gpu_zone(spec: DeploymentSpec) -> str:
    """The AZ of every GPU node: the configured one, else the first AZ offering all GPU types.

    Asks EC2 (DescribeInstanceTypeOfferings), like the reference guide. An AZ that lacks one of
    the types is an error here, before anything is created, not 20 minutes into a node group.
    """
    types = gpu_instance_types(spec)
    zones = zones_offering_all(spec.region, _offerings(types, spec.availability_zone), types)
    if spec.availability_zone is not None:
        if spec.availability_zone not in zones:
            raise SpecError.single(AZ_FIELD, (
                f"{spec.availability_zone} does not offer all of {', '.join(types)} (EC2 "
                "DescribeInstanceTypeOfferings); leave raypd:availabilityZone unset to pick one "
                "that does"
            ))
        return spec.availability_zone
    if not zones:
        raise SpecError.single(AZ_FIELD, (
            f"no availability zone of {spec.region} offers all of {', '.join(types)}; the GPU "
            "node groups must share one AZ (EFA cannot cross AZs): pick instance types offered "
            "together, or another aws:region"
        ))
    return zones[0]


def resolve_second_zone(spec: DeploymentSpec, gpu_zone: str) -> str:
    """EKS needs subnets in two AZs; the second is the first other regular AZ of the region."""
    import pulumi_aws as aws

    result = aws.get_availability_zones(
        state="available",
        filters=[aws.GetAvailabilityZonesFilterArgs(
            name="opt-in-status", values=["opt-in-not-required"]
        )],
    )
    others = sorted(
        zone for zone in result.names if zone != gpu_zone and is_regular_zone(spec.region, zone)
    )
    if not others:
        raise SpecError.single(REGION_KEY, (
            f"{spec.region} has no second availability zone; EKS needs subnets in two"
        ))
    return others[0]


def resource_tags(spec: DeploymentSpec) -> dict[str, str]:
    return {
        "app.kubernetes.io/part-of": "raypd",
        "raypd.io/stack": spec.stack,
        "raypd.io/cluster": spec.effective_cluster_name,
    }


def build(spec: DeploymentSpec) -> dict[str, Any]:
    """Create every resource of a raypd stack; return the stack outputs (Contract 3).

    Raises SpecError before creating anything when the region cannot host the spec.
    """
    # Imported here: the web app and CLIs import this module without paying for the SDKs.
    from components import rayservice
    from components.addons import Addons, AddonsArgs
    from components.cluster import Cluster, ClusterArgs, SystemNodesArgs
    from components.network import Network, NetworkArgs
    from components.node_groups import GpuNodeGroup, GpuNodeGroupArgs, node_group_resource_name
    from components.pd_service import PdService, PdServiceArgs

    gpu_zone = resolve_gpu_zone(spec)
    second_zone = resolve_second_zone(spec, gpu_zone)
    groups = plan_gpu_groups(spec)
    cluster_name = spec.effective_cluster_name
    tags = resource_tags(spec)

    network = Network("network", NetworkArgs(
        cluster_name=cluster_name,
        availability_zones=(gpu_zone, second_zone),
        tags=tags,
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
    ))
    gpu_node_groups = [
        GpuNodeGroup(node_group_resource_name(group), GpuNodeGroupArgs(
            group=group,
            availability_zone=gpu_zone,
            cluster=cluster.eks_cluster,
            node_role_arn=cluster.node_role_arn,
            subnet_id=network.node_subnet_id_by_az[gpu_zone],
            tags=tags,
        ))
        for group in groups
    ]
    kubernetes = pulumi.ResourceOptions(providers=[cluster.provider])
    addons = Addons("addons", AddonsArgs(
        gpu_groups=tuple(groups),
        kuberay_version=spec.kuberay_version,
        wait_for=(cluster.system_node_group,),
    ), opts=kubernetes)
    PdService("pd-service", PdServiceArgs(
        namespace=spec.namespace,
        manifest=rayservice.render_rayservice(spec),
        hf_token=spec.hf_token,
        hf_token_secret_name=rayservice.hf_token_secret_name(spec),
        wait_for=(
            addons.kuberay,
            *addons.device_plugins,
            *(group.node_group for group in gpu_node_groups),
        ),
    ), opts=kubernetes)

    outputs: dict[str, Any] = render_stack_outputs(
        spec, availability_zone=gpu_zone, cluster_name=cluster_name
    )
    outputs[KUBECONFIG_KEY] = pulumi.Output.secret(cluster.kubeconfig_json)
    return outputs


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
