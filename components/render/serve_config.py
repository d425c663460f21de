"""The Ray Serve config (the document `serve deploy` and KubeRay's serveConfigV2 take) for a plan.

Pure functions of the deployment plan: the RayService renderer embeds the applications,
`python -m serve.render` prints the whole document for any Ray cluster, and tests compare it with
the AWS reference key by key. It lives in `components` (not `serve`) so that imports run one way:
`serve` (render, verify, live status) uses `components`, never the reverse.

Field names are those of the DLC's pair, Ray 2.58 + vLLM 0.26, checked in Ray's sources:
- Serve config (`ray.serve.schema.ServeDeploySchema`): top level `http_options {host, port}` and
  `applications[] {name, route_prefix, import_path, args}`; `host`/`port` must not appear per app.
- `LLMConfig` (`ray/llm/_internal/serve/core/configs/llm_config.py`, pydantic `extra="forbid"`):
  `model_loading_config {model_id, model_source}`, `engine_kwargs`, `deployment_config`,
  `placement_group_config`. An `s3://` source must be a mirror config `{bucket_uri: ...}`; a plain
  string is handed to vLLM as a Hugging Face id.
- `build_pd_openai_app` args: `prefill_config`, `decode_config` (no proxy fields: Ray 2.60 removed
  them and forbids unknown keys). Both configs must name the same model and carry
  `kv_transfer_config`. Ray's NIXL backend appends host and port to `engine_id`, so one id per phase
  stays unique across that phase's replicas.

Replica counts are NOT in the args. Ray Serve hashes an application's import path, runtime_env and
args into its code version (`ray/serve/_private/deploy_utils.py` `get_app_code_version`); a new code
version rebuilds the application and restarts every replica of every deployment, i.e. every vLLM
engine reloads its model. The per-deployment `deployments: [{name, num_replicas}]` overrides are
applied to the built deployments without a rebuild (`ApplicationState.apply_app_config`,
`override_deployment_info`): Serve adds or stops replicas and leaves the running ones alone. So each
LLMConfig carries a fixed `num_replicas` (which also keeps Ray Serve LLM from applying its default
autoscaling config, `maybe_apply_llm_deployment_config_defaults`) and the real count is an override
keyed by the deployment's name (`serve_deployment_name`). An autoscaled phase's override carries its
autoscaling config instead (components.render.serve_autoscaling, issue 30).
"""

from __future__ import annotations

from typing import Any, Optional

import yaml

from components.config import defaults
from components.config.spec import DeploymentSpec
from components.plan.topology import DeploymentPlan, PhasePlan
from components.render.scaling_policy.rendering import application_scaling
from components.render.serve_autoscaling import deployment_override

APP_NAME = "llm"
ROUTE_PREFIX = "/"
PD_IMPORT_PATH = "ray.serve.llm:build_pd_openai_app"
COLOCATED_IMPORT_PATH = "ray.serve.llm:build_openai_app"
HTTP_HOST = "0.0.0.0"  # Serve's proxy must listen beyond localhost for the Kubernetes Service
KV_ROLE = "kv_both"
# The default policy (raypd:kvTransfer.loadFailurePolicy; components.config.defaults says why), as
# serve.verify words a 500 from a failed KV load: only "fail" answers one.
KV_LOAD_FAILURE_POLICY = defaults.KV_LOAD_FAILURE_POLICY
# STRICT_PACK keeps all of one engine's GPU bundles on one node, which is what the node plan sized
# for (TP/PP over NVLink/PCIe, never across the network). Ray's default is PACK (best effort).
PIN_STRATEGY = "STRICT_PACK"
# The num_replicas written into each LLMConfig (see the module docstring: the real count is the
# application's `deployments` override, so scaling never changes the args).
BUILD_TIME_REPLICAS = 1
# Ray Serve LLM's deployment names (`ray/llm/_internal/serve/core/server/builder.py`
# `build_llm_deployment` and `_get_deployment_name`; the PD builder's "Prefill:"/"Decode:" prefixes).
DEPLOYMENT_PREFIXES = {"prefill": "Prefill:", "decode": "Decode:", "colocated": "LLMServer:"}


def serve_safe_model_id(model_id: str) -> str:
    """Ray Serve LLM's deployment-name form of a model id ("/" -> "--", "." -> "_")."""
    return model_id.replace("/", "--").replace(".", "_")


def serve_deployment_name(phase_name: str, model_id: str) -> str:
    """The Serve deployment that runs a phase's engines, e.g. `Decode:qwen3_5-9b`."""
    return DEPLOYMENT_PREFIXES[phase_name] + serve_safe_model_id(model_id)


def _model_source(source: str) -> Any:
    """Hugging Face ids pass as strings; S3 prefixes become Ray's CloudMirrorConfig."""
    if source.startswith("s3://"):
        return {"bucket_uri": source}
    return source


