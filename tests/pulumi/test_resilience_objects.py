"""The worker groups' PodDisruptionBudgets under the mock runtime (issue 31 §1): registered as
policy/v1 objects with an integer minAvailable and no maxUnavailable (components.render.disruption
says why), in the serving namespace, beside the RayService; and the gateway's safe retry."""

from __future__ import annotations

PDB = "kubernetes:policy/v1:PodDisruptionBudget"


def budgets(plan) -> dict[str, dict]:
    return {r["inputs"]["metadata"]["name"]: r for r in plan.of_type(PDB)}


def test_the_reference_stack_registers_one_budget_for_its_shared_gpu_group(reference_plan):
    (budget,) = budgets(reference_plan).values()
    assert budget["inputs"]["metadata"]["name"] == "ray-llm-gpu-workers"
    assert budget["inputs"]["metadata"]["namespace"] == "inference"
    spec = budget["inputs"]["spec"]
    assert spec["minAvailable"] == 1 and "maxUnavailable" not in spec
    assert spec["selector"] == {"matchLabels": {"raypd.io/ray-service": "ray-llm", "ray.io/node-type": "worker",
                                                "ray.io/group": "gpu"}}
    assert spec["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert budget["parent"] == "pd-service"
    assert "pd-service-namespace" in budget["dependsOn"]


def test_a_group_of_one_node_and_the_head_get_none(heterogeneous_plan):
    # prefill: one p5.48xlarge node; decode: two g6e.48xlarge nodes.
    assert {name: r["inputs"]["spec"]["minAvailable"] for name, r in budgets(heterogeneous_plan).items()} == {
        "ray-llm-decode-workers": 1}
    for budget in heterogeneous_plan.of_type(PDB):
        assert budget["inputs"]["spec"]["selector"]["matchLabels"]["ray.io/node-type"] == "worker"


def test_the_gateway_retries_once_before_any_byte(reference_plan):
    # issue 31 §1: the BackendTrafficPolicy the program registers carries the safe retry
    # (tests/unit/test_endpoint_retry.py judges it against Envoy's rules and the CRD).
    (policy,) = reference_plan.of_type("kubernetes:gateway.envoyproxy.io/v1alpha1:BackendTrafficPolicy")
    retry = policy["inputs"]["spec"]["retry"]
    assert retry == {"numRetries": 1, "perRetry": {"backOff": {"baseInterval": "250ms", "maxInterval": "1s"}},
                     "retryOn": {"httpStatusCodes": [503],
                                 "triggers": ["connect-failure", "reset", "retriable-status-codes"]}}
