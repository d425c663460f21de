"""What the program would create, read from its resource graph under the mock runtime."""

from __future__ import annotations

from collections import Counter

import pytest

from components.config import catalogue, defaults
from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment
from components.render.gcs_fault_tolerance import with_redis_host
from components.render.outputs import OUTPUT_KEYS, validate_outputs
from components.render.rayservice import render_rayservice
from tests.pulumi.conftest import HETEROGENEOUS

GPU_AMI = "AL2023_x86_64_NVIDIA"
RAYSERVICE = "kubernetes:ray.io/v1:RayService"
RELEASE = "kubernetes:helm.sh/v3:Release"
MNG = "eks:index:ManagedNodeGroup"
# Every EFA-capable GPU type of the catalogue, whatever types the stack runs.
EFA_CAPABLE_TYPES = sorted(t.name for t in catalogue.gpu_instance_types() if t.efa_supported)


def releases_by_chart(plan) -> dict[str, dict]:
    return {r["inputs"]["chart"]: r for r in plan.of_type(RELEASE)}


# ---- the reference stack (Pulumi.dev.yaml) ----

def test_reference_stack_creates_one_of_each_part_of_the_reference_deployment(reference_plan):
    counts = Counter(r["type"] for r in reference_plan.resources)
    assert counts["aws:ec2/vpc:Vpc"] == 1
    assert counts["aws:ec2/subnet:Subnet"] == 4  # public + private in two AZs
    assert counts["aws:ec2/natGateway:NatGateway"] == 1
    assert counts["aws:ec2/internetGateway:InternetGateway"] == 1
    assert counts["eks:index:Cluster"] == 1
    assert counts[MNG] == 2  # system + one shared GPU group
    # coredns (vpc-cni, kube-proxy come with the cluster); the EBS CSI driver for the metrics
    # stack's volumes (issue 18, tests/pulumi/test_observability.py)
    assert counts["aws:eks/addon:Addon"] == 2
    # NVIDIA + EFA device plugins, KubeRay operator; Envoy Gateway and the AWS Load Balancer
    # Controller for the endpoint (tests/pulumi/test_endpoint_plan.py); kube-prometheus-stack and
    # dcgm-exporter (issue 18)
    assert counts[RELEASE] == 7
    assert counts[RAYSERVICE] == 1
    assert counts["kubernetes:core/v1:Namespace"] == 2  # the deployment's, monitoring
    # No HF token configured: the Secrets hold the endpoint's API keys and the GCS store's auth token.
    assert sorted(r["name"] for r in reference_plan.of_type("kubernetes:core/v1:Secret")) == [
        "endpoint-api-keys", "pd-service-gcs-redis"]


def test_every_resource_name_is_unique_so_dependencies_by_name_are_unambiguous(
    reference_plan, heterogeneous_plan
):
    for plan in (reference_plan, heterogeneous_plan):
        names = [r["name"] for r in plan.resources]
        assert len(names) == len(set(names))
        for resource in plan.resources:
            assert set(resource["dependsOn"]) <= set(names), resource["name"]


def test_reference_gpu_nodes_are_two_efa_g6_8xlarge_in_one_az(reference_plan):
    groups = reference_plan.gpu_node_groups()
    assert list(groups) == ["gpu"]
    inputs = groups["gpu"]["inputs"]
    az = reference_plan.outputs["availabilityZone"]
    assert az == "us-east-2a"  # offline: the first AZ of the region is assumed to offer g6.8xlarge
    assert inputs["instanceTypes"] == ["g6.8xlarge"]
    assert inputs["scalingConfig"] == {"minSize": 2, "maxSize": 2, "desiredSize": 2}
    assert inputs["enableEfaSupport"] is True
    assert inputs["placementGroupAvailabilityZone"] == az
    assert inputs["labels"] == {"role": "gpu-worker", "raypd.io/node-group": "gpu"}
    assert inputs["amiType"] == GPU_AMI
    assert inputs["diskSize"] == 200
    assert inputs["enableIMDSv2"] is True
    # One subnet, the private one of the GPU AZ, used once its NAT route is attached.
    assert len(inputs["subnetIds"]) == 1
    needs = set(groups["gpu"]["dependsOn"])
    assert {f"network-private-{az}", f"network-private-{az}-rta"} <= needs
    assert not any("us-east-2b" in name for name in needs)


