"""The program's entry point as Pulumi runs it: config in, exports out, readable failures.

`components.stack.program.main` is what `__main__.py` runs. Here it runs under the mock runtime with
config given the way the Pulumi engine hands it over (object values as JSON text, the HF token
as a secret key), and with EC2 answers scripted to exercise the AZ choice.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pulumi
import pytest

from components.config.errors import SpecError
from components.render.outputs import OUTPUT_KEYS
from components.stack.mockrun import PlanMocks, run_program
from components.stack.program import main


def exported_outputs() -> dict[str, Any]:
    """The program as `__main__.py` runs it; the result is what it exported."""
    main()
    return dict(pulumi.runtime.get_root_resource().outputs)


class ScriptedEc2(PlanMocks):
    """Answers DescribeInstanceTypeOfferings from a script and records what gets created."""

    def __init__(self, region: str, offerings: list[tuple[str, str]]):
        super().__init__(region)
        self.scripted = offerings
        self.created: list[str] = []

    def _offerings(self, request: dict[str, Any]) -> dict[str, Any]:
        filters = {f["name"]: f["values"] for f in request.get("filters") or []}
        pairs = [
            (t, zone) for t, zone in self.scripted
            if t in filters.get("instance-type", []) and zone in filters.get("location", [zone])
        ]
        return {
            "instanceTypes": [t for t, _ in pairs],
            "locations": [zone for _, zone in pairs],
            "locationTypes": ["availability-zone"] * len(pairs),
        }

    def new_resource(self, args):
        self.created.append(args.name)
        return super().new_resource(args)


HETEROGENEOUS_CONFIG = {
    "aws:region": "us-east-2",
    "raypd:prefill": json.dumps({"instanceType": "p5.48xlarge", "tensorParallelSize": 8}),
    "raypd:decode": json.dumps(
        {"instanceType": "g6e.48xlarge", "tensorParallelSize": 8, "replicas": 2}
    ),
}


def run_main(config: dict[str, str], secret_keys=(), mock=None, region="us-east-2"):
    return run_program(
        exported_outputs, project="raypd", stack="dev", region=region,
        config=config, secret_keys=list(secret_keys), mock=mock,
    )


def test_main_reads_pulumi_config_and_exports_every_output_with_kubeconfig_secret():
    run = run_main(
        {**HETEROGENEOUS_CONFIG, "raypd:hfToken": "hf_from_pulumi_config"},
        secret_keys=["raypd:hfToken"],
    )
    assert set(OUTPUT_KEYS) <= set(run.outputs)
    assert run.outputs["kubeconfig"].secret
    assert not run.outputs["modelId"].secret
    assert run.outputs["topology"].value["prefill"]["instanceType"] == "p5.48xlarge"
    assert run.outputs["topology"].value["decode"]["replicas"] == 2
    (secret,) = [r for r in run.resources if r.type == "kubernetes:core/v1:Secret"
                 and r.name.endswith("hf-token")]
    # The token reaches the engine only as a secret value.
    assert pulumi.runtime.rpc.is_rpc_secret(secret.inputs["stringData"])


def test_invalid_config_fails_with_field_messages_and_creates_nothing(caplog):
    mock = ScriptedEc2("us-east-2", [])
    config = {"raypd:prefill": json.dumps({"instanceType": "g6.8xlarge", "tensorParallelSize": 2})}
    with caplog.at_level(logging.ERROR), pytest.raises(pulumi.RunError) as failure:
        run_main(config, mock=mock)
    assert "invalid raypd configuration" in str(failure.value)
    assert any(
        record.getMessage().startswith("raypd:prefill.tensorParallelSize:")
        for record in caplog.records
    )
    assert mock.created == []


def test_unknown_raypd_key_in_pulumi_config_is_reported(caplog):
    with caplog.at_level(logging.ERROR), pytest.raises(pulumi.RunError):
        run_main({"raypd:replica": "2"})
    assert any(r.getMessage().startswith("raypd:replica: unknown key") for r in caplog.records)


def test_gpu_az_is_the_first_zone_offering_every_gpu_type():
    mock = ScriptedEc2("us-east-2", [
        ("p5.48xlarge", "us-east-2a"),
        ("p5.48xlarge", "us-east-2c"), ("g6e.48xlarge", "us-east-2c"),
        ("p5.48xlarge", "us-east-2b"), ("g6e.48xlarge", "us-east-2b"),
    ])
    run = run_main(HETEROGENEOUS_CONFIG, mock=mock)
    assert run.outputs["availabilityZone"].value == "us-east-2b"
    subnet_zones = {r.inputs["availabilityZone"] for r in run.resources
                    if r.type == "aws:ec2/subnet:Subnet"}
    assert subnet_zones == {"us-east-2b", "us-east-2a"}  # the GPU AZ and the first other one


def test_local_zones_are_never_chosen_for_gpu_nodes():
    mock = ScriptedEc2("us-west-2", [
        ("g6.8xlarge", "us-west-2-lax-1a"), ("g6.8xlarge", "us-west-2c"),
    ])
    run = run_main({"aws:region": "us-west-2"}, mock=mock, region="us-west-2")
    assert run.outputs["availabilityZone"].value == "us-west-2c"


def test_no_zone_offering_all_gpu_types_is_a_readable_error_before_anything_exists(caplog):
    mock = ScriptedEc2("us-east-2", [("p5.48xlarge", "us-east-2a"), ("g6e.48xlarge", "us-east-2b")])
    with caplog.at_level(logging.ERROR), pytest.raises(pulumi.RunError):
        run_main(HETEROGENEOUS_CONFIG, mock=mock)
    messages = [r.getMessage() for r in caplog.records]
    expected = "raypd:availabilityZone: no availability zone of us-east-2 offers all of"
    assert any(message.startswith(expected) for message in messages)
    assert mock.created == []


def test_configured_zone_without_the_gpu_type_is_rejected():
    from components.config.spec import DeploymentSpec
    from components.plan.topology import plan_deployment
    from components.stack.offline_plan import plan_spec
    from components.stack.program import resolve_gpu_zone

    spec = DeploymentSpec.from_config({"raypd:availabilityZone": "us-east-2c"}, "dev")
    mock = ScriptedEc2("us-east-2", [("g6.8xlarge", "us-east-2a")])
    with pytest.raises(SpecError) as failure:
        run_program(lambda: {"zone": resolve_gpu_zone(plan_deployment(spec))}, project="raypd", stack="dev",
                    region="us-east-2", mock=mock)
    assert failure.value.errors[0].field == "raypd:availabilityZone"
    assert "us-east-2c does not offer all of g6.8xlarge" in failure.value.errors[0].message
    # Offline, the zone asked about is assumed to offer the type.
    assert plan_spec(spec)["outputs"]["availabilityZone"] == "us-east-2c"


def test_missing_aws_region_is_warned_about(caplog):
    with caplog.at_level(logging.WARNING):
        run_main({})
    assert any(r.getMessage().startswith("aws:region is not set") for r in caplog.records)


class PlainKubeconfigMocks(PlanMocks):
    """A provider that hands the kubeconfig back as a plain value (nothing obliges it to mark it)."""

    def new_resource(self, args: Any) -> Any:
        resource_id, state = super().new_resource(args)
        if args.typ == "eks:index:Cluster":
            unwrap = pulumi.runtime.rpc.unwrap_rpc_secret
            state = {**state, "kubeconfig": unwrap(state["kubeconfig"]),
                     "kubeconfigJson": unwrap(state["kubeconfigJson"])}
        return resource_id, state


def test_the_program_itself_makes_the_kubeconfig_output_secret():
    run = run_main({}, mock=PlainKubeconfigMocks("us-east-2"))
    assert run.outputs["kubeconfig"].secret  # raypd's own wrapping, not the provider's
    assert not pulumi.runtime.rpc.is_rpc_secret(run.outputs["kubeconfig"].value)
