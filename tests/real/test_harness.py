"""The harness's own pure parts, without engines: they run in every `make test`.

for_cpu must change exactly what its docstring names (anything else would mean the Ray test
deploys something raypd never renders); the proxy must send prefill one non-streamed token asking
it to keep the KV for a remote decode, and decode the client's own request with prefill's params.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.real.cpu_serve_config import REJECTED_BY_RAY_260, for_cpu
from tests.real.pd_proxy import decode_request, prefill_request
from tests.real.stacks import small_stack_serve_config

PORTS = {"prefill": 41001, "decode": 41002, "colocated": 41003}


def _without_cpu_changes(llm_config: dict[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(llm_config)
    result.pop("accelerator_config")
    result.pop("runtime_env")
    result.pop("experimental_configs")
    result["model_loading_config"].pop("model_source")
    return result


def test_for_cpu_changes_only_the_machine_specific_fields() -> None:
    rendered = small_stack_serve_config()
    original = copy.deepcopy(rendered)
    cpu = for_cpu(rendered, model_dir="/models/tiny", http_port=40123, side_channel_ports=PORTS)
    assert rendered == original, "for_cpu modified its input"
    assert cpu["http_options"] == {"host": "127.0.0.1", "port": 40123}
    (app,), (rendered_app,) = cpu["applications"], rendered["applications"]
    assert {k: v for k, v in app.items() if k != "args"} == {k: v for k, v in rendered_app.items() if k != "args"}
    for key, core in (("prefill_config", "0"), ("decode_config", "1")):
        ours, theirs = app["args"][key], rendered_app["args"][key]
        assert ours["model_loading_config"] == {**theirs["model_loading_config"], "model_source": "/models/tiny"}
        assert ours["accelerator_config"] == {"kind": "cpu"}
        env = ours["runtime_env"]["env_vars"]
        assert env["VLLM_CPU_OMP_THREADS_BIND"] == core
        assert env["VLLM_NIXL_SIDE_CHANNEL_HOST"] == "127.0.0.1"
        # Ray adds each replica's rank to the phase's base: two replicas of a phase on this machine.
        assert "VLLM_NIXL_SIDE_CHANNEL_PORT" not in env
        assert ours["experimental_configs"] == {"NIXL_SIDE_CHANNEL_PORT_BASE": PORTS[key.split("_")[0]]}
        strip = copy.deepcopy(theirs)
        strip["model_loading_config"].pop("model_source")
        assert _without_cpu_changes(ours) == strip
    assert REJECTED_BY_RAY_260 == frozenset()


def test_for_cpu_turns_gpu_bundles_into_cpu_bundles_and_keeps_phase_resources() -> None:
    rendered = small_stack_serve_config()
    rendered["applications"][0]["args"]["decode_config"]["placement_group_config"] = {
        "bundles": [{"GPU": 1, "raypd_decode": 1}, {"GPU": 1, "raypd_decode": 1}], "strategy": "STRICT_PACK"}
    cpu = for_cpu(rendered, model_dir="/m", http_port=1, side_channel_ports=PORTS)
    placement = cpu["applications"][0]["args"]["decode_config"]["placement_group_config"]
    assert placement == {"bundles": [{"CPU": 1, "raypd_decode": 1}] * 2, "strategy": "STRICT_PACK"}


def test_proxy_asks_prefill_for_one_unstreamed_token_and_keeps_the_client_request() -> None:
    body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 64,
            "max_completion_tokens": 64, "stream": True, "stream_options": {"include_usage": True}}
    original = copy.deepcopy(body)
    sent = prefill_request(body)
    assert body == original
    assert sent["max_tokens"] == 1 and sent["max_completion_tokens"] == 1
    assert sent["stream"] is False and "stream_options" not in sent
    assert sent["kv_transfer_params"]["do_remote_decode"] is True
    assert sent["kv_transfer_params"]["do_remote_prefill"] is False
    params = {"do_remote_prefill": True, "remote_engine_id": "prefill", "remote_block_ids": [[1]]}
    assert decode_request(body, params) == {**original, "kv_transfer_params": params}


def test_for_cpu_points_the_pd_policy_at_the_tests_directory_and_keeps_the_rest() -> None:
    from tests.real.stacks import autoscaled_small_stack_serve_config

    rendered = autoscaled_small_stack_serve_config()
    (rendered_app,) = rendered["applications"]
    assert rendered_app["runtime_env"] == {"env_vars": {"PYTHONPATH": "/opt/raypd/python:${PYTHONPATH}"}}
    (app,) = for_cpu(rendered, model_dir="/m", http_port=1, side_channel_ports=PORTS,
                     policy_dir="/tmp/policy")["applications"]
    assert app["runtime_env"] == {"env_vars": {"PYTHONPATH": "/tmp/policy:${PYTHONPATH}"}}
    assert app["autoscaling_policy"] == rendered_app["autoscaling_policy"]
    assert app["deployments"] == rendered_app["deployments"]
