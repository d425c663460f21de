"""Ray Serve LLM 2.60 on CPU runs raypd's rendered PD application (the DLC has Ray 2.58 on GPUs).

The app is raypd's own Serve config for a small stack, changed only where this machine forces it
(tests/real/cpu_serve_config.py), deployed through Serve's REST API on a local Ray head.
"""

from __future__ import annotations

from pathlib import Path

from tests.real import prom
from tests.real.chat import chat
from tests.real.processes import wait_until
from tests.real.ray_serve import RayServe

DEPLOYMENTS = {"Prefill:tiny", "Decode:tiny", "OpenAiIngress"}


def test_the_pd_app_runs_with_prefill_decode_and_ingress_deployments(real_ray_serve: RayServe) -> None:
    app = real_ray_serve.applications()["applications"][real_ray_serve.app_name]
    assert app["status"] == "RUNNING", real_ray_serve.describe()
    deployments = app["deployments"]
    assert set(deployments) == DEPLOYMENTS, real_ray_serve.describe()
    for name, deployment in deployments.items():
        assert deployment["status"] == "HEALTHY", f"{name}: {deployment}"
        assert [replica["state"] for replica in deployment["replicas"]] == ["RUNNING"], f"{name}: {deployment}"
    deployed = app["deployed_app_config"]
    assert deployed["import_path"] == "ray.serve.llm:build_pd_openai_app"
    assert deployed["args"] == real_ray_serve.deployed_config["applications"][0]["args"]


def test_a_chat_on_serves_port_moves_kv_through_nixl(real_ray_serve: RayServe) -> None:
    ray = real_ray_serve
    before = prom.scrape(ray.metrics_urls[0])
    answer = chat(ray.serve_url, "serve sends the prompt to prefill and the cache to decode", max_tokens=8)
    assert answer["model"] == ray.model_id
    assert answer["usage"]["completion_tokens"] == 8
    prompt_tokens = answer["usage"]["prompt_tokens"]

    def moved() -> bool:  # each Ray process exports its engine's metrics on its own timer:
        text = prom.scrape(ray.metrics_urls[0])  # wait for decode's transfer AND prefill's prompt
        return (prom.value(text, "ray_vllm_prompt_tokens_by_source_total", source="local_compute")
                >= prom.value(before, "ray_vllm_prompt_tokens_by_source_total", source="local_compute")
                + prompt_tokens
                and prom.value(text, "ray_vllm_nixl_xfer_time_seconds_count")
                > prom.value(before, "ray_vllm_nixl_xfer_time_seconds_count")
                and prom.value(text, "ray_vllm_prompt_tokens_by_source_total", source="external_kv_transfer")
                >= prom.value(before, "ray_vllm_prompt_tokens_by_source_total", source="external_kv_transfer")
                + prompt_tokens)

    wait_until("ray_vllm_nixl_* on Ray's metrics export port", moved, deadline_s=180, interval_s=3)
    after = prom.scrape(ray.metrics_urls[0])
    assert (prom.value(after, "ray_vllm_prompt_tokens_by_source_total", source="local_compute")
            - prom.value(before, "ray_vllm_prompt_tokens_by_source_total", source="local_compute")) == prompt_tokens, \
        "only prefill computes the prompt"  # decode's local_compute stays put; prefill's rises by the prompt
    xfer_series = [name for name in prom.names(after) if name.startswith("ray_vllm_nixl_xfer_time_seconds")]
    assert xfer_series, "no ray_vllm_nixl_xfer_time_seconds series"


def test_the_replicas_say_nixl_instantiated_ucx(real_ray_serve: RayServe) -> None:
    """On CPU the vLLM worker is a subprocess of the replica: NIXL's line is in the replica's worker log."""
    logs: Path = real_ray_serve.session_log_dir
    lines = [line for path in logs.glob("worker-*.out") for line in path.read_text(errors="replace").splitlines()
             if "Backend UCX was instantiated" in line]
    assert len(lines) >= 2, f"expected the line from prefill and decode in {logs}/worker-*.out, got {lines}"
