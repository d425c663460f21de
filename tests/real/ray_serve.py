"""A local one-node Ray 2.60 cluster with a Serve application, for the Ray Serve LLM tests.

`ray start --head --block` from the real venv, on 127.0.0.1, every port free-picked (GCS,
dashboard, dashboard agent, runtime-env agent, metrics export, client server, node and object
managers; workers on random ports), its session under a short temp dir of its own (Ray's unix
sockets must fit 107 bytes). The Serve application is deployed through the dashboard's REST API
(`PUT /api/serve/applications/`, what `serve deploy` does), and readiness is read back from it.

Measured here: ~3 min from `ray start` to the PD app RUNNING, ~10 GB. Ray's gcs_server, raylet and
dashboard agent listen on all interfaces even with the node IP set to 127.0.0.1; the tests only
ever talk to 127.0.0.1. Stopping: SIGTERM to `ray start --block` (it stops what it started), the
group killed, then any process still naming our temp dir (Ray workers run in their own process
groups) killed by pid, and the temp dir removed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

import requests

from components.render.scaling_policy.delivery import policy_config_map
from tests.real.locate import MODEL_ID, RealVllm
from tests.real.processes import ManagedProcess, StartError, free_port_blocks, free_ports, http_ok, wait_until
from tests.real.quiet_nixl import with_quiet_nixl

START_DEADLINE_S = 300.0
APP_DEADLINE_S = float(os.environ.get("RAYPD_REAL_RAY_READY_S", "1200"))
# Custom resources raypd's worker groups advertise (components/plan/topology.py: raypd_<phase>); the
# test node advertises them too, so a rendered placement group that asks for them can be placed.
NODE_RESOURCES = {"raypd_prefill": 8, "raypd_decode": 8}
NUM_CPUS = 8  # logical CPUs for scheduling (ingress, two replicas and their bundles), not cores


def ray_env(temp_dir: Path, home: Optional[Path] = None) -> dict[str, str]:
    """What every Ray process (and so every vLLM engine it starts) inherits: loopback, offline,
    and no token authentication. Ray 2.60's `ray start` turns token auth on by itself when
    RAY_AUTH_MODE is unset and a token exists (~/.ray/auth_token, which any `ray.init()` on the
    machine creates: ray/_private/authentication/authentication_token_setup.py
    `maybe_enable_token_auth_if_token_available`, called from ray/scripts/scripts.py `start`);
    every dashboard request of the tests would then answer 401. `RAY_AUTH_MODE=disabled` is the
    opt-out Ray names (`_warn_token_auth_enabled`: "Set RAY_AUTH_MODE=disabled to opt out").
    `home`: another HOME for the Ray processes (a test's machine with a token file)."""
    env = dict(os.environ)
    if home is not None:
        env["HOME"] = str(home)
    env.update({
        "RAY_AUTH_MODE": "disabled",
        "UCX_TLS": "tcp,self",
        "UCX_NET_DEVICES": "lo",
        "VLLM_HOST_IP": "127.0.0.1",
        "VLLM_NIXL_SIDE_CHANNEL_HOST": "127.0.0.1",  # also per engine (cpu_serve_config); never the NIC's IP
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "RAY_USAGE_STATS_ENABLED": "0",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": with_quiet_nixl(env.get("PYTHONPATH")),  # tests/real/nixl_quiet says why
        "TMPDIR": str(temp_dir),
        # Serve's handles and replicas push autoscaling metrics every 2 s instead of 10 s, so that
        # the scaling tests' decisions follow a load step within their short look-back window.
        "RAY_SERVE_HANDLE_AUTOSCALING_METRIC_PUSH_INTERVAL_S": "2",
        "RAY_SERVE_REPLICA_AUTOSCALING_METRIC_PUSH_INTERVAL_S": "2",
    })
    return env


@dataclass
class RayServe:
    """What `real_ray_serve` yields (see tests/real/ray/conftest.py)."""

    dashboard_url: str
    metrics_urls: list[str]
    serve_url: str
    gcs_address: str
    temp_dir: Path
    log_path: Path
    process: ManagedProcess
    model_id: str = MODEL_ID
    node_id: str = ""
    node_ip: str = "127.0.0.1"
    app_name: str = "llm"
    ready_s: float = 0.0
    deployed_config: dict[str, Any] = field(default_factory=dict)
    home: Optional[Path] = None  # the HOME the Ray processes saw, when not ours

    @property
    def session_log_dir(self) -> Path:
        """Ray's own log files (raylet, gcs, workers, serve replicas) of this session."""
        return self.temp_dir / "session_latest" / "logs"

    def get(self, path: str, **params: Any) -> requests.Response:
        return requests.get(self.dashboard_url + path, params=params or None, timeout=30)

    def applications(self) -> dict[str, Any]:
        response = self.get("/api/serve/applications/")
        response.raise_for_status()
        return response.json()

    def app_status(self) -> Optional[str]:
        try:
            app = (self.applications().get("applications") or {}).get(self.app_name) or {}
        except (requests.RequestException, ValueError):
            return None
        return app.get("status")

    def describe(self) -> str:
        lines = [self.process.describe()]
        with contextlib.suppress(requests.RequestException, ValueError):
            app = (self.applications().get("applications") or {}).get(self.app_name) or {}
            lines.append(f"Serve app {self.app_name}: {app.get('status')} {app.get('message', '')[:2000]}")
            for name, dep in (app.get("deployments") or {}).items():
                lines.append(f"  {name}: {dep.get('status')} {str(dep.get('message', ''))[:500]}")
        return "\n".join(lines)


# Ray 2.60 gives its raylet a fixed 30 s to register with the GCS (ray/_private/node.py
# `raylet_start_wait_time_s = 30`, no setting; the log's RAY_raylet_start_wait_time_s hint is not
# read there), then `ray start` exits with "timed out during startup". On a 2-core machine under
# load that happened (a measured run beside other suites); the start is tried again, a bounded
# number of times, only for that reason.
RAYLET_REGISTRATION_TIMEOUT = "timed out during startup"
START_ATTEMPTS = 3


def start_ray(real: RealVllm, log_dir: Path, *, num_cpus: int = NUM_CPUS,
              resources: Mapping[str, float] = NODE_RESOURCES, home: Optional[Path] = None) -> RayServe:
    """Start the head node and wait for its dashboard; the caller must `stop_ray` it. `home`: the
    HOME its processes see (default: ours)."""
    for _ in range(START_ATTEMPTS - 1):
        try:
            return _start_ray_once(real, log_dir, num_cpus=num_cpus, resources=resources, home=home)
        except StartError as exc:
            if RAYLET_REGISTRATION_TIMEOUT not in str(exc):
                raise
    return _start_ray_once(real, log_dir, num_cpus=num_cpus, resources=resources, home=home)


def _start_ray_once(real: RealVllm, log_dir: Path, *, num_cpus: int, resources: Mapping[str, float],
                    home: Optional[Path]) -> RayServe:
    temp_dir = Path(tempfile.mkdtemp(prefix="raypd-ray-", dir="/tmp"))
    (gcs, dashboard, agent_http, agent_grpc, runtime_env, metrics, client, node_manager, object_manager,
     serve_http) = free_ports(10)
    argv = [
        str(real.ray), "start", "--head", "--block", "--disable-usage-stats",
        "--node-ip-address", "127.0.0.1", "--port", str(gcs),
        "--include-dashboard", "true", "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dashboard),
        "--dashboard-agent-listen-port", str(agent_http), "--dashboard-agent-grpc-port", str(agent_grpc),
        "--runtime-env-agent-port", str(runtime_env), "--metrics-export-port", str(metrics),
        "--ray-client-server-port", str(client), "--node-manager-port", str(node_manager),
        "--object-manager-port", str(object_manager), "--min-worker-port", "0", "--max-worker-port", "0",
        "--num-cpus", str(num_cpus), "--num-gpus", "0", "--resources", json.dumps(dict(resources)),
        "--temp-dir", str(temp_dir),
    ]
    log_path = log_dir / "ray-head.log"
    log_path.unlink(missing_ok=True)
    process = ManagedProcess.start("ray head", argv, log_path, env=ray_env(temp_dir, home))
    ray = RayServe(
        dashboard_url=f"http://127.0.0.1:{dashboard}", metrics_urls=[f"http://127.0.0.1:{metrics}/metrics"],
        serve_url=f"http://127.0.0.1:{serve_http}", gcs_address=f"127.0.0.1:{gcs}", temp_dir=temp_dir,
        log_path=log_path, process=process)
    try:
        wait_until("the Ray dashboard", lambda: http_ok(ray.dashboard_url + "/api/version"),
                   deadline_s=START_DEADLINE_S, watch=[process])
        wait_until("Ray's node in the State API", lambda: bool(_alive_node(ray)), deadline_s=120, watch=[process])
    except BaseException:
        stop_ray(ray)
        raise
    node = _alive_node(ray) or {}
    ray.node_id = node.get("node_id", "")
    ray.node_ip = node.get("node_ip", "127.0.0.1")
    return ray


def _alive_node(ray: RayServe) -> Optional[dict[str, Any]]:
    try:
        answer = ray.get("/api/v0/nodes").json()
    except (requests.RequestException, ValueError):
        return None
    for node in ((answer.get("data") or {}).get("result") or {}).get("result") or []:
        if node.get("state") == "ALIVE":
            return node
    return None


def serve_http_port(ray: RayServe) -> int:
    return int(ray.serve_url.rsplit(":", 1)[1])


def write_policy_files(directory: Path) -> Path:
    """What the policy ConfigMap's volume is in a Ray pod: each data key a file in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    for key, text in policy_config_map("ray-llm", "inference", {})["data"].items():
        (directory / key).write_text(text, encoding="utf-8")
    return directory


def small_stack_for_cpu(real: RealVllm, ray: RayServe) -> dict[str, Any]:
    """raypd's Serve config of the autoscaled small stack (tests/real/stacks.py) in the scaling tests'
    shape, changed for this machine only; the policy file written where its runtime_env points."""
    from tests.real.cpu_serve_config import PORTS_PER_PHASE, for_cpu
    from tests.real.stacks import autoscaled_small_stack_serve_config, scaling_test_shape

    prefill_base, decode_base = free_port_blocks(2, PORTS_PER_PHASE)
    policy_dir = write_policy_files(ray.temp_dir / "serve-policy")
    return for_cpu(scaling_test_shape(autoscaled_small_stack_serve_config()), model_dir=str(real.model_dir),
                   http_port=serve_http_port(ray), side_channel_ports={"prefill": prefill_base, "decode": decode_base},
                   policy_dir=str(policy_dir))


def deploy(ray: RayServe, serve_config: Mapping[str, Any]) -> None:
    """PUT the Serve config to the dashboard (the REST API `serve deploy` uses)."""
    response = requests.put(ray.dashboard_url + "/api/serve/applications/", json=dict(serve_config), timeout=120)
    if response.status_code != 200:
        raise RuntimeError(f"PUT /api/serve/applications/ answered {response.status_code}: {response.text[:2000]}")
    ray.deployed_config = dict(serve_config)


def wait_app_running(ray: RayServe, deadline_s: float = APP_DEADLINE_S) -> float:
    """Until the app is RUNNING; a DEPLOY_FAILED app fails at once with Serve's message."""
    def running() -> bool:
        status = ray.app_status()
        if status == "DEPLOY_FAILED":
            raise RuntimeError(f"the Serve app failed to deploy:\n{ray.describe()}")
        return status == "RUNNING"

    return wait_until(f"the Serve app {ray.app_name!r}", running, deadline_s=deadline_s,
                      watch=[ray.process], interval_s=5.0)


def _pids_of_session(temp_dir: Path) -> list[int]:
    """Processes of this Ray session: their command line names its temp dir, or their environment
    carries TMPDIR=<it> (set for `ray start`, so inherited by every worker and engine process,
    which a worker's spawned vLLM engine core needs: its command line names nothing of ours)."""
    marker = str(temp_dir).encode()
    tmpdir = b"TMPDIR=" + marker + b"\0"
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker in (entry / "cmdline").read_bytes() or tmpdir in (entry / "environ").read_bytes() + b"\0":
                pids.append(int(entry.name))
    return pids


def stop_ray(ray: RayServe, grace_s: float = 30.0, keep_logs_in: Optional[Path] = None) -> None:
    """Stop every process of this Ray session (and only those), keep its logs, remove its temp dir."""
    ray.process.stop(grace_s=grace_s)  # `ray start --block` stops its own children on SIGTERM
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        left = _pids_of_session(ray.temp_dir)
        if not left:
            break
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.5)
    if keep_logs_in is not None and ray.session_log_dir.is_dir():
        shutil.rmtree(keep_logs_in, ignore_errors=True)
        shutil.copytree(ray.session_log_dir, keep_logs_in, symlinks=False, ignore_dangling_symlinks=True,
                        dirs_exist_ok=True)
    shutil.rmtree(ray.temp_dir, ignore_errors=True)
