"""Who may use the cluster and what the pods may read, and the KubeRay CRDs, read from the
program's resource graph under the mock runtime."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest

from components.config import defaults
from components.config.spec import DeploymentSpec
from components.render.model_access import read_policy, s3_location
from components.stack.addons import CRD_TYPE, PATCH_FORCE_ANNOTATION, force_crd_ownership
from components.stack.mockrun import RegisteredResource, run_program
from components.stack.program import build

RAYSERVICE = "kubernetes:ray.io/v1:RayService"
CONFIG_GROUP = "kubernetes:yaml/v2:ConfigGroup"
RELEASE = "kubernetes:helm.sh/v3:Release"
S3_SOURCE = "s3://acme-models/llm/qwen3.5-9b/"


def registered(config: dict[str, Any]) -> list[RegisteredResource]:
    spec = DeploymentSpec.from_config(config, "dev")
    return run_program(lambda: build(spec), project="raypd", stack="dev",
                       region=spec.region).resources


def of_type(resources, type_token: str) -> list[RegisteredResource]:
    """Resources of a type, leaving out the endpoint's own (its LB controller role and policy,
    its CRDs; tests/pulumi/test_endpoint_plan.py covers those) and the node autoscaler's
    (tests/pulumi/test_node_autoscaler.py)."""
    return [r for r in resources if r.type == type_token
            and not r.name.startswith(("lb-controller-", "endpoint-", "node-autoscaler-"))]


@pytest.fixture(scope="module")
def s3_resources() -> list[RegisteredResource]:
    return registered({"raypd:model": {"source": S3_SOURCE}})


@pytest.fixture(scope="module")
def hf_resources() -> list[RegisteredResource]:
    return registered({})


# ---- s3:// model sources ----

def test_s3_model_gets_a_role_that_reads_exactly_that_prefix(s3_resources):
    (policy,) = of_type(s3_resources, "aws:iam/rolePolicy:RolePolicy")
    document = json.loads(policy.inputs["policy"])
    statements = {s["Action"]: s for s in document["Statement"]}
    assert set(statements) == {"s3:GetObject", "s3:ListBucket"}
    assert statements["s3:GetObject"]["Resource"] == "arn:aws:s3:::acme-models/llm/qwen3.5-9b/*"
    listing = statements["s3:ListBucket"]
    assert listing["Resource"] == "arn:aws:s3:::acme-models"
    assert listing["Condition"] == {
        "StringLike": {"s3:prefix": ["llm/qwen3.5-9b", "llm/qwen3.5-9b/*"]}}
    assert all(s["Effect"] == "Allow" and "*" not in s["Action"] for s in document["Statement"])


def test_only_the_ray_pods_service_account_may_assume_the_role(s3_resources):
    roles = [r for r in of_type(s3_resources, "aws:iam/role:Role") if "model-reader" in r.name]
    (role,) = roles
    (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert statement["Action"] == "sts:AssumeRoleWithWebIdentity"
    assert statement["Principal"]["Federated"].endswith(":oidc-provider/" + next(
        iter(statement["Condition"]["StringEquals"])).rsplit(":", 1)[0])
    conditions = statement["Condition"]["StringEquals"]
    assert sorted(conditions.values()) == [
        "sts.amazonaws.com", "system:serviceaccount:inference:ray-llm-model-reader"]

    (account,) = of_type(s3_resources, "kubernetes:core/v1:ServiceAccount")
    assert account.inputs["metadata"]["name"] == "ray-llm-model-reader"
    assert account.inputs["metadata"]["namespace"] == "inference"
    assert account.inputs["metadata"]["annotations"]["eks.amazonaws.com/role-arn"].startswith(
        "arn:aws:iam::")


def test_ray_head_and_workers_run_as_that_service_account(s3_resources):
    (service,) = of_type(s3_resources, RAYSERVICE)
    cluster = service.inputs["spec"]["rayClusterConfig"]
    templates = [cluster["headGroupSpec"]["template"]] + [
        group["template"] for group in cluster["workerGroupSpecs"]]
    assert {t["spec"].get("serviceAccountName") for t in templates} == {"ray-llm-model-reader"}
    # The RayService waits for the account it names.
    (account,) = of_type(s3_resources, "kubernetes:core/v1:ServiceAccount")
    assert account.urn in service.dependencies


def test_hugging_face_models_create_no_role_and_no_service_account(hf_resources):
    assert not [r for r in of_type(hf_resources, "aws:iam/role:Role") if "model-reader" in r.name]
    assert not of_type(hf_resources, "aws:iam/rolePolicy:RolePolicy")
    assert not of_type(hf_resources, "kubernetes:core/v1:ServiceAccount")
    (service,) = of_type(hf_resources, RAYSERVICE)
    head = service.inputs["spec"]["rayClusterConfig"]["headGroupSpec"]["template"]["spec"]
    assert "serviceAccountName" not in head


def test_a_whole_bucket_source_lists_the_bucket_without_a_prefix_condition():
    location = s3_location("s3://acme-models")
    assert location is not None and location.prefix == ""
    statements = read_policy("aws", location)["Statement"]
    assert statements[0]["Resource"] == "arn:aws:s3:::acme-models/*"
    assert "Condition" not in statements[1]
    assert s3_location("Qwen/Qwen3.5-9B") is None


# ---- admin roles ----

ADMINS = ["arn:aws:iam::123456789012:role/ci-deployer", "arn:aws:iam::123456789012:role/web-app"]


def test_admin_roles_become_cluster_admin_access_entries():
    resources = registered({"raypd:adminRoleArns": ADMINS})
    (cluster,) = of_type(resources, "eks:index:Cluster")
    assert cluster.inputs["authenticationMode"] == "API"
    entries = cluster.inputs["accessEntries"]
    assert sorted(e["principalArn"] for e in entries.values()) == ADMINS
    for entry in entries.values():
        (association,) = entry["accessPolicies"].values()
        assert association["policyArn"] == (
            "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy")
        assert association["accessScope"] == {"type": "cluster"}
    # Keys follow the ARN, so removing one role leaves the other's entry alone.
    fewer = registered({"raypd:adminRoleArns": ADMINS[1:]})
    (cluster_after,) = of_type(fewer, "eks:index:Cluster")
    remaining = {k for k, e in entries.items() if e["principalArn"] == ADMINS[1]}
    assert set(cluster_after.inputs["accessEntries"]) == remaining


def test_no_admin_roles_no_access_entries(hf_resources):
    (cluster,) = of_type(hf_resources, "eks:index:Cluster")
    assert not cluster.inputs.get("accessEntries")


# ---- KubeRay CRDs follow kuberayVersion ----

def kuberay_crd_group(resources):
    # The Prometheus Operator's CRDs are a ConfigGroup too (issue 18): pick KubeRay's.
    (group,) = [r for r in of_type(resources, CONFIG_GROUP)
                if any("/ray-project/kuberay/" in url for url in r.inputs["files"])]
    return group


def crd_files(resources) -> list[str]:
    return kuberay_crd_group(resources).inputs["files"]


def test_kuberay_crds_are_those_of_the_configured_chart_version_and_come_first(hf_resources):
    files = crd_files(hf_resources)
    assert all(f"/ray-project/kuberay/v{defaults.KUBERAY_VERSION}/helm-chart/kuberay-operator/crds/"
               in url for url in files)
    assert any(url.endswith("ray.io_rayservices.yaml") for url in files)
    (operator,) = [r for r in of_type(hf_resources, RELEASE)
                   if r.inputs["chart"] == defaults.KUBERAY_CHART]
    assert operator.inputs["skipCrds"] is True
    group = kuberay_crd_group(hf_resources)
    assert group.urn in operator.dependencies


def test_raising_kuberay_version_upgrades_the_crds_too():
    files = crd_files(registered({"raypd:kuberayVersion": "1.7.0"}))
    assert all("/kuberay/v1.7.0/" in url for url in files)
    assert any(url.endswith("ray.io_raycronjobs.yaml") for url in files)


def test_crd_objects_take_over_fields_helm_wrote():
    crd = pulumi.ResourceTransformArgs(
        custom=True, type_=CRD_TYPE, name="rayservices.ray.io",
        props={"metadata": {"name": "rayservices.ray.io"}}, opts=pulumi.ResourceOptions())
    result = force_crd_ownership(crd)
    assert result.props["metadata"]["annotations"] == {PATCH_FORCE_ANNOTATION: "true"}
    other = pulumi.ResourceTransformArgs(
        custom=True, type_="kubernetes:core/v1:Namespace", name="x", props={},
        opts=pulumi.ResourceOptions())
    assert force_crd_ownership(other) is None