def test_system_nodes_run_the_configured_type_with_the_system_label(reference_plan):
    (system,) = [r for r in reference_plan.of_type(MNG) if r["inputs"]["amiType"] != GPU_AMI]
    inputs = system["inputs"]
    assert inputs["instanceTypes"] == ["m7i.xlarge"]
    assert inputs["scalingConfig"]["desiredSize"] == 1
    assert inputs["labels"] == {"role": "system"}
    assert inputs["enableIMDSv2"] is True
    # One private subnet: the system zone's (tests/pulumi/test_observability.py says why).
    assert len(inputs["subnetIds"]) == 1
    assert "enableEfaSupport" not in inputs
    node_attachments = [r for r in reference_plan.of_type(
        "aws:iam/rolePolicyAttachment:RolePolicyAttachment") if r["parent"] != "observability"]
    policies = {r["inputs"]["policyArn"] for r in node_attachments}
    assert policies == {
        "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
        "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
        "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
    }
    # Nodes join only with their policies attached.
    assert {r["name"] for r in node_attachments} <= set(system["dependsOn"])


def test_system_nodes_have_disk_room_for_the_image_the_ray_head_runs(reference_plan):
    (service,) = reference_plan.of_type(RAYSERVICE)
    head = service["inputs"]["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]
    # The head (the multi-GB serving image) is pinned to the system nodes (of the system type, so it
    # never starts on a replaced group's old node)...
    assert head["nodeSelector"] == {**defaults.SYSTEM_LABELS,
                                    "node.kubernetes.io/instance-type": defaults.SYSTEM_INSTANCE_TYPE}
    (system,) = [r for r in reference_plan.of_type(MNG) if r["inputs"]["amiType"] != GPU_AMI]
    # ...so their root volume must be well above EKS's 20 GiB default, at least the 80 GiB the
    # reference's eksctl node group had, or the head pod never pulls its image.
    assert system["inputs"]["diskSize"] >= 80


def test_cluster_matches_the_reference_control_plane(reference_plan):
    (cluster,) = reference_plan.of_type("eks:index:Cluster")
    inputs = cluster["inputs"]
    assert inputs["name"] == "raypd-demo"
    assert inputs["version"] == "1.35"
    assert inputs["authenticationMode"] == "API"
    assert inputs["createOidcProvider"] is True
    assert inputs["skipDefaultNodeGroup"] is True
    assert inputs["endpointPrivateAccess"] is True and inputs["endpointPublicAccess"] is True
    assert inputs["nodeAssociatePublicIpAddress"] is False
    assert inputs["kubeProxyAddonOptions"]["enabled"] is True
    assert len(inputs["privateSubnetIds"]) == 2 and len(inputs["publicSubnetIds"]) == 2
    (coredns,) = [r for r in reference_plan.of_type("aws:eks/addon:Addon")
                  if r["inputs"]["addonName"] == "coredns"]
    assert coredns["inputs"]["addonName"] == "coredns"
    assert coredns["inputs"]["clusterName"] == "raypd-demo"
    # Created once nodes exist, or it would sit DEGRADED until it times out.
    assert "cluster-system" in coredns["dependsOn"]


def test_network_has_dns_nat_in_the_gpu_az_and_eks_subnet_roles(reference_plan):
    (vpc,) = reference_plan.of_type("aws:ec2/vpc:Vpc")
    assert vpc["inputs"]["enableDnsSupport"] is True and vpc["inputs"]["enableDnsHostnames"] is True
    subnets = {r["name"]: r["inputs"] for r in reference_plan.of_type("aws:ec2/subnet:Subnet")}
    azs = {inputs["availabilityZone"] for inputs in subnets.values()}
    assert len(azs) == 2 and reference_plan.outputs["availabilityZone"] in azs
    for name, inputs in subnets.items():
        role_tag = "kubernetes.io/role/elb" if "public" in name else "kubernetes.io/role/internal-elb"
        assert inputs["tags"][role_tag] == "1", name
        assert inputs["tags"]["kubernetes.io/cluster/raypd-demo"] == "shared"
    (nat,) = reference_plan.of_type("aws:ec2/natGateway:NatGateway")
    assert "network-public-us-east-2a" in nat["dependsOn"]
    routes = {r["name"]: r["inputs"]["routes"] for r in reference_plan.of_type(
        "aws:ec2/routeTable:RouteTable")}
    assert "natGatewayId" in routes["network-private-rt"][0]
    assert "gatewayId" in routes["network-public-rt"][0]


def test_helm_releases_install_device_plugins_and_the_kuberay_operator(reference_plan):
    releases = releases_by_chart(reference_plan)
    assert set(releases) == {
        defaults.NVIDIA_DEVICE_PLUGIN_CHART, defaults.EFA_DEVICE_PLUGIN_CHART, defaults.KUBERAY_CHART,
        defaults.ENVOY_GATEWAY_CHART, defaults.LB_CONTROLLER_CHART,
        defaults.KUBE_PROMETHEUS_STACK_CHART, defaults.DCGM_EXPORTER_CHART,  # issue 18
    }
    kuberay = releases[defaults.KUBERAY_CHART]["inputs"]
    assert kuberay["version"] == "1.4.0"
    assert kuberay["repositoryOpts"]["repo"] == defaults.KUBERAY_CHART_REPO
    assert kuberay["namespace"] == defaults.KUBERAY_NAMESPACE
    assert kuberay["values"]["nodeSelector"] == {"role": "system"}
    nvidia = releases[defaults.NVIDIA_DEVICE_PLUGIN_CHART]["inputs"]
    assert nvidia["version"] == defaults.NVIDIA_DEVICE_PLUGIN_VERSION
    terms = nvidia["values"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [
        {"key": "role", "operator": "In", "values": ["gpu-worker"]}]}]
    efa = releases[defaults.EFA_DEVICE_PLUGIN_CHART]["inputs"]
    assert efa["values"]["supportedInstanceLabels"]["values"] == EFA_CAPABLE_TYPES
    assert efa["values"]["nodeSelector"] == {"role": "gpu-worker"}
    for release in releases.values():
        # The operator pod and the charts' hooks need a node to run on.
        assert "cluster-system" in release["dependsOn"]


