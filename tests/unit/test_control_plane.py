"""The EKS control plane settings: raypd:apiAccessCidrs (rules, warning, change preview) and the
upgrade policy's support type. The wiring into eks.Cluster is tested under the mock runtime in
tests/pulumi/test_eks_control_plane.py."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest

from components.changes.assess import Kind, assess
from components.config import defaults
from components.config.errors import SpecError
from components.config.spec import DeploymentSpec, eks_support_type
from components.plan.topology import plan_deployment

KEY = "raypd:apiAccessCidrs"


def errors_of(value: Any, strict: bool = False) -> dict[str, str]:
    with pytest.raises(SpecError) as caught:
        DeploymentSpec.from_config({KEY: value}, "dev", strict=strict)
    return {e.field: e.message for e in caught.value.errors}


# ---- accepted ----

def test_the_default_is_eks_own_open_endpoint_and_stays_out_of_the_stored_config():
    spec = DeploymentSpec.from_config({}, "dev")
    assert spec.api_access_cidrs == ("0.0.0.0/0",)
    assert KEY not in spec.public_config()


def test_listed_ranges_are_kept_in_order_from_yaml_pulumi_json_text_and_the_json_api():
    cidrs = ["203.0.113.0/24", "198.51.100.7/32"]
    for spec in (DeploymentSpec.from_config({KEY: cidrs}, "dev"),
                 DeploymentSpec.from_config({KEY: json.dumps(cidrs)}, "dev"),  # as Pulumi hands it
                 DeploymentSpec.from_config({KEY: cidrs}, "dev", strict=True)):
        assert spec.api_access_cidrs == tuple(cidrs)
        assert spec.public_config()[KEY] == cidrs


def test_forty_ranges_are_eks_limit_and_accepted():
    cidrs = [f"10.0.{i}.0/24" for i in range(defaults.MAX_API_ACCESS_CIDRS)]
    assert len(DeploymentSpec.from_config({KEY: cidrs}, "dev").api_access_cidrs) == 40


# ---- the warning for the open default ----

def test_the_open_default_warns_naming_the_key_and_how_to_narrow_it():
    (warning,) = DeploymentSpec.from_config({}, "dev").warnings
    assert warning.startswith(f"{KEY} allows 0.0.0.0/0")
    assert "every address" in warning and f'{KEY}: ["203.0.113.0/24"]' in warning


def test_a_narrowed_list_has_no_warning_but_listing_0_0_0_0_among_others_still_warns():
    assert DeploymentSpec.from_config({KEY: ["203.0.113.0/24"]}, "dev").warnings == []
    warnings = DeploymentSpec.from_config({KEY: ["203.0.113.0/24", "0.0.0.0/0"]}, "dev").warnings
    assert any(w.startswith(KEY) for w in warnings)


# ---- refused, each naming the key and the entry ----

def test_a_bad_cidr_is_named_by_its_index():
    errors = errors_of(["203.0.113.0/24", "not-a-cidr"])
    assert list(errors) == [f"{KEY}[1]"]
    assert "'not-a-cidr' is not an IPv4 CIDR" in errors[f"{KEY}[1]"]


def test_host_bits_are_refused_with_the_network_to_write_instead():
    errors = errors_of(["10.1.2.3/8"])
    assert "host bits" in errors[f"{KEY}[0]"] and "10.0.0.0/8" in errors[f"{KEY}[0]"]
    assert "10.1.2.3/32" in errors[f"{KEY}[0]"]


@pytest.mark.parametrize("entry,hint", [
    ("203.0.113.5", "203.0.113.5/32"),          # a bare address: EKS wants a prefix length
    ("10.0.0.0/255.0.0.0", "write 10.0.0.0/8"),  # a netmask Python reads and EKS does not
    ("::/0", "IPv6"),                            # the cluster is IPv4
    ("010.0.0.0/8", "not an IPv4 CIDR"),         # leading zeros
    ("10.0.0.0/33", "not an IPv4 CIDR"),
    (" 10.0.0.0/8", "not an IPv4 CIDR"),
])
def test_text_eks_would_not_read_as_an_ipv4_cidr_is_refused(entry: str, hint: str):
    assert hint in errors_of([entry])[f"{KEY}[0]"]


def test_duplicates_are_refused_naming_both_entries():
    errors = errors_of(["10.0.0.0/8", "203.0.113.0/24", "10.0.0.0/8"])
    assert list(errors) == [f"{KEY}[2]"]
    assert "given twice" in errors[f"{KEY}[2]"] and "[0]" in errors[f"{KEY}[2]"]


def test_more_than_forty_ranges_are_refused_with_eks_limit():
    errors = errors_of([f"10.0.{i}.0/24" for i in range(41)])
    assert list(errors) == [KEY]
    assert "41 entries" in errors[KEY] and "at most 40" in errors[KEY]


@pytest.mark.parametrize("value,fragment", [
    ("203.0.113.0/24", "not text"),  # one string, not a list
    ({"cidr": "203.0.113.0/24"}, "not dict"),
    (24, "not int"),
    ([], "is empty"),
    ([24], "[0] is int"),
])
def test_anything_but_a_non_empty_list_of_text_is_refused_naming_the_key(value: Any, fragment: str):
    errors = errors_of(value)
    assert list(errors) == [KEY] and fragment in errors[KEY]
    assert "203.0.113.0/24" in errors[KEY] or "CIDR" in errors[KEY]


def test_the_json_api_gets_the_same_messages():
    assert "not text" in errors_of("203.0.113.0/24", strict=True)[KEY]
    assert "given twice" in errors_of(["10.0.0.0/8", "10.0.0.0/8"], strict=True)[f"{KEY}[1]"]


@pytest.mark.parametrize("entry", ["10.0.0.0/8\n", "10.0.0.0/8\x00", "\u202e10.0.0.0/8\x85", "\ud800"])
def test_control_characters_and_surrogates_are_refused_before_any_value_is_quoted(entry: str):
    errors = errors_of(["203.0.113.0/24", entry])
    assert errors == {f"{KEY}[1]": "contains a control character or a lone surrogate (not valid text)"}


def test_a_huge_entry_is_refused_without_quoting_it_whole():
    message = errors_of(["1" * 100_000])[f"{KEY}[0]"]
    assert "100000 characters" in message and len(message) < 200


def test_a_huge_list_is_one_error_not_one_per_entry():
    errors = errors_of(["x"] * 100_000)
    assert list(errors) == [KEY] and "100000 entries" in errors[KEY]


def test_cidr_errors_come_with_the_other_keys_errors_of_the_same_config():
    with pytest.raises(SpecError) as caught:
        DeploymentSpec.from_config({KEY: ["10.0.0.1/8"], "raypd:adminRoleArns": ["nope"]}, "dev")
    assert {e.field for e in caught.value.errors} == {f"{KEY}[0]", "raypd:adminRoleArns[0]"}


# ---- the change preview ----

def _plan(config: dict[str, Any]):
    return plan_deployment(DeploymentSpec.from_config(config, "dev"))


def test_narrowing_the_api_access_is_an_in_place_cluster_update_without_downtime():
    result = assess(_plan({}), _plan({KEY: ["203.0.113.0/24"]}), "us-east-2a")
    (effect,) = result.effects
    assert (effect.subject, effect.kind, effect.downtime_seconds) == (KEY, Kind.IN_PLACE, 0.0)
    assert "updated in place" in effect.detail and "pulumi up" in effect.detail
    assert result.chosen.downtime_seconds == 0 and not result.chosen.extra_nodes
    assert not result.disruptive


def test_the_same_ranges_in_the_same_order_are_no_change():
    same = assess(_plan({KEY: ["203.0.113.0/24"]}), _plan({KEY: ["203.0.113.0/24"]}), "us-east-2a")
    assert same.kind == Kind.NO_SERVING_EFFECT


# ---- the upgrade policy ----

def test_support_is_standard_while_the_version_is_in_standard_support_then_extended():
    standard_end = datetime.date.fromisoformat(defaults.EKS_KUBERNETES_VERSIONS["1.34"][0])
    assert eks_support_type("1.34", standard_end) == "STANDARD"
    assert eks_support_type("1.34", standard_end + datetime.timedelta(days=1)) == "EXTENDED"
    assert eks_support_type("1.99", standard_end) == "STANDARD"  # newer than the table


def test_the_reference_version_gets_standard_support_and_no_support_warning():
    """A date-driven failure on purpose: once the reference version leaves standard support, the
    reference a newcomer deploys pays EKS's extended rate and warns, and someone must move it on."""
    spec = DeploymentSpec.from_config({KEY: ["203.0.113.0/24"]}, "dev")
    if spec.support_type != "STANDARD":
        pytest.fail(f"Kubernetes {spec.kubernetes_version}, the reference version, has left EKS standard "
                    "support: update KUBERNETES_VERSION and the EKS_KUBERNETES_VERSIONS table in "
                    f"components/config/defaults.py (as of {defaults.EKS_VERSIONS_AS_OF}, from "
                    f"{defaults.EKS_VERSIONS_SOURCE})", pytrace=False)
    assert spec.warnings == []


def test_a_version_in_extended_support_warns_about_the_extended_rate():
    today = datetime.datetime.now(datetime.timezone.utc).date()
    extended = [v for v, (standard, extended_end) in defaults.EKS_KUBERNETES_VERSIONS.items()
                if datetime.date.fromisoformat(standard) < today <= datetime.date.fromisoformat(extended_end)]
    if not extended:
        pytest.skip("no version of the table is in extended support today")
    spec = DeploymentSpec.from_config({"raypd:kubernetesVersion": extended[0]}, "dev")
    assert spec.support_type == "EXTENDED"
    assert any(w.startswith("raypd:kubernetesVersion") and "extended support" in w for w in spec.warnings)
