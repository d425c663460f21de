"""The benchmark's replica sampler (serve/benchmark/replicas.py) against a real Ray 2.60 Serve REST API.

The unit tests read a stand-in built from Ray's schema (tests/fakes/serve_api.py); this reads the
real `GET /api/serve/applications/` of a Ray head and checks the sampler's counts equal what
`serve status` (Ray's own CLI, the same document counted by replica state:
ServeInstanceDetails._get_status) says, and the target equals the replicas deployed. The probe
application (probe_app.py) is named like Ray Serve LLM's engines (`Decode:tiny`), so raypd's
deployment names find it; no LLM is started.
"""

from __future__ import annotations

import subprocess
from typing import Any

import yaml

from components.render.serve_config import serve_deployment_name
from serve.benchmark.replicas import ReplicaSampler, raypd_deployments
from tests.real.locate import RealVllm
from tests.real.processes import wait_until
from tests.real.ray_serve import RayServe, deploy, ray_env, serve_http_port

APP = "probe"
MODEL = "tiny"
REPLICAS = 2


def serve_status(real: RealVllm, ray: RayServe) -> dict[str, Any]:
    """`serve status` of the head, as YAML (ray/serve/scripts.py `status`)."""
    result = subprocess.run([str(real.venv / "bin" / "serve"), "status", "--address", ray.dashboard_url],
                            env=ray_env(ray.temp_dir, ray.home), capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def test_the_sampler_counts_what_serve_status_counts(plain_ray: RayServe, real: RealVllm) -> None:
    ray = plain_ray
    decode = serve_deployment_name("decode", MODEL)
    assert decode == "Decode:tiny"  # probe_app.DEPLOYMENT: the name the probe runs under
    deploy(ray, {"http_options": {"host": "127.0.0.1", "port": serve_http_port(ray)},
                 "applications": [{"name": APP, "route_prefix": "/", "import_path": "probe_app:build",
                                   "args": {"sampled": True},
                                   "deployments": [{"name": decode, "num_replicas": REPLICAS}]}]})
    sampler = ReplicaSampler(ray.dashboard_url, raypd_deployments(MODEL), app=APP)

    def settled() -> bool:
        return sampler.sample().get("decode") == {"target": REPLICAS, "running": REPLICAS}

    wait_until(f"{REPLICAS} RUNNING replicas of {decode}", settled, deadline_s=600, interval_s=2,
               watch=[ray.process])
    counts = sampler.sample()
    status = serve_status(real, ray)
    states = status["applications"][APP]["deployments"][decode]["replica_states"]
    assert counts == {"decode": {"target": REPLICAS, "running": states.get("RUNNING", 0)}}
    assert states == {"RUNNING": REPLICAS}  # nothing starting or stopping: the two agree on a still app
    # The phases the app does not run (prefill, colocated) are absent, not zero.
    assert set(counts) == {"decode"}
