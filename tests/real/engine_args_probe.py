"""Run in the real venv: do vLLM's own argument parser and EngineArgs accept raypd's engine_kwargs?

`python engine_args_probe.py MODEL_DIR < cases.json` where cases.json is
`{"<name>": {"engine_kwargs": {...}, "build": true|false}}`. For each case:
1. every key is a field of vllm.engine.arg_utils.AsyncEngineArgs (what Ray Serve LLM builds from
   engine_kwargs);
2. the same settings as `vllm serve` flags parse with vLLM's own CLI parser and give back the values;
3. with "build", EngineArgs(model=MODEL_DIR, ...).create_engine_config() accepts them (their values
   checked against a real model config: the tiny model's, so only cases whose sizes fit it).
Prints one JSON object: {"<name>": {"unknown_keys": [...], "cli_mismatches": {...}, "built": {...} or
"error": "..."}}.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any


def cli_flags(engine_kwargs: dict[str, Any]) -> list[str]:
    argv = []
    for key, value in engine_kwargs.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, (dict, list)):
            argv += [flag, json.dumps(value)]
        else:
            argv += [flag, str(value)]
    return argv


def comparable(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def probe(model_dir: str, name: str, case: dict[str, Any]) -> dict[str, Any]:
    from vllm.engine.arg_utils import AsyncEngineArgs, EngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    kwargs = case["engine_kwargs"]
    fields = {f.name for f in dataclasses.fields(AsyncEngineArgs)}
    result: dict[str, Any] = {"unknown_keys": sorted(set(kwargs) - fields), "cli_mismatches": {}}
    parser = AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())
    try:
        parsed = AsyncEngineArgs.from_cli_args(parser.parse_args(["--model", model_dir, *cli_flags(kwargs)]))
    except SystemExit as exc:
        result["error"] = f"vLLM's CLI parser refused the flags {cli_flags(kwargs)} (exit {exc.code})"
        return result
    for key, expected in kwargs.items():
        got = comparable(getattr(parsed, key, None))
        if isinstance(expected, dict) and isinstance(got, dict):
            got = {k: got.get(k) for k in expected}
        if got != expected:
            result["cli_mismatches"][key] = {"expected": expected, "got": got}
    if case.get("build"):
        try:
            config = EngineArgs(model=model_dir, **kwargs).create_engine_config()
        except Exception as exc:  # noqa: BLE001 - reported to the test, which fails with it
            result["error"] = f"create_engine_config: {type(exc).__name__}: {exc}"
            return result
        kv = config.kv_transfer_config
        result["built"] = {
            "max_model_len": config.model_config.max_model_len,
            "dtype": str(config.model_config.dtype).removeprefix("torch."),
            "enforce_eager": config.model_config.enforce_eager,
            "tensor_parallel_size": config.parallel_config.tensor_parallel_size,
            "pipeline_parallel_size": config.parallel_config.pipeline_parallel_size,
            "kv_transfer_config": None if kv is None else {
                "kv_connector": kv.kv_connector, "kv_role": kv.kv_role, "engine_id": kv.engine_id,
                "kv_load_failure_policy": kv.kv_load_failure_policy,
                "kv_connector_extra_config": kv.kv_connector_extra_config,
            },
        }
    return result


def main() -> int:
    model_dir = sys.argv[1]
    cases = json.load(sys.stdin)
    print(json.dumps({name: probe(model_dir, name, case) for name, case in cases.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
