"""Kubernetes versions EKS no longer supports, and admin role ARNs, are refused at validation with
the user-facing key."""

from __future__ import annotations

import datetime
import json

import pytest

from components.config import defaults
from components.config.errors import SpecError
from components.config.spec import DeploymentSpec, eks_version_problem


def fields(config: dict) -> dict[str, str]:
    with pytest.raises(SpecError) as failure:
        DeploymentSpec.from_config(config, "dev")
    return {e.field: e.message for e in failure.value.errors}


def test_the_version_table_has_its_date_source_and_the_default():
    assert defaults.EKS_VERSIONS_AS_OF == "2026-12-01"
    assert defaults.EKS_VERSIONS_SOURCE.startswith("https://docs.aws.amazon.com/eks/")
    assert defaults.KUBERNETES_VERSION in defaults.EKS_KUBERNETES_VERSIONS
    for standard_end, extended_end in defaults.EKS_KUBERNETES_VERSIONS.values():
        assert datetime.date.fromisoformat(standard_end) < datetime.date.fromisoformat(extended_end)


@pytest.mark.parametrize("version", ["1.28", "1.29", "1.30", "1.31"])
def test_versions_past_the_end_of_extended_support_are_refused_today(version):
    message = eks_version_problem(version, datetime.date(2026, 12, 1))
    assert message is not None
    assert "1.32, 1.33, 1.34, 1.35" in message


@pytest.mark.parametrize("version", ["1.32", "1.33", "1.34", "1.35", "1.36"])
def test_supported_and_newer_versions_pass(version):
    assert eks_version_problem(version, datetime.date(2026, 12, 1)) is None


def test_a_version_is_refused_the_day_after_its_extended_support_ends():
    assert eks_version_problem("1.32", datetime.date(2027, 3, 23)) is None
    assert "2027-03-23" in eks_version_problem("1.32", datetime.date(2027, 3, 24))


def test_an_unsupported_version_names_the_key():
    errors = fields({"raypd:kubernetesVersion": "1.29"})
    assert "EKS" in errors["raypd:kubernetesVersion"]


def test_admin_role_arns_default_to_none_and_accept_role_arns():
    assert DeploymentSpec.from_config({}, "dev").admin_role_arns == ()
    arns = ["arn:aws:iam::123456789012:role/ci-deployer",
            "arn:aws-us-gov:iam::123456789012:role/path/web-app"]
    # Pulumi hands list-valued config over as JSON text.
    spec = DeploymentSpec.from_config({"raypd:adminRoleArns": json.dumps(arns)}, "dev")
    assert spec.admin_role_arns == tuple(arns)


def test_a_bad_admin_role_arn_is_named_by_its_index():
    errors = fields({"raypd:adminRoleArns": [
        "arn:aws:iam::123456789012:role/ok",
        "arn:aws:iam::123456789012:user/alice",
    ]})
    assert list(errors) == ["raypd:adminRoleArns[1]"]
    assert "role ARN" in errors["raypd:adminRoleArns[1]"]
