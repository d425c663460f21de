"""A phase's `autoscaling` block (issue 30 §1): every rule an error under its own key, the block
round-trips as written, and a stack without it reads exactly as before."""

from __future__ import annotations

from typing import Any

import pytest

from components.config import catalogue
from components.config.autoscaling_spec import engine_max_num_seqs
from components.config.errors import SpecError
from components.config.spec import DeploymentSpec
from webui.api_models.common import contract1_schema

BLOCK: dict[str, Any] = {"minReplicas": 1, "maxReplicas": 4, "targetOngoingRequests": 8}


def errors_of(config: dict[str, Any], strict: bool = False) -> dict[str, str]:
    with pytest.raises(SpecError) as caught:
        DeploymentSpec.from_config(config, "dev", strict=strict)
    return {error.field: error.message for error in caught.value.errors}


def decode(block: dict[str, Any], **phase: Any) -> dict[str, Any]:
    return {"raypd:decode": {**phase, "autoscaling": block}}


def test_a_valid_block_is_read_with_serves_delays_where_none_are_given() -> None:
    spec = DeploymentSpec.from_config(decode(BLOCK, replicas=2), "dev")
    scaling = spec.decode.autoscaling
    assert scaling is not None
    assert (scaling.minimum, scaling.maximum, scaling.target) == (1, 4, 8.0)
    assert (scaling.upscale_delay, scaling.downscale_delay) == (30.0, 600.0)  # Ray 2.58's AutoscalingConfig
    assert (spec.decode.min_replicas, spec.decode.replicas, spec.decode.max_replicas) == (1, 2, 4)
    assert spec.prefill.autoscaling is None
    assert (spec.prefill.min_replicas, spec.prefill.max_replicas) == (1, 1)


@pytest.mark.parametrize("missing,why", [
    ("minReplicas", "fewest engines"), ("maxReplicas", "most engines"),
    ("targetOngoingRequests", "1e9"),
])
def test_each_required_value_left_out_is_named(missing: str, why: str) -> None:
    block = {key: value for key, value in BLOCK.items() if key != missing}
    found = errors_of(decode(block))
    assert list(found) == [f"raypd:decode.autoscaling.{missing}"]
    assert found[f"raypd:decode.autoscaling.{missing}"].startswith("is required") and why in found[
        f"raypd:decode.autoscaling.{missing}"]


def test_min_above_max_is_refused_under_min_replicas() -> None:
    found = errors_of(decode({**BLOCK, "minReplicas": 3, "maxReplicas": 2}, replicas=2))
    assert list(found) == ["raypd:decode.autoscaling.minReplicas"]
    assert "minReplicas 3 is above maxReplicas 2" in found["raypd:decode.autoscaling.minReplicas"]


@pytest.mark.parametrize("replicas,block", [
    (1, {**BLOCK, "minReplicas": 2}),   # below the minimum
    (5, BLOCK),                          # above the maximum
])
def test_a_starting_count_outside_the_bounds_is_refused_under_replicas(replicas: int, block: dict[str, Any]) -> None:
    found = errors_of(decode(block, replicas=replicas))
    assert list(found) == ["raypd:decode.replicas"]
    assert f"starting count {replicas} is outside" in found["raypd:decode.replicas"]


@pytest.mark.parametrize("key,value", [
    ("minReplicas", 0), ("maxReplicas", 0), ("maxReplicas", 65),
    ("targetOngoingRequests", 0), ("targetOngoingRequests", -1),
    ("targetOngoingRequests", float("nan")), ("targetOngoingRequests", float("inf")),
    ("upscaleDelaySeconds", -1), ("downscaleDelaySeconds", -0.5),
    ("downscaleDelaySeconds", float("inf")),
])
def test_out_of_range_numbers_are_refused_under_their_key(key: str, value: float) -> None:
    found = errors_of(decode({**BLOCK, key: value}))
    assert f"raypd:decode.autoscaling.{key}" in found
    if value != value or value in (float("inf"), float("-inf")):  # NaN and infinity: not a number of seconds
        assert found[f"raypd:decode.autoscaling.{key}"] == "Input should be a finite number"


@pytest.mark.parametrize("strict", [False, True], ids=["stack-file", "json-api"])
@pytest.mark.parametrize("key,value", [
    ("minReplicas", "١"), ("maxReplicas", "٤"), ("targetOngoingRequests", "８"),
    ("upscaleDelaySeconds", "٣٠"), ("downscaleDelaySeconds", "６００"),
])
def test_numbers_in_other_scripts_are_refused(key: str, value: str, strict: bool) -> None:
    assert f"raypd:decode.autoscaling.{key}" in errors_of(decode({**BLOCK, key: value}), strict=strict)


