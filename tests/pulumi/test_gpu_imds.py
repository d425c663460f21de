"""GPU nodes: IMDSv2 with hop limit 1 (issue 17 §3), so privileged Ray workers cannot take the
node role's credentials. pulumi-eks builds the launch template inside its ManagedNodeGroup (a
multi-language component the mock runtime registers as one resource), so the transform raypd
declares on it is called here on the launch template pulumi-eks would create."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest

from components.config.spec import DeploymentSpec
from components.stack.mockrun import RegisteredResource, run_program
from components.stack.node_groups import LAUNCH_TEMPLATE_TYPE, imds_hop_limit_one
from components.stack.program import build

MNG = "eks:index:ManagedNodeGroup"


@pytest.fixture(scope="module")
def node_groups() -> list[RegisteredResource]:
    spec = DeploymentSpec()
    run = run_program(lambda: build(spec), project="raypd", stack="dev", region=spec.region)
    return [r for r in run.resources if r.type == MNG]


def pulumi_eks_launch_template() -> pulumi.ResourceTransformArgs:
    """What nodegroup.ts `createMNGCustomLaunchTemplate` passes for enableIMDSv2 + EFA."""
    props: dict[str, Any] = {
        "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 2, "httpEndpoint": "enabled"},
        "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": 200}}],
        "placement": {"groupName": "gpu-placement"},
        "networkInterfaces": [{"deviceIndex": 0, "networkCardIndex": 0, "interfaceType": "efa"}],
    }
    return pulumi.ResourceTransformArgs(True, LAUNCH_TEMPLATE_TYPE, "gpu-nodes-group-launchTemplate",
                                        props, pulumi.ResourceOptions())


def apply_transforms(resource: RegisteredResource, args: pulumi.ResourceTransformArgs) -> dict[str, Any]:
    props = dict(args.props)
    for transform in resource.transforms:
        result = transform(pulumi.ResourceTransformArgs(args.custom, args.type_, args.name, props, args.opts))
        if result is not None:
            props = dict(result.props)
    return props


def test_every_gpu_group_launch_template_gets_hop_limit_one(node_groups):
    gpu = [r for r in node_groups if "gpu-worker" in str(r.inputs.get("labels"))]
    assert gpu, "no GPU node group in the plan"
    for group in gpu:
        props = apply_transforms(group, pulumi_eks_launch_template())
        assert props["metadataOptions"] == {
            "httpTokens": "required", "httpPutResponseHopLimit": 1, "httpEndpoint": "enabled"}
        # pulumi-eks keeps building the rest: EFA interfaces, placement group, disk.
        assert props["networkInterfaces"][0]["interfaceType"] == "efa"
        assert props["placement"] == {"groupName": "gpu-placement"}
        assert props["blockDeviceMappings"][0]["ebs"]["volumeSize"] == 200


def test_the_group_still_asks_pulumi_eks_for_its_efa_launch_template(node_groups):
    (gpu,) = [r for r in node_groups if "gpu-worker" in str(r.inputs.get("labels"))]
    assert gpu.inputs["enableIMDSv2"] is True
    assert gpu.inputs["enableEfaSupport"] is True
    assert "launchTemplate" not in gpu.inputs


def test_the_transform_leaves_other_resources_alone():
    args = pulumi.ResourceTransformArgs(True, "aws:eks/nodeGroup:NodeGroup", "n", {"x": 1},
                                        pulumi.ResourceOptions())
    assert imds_hop_limit_one(args) is None


def test_a_template_without_metadata_options_gets_them():
    args = pulumi.ResourceTransformArgs(True, LAUNCH_TEMPLATE_TYPE, "lt", {}, pulumi.ResourceOptions())
    result = imds_hop_limit_one(args)
    assert result is not None
    assert result.props["metadataOptions"]["httpPutResponseHopLimit"] == 1
    assert result.props["metadataOptions"]["httpTokens"] == "required"
