"""gpu-memory-fit: the model table, the size-from-name estimate and the fit arithmetic (no AWS)."""

from __future__ import annotations

import re
from typing import Any, Callable

import pytest

from components.config.model_catalogue import find_shape
from components.config.spec import DeploymentSpec
from components.plan.model_shapes import memory_fit, params_from_name

MakeSpec = Callable[[dict[str, Any]], DeploymentSpec]


def _model(make_spec: MakeSpec, extra: dict[str, Any] | None = None, **model: Any) -> DeploymentSpec:
    return make_spec({"raypd:model": model, **(extra or {})})


def test_reference_fits_with_its_numbers_shown(reference_spec: DeploymentSpec) -> None:
    check = memory_fit(reference_spec)
    assert check.id == "gpu-memory-fit"
    assert check.status == "pass"
    # Both phases, the checkpoint (~18 GiB bf16), and the budget 0.9 x 22.35 GiB on one L4.
    assert check.detail.count("GiB usable (0.9 x 22.35 GiB x 1 GPU)") == 2
    assert "prefill: weights 18.0 GiB" in check.detail and "decode:" in check.detail


def test_qwen3_32b_on_one_l4_fails_and_names_a_fix(make_spec: MakeSpec) -> None:
    check = memory_fit(_model(make_spec, source="Qwen/Qwen3-32B"))
    assert check.status == "fail"
    assert "weights 61.0 GiB" in check.detail
    assert "raypd:prefill.instanceType" in check.remedy and "tensorParallelSize" in check.remedy


def test_qwen3_32b_fits_over_four_l4s(make_spec: MakeSpec) -> None:
    tp4 = {"instanceType": "g6.12xlarge", "tensorParallelSize": 4}
    spec = _model(make_spec, {"raypd:prefill": tp4, "raypd:decode": tp4}, source="Qwen/Qwen3-32B")
    check = memory_fit(spec)
    assert check.status == "pass", check.detail
    assert "x 4 GPUs" in check.detail


def test_suggested_tensor_parallel_size_really_fits(make_spec: MakeSpec) -> None:
    phase = {"instanceType": "p5.48xlarge", "tensorParallelSize": 1}
    config = {"raypd:prefill": phase, "raypd:decode": phase}
    failing = memory_fit(_model(make_spec, config, source="meta-llama/Llama-3.3-70B-Instruct"))
    assert failing.status == "fail"
    tp = int(re.search(r"raypd:prefill.tensorParallelSize to (\d+)", failing.remedy).group(1))
    fixed_phase = {"instanceType": "p5.48xlarge", "tensorParallelSize": tp}
    fixed = memory_fit(_model(make_spec, {"raypd:prefill": fixed_phase, "raypd:decode": fixed_phase},
                              source="meta-llama/Llama-3.3-70B-Instruct"))
    assert fixed.status == "pass", fixed.detail


def test_long_context_kv_cache_fails_and_the_suggested_length_fits(make_spec: MakeSpec) -> None:
    failing = memory_fit(_model(make_spec, source="meta-llama/Llama-3.1-8B-Instruct", maxModelLen=131072))
    assert failing.status == "fail"
    assert "KV 16.00 GiB (131072 tokens)" in failing.detail
    tokens = int(re.search(r"raypd:model.maxModelLen to at most (\d+)", failing.remedy).group(1))
    assert 0 < tokens < 131072
    fits = memory_fit(_model(make_spec, source="meta-llama/Llama-3.1-8B-Instruct", maxModelLen=tokens))
    assert fits.status == "pass", fits.detail


def test_float32_doubles_the_weights(make_spec: MakeSpec) -> None:
    bf16 = memory_fit(_model(make_spec, source="Qwen/Qwen3-8B", dtype="bfloat16"))
    fp32 = memory_fit(_model(make_spec, source="Qwen/Qwen3-8B", dtype="float32"))
    assert bf16.status == "pass"
    assert fp32.status == "fail"
    assert "bfloat16" in fp32.remedy


def test_gpt_oss_uses_its_mxfp4_checkpoint_size(make_spec: MakeSpec) -> None:
    h100 = {"raypd:mode": "colocated", "raypd:colocated": {"instanceType": "p5.48xlarge"}}
    check = memory_fit(_model(make_spec, h100, source="openai/gpt-oss-120b", dtype="auto"))
    assert check.status == "pass", check.detail  # the published "fits one 80 GB GPU"
    assert "weights 60.8 GiB" in check.detail
    l40s = {"raypd:mode": "colocated", "raypd:colocated": {"instanceType": "g6e.48xlarge"}}
    assert memory_fit(_model(make_spec, l40s, source="openai/gpt-oss-120b")).status == "fail"


def test_lookup_is_case_insensitive_and_s3_falls_back_to_names() -> None:
    assert find_shape("qwen/QWEN3-8b").repo_id == "Qwen/Qwen3-8B"
    assert find_shape("s3://models-bucket/llm/Llama-3.3-70B-Instruct/").repo_id == (
        "meta-llama/Llama-3.3-70B-Instruct")
    assert find_shape("s3://models-bucket/llm/v7", "Mistral-7B-Instruct-v0.3").repo_id == (
        "mistralai/Mistral-7B-v0.3")
    # An HF repo id names the model; the served name is only a label and is not used.
    assert find_shape("someorg/private-model", "qwen3.5-9b") is None


@pytest.mark.parametrize(("name", "billions"), [
    ("org/Model-70B", 70), ("org/model-8b-chat", 8), ("Qwen/Qwen2.5-1.5B-Instruct", 1.5),
    ("mistralai/Mixtral-8x7B-v0.1", 56), ("Qwen/Qwen3-30B-A3B", 30), ("org/custom", None),
    ("mistralai/Mistral-7B-v0.3", 7),
])
def test_size_read_from_the_name(name: str, billions: float | None) -> None:
    assert params_from_name(name) == billions


def test_estimate_that_cannot_fit_fails_and_says_estimate(make_spec: MakeSpec) -> None:
    check = memory_fit(_model(make_spec, source="someorg/big-model-13B"))
    assert check.status == "fail"
    assert "estimate" in check.detail and "13B" in check.detail


def test_estimate_with_room_passes_as_an_estimate(make_spec: MakeSpec) -> None:
    check = memory_fit(_model(make_spec, source="someorg/small-1.5B"))
    assert check.status == "pass"
    assert "estimate" in check.detail and "KV not counted" in check.detail


def test_no_size_at_all_warns(make_spec: MakeSpec) -> None:
    check = memory_fit(_model(make_spec, source="someorg/mystery"))
    assert check.status == "warn"
    assert "cannot estimate" in check.detail


def test_cuda_context_overhead_counts_against_the_budget(make_spec: MakeSpec) -> None:
    # Llama-3.1-8B on one L4: 15.0 GiB of weights + 4.5 GiB of KV (36864 tokens x 128 KiB) = 19.5 GiB
    # fits the 20.1 GiB budget on paper, but not with the CUDA context and activations on top.
    check = memory_fit(_model(make_spec, source="meta-llama/Llama-3.1-8B-Instruct", maxModelLen=36864))
    assert check.status == "fail", check.detail
    assert "overhead 1.5 GiB" in check.detail
    shorter = memory_fit(_model(make_spec, source="meta-llama/Llama-3.1-8B-Instruct", maxModelLen=16384))
    assert shorter.status == "pass", shorter.detail