def test_rayservice_is_the_rendered_manifest_and_waits_for_operator_plugins_and_nodes(
    reference_plan, reference_config
):
    (service,) = reference_plan.of_type(RAYSERVICE)
    spec = DeploymentSpec.from_config(reference_config, "dev")
    # The image the program pinned by digest (components.config.image; offline, the mock's placeholder).
    assert reference_plan.outputs["image"] != spec.image_uri
    spec = spec.model_copy(update={"image": reference_plan.outputs["image"]})
    # The zone the program resolved (offline: the first zone of the region offers everything).
    expected = render_rayservice(plan_deployment(spec), f"{spec.region}a")
    assert service["inputs"]["metadata"] == expected["metadata"]
    # The program puts the ElastiCache group's primary endpoint (the mock's) into the rendered
    # stand-in host of gcsFaultToleranceOptions.redisAddress; everything else is the rendering.
    redis = service["inputs"]["spec"]["rayClusterConfig"]["gcsFaultToleranceOptions"]["redisAddress"]
    host = redis.removeprefix("rediss://").removesuffix(":6379")
    assert redis.startswith("rediss://master.") and redis.endswith(":6379")
    assert service["inputs"]["spec"] == with_redis_host(expected["spec"], host)
    assert "condition=Ready" in service["inputs"]["metadata"]["annotations"]["pulumi.com/waitFor"]
    # Created after, and so destroyed before, the operator that owns its finalizer.
    assert {
        "addons-kuberay-operator", "addons-nvidia-device-plugin", "addons-efa-device-plugin",
        "gpu-nodes-group", "pd-service-namespace",
    } <= set(service["dependsOn"])


def test_kubernetes_resources_use_the_clusters_provider_whose_kubeconfig_is_masked(reference_plan):
    (provider,) = reference_plan.of_type("pulumi:providers:kubernetes")
    assert provider["inputs"]["kubeconfig"] == "[secret]"
    assert provider["dependsOn"] == ["cluster-eks"]


def test_outputs_carry_every_contract_key_with_the_kubeconfig_masked(reference_plan):
    outputs = reference_plan.outputs
    assert set(OUTPUT_KEYS) <= set(outputs)
    assert outputs["kubeconfig"] == "[secret]"
    assert outputs["clusterName"] == "raypd-demo"
    assert outputs["topology"]["prefill"]["nodeGroup"] == outputs["topology"]["decode"]["nodeGroup"]
    # The document is valid against the published schema once the kubeconfig is a real string.
    validate_outputs({**outputs, "kubeconfig": "apiVersion: v1"})


# ---- heterogeneous: prefill p5.48xlarge TP=8, decode g6e.48xlarge TP=8 x2 ----

