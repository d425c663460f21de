"""Preflight against a real AWS emulator (moto's server, reached through AWS_ENDPOINT_URL).

moto answers STS and EC2 (instance types, offerings per AZ, zones, instances) from AWS's own recorded
data. It does not implement EC2's Service Quotas, so that client is a botocore Stubber, passed in
through `run_preflight(..., clients=...)`. Where the spec itself refuses a configuration (a type the
catalogue says has no EFA, or too few GPUs), the catalogue entry is patched to disagree with EC2:
that is the real failure preflight exists for (a stale catalogue vs the API), and EC2's answer is
moto's unmodified one.
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import shlex
import socket
import threading
import urllib.request
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

import boto3
import pytest
from botocore.stub import Stubber

from components.config import catalogue
from components.config.checks import PREFLIGHT_IDS, Report, exit_code
from components.config.spec import DeploymentSpec
from components.plan.capacity import node_lines, quota_code_for, surge_nodes, update_surge_vcpus, vcpus_needed
from components.plan.topology import plan_deployment
from components.plan.zones import EKS_UNSUPPORTED_ZONE_IDS, PreviousZones
from components.plan.zones import eks_usable as eks_usable_zones
from components.preflight.admin_access import caller_in_admins, matching_entry
from components.preflight.cli import main as preflight_main
from components.preflight.placement import choose_gpu_zone, second_zone
from components.preflight.quota import increase_command
from components.preflight.run import run_preflight
from tests.unit.cli_support import run_main, run_module, write_stack

G, P, STD = catalogue.QUOTA_G_AND_VT, catalogue.QUOTA_P, catalogue.QUOTA_STANDARD
# The EC2 and quota checks (model-source asks S3, endpoint-certificate ACM, each with its own reasons:
# tests/unit/test_model_source.py, tests/unit/test_endpoint_certificate.py).
AWS_CHECKS = [i for i in PREFLIGHT_IDS if i not in (
    "aws-credentials", "gpu-memory-fit", "model-source", "endpoint-certificate")]
MakeSpec = Callable[..., DeploymentSpec]


# ---- fixtures: a clean AWS environment on the emulator (moto_endpoint: tests/unit/conftest.py) ----

def _isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No developer config, profile or instance role can leak into a test."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                 "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL", "AWS_REGION",
                 "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI"):
        monkeypatch.delenv(name, raising=False)
    for name in ("config", "credentials"):
        (tmp_path / name).write_text("", encoding="utf-8")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")


@pytest.fixture
def aws(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """A fresh emulated account, reached the way users reach AWS: the default credential chain."""
    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST"))
    _isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    return moto_endpoint


def quotas(region: str, answers: Mapping[str, Any]) -> tuple[Any, Stubber]:
    """A Service Quotas client answering GetServiceQuota per code: a number, or an error code."""
    client = boto3.client(
        "service-quotas", region_name=region, endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="stub", aws_secret_access_key="stub",
    )
    stubber = Stubber(client)
    for code in sorted(answers):  # preflight asks in code order
        expected = {"ServiceCode": "ec2", "QuotaCode": code}
        answer = answers[code]
        if isinstance(answer, str):
            stubber.add_client_error("get_service_quota", service_error_code=answer,
                                     http_status_code=403, expected_params=expected)
        else:
            stubber.add_response("get_service_quota", {"Quota": {
                "ServiceCode": "ec2", "QuotaCode": code, "QuotaName": code, "Value": float(answer),
            }}, expected)
    stubber.activate()
    return client, stubber


def run(spec: DeploymentSpec, quota_answers: Optional[Mapping[str, Any]] = None,
        deployed: Optional[DeploymentSpec] = None, deployed_zone: Optional[str] = None) -> Report:
    answers = quota_answers if quota_answers is not None else {G: 1000, P: 1000, STD: 1000}
    client, stubber = quotas(spec.region, {c: v for c, v in answers.items()
                                           if c in vcpus_needed(node_lines(plan_deployment(spec), {}))})
    report = run_preflight(spec, deployed=deployed, clients={"service-quotas": client},
                           deployed_zone=deployed_zone)
    stubber.assert_no_pending_responses()  # the quotas really were read
    return report


def by_id(report: Report) -> dict[str, Any]:
    return {check.id: check for check in report.checks}


def run_instances(region: str, instance_type: str, count: int, cluster: Optional[str] = None) -> None:
    ec2 = boto3.client("ec2", region_name=region)
    tags = ([{"ResourceType": "instance", "Tags": [{"Key": "eks:cluster-name", "Value": cluster}]}]
            if cluster else [])
    ec2.run_instances(ImageId="ami-12c6146b", MinCount=count, MaxCount=count,
                      InstanceType=instance_type, TagSpecifications=tags)


# ---- pure logic ----

def test_eks_excluded_zone_ids_are_keyed_by_zone_id_not_name() -> None:
    zones = [("us-east-1a", "use1-az6"), ("us-east-1e", "use1-az3"), ("us-east-1-bos-1a", "use1-bos1-az1")]
    assert eks_usable_zones("us-east-1", zones) == ["us-east-1a"]
    # The same name maps to another zone ID in another account: then it is fine.
    assert eks_usable_zones("us-east-1", [("us-east-1e", "use1-az5")]) == ["us-east-1e"]
    assert "use1-az3" in EKS_UNSUPPORTED_ZONE_IDS["us-east-1"]


def test_second_zone_follows_the_programs_rule() -> None:
    names = ["us-east-2c", "us-east-2a", "us-east-2b", "us-east-2-lax-1a"]
    assert second_zone("us-east-2", names, "us-east-2a") == "us-east-2b"
    assert second_zone("us-east-2", names, "us-east-2b") == "us-east-2a"
    assert second_zone("us-east-2", ["us-east-2a"], "us-east-2a") is None


def test_zone_choice_is_the_first_zone_offering_every_gpu_type(make_spec: MakeSpec) -> None:
    spec = make_spec({"aws:region": "us-east-1", "raypd:prefill": {"instanceType": "p5en.48xlarge"},
                      "raypd:decode": {"instanceType": "p5.48xlarge"}})
    offerings = [("p5en.48xlarge", "us-east-1c"), ("p5en.48xlarge", "us-east-1a"),
                 ("p5.48xlarge", "us-east-1c"), ("p5.48xlarge", "us-east-1b")]
    assert choose_gpu_zone(plan_deployment(spec), offerings) == ("us-east-1c", ["us-east-1c"])
    pinned = make_spec({"aws:region": "us-east-1", "raypd:availabilityZone": "us-east-1a",
                        "raypd:prefill": {"instanceType": "p5en.48xlarge"},
                        "raypd:decode": {"instanceType": "p5.48xlarge"}})
    assert choose_gpu_zone(plan_deployment(pinned), offerings) == (None, ["us-east-1c"])


def test_vcpus_needed_per_quota_code(reference_spec: DeploymentSpec, heterogeneous_spec: DeploymentSpec) -> None:
    assert vcpus_needed(node_lines(plan_deployment(reference_spec), {})) == {G: 64, STD: 4}
    # 1 x p5.48xlarge (192) for prefill; 2 x g6e.48xlarge (192) for decode; 1 x m7i.xlarge.
    assert vcpus_needed(node_lines(plan_deployment(heterogeneous_spec), {})) == {P: 192, G: 384, STD: 4}
    # The API's vCPU count wins over the catalogue's.
    reference = plan_deployment(reference_spec)
    assert vcpus_needed(node_lines(reference, {"g6.8xlarge": 16})) == {G: 32, STD: 4}


def test_autoscaled_groups_count_at_their_maximum(make_spec: MakeSpec) -> None:
    # Issue 30: decode 1..4 beside a fixed prefill on the shared group: 5 nodes at the maximum.
    plan = plan_deployment(make_spec({"raypd:decode": {"autoscaling": AUTOSCALED}}))
    assert vcpus_needed(node_lines(plan, {})) == {G: 160, STD: 4}
    assert vcpus_needed(node_lines(plan, {}, at_maximum=False)) == {G: 64, STD: 4}
    (line, _system) = node_lines(plan, {})
    assert (line.nodes, line.why) == (5, "GPU group gpu at its autoscaling maximum")


def test_update_surge_is_twice_the_zones_of_each_gpu_group(reference_spec: DeploymentSpec,
                                                           heterogeneous_spec: DeploymentSpec) -> None:
    assert surge_nodes(zones=1, max_unavailable=1) == 2
    assert surge_nodes(zones=1, max_unavailable=5) == 5
    # System nodes are not counted.
    assert update_surge_vcpus(node_lines(plan_deployment(reference_spec), {})) == {G: 64}
    assert update_surge_vcpus(node_lines(plan_deployment(heterogeneous_spec), {})) == {P: 384, G: 384}


def test_quota_codes_by_family() -> None:
    assert quota_code_for("g6.8xlarge") == G
    assert quota_code_for("gr6.4xlarge") == G
    assert quota_code_for("p5en.48xlarge") == P
    assert quota_code_for("c7i.large") == STD
    assert quota_code_for("inf2.xlarge") is None  # its own quota, not one raypd uses


def test_increase_command_is_shell_safe() -> None:
    command = increase_command("L-DB2E81BA", 64, "us-east-2")
    assert command == ("aws service-quotas request-service-quota-increase --service-code ec2 "
                       "--quota-code L-DB2E81BA --desired-value 64 --region us-east-2")
    hostile = increase_command("L-1; rm -rf /", 1, "x y")
    assert shlex.split(hostile)[6:] == ["L-1; rm -rf /", "--desired-value", "1", "--region", "x y"]


# ---- against the emulator ----

def test_reference_stack_passes_every_check(aws: str, reference_spec: DeploymentSpec) -> None:
    report = run(reference_spec, {G: 128, STD: 32})
    checks = by_id(report)
    assert report.ok and exit_code(report) == 0
    assert [c.id for c in report.checks] == list(PREFLIGHT_IDS)
    assert {c.status for c in report.checks
            if c.id not in ("update-headroom", "endpoint-certificate")} == {"pass"}
    # The reference endpoint is plain HTTP inside the VPC: no certificate to check, and it says so.
    assert checks["endpoint-certificate"].status == "skip"
    assert "plain HTTP" in checks["endpoint-certificate"].detail
    assert "account 123456789012" in checks["aws-credentials"].detail
    assert "testing" not in json.dumps(report.as_dict())  # never the keys
    assert checks["zone-offering"].detail.startswith(
        "us-east-2a (the first zone offering g6.8xlarge where EKS can place the cluster; set "
        "raypd:availabilityZone to pin it)")
    assert "L-DB2E81BA" in checks["vcpu-quota"].detail and "64 vCPUs" in checks["vcpu-quota"].detail
    assert checks["update-headroom"].status == "skip"
    assert "new stack" in checks["update-headroom"].detail


def test_quota_too_small_fails_with_a_copy_paste_request(aws: str, reference_spec: DeploymentSpec) -> None:
    report = run(reference_spec, {G: 32, STD: 32})
    quota = by_id(report)["vcpu-quota"]
    assert quota.status == "fail" and not report.ok
    assert "needs 64 vCPUs" in quota.detail and "quota 32" in quota.detail
    assert ("aws service-quotas request-service-quota-increase --service-code ec2 --quota-code "
            "L-DB2E81BA --desired-value 64 --region us-east-2") in quota.remedy
    assert "L-1216C47A" not in quota.remedy  # the standard quota was enough


AUTOSCALED = {"minReplicas": 1, "maxReplicas": 4, "targetOngoingRequests": 8}


def test_a_quota_short_of_the_autoscaling_maximum_warns(aws: str, make_spec: MakeSpec) -> None:
    spec = make_spec({"raypd:decode": {"autoscaling": AUTOSCALED}})  # 64 vCPUs at the start, 160 at the top
    report = run(spec, {G: 96, STD: 32})
    quota = by_id(report)["vcpu-quota"]
    assert quota.status == "warn" and report.ok  # the stack starts; its scale-ups stop short
    assert "not every autoscaled phase at its maxReplicas" in quota.detail
    assert "needs 160 vCPUs (5 x g6.8xlarge (32)) at every autoscaled phase's maxReplicas, 64 at the " \
           "starting counts" in quota.detail
    assert "--quota-code L-DB2E81BA --desired-value 160" in quota.remedy
    assert by_id(run(spec, {G: 160, STD: 32}))["vcpu-quota"].status == "pass"


def test_a_quota_short_of_the_start_fails_and_asks_for_the_maximum(aws: str, make_spec: MakeSpec) -> None:
    quota = by_id(run(make_spec({"raypd:decode": {"autoscaling": AUTOSCALED}}), {G: 32, STD: 32}))["vcpu-quota"]
    assert quota.status == "fail"
    assert "--desired-value 160" in quota.remedy  # an increase to the start alone would stall scale-ups


def test_running_instances_use_up_quota(aws: str, reference_spec: DeploymentSpec) -> None:
    run_instances("us-east-2", "g6.8xlarge", 2)  # someone else's 64 vCPUs of G
    quota = by_id(run(reference_spec, {G: 96, STD: 32}))["vcpu-quota"]
    assert quota.status == "fail"
    assert "64 in use by other running instances, 32 free" in quota.detail
    assert "--desired-value 128" in quota.remedy


def test_on_update_this_stacks_own_nodes_are_not_extra(aws: str, reference_spec: DeploymentSpec) -> None:
    cluster = reference_spec.effective_cluster_name
    run_instances("us-east-2", "g6.8xlarge", 2, cluster=cluster)  # the deployed stack's GPU nodes
    new_stack = by_id(run(reference_spec, {G: 96, STD: 32}))["vcpu-quota"]
    assert new_stack.status == "fail"  # a new stack cannot assume those nodes go away
    update = by_id(run(reference_spec, {G: 96, STD: 32}, deployed=reference_spec))["vcpu-quota"]
    assert update.status == "pass", update.detail
    assert f"64 by this stack's cluster {cluster} (not counted" in update.detail


def test_service_quotas_denied_warns_with_the_need(aws: str, reference_spec: DeploymentSpec) -> None:
    report = run(reference_spec, {G: "AccessDeniedException", STD: "AccessDeniedException"},
                 deployed=reference_spec)
    checks = by_id(report)
    assert checks["vcpu-quota"].status == "warn"
    assert "L-DB2E81BA" in checks["vcpu-quota"].detail and "needs 64 vCPUs" in checks["vcpu-quota"].detail
    assert "AccessDeniedException" in checks["vcpu-quota"].detail
    assert checks["update-headroom"].status == "skip"
    assert report.ok  # unknown is not a failure


def test_update_headroom_warns_when_the_surge_does_not_fit(aws: str, reference_spec: DeploymentSpec) -> None:
    # No change pending: what a later rolling update (AMI, Kubernetes version) would need.
    tight = by_id(run(reference_spec, {G: 96, STD: 32}, deployed=reference_spec))
    assert tight["vcpu-quota"].status == "pass"
    assert tight["update-headroom"].status == "warn"
    assert "would stall" in tight["update-headroom"].detail
    assert "64 + 64 = 128 vCPUs" in tight["update-headroom"].detail
    assert "--desired-value 128" in tight["update-headroom"].remedy
    roomy = by_id(run(reference_spec, {G: 128, STD: 32}, deployed=reference_spec))
    assert roomy["update-headroom"].status == "pass"


def test_type_offered_only_in_some_zones(aws: str, make_spec: MakeSpec) -> None:
    # moto's AWS data: p5en.48xlarge is in use1-az2 and use1-az6 only (us-east-1c, us-east-1a).
    p5en = {"instanceType": "p5en.48xlarge", "tensorParallelSize": 8}
    spec = make_spec({"aws:region": "us-east-1", "raypd:availabilityZone": "us-east-1b",
                      "raypd:prefill": p5en, "raypd:decode": p5en})
    report = run(spec)
    zone = by_id(report)["zone-offering"]
    assert zone.status == "fail"
    assert "us-east-1b (raypd:availabilityZone) does not offer p5en.48xlarge" in zone.detail
    assert "us-east-1a, us-east-1c" in zone.detail and "us-east-1a, us-east-1c" in zone.remedy
    assert by_id(report)["eks-zone"].status == "pass"  # EKS can use us-east-1b; the offering is the problem
    unpinned = by_id(run(make_spec({"aws:region": "us-east-1", "raypd:prefill": p5en, "raypd:decode": p5en})))
    assert unpinned["zone-offering"].status == "pass"
    assert unpinned["zone-offering"].detail.startswith("us-east-1a (the first zone offering p5en.48xlarge")


def test_zone_choice_skips_zones_eks_cannot_use_like_the_program(make_spec: MakeSpec) -> None:
    p5 = {"instanceType": "p5.4xlarge"}
    spec = make_spec({"aws:region": "us-east-1", "raypd:prefill": p5, "raypd:decode": p5})
    offerings = [("p5.4xlarge", "us-east-1a"), ("p5.4xlarge", "us-east-1e")]
    usable = eks_usable_zones("us-east-1", [("us-east-1a", "use1-az3"), ("us-east-1e", "use1-az5")])
    assert choose_gpu_zone(plan_deployment(spec), offerings, usable) == ("us-east-1e", ["us-east-1a", "us-east-1e"])
    remembered = PreviousZones(gpu="us-east-1a", second="us-east-1b")
    assert choose_gpu_zone(plan_deployment(spec), offerings, usable, remembered)[0] == "us-east-1a"


def test_a_deployed_stack_keeps_the_zone_its_vpc_remembers(aws: str, reference_spec: DeploymentSpec) -> None:
    ec2 = boto3.client("ec2", region_name="us-east-2")
    ec2.create_vpc(CidrBlock="10.0.0.0/16", TagSpecifications=[{"ResourceType": "vpc", "Tags": [
        {"Key": "raypd.io/stack", "Value": "dev"}, {"Key": "raypd.io/cluster", "Value": "raypd-dev"},
        {"Key": "raypd.io/gpu-zone", "Value": "us-east-2b"}, {"Key": "raypd.io/second-zone", "Value": "us-east-2a"}]}])
    zone = by_id(run(reference_spec, {G: 128, STD: 32}))["zone-offering"]
    assert zone.status == "pass"
    assert zone.detail.startswith("us-east-2b (the zone this stack already runs in; it never moves on its own")


def test_a_move_outside_the_clusters_two_zones_fails_before_the_program_refuses_it(
        aws: str, make_spec: MakeSpec) -> None:
    ec2 = boto3.client("ec2", region_name="us-east-2")
    ec2.create_vpc(CidrBlock="10.0.0.0/16", TagSpecifications=[{"ResourceType": "vpc", "Tags": [
        {"Key": "raypd.io/stack", "Value": "dev"}, {"Key": "raypd.io/cluster", "Value": "raypd-dev"},
        {"Key": "raypd.io/gpu-zone", "Value": "us-east-2b"}, {"Key": "raypd.io/second-zone", "Value": "us-east-2a"}]}])
    third = by_id(run(make_spec({"raypd:availabilityZone": "us-east-2c"}), {G: 128, STD: 32}))["zone-offering"]
    assert third.status == "fail" and "outside the zones" in third.detail
    assert "us-east-2a" in third.remedy
    swap = by_id(run(make_spec({"raypd:availabilityZone": "us-east-2a"}), {G: 128, STD: 32}))["zone-offering"]
    assert swap.status == "pass"


def test_zone_eks_does_not_support(aws: str, make_spec: MakeSpec) -> None:
    # In moto's account us-east-1e is use1-az3, and p5.4xlarge is offered there.
    p5 = {"instanceType": "p5.4xlarge"}
    spec = make_spec({"aws:region": "us-east-1", "raypd:availabilityZone": "us-east-1e",
                      "raypd:prefill": p5, "raypd:decode": p5})
    checks = by_id(run(spec))
    assert checks["zone-offering"].status == "pass"
    assert checks["eks-zone"].status == "fail"
    assert "us-east-1e is use1-az3" in checks["eks-zone"].detail
    assert "us-east-1e" not in checks["eks-zone"].remedy.split("here:")[1]


def test_zone_eks_does_not_support_fails_even_when_the_zone_also_lacks_the_type(aws: str, make_spec: MakeSpec) -> None:
    # moto's account: us-east-1e is use1-az3 (EKS refuses it), and p5en.48xlarge is not offered there.
    p5en = {"instanceType": "p5en.48xlarge", "tensorParallelSize": 8}
    spec = make_spec({"aws:region": "us-east-1", "raypd:availabilityZone": "us-east-1e",
                      "raypd:prefill": p5en, "raypd:decode": p5en})
    checks = by_id(run(spec))
    assert checks["zone-offering"].status == "fail"
    eks = checks["eks-zone"]
    assert eks.status == "fail", eks.detail
    assert "GPU zone us-east-1e is use1-az3, where EKS cannot place cluster subnets" in eks.detail
    assert eks.remedy.startswith("set raypd:availabilityZone to a zone that offers the GPU types and that EKS supports")
    assert "us-east-1e" not in eks.remedy.split("here:")[1]


def test_eks_zone_skips_only_when_there_is_no_zone_to_judge(aws: str, make_spec: MakeSpec) -> None:
    # Unpinned, and no zone offers both types (moto's data: p5e.48xlarge is not in us-east-1).
    spec = make_spec({"aws:region": "us-east-1",
                      "raypd:prefill": {"instanceType": "p5en.48xlarge", "tensorParallelSize": 8},
                      "raypd:decode": {"instanceType": "p5e.48xlarge", "tensorParallelSize": 8}})
    checks = by_id(run(spec))
    assert checks["zone-offering"].status == "fail"
    eks = checks["eks-zone"]
    assert eks.status == "skip"
    assert "EKS does not support us-east-1e" not in eks.detail  # no contradiction in a skip
    assert "zones EKS does not support here: us-east-1e (use1-az3)" in eks.detail


def test_type_not_in_the_region_and_type_unknown_to_ec2(aws: str, make_spec: MakeSpec) -> None:
    p5e = {"instanceType": "p5e.48xlarge", "tensorParallelSize": 8}
    spec = make_spec({"aws:region": "us-east-1", "raypd:prefill": p5e, "raypd:decode": p5e,
                      "raypd:systemNodes": {"instanceType": "m9z.xlarge"}})
    checks = by_id(run(spec))
    types = checks["instance-types"]
    assert types.status == "fail"
    assert "p5e.48xlarge is not offered in us-east-1" in types.detail
    assert "m9z.xlarge does not exist in EC2 (InvalidInstanceType)" in types.detail
    assert "raypd:prefill.instanceType" in types.remedy and "raypd:systemNodes.instanceType" in types.remedy
    assert checks["zone-offering"].status == "fail"
    # The same GPU type is offered in us-east-2 (moto's data).
    assert by_id(run(make_spec({"raypd:prefill": p5e, "raypd:decode": p5e})))["instance-types"].status == "pass"


def test_ec2_reports_fewer_gpus_than_the_catalogue(aws: str, make_spec: MakeSpec,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    stale = dataclasses.replace(catalogue.CATALOGUE["g6.8xlarge"], gpus=2)
    monkeypatch.setitem(catalogue.CATALOGUE, "g6.8xlarge", stale)
    tp2 = {"instanceType": "g6.8xlarge", "tensorParallelSize": 2}
    checks = by_id(run(make_spec({"raypd:prefill": tp2, "raypd:decode": tp2})))
    assert checks["instance-types"].status == "fail"
    assert "g6.8xlarge has 1 GPU(s) per EC2, but raypd:prefill needs" in checks["instance-types"].detail
    assert "raypd:decode.tensorParallelSize" in checks["instance-types"].remedy


def test_ec2_reports_no_efa(aws: str, make_spec: MakeSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = dataclasses.replace(catalogue.CATALOGUE["g6.4xlarge"], max_efa_interfaces=1)
    monkeypatch.setitem(catalogue.CATALOGUE, "g6.4xlarge", stale)
    phase = {"instanceType": "g6.4xlarge"}
    checks = by_id(run(make_spec({"raypd:prefill": phase, "raypd:decode": phase})))
    assert checks["efa-support"].status == "fail"
    assert "no EFA support for g6.4xlarge" in checks["efa-support"].detail
    assert "UCX" in checks["efa-support"].remedy


def test_efa_is_skipped_when_kv_transfer_does_not_use_it(aws: str, make_spec: MakeSpec) -> None:
    ucx = by_id(run(make_spec({"raypd:kvTransfer": {"backend": "UCX"}})))
    assert ucx["efa-support"].status == "skip" and "UCX" in ucx["efa-support"].detail
    colocated = by_id(run(make_spec({"raypd:mode": "colocated"})))
    assert colocated["efa-support"].status == "skip" and "colocated" in colocated["efa-support"].detail


def test_rejected_credentials_fail_and_stop_the_aws_checks(aws: str, reference_spec: DeploymentSpec) -> None:
    sts = boto3.client("sts", region_name="us-east-2")
    stubber = Stubber(sts)
    stubber.add_client_error("get_caller_identity", service_error_code="ExpiredToken", http_status_code=403)
    stubber.activate()
    report = run_preflight(reference_spec, clients={"sts": sts})
    checks = by_id(report)
    assert checks["aws-credentials"].status == "fail"
    assert "ExpiredToken" in checks["aws-credentials"].detail and checks["aws-credentials"].remedy
    assert all(checks[i].status == "skip" for i in AWS_CHECKS)
    assert checks["gpu-memory-fit"].status == "pass"


def test_cli_exit_2_names_a_region_typo_without_credentials_or_network(tmp_path: Path) -> None:
    # botocore's partition data decides, offline: no AWS call, no traceback.
    result = run_main(preflight_main, "--config", str(_stack(tmp_path, {"aws:region": "us-east-3"})))
    assert result.returncode == 2 and result.stdout == ""
    assert "aws:region: 'us-east-3' is not an AWS region" in result.stderr
    assert "us-east-2" in result.stderr and "Traceback" not in result.stderr


def test_no_credentials_skips_aws_but_still_checks_memory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          reference_spec: DeploymentSpec) -> None:
    _isolate(monkeypatch, tmp_path)
    report = run_preflight(reference_spec)
    checks = by_id(report)
    assert checks["aws-credentials"].status == "skip"
    assert checks["aws-credentials"].detail.startswith("no AWS credentials found")
    assert all(checks[i].status == "skip" for i in AWS_CHECKS)
    assert checks["gpu-memory-fit"].status == "pass"
    assert report.ok


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_dead_endpoint_fails_the_credentials_check_naming_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                             reference_spec: DeploymentSpec) -> None:
    _isolate(monkeypatch, tmp_path)
    dead = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("AWS_ENDPOINT_URL", dead)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    report = run_preflight(reference_spec)
    checks = by_id(report)
    assert checks["aws-credentials"].status == "fail" and not report.ok and exit_code(report) == 1
    assert f"AWS STS at {dead} did not answer" in checks["aws-credentials"].detail
    assert "AWS_ENDPOINT_URL" in checks["aws-credentials"].remedy
    assert all(checks[i].status == "skip" for i in AWS_CHECKS)
    assert all("see aws-credentials" in checks[i].detail for i in AWS_CHECKS)


class _NotAws(http.server.BaseHTTPRequestHandler):
    """A proxy or captive portal: answers every request with an empty body (status: the server's)."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.parametrize(("status", "said"), [(200, "not an AWS response"), (502, "HTTP 502")])
def test_endpoint_that_is_not_aws_fails_the_credentials_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                          reference_spec: DeploymentSpec,
                                                          status: int, said: str) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotAws)
    server.status = status  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        _isolate(monkeypatch, tmp_path)
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_address[1]}")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        checks = by_id(run_preflight(reference_spec))
    finally:
        server.shutdown()
        thread.join()
    assert checks["aws-credentials"].status == "fail"
    assert said in checks["aws-credentials"].detail and "127.0.0.1" in checks["aws-credentials"].detail
    assert all(checks[i].status == "skip" for i in AWS_CHECKS)


