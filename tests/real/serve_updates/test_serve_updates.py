"""Ray Serve's own rule, on a real Ray 2.60: what restarts replicas and what does not.

raypd's change preview promises "replica counts: in place, no restart of the running engines" and
"engine settings: every engine restarts". Both rest on Ray Serve (ray/serve/_private/
deploy_utils.py `get_app_code_version` hashes an application's import path, runtime_env and args;
a new code version rebuilds the application and replaces every replica, while per-deployment
`deployments` overrides are applied to the built deployments). components/render/serve_config.py puts
the replica counts in those overrides, keyed by names like Ray Serve LLM's (`Decode:<model>`).
This test deploys an application built the same way and watches its replicas' identities.
(Ray 2.58, the DLC's, has the same code version rule; it cannot run on this machine.)
"""

from __future__ import annotations

from typing import Any

import requests

from tests.real.processes import wait_until
from tests.real.ray_serve import RayServe, deploy, serve_http_port

# The probe's deployment name (probe_app.py runs inside Ray's workers, which alone import ray).
DEPLOYMENT = "Decode:tiny"


def config(ray: RayServe, args: dict[str, Any], replicas: int) -> dict[str, Any]:
    return {
        "http_options": {"host": "127.0.0.1", "port": serve_http_port(ray)},
        "applications": [{"name": "probe", "route_prefix": "/", "import_path": "probe_app:build",
                          "args": args, "deployments": [{"name": DEPLOYMENT, "num_replicas": replicas}]}],
    }


def replicas(ray: RayServe) -> dict[str, str]:
    """replica id -> state of the probe deployment, as Serve's REST API reports them."""
    app = (ray.applications().get("applications") or {}).get("probe") or {}
    deployment = (app.get("deployments") or {}).get(DEPLOYMENT) or {}
    return {r["replica_id"]: r["state"] for r in deployment.get("replicas") or []}


def settle(ray: RayServe, count: int, args: dict[str, Any]) -> dict[str, str]:
    """Wait until the app is RUNNING with `count` RUNNING replicas of the new config."""
    def done() -> bool:
        app = (ray.applications().get("applications") or {}).get("probe") or {}
        deployed = app.get("deployed_app_config") or {}
        states = replicas(ray)
        return (app.get("status") == "RUNNING" and deployed.get("args") == args
                and len(states) == count and set(states.values()) == {"RUNNING"})

    wait_until(f"{count} RUNNING replicas of {args}", done, deadline_s=600, interval_s=2)
    return replicas(ray)


def answer(ray: RayServe) -> dict[str, Any]:
    response = requests.get(ray.serve_url + "/", timeout=60)
    response.raise_for_status()
    return response.json()


def test_a_replica_count_override_scales_without_restarting_and_new_args_restart_every_replica(
        plain_ray: RayServe) -> None:
    ray = plain_ray
    from pathlib import Path

    assert f'DEPLOYMENT = "{DEPLOYMENT}"' in (Path(__file__).parent / "probe_app.py").read_text()
    first = {"max_model_len": 4096}
    deploy(ray, config(ray, first, 1))
    (original,) = settle(ray, 1, first)
    started = answer(ray)["started"]

    # 1 -> 2 through the override: the running replica keeps running, a second one joins.
    deploy(ray, config(ray, first, 2))
    scaled = settle(ray, 2, first)
    assert original in scaled, (original, scaled)
    seen = {answer(ray)["started"] for _ in range(20)}
    assert started in seen  # the first replica still answers, with the id it drew at start

    # 2 -> 1: one stops, nothing starts.
    deploy(ray, config(ray, first, 1))
    (kept,) = settle(ray, 1, first)
    assert kept in scaled

    # New args (an engine setting): a new code version, every replica replaced.
    second = {"max_model_len": 8192}
    deploy(ray, config(ray, second, 1))
    (replaced,) = settle(ray, 1, second)
    assert replaced != kept
    reply = answer(ray)
    assert reply["settings"] == second and reply["started"] != started