def test_heterogeneous_stack_gets_one_efa_group_per_phase_in_the_same_az(heterogeneous_plan):
    groups = heterogeneous_plan.gpu_node_groups()
    assert set(groups) == {"prefill", "decode"}
    prefill, decode = groups["prefill"]["inputs"], groups["decode"]["inputs"]
    assert prefill["instanceTypes"] == ["p5.48xlarge"]
    assert prefill["scalingConfig"]["desiredSize"] == 1
    assert decode["instanceTypes"] == ["g6e.48xlarge"]
    assert decode["scalingConfig"]["desiredSize"] == 2
    az = heterogeneous_plan.outputs["availabilityZone"]
    for phase, group in groups.items():
        inputs = group["inputs"]
        assert inputs["enableEfaSupport"] is True
        assert inputs["placementGroupAvailabilityZone"] == az
        assert inputs["labels"] == {"role": "gpu-worker", defaults.PHASE_LABEL_KEY: phase,
                                    defaults.NODE_GROUP_LABEL: phase}
        assert inputs["amiType"] == GPU_AMI
        assert inputs["diskSize"] == 800  # 8 GPUs x 100 GB
    efa = releases_by_chart(heterogeneous_plan)[defaults.EFA_DEVICE_PLUGIN_CHART]
    # The same list as the reference's: a GPU type change leaves the plugin alone (its pods stay
    # on the old nodes while a newCluster switch still runs there).
    assert efa["inputs"]["values"]["supportedInstanceLabels"]["values"] == EFA_CAPABLE_TYPES
    (service,) = heterogeneous_plan.of_type(RAYSERVICE)
    worker_groups = service["inputs"]["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    assert {g["groupName"] for g in worker_groups} == {"prefill", "decode"}
    assert {"prefill-nodes-group", "decode-nodes-group"} <= set(service["dependsOn"])
    topology = heterogeneous_plan.outputs["topology"]
    assert topology["decode"]["nodes"] == 2 and topology["prefill"]["tensorParallelSize"] == 8


# ---- colocated and other variants ----

def test_colocated_stack_has_one_gpu_group_and_no_kv_transfer(colocated_plan):
    groups = colocated_plan.gpu_node_groups()
    assert list(groups) == ["colocated"]
    assert groups["colocated"]["inputs"]["scalingConfig"]["desiredSize"] == 2
    assert colocated_plan.outputs["mode"] == "colocated"
    assert set(colocated_plan.outputs["topology"]) == {"colocated"}
    assert colocated_plan.outputs["kvTransfer"] is None


def test_types_without_efa_get_no_efa_support_and_no_efa_plugin(make_plan):
    plan = make_plan({
        "raypd:mode": "colocated",
        "raypd:colocated": {"instanceType": "g6.xlarge", "replicas": 1},
    })
    (group,) = plan.gpu_node_groups().values()
    assert "enableEfaSupport" not in group["inputs"]
    assert "placementGroupAvailabilityZone" not in group["inputs"]
    assert defaults.EFA_DEVICE_PLUGIN_CHART not in releases_by_chart(plan)


def test_configured_availability_zone_places_gpu_nodes_and_nat_there(make_plan):
    plan = make_plan({"raypd:availabilityZone": "us-east-2b"})
    assert plan.outputs["availabilityZone"] == "us-east-2b"
    (group,) = plan.gpu_node_groups().values()
    assert group["inputs"]["placementGroupAvailabilityZone"] == "us-east-2b"
    assert "network-private-us-east-2b" in group["dependsOn"]
    (nat,) = plan.of_type("aws:ec2/natGateway:NatGateway")
    assert "network-public-us-east-2b" in nat["dependsOn"]


def test_region_reaches_availability_zones_image_and_outputs(make_plan):
    plan = make_plan({"aws:region": "us-west-2"})
    assert plan.outputs["region"] == "us-west-2"
    assert plan.outputs["availabilityZone"] == "us-west-2a"
    assert plan.outputs["image"].startswith(f"{defaults.DLC_ACCOUNTS['us-west-2']}.dkr.ecr.us-west-2.")


def test_hf_token_becomes_a_secret_whose_value_never_appears(make_plan):
    token = "hf_plaintext_token_value"
    plan = make_plan({"raypd:hfToken": token}, secret_keys=("raypd:hfToken",))
    (secret,) = [r for r in plan.of_type("kubernetes:core/v1:Secret") if r["name"].endswith("hf-token")]
    assert secret["inputs"]["stringData"] == "[secret]"
    assert secret["inputs"]["metadata"] == {"name": "ray-llm-hf-token", "namespace": "inference"}
    (service,) = plan.of_type(RAYSERVICE)
    assert "pd-service-hf-token" in service["dependsOn"]
    assert token not in repr(plan.document)


@pytest.mark.parametrize("config", [HETEROGENEOUS, {"raypd:mode": "colocated"}])
def test_gpu_node_groups_follow_the_node_group_plan(make_plan, config):
    spec = DeploymentSpec.from_config(config, "dev")
    plan = make_plan(config)
    groups = plan.gpu_node_groups()
    for expected in plan_deployment(spec).groups:
        inputs = groups[expected.name]["inputs"]
        assert inputs["instanceTypes"] == [expected.instance_type]
        assert inputs["scalingConfig"]["desiredSize"] == expected.nodes
        assert inputs["diskSize"] == expected.root_volume_gb