def _placement_group_config(phase: PhasePlan) -> Optional[dict[str, Any]]:
    """One bundle per GPU of the engine (TP x PP), or None to keep Ray's own default.

    Ray 2.58's `PlacementGroupConfig` takes `bundles` (list of resource dicts; `GPU` defaults to 1,
    `CPU` to 0, extra resource names allowed) and `strategy` (PACK | SPREAD | STRICT_PACK |
    STRICT_SPREAD); vLLM's Ray executor wants at most one GPU per bundle. When the phase has its own
    node group, each bundle also asks for one unit of that group's custom resource, so the engine
    can only land on that group's workers (which advertise one unit per GPU).
    """
    gpus = phase.gpus_per_replica
    if phase.ray_resource is None and gpus == 1:
        return None  # one GPU cannot straddle nodes; the reference writes no placement config
    bundle: dict[str, float | int] = {"GPU": 1}
    if phase.ray_resource is not None:
        bundle[phase.ray_resource] = 1
    return {"bundles": [dict(bundle) for _ in range(gpus)], "strategy": PIN_STRATEGY}


def _kv_transfer_config(spec: DeploymentSpec, phase_name: str) -> dict[str, Any]:
    """One phase's `kv_transfer_config`; the same settings on both phases (issue 31).

    Field names from vLLM's `KVTransferConfig` (vllm/config/kv_transfer.py: `kv_load_failure_policy`
    "fail" | "recompute", read by the scheduler on decode, vllm/v1/core/sched/scheduler.py) and the
    NIXL connector's extra config (`get_from_extra_config("kv_lease_duration", 30)` in
    nixl/base_scheduler.py, where prefill expires the blocks it holds, and nixl/base_worker.py, where
    decode renews the lease: both sides read it, so both get it). The policy is written out even at
    vLLM's own default: an image whose vLLM defaults to "recompute" would otherwise turn a failed KV
    load into a silent recompute (verify still checks the transfers, since a decode that never got
    KV params recomputes anyway).
    """
    kv = spec.kv_transfer
    return {
        "kv_connector": kv.connector,
        "kv_role": KV_ROLE,
        "engine_id": phase_name,
        "kv_load_failure_policy": kv.load_failure_policy,
        # Without an explicit backend NIXL picks UCX, which runs at TCP speed on EFA, silently.
        "kv_connector_extra_config": {"backends": [kv.backend], "kv_lease_duration": kv.lease_seconds},
    }


def render_llm_config(plan: DeploymentPlan, phase_name: str) -> dict[str, Any]:
    """The LLMConfig dict of one phase ("prefill", "decode" or "colocated")."""
    spec = plan.spec
    phase = spec.phases[phase_name]
    model = spec.model
    engine_kwargs: dict[str, Any] = {
        "max_model_len": model.max_model_len,
        "dtype": model.dtype,
        "gpu_memory_utilization": model.gpu_memory_utilization,
        "enforce_eager": model.enforce_eager,
        "tensor_parallel_size": phase.tensor_parallel_size,
        "pipeline_parallel_size": phase.pipeline_parallel_size,
    }
    if spec.mode == "disaggregated":
        engine_kwargs["kv_transfer_config"] = _kv_transfer_config(spec, phase_name)
    config: dict[str, Any] = {
        "model_loading_config": {"model_id": model.id, "model_source": _model_source(model.source)},
        "engine_kwargs": engine_kwargs,
        "deployment_config": {"num_replicas": BUILD_TIME_REPLICAS},
    }
    placement = _placement_group_config(plan.phases[phase_name])
    if placement is not None:
        config["placement_group_config"] = placement
    return config


def render_application(plan: DeploymentPlan) -> dict[str, Any]:
    """The one Serve application: the PD app, or the colocated OpenAI app."""
    if plan.spec.mode == "colocated":
        import_path = COLOCATED_IMPORT_PATH
        args: dict[str, Any] = {"llm_configs": [render_llm_config(plan, "colocated")]}
    else:
        import_path = PD_IMPORT_PATH
        args = {
            "prefill_config": render_llm_config(plan, "prefill"),
            "decode_config": render_llm_config(plan, "decode"),
        }
    deployments = [deployment_override(plan, name, serve_deployment_name(name, plan.spec.model.id))
                   for name in plan.phases]
    return {"name": APP_NAME, "route_prefix": ROUTE_PREFIX, "import_path": import_path, "args": args,
            "deployments": deployments, **application_scaling(plan)}


def render_serve_config(plan: DeploymentPlan) -> dict[str, Any]:
    """The full Serve config for `serve deploy`: HTTP options plus the application."""
    return {
        "http_options": {"host": HTTP_HOST, "port": defaults.SERVE_PORT},
        "applications": [render_application(plan)],
    }


class _ReadableDumper(yaml.SafeDumper):
    """Multi-line strings (serveConfigV2 is a YAML document inside the manifest) as `|` blocks."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ReadableDumper.add_representer(str, _represent_str)


def to_yaml(document: Any) -> str:
    """Block-style YAML in the renderer's key order (people read these files next to the docs)."""
    return yaml.dump(document, Dumper=_ReadableDumper, sort_keys=False, default_flow_style=False)


def render_serve_config_yaml(plan: DeploymentPlan) -> str:
    return to_yaml(render_serve_config(plan))
