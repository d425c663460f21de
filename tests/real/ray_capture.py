"""`python -m tests.real.capture ray`: Ray 2.60's APIs and metrics with raypd's small stack RUNNING.

Writes tests/fixtures/real/ray/: the dashboard's Serve applications, State API actors and nodes,
the log API's listing and a replica actor's .out/.err through it (by actor id), and the metrics
export port's text cut to the `ray_vllm_*` families raypd reads, after a few chats.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import requests

from tests.real import prom
from tests.real.capture import ARTIFACTS, LOG_PATTERN, Writer, cut_log, cut_metrics
from tests.real.chat import chat
from tests.real.locate import RealVllm
from tests.real.machine_lock import machine_lock
from tests.real.processes import wait_until
from tests.real.ray_serve import RayServe, deploy, small_stack_for_cpu, start_ray, stop_ray, wait_app_running

RAY_METRIC_PREFIXES = tuple("ray_" + prefix.replace(":", "_") for prefix in (
    "vllm:nixl_", "vllm:prompt_tokens", "vllm:generation_tokens", "vllm:time_to_first_token_seconds",
    "vllm:request_success", "vllm:num_requests_",
))
CHATS = 3
# Ray's worker files start with `:job_id:...` / `:actor_name:<class>` marker lines (the log monitor
# reads them to prefix forwarded lines with "(<actor name> pid=...)"): kept with the NIXL lines.
REPLICA_LOG_PATTERN = re.compile(r"^:(job_id|actor_name|task_name):|" + LOG_PATTERN.pattern)


def replica_actors(ray: RayServe) -> dict[str, dict[str, Any]]:
    """The Serve replica actors by deployment ("Prefill:tiny", ...), from the State API."""
    actors = ray.get("/api/v0/actors", limit=1000).json()["data"]["result"]["result"]
    found = {}
    for actor in actors:
        name = actor.get("class_name", "")
        if name.startswith("ServeReplica:") and actor.get("state") == "ALIVE":
            found[name.split(":", 2)[2]] = actor
    return found


def xfers(ray: RayServe) -> float:
    return prom.value(prom.scrape(ray.metrics_urls[0]), "ray_vllm_nixl_xfer_time_seconds_count")


def capture_ray(real: RealVllm) -> None:
    out = Writer("ray", real)
    log_dir = ARTIFACTS / "ray"
    with machine_lock("capture ray"):
        ray = start_ray(real, log_dir)
        try:
            deploy(ray, small_stack_for_cpu(real, ray))
            print(f"Serve app RUNNING after {wait_app_running(ray):.0f} s", file=sys.stderr)
            idle = prom.scrape(ray.metrics_urls[0])
            out.text("metrics-export-idle.txt", "Ray metrics export port, app RUNNING, before any request "
                     "(no ray_vllm_nixl_num_failed_transfers series: it is registered on the first failure)",
                     cut_metrics(idle, RAY_METRIC_PREFIXES))
            for i in range(CHATS):
                chat(ray.serve_url, f"ray moves block {i}", max_tokens=8)
            wait_until("ray_vllm_nixl_xfer_time_seconds_count", lambda: xfers(ray) >= CHATS, deadline_s=180)
            out.text("metrics-export-after-transfers.txt",
                     f"Ray metrics export port after {CHATS} chats on Serve's HTTP port",
                     cut_metrics(prom.scrape(ray.metrics_urls[0]), RAY_METRIC_PREFIXES))
            out.json("serve-applications.json", "GET /api/serve/applications/ with the PD app RUNNING",
                     ray.applications())
            out.json("actors.json", "GET /api/v0/actors?limit=1000 (State API): on CPU the vLLM worker is a "
                     "subprocess of the replica, so no RayWorkerWrapper actor appears",
                     ray.get("/api/v0/actors", limit=1000).json())
            out.json("nodes.json", "GET /api/v0/nodes (State API)", ray.get("/api/v0/nodes").json())
            out.json("logs-list.json", "GET /api/v0/logs?node_id=<the node> (log API listing)",
                     ray.get("/api/v0/logs", node_id=ray.node_id).json())
            for deployment, actor in sorted(replica_actors(ray).items()):
                phase = deployment.split(":")[0].lower()
                for suffix in ("out", "err"):
                    response = ray.get("/api/v0/logs/file", actor_id=actor["actor_id"], suffix=suffix, lines=5000)
                    response.raise_for_status()
                    out.text(f"{phase}-replica.{suffix}.txt",
                             f"GET /api/v0/logs/file?actor_id={actor['actor_id']}&suffix={suffix} "
                             f"({actor['class_name']}), cut to NIXL/UCX/KV-transfer lines",
                             cut_log(response.text, REPLICA_LOG_PATTERN, limit=150) if phase != "openaiingress"
                             else "\n".join(response.text.splitlines()[-40:]))
        except requests.RequestException as exc:
            raise RuntimeError(f"capture ray: {exc}\n{ray.describe()}") from exc
        finally:
            stop_ray(ray, keep_logs_in=log_dir / "ray-logs")
    out.finish()
