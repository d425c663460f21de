"""Tensor and pipeline parallelism the model cannot take are refused before anything is created
(issue 29 §2): decode TP 3 on g6.12xlarge passed validation, preview and preflight, and vLLM
refused it at engine start ("Total number of attention heads (16) must be divisible by tensor
parallel size (3)"), 25-45 minutes into a deploy. The rule reads the model table
(components.config.model_catalogue); a model not in it warns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.config.errors import SpecError
from components.config.model_catalogue import (
    SHAPES,
    ModelShape,
    pipeline_parallel_problem,
    tensor_parallel_problem,
    tensor_parallel_sizes,
)
from components.config.spec import DeploymentSpec
from components.preflight.cli import main as preflight_main
from components.stack.offline_plan import main as plan_main
from tests.unit.cli_support import run_main, write_stack

TP3_ON_G6_12 = {"raypd:decode": {"instanceType": "g6.12xlarge", "tensorParallelSize": 3}}
TP3_MESSAGE = (
    "3 does not divide the 16 attention heads of Qwen/Qwen3.5-9B: vLLM refuses it when the engine "
    "starts (\"Total number of attention heads (16) must be divisible by tensor parallel size (3)\"); "
    "on g6.12xlarge (4 GPUs) use 1, 2 or 4")


def errors_of(config: dict[str, Any], strict: bool = False) -> dict[str, str]:
    with pytest.raises(SpecError) as caught:
        DeploymentSpec.from_config(config, "dev", strict=strict)
    return {error.field: error.message for error in caught.value.errors}


@pytest.mark.parametrize("strict", [False, True], ids=["stack-file", "json-api"])
def test_tp_3_of_the_reference_model_is_refused_with_the_sizes_the_node_takes(strict: bool) -> None:
    assert errors_of(TP3_ON_G6_12, strict) == {"raypd:decode.tensorParallelSize": TP3_MESSAGE}
    for size in (1, 2, 4):
        DeploymentSpec.from_config({"raypd:decode": {"instanceType": "g6.12xlarge", "tensorParallelSize": size}})


@pytest.mark.parametrize("config,field,sizes", [
    ({"raypd:mode": "colocated",
      "raypd:colocated": {"instanceType": "p5.48xlarge", "tensorParallelSize": 6}},
     "raypd:colocated.tensorParallelSize", "on p5.48xlarge (8 GPUs) use 1, 2, 4 or 8"),
    ({"raypd:model": {"source": "meta-llama/Llama-3.3-70B-Instruct"},
      "raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 3, "pipelineParallelSize": 2}},
     "raypd:prefill.tensorParallelSize", "on p5.48xlarge (8 GPUs with pipelineParallelSize 2) use 1, 2 or 4"),
    # An s3:// source is matched to its table row by the folder's name, as the memory fit does.
    ({"raypd:model": {"id": "qwen3-8b", "source": "s3://raypd-weights/Qwen3-8B/"},
      "raypd:decode": {"instanceType": "g6e.48xlarge", "tensorParallelSize": 5}},
     "raypd:decode.tensorParallelSize", "32 attention heads of Qwen/Qwen3-8B"),
])
def test_every_phase_and_source_kind_is_judged(config: dict[str, Any], field: str, sizes: str) -> None:
    errors = errors_of(config)
    assert list(errors) == [field] and sizes in errors[field]


def test_the_tp_error_comes_with_every_other_problem() -> None:
    errors = errors_of({**TP3_ON_G6_12, "raypd:prefill": {"instanceType": "g6.8xlarg"}, "raypd:mode": "disaggregated",
                        "raypd:kubernetesVersion": "1.٢٩"})
    assert set(errors) == {"raypd:decode.tensorParallelSize", "raypd:prefill.instanceType",
                           "raypd:kubernetesVersion"}


def test_a_model_refused_itself_is_not_judged_by_its_default() -> None:
    # The default model (Qwen3.5-9B, 16 heads) must not stand in for a source that was refused.
    errors = errors_of({"raypd:model": {"source": "not a repo"}, **TP3_ON_G6_12})
    assert set(errors) == {"raypd:model.source"}


def test_a_model_not_in_the_table_warns_and_passes() -> None:
    spec = DeploymentSpec.from_config({"raypd:model": {"id": "odd", "source": "acme/odd-13b"}, **TP3_ON_G6_12})
    warned = [w for w in spec.warnings if "not in raypd's model table" in w]
    assert len(warned) == 1 and "raypd:decode: tensorParallelSize 3" in warned[0]
    single_gpu = DeploymentSpec.from_config({"raypd:model": {"id": "odd", "source": "acme/odd-13b"}})
    assert not [w for w in single_gpu.warnings if "model table" in w]  # TP 1, PP 1 suit every model
    assert not [w for w in DeploymentSpec.from_config({}).warnings if "model table" in w]


# ---- the rule itself (vLLM's ModelConfig.verify_with_parallel_config and QKVParallelLinear) ----

def _shape(heads: int, kv: int, layers: int = 32) -> ModelShape:
    return ModelShape("acme/m", 1.0, layers, layers, kv, 128, heads, source="test")


def test_kv_heads_are_sharded_or_replicated_and_nothing_else() -> None:
    assert tensor_parallel_problem(_shape(32, 8), 4) is None  # 2 KV heads per rank
    assert tensor_parallel_problem(_shape(32, 8), 16) is None  # each KV head on 2 ranks
    problem = tensor_parallel_problem(_shape(40, 8), 20)  # 40 heads split, 8 KV heads cannot be
    assert problem is not None and "neither divides nor is a multiple of the 8 KV heads" in problem
    assert tensor_parallel_sizes(_shape(40, 8), 8) == [1, 2, 4, 8]
    assert tensor_parallel_sizes(_shape(28, 4), 8) == [1, 2, 4]


def test_pipeline_stages_need_a_layer_each() -> None:
    assert pipeline_parallel_problem(_shape(32, 8, layers=4), 4) is None
    problem = pipeline_parallel_problem(_shape(32, 8, layers=4), 8)
    assert problem == "8 stages for the 4 layers of acme/m: a pipeline stage would hold no layer"


def test_every_model_of_the_table_takes_the_powers_of_two_a_node_has() -> None:
    # The memory fit's remedies double TP (components.plan.model_shapes): each size it names is valid.
    for shape in SHAPES:
        assert tensor_parallel_sizes(shape, 8)[:1] == [1]
        assert {1, 2, 4, 8} <= set(tensor_parallel_sizes(shape, 8)), shape.repo_id


# ---- the preview and the preflight never see such a spec ----

@pytest.mark.parametrize("main", [plan_main, preflight_main], ids=["plan", "preflight"])
def test_the_plan_and_preflight_clis_refuse_it_as_invalid_input(main: Any, tmp_path: Path) -> None:
    stack = write_stack(tmp_path, "config:\n  raypd:decode:\n    instanceType: g6.12xlarge\n"
                                  "    tensorParallelSize: 3\n")
    result = run_main(main, "--config", str(stack))
    assert result.returncode == 2, result.stdout
    assert f"raypd:decode.tensorParallelSize: {TP3_MESSAGE}" in result.stderr and "Traceback" not in result.stderr
