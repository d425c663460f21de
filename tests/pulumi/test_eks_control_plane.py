"""The EKS control plane under the mock runtime: what eks.Cluster receives for raypd:apiAccessCidrs,
private endpoint access, control-plane logs and the upgrade policy, and what `up` does on a change."""

from __future__ import annotations

from typing import Any

from components.config.spec import DeploymentSpec
from components.stack.offline_plan import plan_spec, render_summary
from webui.change import plan_diff

EKS_CLUSTER = "eks:index:Cluster"
AWS_CLUSTER = "aws:eks/cluster:Cluster"
NARROW = ["203.0.113.0/24", "198.51.100.7/32"]


def cluster_inputs(plan) -> dict[str, Any]:
    (cluster,) = plan.of_type(EKS_CLUSTER)
    return cluster["inputs"]


def test_the_listed_ranges_are_the_clusters_public_access_cidrs(make_plan):
    inputs = cluster_inputs(make_plan({"raypd:apiAccessCidrs": NARROW}))
    assert inputs["publicAccessCidrs"] == NARROW
    assert inputs["endpointPublicAccess"] is True


def test_the_reference_stack_is_open_to_every_address_and_its_plan_warns(reference_plan):
    assert cluster_inputs(reference_plan)["publicAccessCidrs"] == ["0.0.0.0/0"]
    assert any(w.startswith("raypd:apiAccessCidrs allows 0.0.0.0/0")
               for w in reference_plan.document["warnings"])


def test_a_narrowed_stack_plans_without_the_warning(make_plan):
    plan = make_plan({"raypd:apiAccessCidrs": NARROW})
    assert not any("raypd:apiAccessCidrs" in w for w in plan.document["warnings"])


def test_private_endpoint_access_stays_on_whatever_the_public_ranges(reference_plan, make_plan):
    # The nodes reach the API through it: with a narrowed public list they would not join otherwise.
    for plan in (reference_plan, make_plan({"raypd:apiAccessCidrs": NARROW})):
        assert cluster_inputs(plan)["endpointPrivateAccess"] is True


def test_api_audit_and_authenticator_logs_are_on(reference_plan):
    assert cluster_inputs(reference_plan)["enabledClusterLogTypes"] == ["api", "audit", "authenticator"]


def test_the_upgrade_policy_is_explicit_and_follows_the_versions_support(reference_plan):
    spec = DeploymentSpec.from_config({}, "dev")
    assert cluster_inputs(reference_plan)["upgradePolicy"] == {"supportType": spec.support_type}
    assert spec.support_type == "STANDARD"  # 1.35 is in standard support until 2027-03-27


def test_a_cidr_change_updates_only_the_eks_cluster_in_place():
    def plan(config: dict[str, Any]) -> dict[str, Any]:
        return plan_spec(DeploymentSpec.from_config(config, "dev"))

    steps = plan_diff(plan({}), plan({"raypd:apiAccessCidrs": NARROW}))
    changed = {(s["type"], s["name"]): s["op"] for s in steps if s["op"] != "same"}
    assert changed == {(EKS_CLUSTER, "cluster-eks"): "update", (AWS_CLUSTER, "cluster-eks"): "update"}
    (child,) = [s for s in steps if s["type"] == AWS_CLUSTER]
    assert [k for k in child["keys"] if k.startswith("publicAccessCidrs")]


def test_the_readable_plan_shows_the_control_plane_settings(make_plan):
    summary = render_summary(make_plan({"raypd:apiAccessCidrs": NARROW}).document)
    (line,) = [line for line in summary.splitlines() if line.startswith("Control plane:")]
    assert line == ("Control plane: Kubernetes 1.35, public API from 203.0.113.0/24, 198.51.100.7/32, "
                    "private endpoint on, logs api, audit, authenticator, upgrade policy STANDARD")
