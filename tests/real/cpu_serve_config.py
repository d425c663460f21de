"""raypd's rendered Serve config, changed only where this CPU test machine forces it.

The Ray Serve LLM test deploys the document `components.render.serve_config.render_serve_config` renders
for a small stack, so that what runs is what raypd ships. A CPU machine with no model hub and
Ray 2.60 (the DLC has 2.58 on GPUs) forces a few changes, and `for_cpu` makes exactly those, each
named here with why (anything else the test deploys is raypd's own output):

- `http_options`: 127.0.0.1 and a free port instead of 0.0.0.0:8000 (tests stay on loopback and
  never take a fixed port).
- `model_loading_config.model_source`: the tiny model made locally (nothing downloads here).
- `accelerator_config: {kind: cpu}` on each LLMConfig: without it Ray 2.60 infers a GPU engine.
- `placement_group_config` bundles: `GPU: n` becomes `CPU: n` (custom phase resources stay; the
  test's Ray node advertises them, as raypd's worker groups do).
- `runtime_env.env_vars` of each engine: vLLM's CPU platform settings (KV cache size in GiB, the
  one core each engine's OpenMP threads are bound to; a GPU engine has neither), and its NIXL
  side channel on 127.0.0.1. raypd leaves the side channel to Ray in a cluster, where Ray takes
  the node's IP and 20000 + the replica's rank; here the "node IP" Ray reports to a replica is
  the machine's interface address, not loopback, and 20000 is a fixed port: each PD phase gets
  `experimental_configs.NIXL_SIDE_CHANNEL_PORT_BASE`, the first of PORTS_PER_PHASE free ports, and
  Ray adds the replica's rank (Ray 2.60 ray/llm/_internal/serve/engines/vllm/kv_transfer/nixl.py
  `_set_side_channel_port`, used only when VLLM_NIXL_SIDE_CHANNEL_PORT is unset): an autoscaled
  phase runs two replicas on this one machine.
- the application's `runtime_env` PYTHONPATH (raypd's PD scaling policy, when rendered): the
  directory the test wrote the policy ConfigMap's file to instead of the pod's mount path.
- Fields Ray 2.60 rejects: none today (the LLMConfig test validates the result with Ray 2.60's own
  model); `REJECTED_BY_RAY_260` names any that appear, with why.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping, Optional

from components.render.scaling_policy.delivery import POLICY_DIR

# LLMConfig keys raypd renders (for Ray 2.58) that Ray 2.60's LLMConfig would refuse: none so far.
REJECTED_BY_RAY_260: frozenset[str] = frozenset()
CPU_KVCACHE_GIB = "1"
PORTS_PER_PHASE = 4  # side-channel ports per PD phase: replica ranks 0..3
PHASE_KEYS = {"prefill_config": "prefill", "decode_config": "decode"}


def cpu_engine_env(core: int) -> dict[str, str]:
    """One engine's CPU settings (KV cache GiB, OpenMP core) and its loopback NIXL side channel host."""
    return {"VLLM_CPU_KVCACHE_SPACE": CPU_KVCACHE_GIB, "VLLM_CPU_OMP_THREADS_BIND": str(core),
            "VLLM_NIXL_SIDE_CHANNEL_HOST": "127.0.0.1"}


def _llm_config_for_cpu(config: Mapping[str, Any], model_dir: str, core: int,
                        side_channel_base: int) -> dict[str, Any]:
    result = {key: copy.deepcopy(value) for key, value in config.items() if key not in REJECTED_BY_RAY_260}
    loading = dict(result.get("model_loading_config") or {})
    loading["model_source"] = model_dir
    result["model_loading_config"] = loading
    result["accelerator_config"] = {"kind": "cpu"}
    placement = result.get("placement_group_config")
    if placement is not None:
        bundles = []
        for bundle in placement.get("bundles") or []:
            bundle = dict(bundle)
            gpus = bundle.pop("GPU", 0)
            if gpus:
                bundle["CPU"] = bundle.get("CPU", 0) + gpus
            bundles.append(bundle)
        result["placement_group_config"] = {**placement, "bundles": bundles}
    runtime_env = dict(result.get("runtime_env") or {})
    runtime_env["env_vars"] = {**(runtime_env.get("env_vars") or {}), **cpu_engine_env(core)}
    result["runtime_env"] = runtime_env
    result["experimental_configs"] = {**(result.get("experimental_configs") or {}),
                                      "NIXL_SIDE_CHANNEL_PORT_BASE": side_channel_base}
    return result


def _policy_path_for_test(runtime_env: Mapping[str, Any], policy_dir: str) -> dict[str, Any]:
    env = dict(runtime_env.get("env_vars") or {})
    env["PYTHONPATH"] = env["PYTHONPATH"].replace(POLICY_DIR, policy_dir, 1)
    return {**runtime_env, "env_vars": env}


def for_cpu(serve_config: Mapping[str, Any], *, model_dir: str, http_port: int,
            side_channel_ports: Mapping[str, int], policy_dir: Optional[str] = None) -> dict[str, Any]:
    """A copy of `serve_config` that runs on this CPU machine (see the module docstring for each change).

    Prefill engines are bound to core 0 and decode engines to core 1; a colocated app's engine to
    core 0. `side_channel_ports` maps "prefill"/"decode"/"colocated" to the first of PORTS_PER_PHASE
    free ports. `policy_dir`: where the PD policy's file is, when the app names it. The input is
    not modified.
    """
    result = copy.deepcopy(dict(serve_config))
    result["http_options"] = {**(result.get("http_options") or {}), "host": "127.0.0.1", "port": http_port}
    apps = []
    for app in result.get("applications") or []:
        args = dict(app.get("args") or {})
        for key, phase in PHASE_KEYS.items():
            if key in args:
                args[key] = _llm_config_for_cpu(args[key], model_dir, 0 if phase == "prefill" else 1,
                                                side_channel_ports[phase])
        if "llm_configs" in args:
            args["llm_configs"] = [_llm_config_for_cpu(c, model_dir, 0, side_channel_ports["colocated"])
                                   for c in args["llm_configs"]]
        app = {**app, "args": args}
        if "runtime_env" in app:
            if policy_dir is None:
                raise ValueError("the app names raypd's PD scaling policy: for_cpu needs policy_dir")
            app["runtime_env"] = _policy_path_for_test(app["runtime_env"], policy_dir)
        apps.append(app)
    result["applications"] = apps
    return result