# ---- the CLI ----

def _stack(tmp_path: Path, config: Mapping[str, Any]) -> Path:
    import yaml

    return write_stack(tmp_path, yaml.safe_dump({"config": dict(config)}))


@pytest.mark.slow
def test_cli_json_against_the_emulator(aws: str, tmp_path: Path) -> None:
    result = run_module("components.preflight", "--config", str(_stack(tmp_path, {})), "--json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert set(document) == {"kind", "ok", "checks"}
    assert document["kind"] == "preflight" and document["ok"] is True
    statuses = {check["id"]: check["status"] for check in document["checks"]}
    assert list(statuses) == list(PREFLIGHT_IDS)
    assert statuses["aws-credentials"] == "pass" and statuses["zone-offering"] == "pass"
    assert statuses["vcpu-quota"] == "warn"  # the emulator has no EC2 Service Quotas
    assert "Traceback" not in result.stderr


def test_cli_exit_1_on_a_failed_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _isolate(monkeypatch, tmp_path)
    stack = _stack(tmp_path, {"raypd:model": {"source": "Qwen/Qwen3-32B"}})
    result = run_main(preflight_main, "--config", str(stack), "--json")
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert document["ok"] is False
    assert [c["status"] for c in document["checks"] if c["id"] == "gpu-memory-fit"] == ["fail"]
    readable = run_main(preflight_main, "--config", str(stack))
    assert readable.returncode == 1
    assert "preflight: FAILED" in readable.stdout and "[FAIL] gpu-memory-fit" in readable.stdout


def test_cli_exit_2_on_invalid_config(tmp_path: Path) -> None:
    stack = _stack(tmp_path, {"raypd:prefill": {"tensorParallelSize": 0}})
    result = run_main(preflight_main, "--config", str(stack))
    assert result.returncode == 2
    assert "raypd:prefill.tensorParallelSize" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


# ---- issue 14: the deploying identity listed in raypd:adminRoleArns ----

WEB_ROLE = "arn:aws:iam::123456789012:role/ops/raypd-web"  # a role with a path
OTHER_ROLE = "arn:aws:iam::123456789012:role/ci"


def _assume(monkeypatch: pytest.MonkeyPatch, role_name: str) -> str:
    """Become `role_name` (moto's STS: its assumed-role credentials answer GetCallerIdentity)."""
    sts = boto3.client("sts", region_name="us-east-2")
    answer = sts.assume_role(RoleArn=f"arn:aws:iam::123456789012:role/ops/{role_name}", RoleSessionName="preflight")
    creds = answer["Credentials"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", creds["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", creds["SecretAccessKey"])
    monkeypatch.setenv("AWS_SESSION_TOKEN", creds["SessionToken"])
    arn = boto3.Session().client("sts", region_name="us-east-2").get_caller_identity()["Arn"]
    assert arn == f"arn:aws:sts::123456789012:assumed-role/{role_name}/preflight"  # no path in it
    return arn


def test_caller_matches_admin_roles_by_account_and_role_name() -> None:
    caller = "arn:aws:sts::123456789012:assumed-role/raypd-web/i-0abc"
    assert caller_in_admins(caller, [OTHER_ROLE, WEB_ROLE]) == [(1, WEB_ROLE)]
    assert caller_in_admins(caller, ["arn:aws:iam::210987654321:role/raypd-web"]) == []  # another account
    assert caller_in_admins(caller, ["arn:aws:iam::123456789012:role/raypd-web-2"]) == []
    user = "arn:aws:iam::123456789012:user/alice"
    assert caller_in_admins(user, ["arn:aws:iam::123456789012:role/alice"]) == []  # a user is no role
    assert matching_entry(user, [OTHER_ROLE, user]) == user
    assert matching_entry(caller, ["arn:aws:iam::123456789012:role/ops/raypd-web"]) == WEB_ROLE


def test_listing_the_deploying_role_fails_before_the_first_up(aws: str, make_spec: MakeSpec,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    _assume(monkeypatch, "raypd-web")
    spec = make_spec({"raypd:adminRoleArns": [OTHER_ROLE, WEB_ROLE]})
    report = run(spec, {G: 128, STD: 32})
    checks = by_id(report)
    creds = checks["aws-credentials"]
    assert creds.status == "fail" and not report.ok
    assert f"raypd:adminRoleArns[1] ({WEB_ROLE}) is the identity running preflight" in creds.detail
    assert "bootstrap cluster admin" in creds.detail and "ResourceInUseException" in creds.detail
    assert creds.remedy.startswith("remove it from raypd:adminRoleArns")
    # The credentials work: every other AWS check still ran.
    assert checks["instance-types"].status == "pass" and checks["vcpu-quota"].status == "pass"
    fine = by_id(run(make_spec({"raypd:adminRoleArns": [OTHER_ROLE]}), {G: 128, STD: 32}))
    assert fine["aws-credentials"].status == "pass"


def _eks_with_entries(cluster: str, entries: Any) -> Any:
    """EKS for an existing cluster (moto does not implement access entries: a Stubber answers)."""
    client = boto3.client("eks", region_name="us-east-2", endpoint_url="http://127.0.0.1:9",
                          aws_access_key_id="stub", aws_secret_access_key="stub")
    stubber = Stubber(client)
    stubber.add_response("describe_cluster", {"cluster": {"name": cluster, "status": "ACTIVE"}}, {"name": cluster})
    if isinstance(entries, str):
        stubber.add_client_error("list_access_entries", service_error_code=entries, http_status_code=403)
    else:
        stubber.add_response("list_access_entries", {"accessEntries": entries}, {"clusterName": cluster})
    stubber.activate()
    return client


@pytest.mark.parametrize(("entries", "deployed_lists_it", "status", "said"), [
    ([OTHER_ROLE, WEB_ROLE], False, "warn", "already has an access entry for it"),  # CLI: cannot tell who owns it
    ([OTHER_ROLE, WEB_ROLE], True, "pass", ""),  # the deployed stack created that entry
    ([OTHER_ROLE], False, "pass", ""),  # no entry yet: the program's create will succeed
    ("AccessDeniedException", False, "warn", "could not be listed"),
])
def test_existing_cluster_asks_eks_for_the_callers_access_entry(
    aws: str, make_spec: MakeSpec, monkeypatch: pytest.MonkeyPatch,
    entries: Any, deployed_lists_it: bool, status: str, said: str,
) -> None:
    _assume(monkeypatch, "raypd-web")
    spec = make_spec({"raypd:adminRoleArns": [WEB_ROLE]})
    deployed = spec if deployed_lists_it else None
    client, stubber = quotas("us-east-2", {G: 128, STD: 32})
    eks = _eks_with_entries(spec.effective_cluster_name, entries)
    report = run_preflight(spec, deployed=deployed, clients={"service-quotas": client, "eks": eks})
    creds = by_id(report)["aws-credentials"]
    assert creds.status == status, creds.detail
    assert said in creds.detail
    if status == "pass":
        assert "is the identity running preflight" not in creds.detail


def test_update_that_newly_lists_the_caller_with_an_existing_entry_fails(
    aws: str, make_spec: MakeSpec, monkeypatch: pytest.MonkeyPatch,
) -> None:
    _assume(monkeypatch, "raypd-web")
    spec = make_spec({"raypd:adminRoleArns": [WEB_ROLE]})
    deployed = make_spec({})  # deployed without it: the caller's entry is the bootstrap one
    client, _ = quotas("us-east-2", {G: 128, STD: 32})
    eks = _eks_with_entries(spec.effective_cluster_name, [WEB_ROLE])
    report = run_preflight(spec, deployed=deployed, clients={"service-quotas": client, "eks": eks})
    creds = by_id(report)["aws-credentials"]
    assert creds.status == "fail"
    assert "that this stack did not create" in creds.detail and "ResourceInUseException" in creds.detail


def test_update_headroom_checks_this_updates_real_peak_old_and_new_groups_together(
        aws: str, reference_spec: DeploymentSpec, make_spec: MakeSpec) -> None:
    # g6.8xlarge -> g6e.8xlarge: the new prefill/decode groups are created before the old shared
    # group (2 x g6.8xlarge) is deleted, so both count against the G quota at the peak.
    changed = make_spec({"raypd:decode": {"instanceType": "g6e.8xlarge"}})
    tight = by_id(run(changed, {G: 100, STD: 32}, deployed=reference_spec))
    assert tight["vcpu-quota"].status == "pass"  # the new settings alone fit (64 vCPUs)
    headroom = tight["update-headroom"]
    assert headroom.status == "fail", headroom
    assert "2 x g6.8xlarge (the old node group" in headroom.detail
    assert "64 + 64 = 128 vCPUs at peak" in headroom.detail
    assert "--desired-value 128" in headroom.remedy
    assert by_id(run(changed, {G: 128, STD: 32}, deployed=reference_spec))["update-headroom"].status == "pass"


def test_update_headroom_counts_a_second_cluster_for_zero_downtime(
        aws: str, make_spec: MakeSpec) -> None:
    deployed = make_spec({"raypd:upgradeStrategy": "newCluster"})
    changed = make_spec({"raypd:upgradeStrategy": "newCluster", "raypd:model": {"maxModelLen": 8192}})
    headroom = by_id(run(changed, {G: 100, STD: 32}, deployed=deployed))["update-headroom"]
    assert headroom.status == "fail" and "zero downtime" in headroom.detail
    assert "roll out in place" in headroom.remedy
    # The same change in place needs no extra node: only a later rolling update is judged.
    in_place = by_id(run(make_spec({"raypd:model": {"maxModelLen": 8192}}), {G: 100, STD: 32},
                         deployed=make_spec({})))["update-headroom"]
    assert in_place.status == "warn" and "adds no nodes" in in_place.detail


def test_update_headroom_takes_the_deployed_zone_so_pinning_it_is_no_move(aws: str, make_spec: MakeSpec) -> None:
    # The stack runs in us-east-1a; the user pins that zone. No node moves, no extra quota.
    deployed = make_spec({})
    pinned = make_spec({"raypd:availabilityZone": "us-east-2a"})
    headroom = by_id(run(pinned, {G: 64, STD: 32}, deployed=deployed, deployed_zone="us-east-2a"))[
        "update-headroom"]
    assert "adds no nodes" in headroom.detail, headroom
    moved = by_id(run(make_spec({"raypd:availabilityZone": "us-east-2b"}), {G: 64, STD: 32},
                      deployed=deployed, deployed_zone="us-east-2a"))["update-headroom"]
    assert moved.status == "fail" and "old node group" in moved.detail, moved