def test_zero_delays_are_allowed() -> None:
    spec = DeploymentSpec.from_config(
        decode({**BLOCK, "upscaleDelaySeconds": 0, "downscaleDelaySeconds": 0}), "dev")
    assert spec.decode.autoscaling is not None and spec.decode.autoscaling.downscale_delay == 0


def test_a_target_above_what_one_engine_runs_is_refused() -> None:
    # A g6.8xlarge engine (one L4) runs vLLM's default 256 sequences at once: Serve would never scale.
    found = errors_of(decode({**BLOCK, "targetOngoingRequests": 257}))
    assert list(found) == ["raypd:decode.autoscaling.targetOngoingRequests"]
    assert "max_num_seqs 256" in found["raypd:decode.autoscaling.targetOngoingRequests"]
    DeploymentSpec.from_config(decode({**BLOCK, "targetOngoingRequests": 256}), "dev")
    # An H100 engine runs 1024 (vLLM's larger default for GPUs of 70 GiB and more).
    DeploymentSpec.from_config(
        decode({**BLOCK, "targetOngoingRequests": 1000}, instanceType="p5.4xlarge"), "dev")


@pytest.mark.parametrize("instance_type,sequences", [
    ("g6.8xlarge", 256), ("g5.12xlarge", 256), ("g6e.8xlarge", 256), ("p4de.24xlarge", 256),
    ("p5.48xlarge", 1024), ("p5en.48xlarge", 1024), ("p6-b200.48xlarge", 1024),
])
def test_the_engine_limit_follows_vllms_default_by_gpu(instance_type: str, sequences: int) -> None:
    # vllm/engine/arg_utils.py get_batch_defaults: >= 70 GiB and not an A100 -> 1024, else 256.
    assert engine_max_num_seqs(catalogue.CATALOGUE[instance_type]) == sequences


def test_every_problem_of_every_phase_is_reported_at_once() -> None:
    found = errors_of({
        "raypd:prefill": {"replicas": 3, "autoscaling": {**BLOCK, "maxReplicas": 2, "targetOngoingRequests": 300}},
        "raypd:decode": {"autoscaling": {"minReplicas": 2, "maxReplicas": 1, "targetOngoingRequests": 8}},
    })
    assert set(found) == {"raypd:prefill.replicas", "raypd:prefill.autoscaling.targetOngoingRequests",
                          "raypd:decode.autoscaling.minReplicas"}


def test_the_colocated_block_follows_the_same_rules() -> None:
    found = errors_of({"raypd:mode": "colocated",
                       "raypd:colocated": {"replicas": 2, "autoscaling": {**BLOCK, "minReplicas": 3}}})
    assert list(found) == ["raypd:colocated.replicas"]


def test_an_unknown_key_in_the_block_is_refused_as_written() -> None:
    assert "raypd:decode.autoscaling.target_ongoing" in errors_of(decode({**BLOCK, "target_ongoing": 3}))


def test_the_block_round_trips_as_written() -> None:
    spec = DeploymentSpec.from_config(decode({**BLOCK, "downscaleDelaySeconds": 1200}), "dev")
    public = spec.public_config()
    assert public["raypd:decode"]["autoscaling"] == {**BLOCK, "downscaleDelaySeconds": 1200}
    assert "upscaleDelaySeconds" not in public["raypd:decode"]["autoscaling"]  # left out stays out
    assert DeploymentSpec.from_config(public, "dev") == spec


def test_without_the_block_the_config_reads_exactly_as_before() -> None:
    public = DeploymentSpec.from_config({}, "dev").public_config()
    for phase in ("raypd:prefill", "raypd:decode", "raypd:colocated"):
        assert "autoscaling" not in public[phase]
        assert public[phase] == {"instanceType": "g6.8xlarge", "replicas": public[phase]["replicas"],
                                 "tensorParallelSize": 1, "pipelineParallelSize": 1}
    # A null block is no block.
    assert DeploymentSpec.from_config({"raypd:decode": {"autoscaling": None}}, "dev").decode.autoscaling is None


def test_the_web_apis_schema_says_which_values_are_required() -> None:
    schema = contract1_schema()["AutoscalingSpec"]
    assert schema["required"] == ["minReplicas", "maxReplicas", "targetOngoingRequests"]
    assert schema["properties"]["minReplicas"]["type"] == "integer"  # not nullable
    assert "anyOf" in schema["properties"]["downscaleDelaySeconds"]  # optional: may be left out
