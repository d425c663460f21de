"""The Ray Serve config: the reference's application key by key, pinning, colocated mode, structure."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from components.plan.topology import plan_deployment
from components.render.serve_config import render_serve_config, render_serve_config_yaml


# The AWS reference deployment's LLMConfig (docs of the reference, "The RayService"); the engine id
# is the one difference between prefill and decode. TP/PP = 1 are vLLM's defaults written out.
def reference_llm_config(engine_id: str) -> dict[str, Any]:
    return {
        "model_loading_config": {"model_id": "qwen3.5-9b", "model_source": "Qwen/Qwen3.5-9B"},
        "engine_kwargs": {
            "max_model_len": 4096,
            "dtype": "bfloat16",
            "gpu_memory_utilization": 0.90,
            "enforce_eager": True,
            "tensor_parallel_size": 1,
            "pipeline_parallel_size": 1,
            "kv_transfer_config": {
                "kv_connector": "NixlConnector",
                "kv_role": "kv_both",
                "engine_id": engine_id,
                "kv_load_failure_policy": "fail",
                # raypd's lease (issue 31; the AWS guide leaves vLLM's 30 s): docs/resilience.md
                "kv_connector_extra_config": {"backends": ["LIBFABRIC"], "kv_lease_duration": 300},
            },
        },
        "deployment_config": {"num_replicas": 1},
    }


# Field names checked in Ray 2.58's sources (ray.serve.schema, ray.llm LLMConfig, the PD builder's
# PDServingArgs, VLLMEngineConfig's PlacementGroupConfig) and vLLM 0.26's AsyncEngineArgs.
SERVE_DEPLOY_FIELDS = {"proxy_location", "http_options", "grpc_options", "logging_config",
                       "applications", "target_capacity"}
HTTP_OPTION_FIELDS = {"host", "port", "root_path", "request_timeout_s", "keep_alive_timeout_s"}
APPLICATION_FIELDS = {"name", "route_prefix", "import_path", "runtime_env", "deployments", "args",
                      "logging_config"}  # host/port are rejected per application
PD_ARGS = {"prefill_config", "decode_config", "proxy_cls_config", "proxy_deployment_config",
           "ingress_cls_config", "ingress_deployment_config"}
LLM_CONFIG_FIELDS = {"runtime_env", "model_loading_config", "llm_engine", "engine_kwargs",
                     "accelerator_type", "placement_group_config", "lora_config",
                     "deployment_config", "experimental_configs", "log_engine_metrics",
                     "callback_config"}
MODEL_LOADING_FIELDS = {"model_id", "model_source", "tokenizer_source"}
ENGINE_KWARGS_USED = {"max_model_len", "dtype", "gpu_memory_utilization", "enforce_eager",
                      "tensor_parallel_size", "pipeline_parallel_size", "kv_transfer_config"}
KV_TRANSFER_FIELDS = {"kv_connector", "kv_role", "engine_id", "kv_connector_extra_config",
                      "kv_load_failure_policy"}
DEPLOYMENT_CONFIG_FIELDS = {"name", "num_replicas", "ray_actor_options", "max_ongoing_requests",
                            "autoscaling_config", "max_queued_requests", "user_config",
                            "health_check_period_s", "health_check_timeout_s",
                            "graceful_shutdown_wait_loop_s", "graceful_shutdown_timeout_s",
                            "logging_config", "request_router_config"}
PG_STRATEGIES = {"PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"}


def llm_configs(document: dict[str, Any]) -> list[dict[str, Any]]:
    args = document["applications"][0]["args"]
    if "llm_configs" in args:
        return list(args["llm_configs"])
    return [args["prefill_config"], args["decode_config"]]


def assert_valid_structure(document: dict[str, Any]) -> None:
    assert set(document) <= SERVE_DEPLOY_FIELDS
    assert set(document.get("http_options", {})) <= HTTP_OPTION_FIELDS
    names = [app["name"] for app in document["applications"]]
    assert len(names) == len(set(names)) and all(names)
    for app in document["applications"]:
        assert set(app) <= APPLICATION_FIELDS
        module, _, attribute = app["import_path"].partition(":")
        assert module and attribute and ":" not in attribute
        assert app["route_prefix"] == "/" or (
            app["route_prefix"].startswith("/") and not app["route_prefix"].endswith("/")
        )
    args = document["applications"][0]["args"]
    assert set(args) <= PD_ARGS or set(args) == {"llm_configs"}
    for config in llm_configs(document):
        assert set(config) <= LLM_CONFIG_FIELDS
        assert set(config["model_loading_config"]) <= MODEL_LOADING_FIELDS
        assert set(config["engine_kwargs"]) <= ENGINE_KWARGS_USED
        assert set(config["engine_kwargs"].get("kv_transfer_config", {})) <= KV_TRANSFER_FIELDS
        assert set(config["deployment_config"]) <= DEPLOYMENT_CONFIG_FIELDS
        placement = config.get("placement_group_config")
        if placement is not None:
            assert set(placement) <= {"bundles", "strategy"} and placement["strategy"] in PG_STRATEGIES
            # vLLM's Ray executor: at most one GPU per bundle.
            assert all(0 < bundle.get("GPU", 1) <= 1 for bundle in placement["bundles"])


# ---- the reference deployment ----

def test_reference_application_matches_the_aws_deployment(reference_spec):
    document = render_serve_config(plan_deployment(reference_spec))
    (app,) = document["applications"]
    assert app["import_path"] == "ray.serve.llm:build_pd_openai_app"
    assert app["route_prefix"] == "/"
    assert app["args"] == {
        "prefill_config": reference_llm_config("prefill"),
        "decode_config": reference_llm_config("decode"),
    }


def test_serve_listens_on_all_interfaces_on_the_serve_port(reference_spec):
    document = render_serve_config(plan_deployment(reference_spec))
    assert document["http_options"] == {"host": "0.0.0.0", "port": 8000}


@pytest.mark.parametrize("spec_fixture", ["reference_spec", "heterogeneous_spec", "colocated_spec"])
def test_rendered_config_uses_only_fields_ray_258_accepts(spec_fixture, request):
    assert_valid_structure(render_serve_config(plan_deployment(request.getfixturevalue(spec_fixture))))


def test_ray_serve_schema_accepts_the_config_when_ray_is_installed(
    reference_spec, heterogeneous_spec, colocated_spec
):
    schema = pytest.importorskip(
        "ray.serve.schema", reason="ray is not installed (it pulls several GB); structure is "
        "checked against Ray's field names in test_rendered_config_uses_only_fields_ray_258_accepts"
    )
    for spec in (reference_spec, heterogeneous_spec, colocated_spec):
        schema.ServeDeploySchema.parse_obj(render_serve_config(plan_deployment(spec)))


def test_yaml_parses_back_to_the_same_config(heterogeneous_spec):
    plan = plan_deployment(heterogeneous_spec)
    assert yaml.safe_load(render_serve_config_yaml(plan)) == render_serve_config(plan)


# ---- pinning phases to their node groups ----

def test_heterogeneous_phases_are_pinned_to_their_own_workers(heterogeneous_spec):
    prefill, decode = llm_configs(render_serve_config(plan_deployment(heterogeneous_spec)))
    for config, resource in ((prefill, "raypd_prefill"), (decode, "raypd_decode")):
        placement = config["placement_group_config"]
        assert placement["strategy"] == "STRICT_PACK"
        assert placement["bundles"] == [{"GPU": 1, resource: 1}] * 8
        assert config["engine_kwargs"]["tensor_parallel_size"] == 8
    # The replica counts are Serve's per-deployment overrides, not the args (a change of args
    # would rebuild the application and restart every engine).
    assert prefill["deployment_config"] == decode["deployment_config"] == {"num_replicas": 1}
    (app,) = render_serve_config(plan_deployment(heterogeneous_spec))["applications"]
    assert app["deployments"] == [{"name": "Prefill:qwen3_5-9b", "num_replicas": 1},
                                  {"name": "Decode:qwen3_5-9b", "num_replicas": 2}]


def test_replica_counts_change_only_the_deployment_overrides_never_the_args(make_spec):
    # Ray Serve's code version hashes import_path, runtime_env and args (deploy_utils.
    # get_app_code_version): equal args and a new override is a lightweight update, no restart.
    one = render_serve_config(plan_deployment(make_spec({})))["applications"][0]
    two = render_serve_config(plan_deployment(make_spec({"raypd:decode": {"replicas": 2}})))["applications"][0]
    assert one["args"] == two["args"]
    assert one["import_path"] == two["import_path"]
    assert [d["num_replicas"] for d in one["deployments"]] == [1, 1]
    assert [d["num_replicas"] for d in two["deployments"]] == [1, 2]


def test_whole_node_engines_stay_on_one_node_without_pinning(make_spec):
    spec = make_spec({
        "raypd:prefill": {"instanceType": "g6.12xlarge", "tensorParallelSize": 4},
        "raypd:decode": {"instanceType": "g6.12xlarge", "tensorParallelSize": 2,
                         "pipelineParallelSize": 2},
    })
    prefill, decode = llm_configs(render_serve_config(plan_deployment(spec)))
    assert prefill["placement_group_config"] == {"bundles": [{"GPU": 1}] * 4, "strategy": "STRICT_PACK"}
    assert decode["placement_group_config"]["bundles"] == [{"GPU": 1}] * 4


def test_engines_smaller_than_a_node_are_pinned_even_on_one_instance_type(make_spec):
    spec = make_spec({
        "raypd:prefill": {"instanceType": "g6.12xlarge", "tensorParallelSize": 2},
        "raypd:decode": {"instanceType": "g6.12xlarge", "tensorParallelSize": 2,
                         "pipelineParallelSize": 2},
    })
    prefill, decode = llm_configs(render_serve_config(plan_deployment(spec)))
    assert prefill["placement_group_config"] == {
        "bundles": [{"GPU": 1, "raypd_prefill": 1}] * 2, "strategy": "STRICT_PACK"}
    assert decode["placement_group_config"]["bundles"] == [{"GPU": 1, "raypd_decode": 1}] * 4


def test_single_gpu_engines_on_a_shared_group_keep_rays_default_placement(reference_spec):
    configs = llm_configs(render_serve_config(plan_deployment(reference_spec)))
    assert all("placement_group_config" not in c for c in configs)


# ---- variants ----

def test_colocated_mode_serves_one_openai_app_without_kv_transfer(colocated_spec):
    (app,) = render_serve_config(plan_deployment(colocated_spec))["applications"]
    assert app["import_path"] == "ray.serve.llm:build_openai_app"
    (config,) = app["args"]["llm_configs"]
    assert "kv_transfer_config" not in config["engine_kwargs"]
    assert config["deployment_config"] == {"num_replicas": 1}
    assert app["deployments"] == [{"name": "LLMServer:qwen3_5-9b",
                                   "num_replicas": colocated_spec.colocated.replicas}]
    assert config["model_loading_config"]["model_id"] == "qwen3.5-9b"


def test_ucx_backend_reaches_both_engines(make_spec):
    document = render_serve_config(plan_deployment(make_spec({"raypd:kvTransfer": {"backend": "UCX"}})))
    for config in llm_configs(document):
        assert config["engine_kwargs"]["kv_transfer_config"]["kv_connector_extra_config"]["backends"] == ["UCX"]


def test_s3_model_source_becomes_a_bucket_mirror(make_spec):
    spec = make_spec({"raypd:model": {"id": "my-llm", "source": "s3://weights-bucket/qwen"}})
    for config in llm_configs(render_serve_config(plan_deployment(spec))):
        assert config["model_loading_config"] == {
            "model_id": "my-llm", "model_source": {"bucket_uri": "s3://weights-bucket/qwen"}
        }


def test_model_settings_reach_the_engine(make_spec):
    spec = make_spec({"raypd:model": {"maxModelLen": 32768, "dtype": "float16",
                                      "gpuMemoryUtilization": 0.8, "enforceEager": False}})
    for config in llm_configs(render_serve_config(plan_deployment(spec))):
        kwargs = config["engine_kwargs"]
        assert (kwargs["max_model_len"], kwargs["dtype"]) == (32768, "float16")
        assert (kwargs["gpu_memory_utilization"], kwargs["enforce_eager"]) == (0.8, False)
