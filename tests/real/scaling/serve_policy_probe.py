"""Run in the real venv (Ray 2.60; no Ray cluster is started): raypd's PD policy inside Serve's own code.

`python serve_policy_probe.py POLICY_DIR < config.json` (this directory, not tests/real/: a script's own
directory leads sys.path, and tests/real/ray/ would shadow the `ray` package) where POLICY_DIR holds the policy file as
the ConfigMap mounts it and config.json is the Serve config the scaling test deploys. Prints one
JSON object:
- "validates_without_the_module": Serve's own ServeDeploySchema accepts the config in a process
  that cannot import the policy (the dashboard's REST handler validates it there);
- "deployment_level_needs_the_module": the error the same schema raises when the policy is named
  at the DEPLOYMENT level instead (why raypd names it at the application level);
- "timeline_<scenario>": the policy, serialized by value as Serve's build task does, loaded from
  those bytes in this process where its module is NOT importable (as the controller does), wrapped
  by Serve's `_apply_app_level_autoscaling_config` and called once per second of a fake clock
  with Serve's real AutoscalingContext / AutoscalingConfig / DeploymentID: each deployment's target
  replicas over time, bounded by min/max as `ApplicationAutoscalingState` does;
- "default_policy_<scenario>": Serve's default policy's raw answer on the same contexts, for contrast.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import math
import sys
from typing import Any, Callable

APP = "llm"
PREFILL = "Prefill:tiny"
DECODE = "Decode:tiny"
INGRESS = "OpenAiIngress"
# (running, queued at handles) per deployment while each load runs, 16 requests at a time as the real
# scaling tests send them against the targets of tests/real/stacks.py (prefill 3, decode 8): prefill-bound,
# 15 ongoing at prefill and decode's own work 1 (Serve's default would count all 16 on decode: 2 replicas);
# decode-bound, 15.8 in decode's engines. See tests/unit/test_scaling_policy.py
LOADS: dict[str, dict[str, tuple[float, float]]] = {
    "prefill_bound": {PREFILL: (2, 13), DECODE: (16, 0), INGRESS: (16, 0)},
    "decode_bound": {PREFILL: (0.2, 0), DECODE: (16, 0), INGRESS: (16, 0)},
}
IDLE = {PREFILL: (0, 0), DECODE: (0, 0), INGRESS: (0, 0)}
LOAD_S = 15  # fake seconds of load, then IDLE_S of nothing
IDLE_S = 40


def serialized_like_the_build_task(policy_dir: str, import_path: str) -> bytes:
    from ray import cloudpickle

    sys.path.insert(0, policy_dir)
    try:
        module_name, attr = import_path.split(":")
        module = importlib.import_module(module_name)
        cloudpickle.register_pickle_by_value(module)  # application_state.py `_get_serialized_def`
        try:
            return cloudpickle.dumps(getattr(module, attr))
        finally:
            cloudpickle.unregister_pickle_by_value(module)
    finally:
        sys.path.remove(policy_dir)
        sys.modules.pop(import_path.split(":")[0], None)


def validation(config: dict[str, Any]) -> dict[str, Any]:
    from ray.serve.schema import ServeDeploySchema

    result: dict[str, Any] = {}
    ServeDeploySchema.model_validate(config)
    result["validates_without_the_module"] = True
    app = json.loads(json.dumps(config["applications"][0]))
    policy = app.pop("autoscaling_policy")
    for deployment in app["deployments"]:
        deployment["autoscaling_config"]["policy"] = {"policy_function": policy["policy_function"]}
    try:
        ServeDeploySchema.model_validate({**config, "applications": [app]})
        result["deployment_level_needs_the_module"] = None
    except Exception as exc:  # noqa: BLE001 - the probe reports whatever Serve raises
        result["deployment_level_needs_the_module"] = f"{type(exc).__name__}: {exc}"
    return result


def contexts(load: dict[str, tuple[float, float]], targets: dict[str, int], states: dict[Any, dict],
             configs: dict[str, Any], now: float) -> dict[Any, Any]:
    from ray.serve._private.common import DeploymentID
    from ray.serve.config import AutoscalingContext

    accepted = set(inspect.signature(AutoscalingContext.__init__).parameters)
    result = {}
    for name, (running, queued) in load.items():
        dep_id = DeploymentID(name=name, app_name=APP)
        kwargs = dict(
            deployment_id=dep_id, deployment_name=name, app_name=APP, current_num_replicas=targets[name],
            target_num_replicas=targets[name], running_replicas=[],
            total_num_requests=lambda r=running, q=queued: r + q, total_queued_requests=lambda q=queued: q,
            aggregated_metrics=None, raw_metrics=None,
            capacity_adjusted_min_replicas=configs[name].min_replicas,
            capacity_adjusted_max_replicas=configs[name].max_replicas, policy_state=dict(states.get(dep_id, {})),
            last_scale_up_time=None, last_scale_down_time=None, current_time=now, config=configs[name],
            total_pending_async_requests=0)
        result[dep_id] = AutoscalingContext(**{k: v for k, v in kwargs.items() if k in accepted})
    return result


def timeline(policy: Callable, configs: dict[str, Any], load: dict[str, tuple[float, float]]) -> list[dict]:
    import ray.serve.autoscaling_policy as serve_policies

    clock = {"now": 1_000_000.0}

    class FakeTime:  # Serve's delay logic reads time.time() (autoscaling_policy.py `_apply_delay_logic`)
        @staticmethod
        def time() -> float:
            return clock["now"]

    real_time = serve_policies.time
    serve_policies.time = FakeTime  # type: ignore[assignment]
    try:
        wrapped = serve_policies._apply_app_level_autoscaling_config(policy)
        targets = {name: configs[name].min_replicas for name in load}
        states: dict[Any, dict] = {}
        events = []
        for second in range(LOAD_S + IDLE_S):
            current = load if second < LOAD_S else IDLE
            decisions, states = wrapped(contexts(current, targets, states, configs, clock["now"]))
            for dep_id, replicas in decisions.items():
                cfg = configs[dep_id.name]
                bounded = max(cfg.min_replicas, min(cfg.max_replicas, math.ceil(replicas)))
                if bounded != targets[dep_id.name]:
                    events.append({"t": second, "deployment": dep_id.name, "replicas": bounded})
                    targets[dep_id.name] = bounded
            clock["now"] += 1.0
        return events
    finally:
        serve_policies.time = real_time


def main() -> None:
    from ray.serve.autoscaling_policy import replica_queue_length_autoscaling_policy
    from ray.serve.config import AutoscalingConfig, AutoscalingPolicy

    policy_dir = sys.argv[1]
    config = json.load(sys.stdin)
    app = config["applications"][0]
    result = validation(config)
    block = app["autoscaling_policy"]
    # What the controller does with the build task's bytes (application_state.py): no import of the path.
    policy_obj = AutoscalingPolicy(_serialized_policy_def=serialized_like_the_build_task(
        policy_dir, block["policy_function"]), **block)
    policy = policy_obj.get_policy()
    result["module_importable_here"] = importlib.util.find_spec(block["policy_function"].split(":")[0]) is not None
    configs = {d["name"]: AutoscalingConfig(**d["autoscaling_config"]) for d in app["deployments"]}
    configs[INGRESS] = AutoscalingConfig(min_replicas=1, max_replicas=1, target_ongoing_requests=1e9)
    result["delays"] = {name: {"up": c.upscale_delay_s, "down": c.downscale_delay_s} for name, c in configs.items()}
    for scenario, load in LOADS.items():
        result[f"timeline_{scenario}"] = timeline(policy, configs, load)
        ctxs = contexts(load, {name: 1 for name in load}, {}, configs, 0.0)
        result[f"default_policy_{scenario}"] = {
            dep_id.name: replica_queue_length_autoscaling_policy(ctx)[0] for dep_id, ctx in ctxs.items()}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
