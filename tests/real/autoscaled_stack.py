"""The small stack's Serve config with per-phase autoscaling and raypd's PD policy, for this CPU machine.

The base is what tests/real/ray deploys: raypd's rendered config of the small stack changed only
where this machine forces it (tests/real/cpu_serve_config.py). On top, for the scaling tests:
- the application-level `autoscaling_policy` raypd ships (components/render/scaling_policy/
  delivery.py), whose module the Ray head finds on PYTHONPATH, as the ConfigMap puts it on every
  Ray pod;
- per phase, `deployments` overrides with `autoscaling_config` (min 1, max 2) and
  `max_ongoing_requests` above the target (Serve's advice; the decode signal relies on it), with
  `num_replicas: null` (Serve refuses an int beside an autoscaling_config). Each phase's target is
  what one of its replicas serves at once: prefill 1 (its engine takes one sequence at a time, see
  below), decode 4 (it batches); TODO(issue 30 §1): use
  raypd's own rendering of an `autoscaling:` block once the config renders it; the delays and the
  metric windows stay test-short either way (upscale 10 s, downscale 20 s, look-back 10 s, metrics
  every 2 s; the Ray head also pushes them every 2 s, tests/real/scaling/conftest.py);
- NIXL side channels from a per-phase base port instead of one fixed port per phase: two replicas
  of a phase run on this one machine, and Ray Serve LLM adds the replica's rank to the base
  (ray/llm/_internal/serve/engines/vllm/kv_transfer/nixl.py `_set_side_channel_port`, used only
  when VLLM_NIXL_SIDE_CHANNEL_PORT is unset);
- prefill's engine runs one sequence at a time (`max_num_seqs: 1`). On the tiny model a prompt's
  prefill takes about one decode step, so nothing on this machine is prefill-bound by itself; one
  sequence at a time makes long prompts queue at prefill, as compute-bound prefill does on a GPU.
"""

from __future__ import annotations

import copy
import socket
from typing import Any

from components.render.scaling_policy.delivery import application_autoscaling_policy
from components.render.serve_config import serve_deployment_name
from tests.real.cpu_serve_config import for_cpu
from tests.real.locate import MODEL_ID
from tests.real.processes import free_port
from tests.real.stacks import small_stack_serve_config

AUTOSCALING: dict[str, Any] = {  # both phases; plus their own TARGETS
    "min_replicas": 1, "max_replicas": 2,
    "upscale_delay_s": 10, "downscale_delay_s": 20, "look_back_period_s": 10, "metrics_interval_s": 2,
}
TARGETS = {"prefill": 1, "decode": 4}  # target_ongoing_requests
MAX_ONGOING_REQUESTS = 8
PORTS_PER_PHASE = 4  # side-channel ports reserved per phase: replica ranks 0..3
PHASES = {"prefill_config": "prefill", "decode_config": "decode"}


def free_port_block(count: int, attempts: int = 50) -> int:
    """A base port such that base .. base+count-1 are all free on loopback right now."""
    for _ in range(attempts):
        base = free_port()
        if base + count > 65535:
            continue
        socks = []
        try:
            for port in range(base, base + count):
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free ports on 127.0.0.1 after {attempts} attempts")


def side_channel_bases() -> dict[str, int]:
    """A base port per phase, each with PORTS_PER_PHASE free ports, the two blocks apart."""
    prefill = free_port_block(PORTS_PER_PHASE)
    for _ in range(50):
        decode = free_port_block(PORTS_PER_PHASE)
        if abs(decode - prefill) >= PORTS_PER_PHASE:
            return {"prefill": prefill, "decode": decode}
    raise RuntimeError("no two separate blocks of free side-channel ports")


def _per_replica_side_channels(llm_config: dict[str, Any], base_port: int) -> None:
    env = llm_config.get("runtime_env", {}).get("env_vars", {})
    env.pop("VLLM_NIXL_SIDE_CHANNEL_PORT", None)
    llm_config.setdefault("experimental_configs", {})["NIXL_SIDE_CHANNEL_PORT_BASE"] = base_port


def autoscaled_small_stack(*, model_dir: str, http_port: int, port_bases: dict[str, int]) -> dict[str, Any]:
    """The Serve config the scaling tests deploy (see the module docstring for each change)."""
    config = for_cpu(small_stack_serve_config(), model_dir=model_dir, http_port=http_port,
                     side_channel_ports={"prefill": port_bases["prefill"], "decode": port_bases["decode"]})
    app = config["applications"][0]
    args = copy.deepcopy(app["args"])
    for key, phase in PHASES.items():
        _per_replica_side_channels(args[key], port_bases[phase])
    args["prefill_config"]["engine_kwargs"]["max_num_seqs"] = 1
    app["args"] = args
    app["autoscaling_policy"] = application_autoscaling_policy()
    app["deployments"] = [
        {"name": serve_deployment_name(phase, MODEL_ID), "num_replicas": None,
         "max_ongoing_requests": MAX_ONGOING_REQUESTS,
         "autoscaling_config": {**AUTOSCALING, "target_ongoing_requests": TARGETS[phase]}}
        for phase in PHASES.values()
    ]
    return config
