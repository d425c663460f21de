"""A stand-in for Ray Serve's REST API on the dashboard: `GET /api/serve/applications/`, on 127.0.0.1.

The answer is `ServeInstanceDetails` as Ray 2.60's python/ray/serve/schema.py defines it (the
pydantic models `ServeInstanceDetails`, `ApplicationDetails`, `DeploymentDetails`,
`ReplicaDetails`; `ReplicaState` in ray/serve/_private/common.py), with every required field of
those models, so a reader that works here reads the real one (tests/real/serve_updates/
test_replica_sampler.py checks that against a real Ray head). What the deployments hold is a
function of the time since the server's first request (`phases(t) -> {deployment: (target,
states)}`): a sampler asks first when its run starts, so `t` is the run's time give or take the
sampler's own lag, and a test scripts a scale-up without sleeping.

    with ServeApi(lambda t: {"Decode:m": (2, ["RUNNING", "STARTING"] if t < 1 else ["RUNNING"] * 2)}) as api:
        api.url   # http://127.0.0.1:PORT (the dashboard's root)
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional, Sequence

from tests.fakes import LoopbackServer

Phases = Callable[[float], dict[str, tuple[int, Sequence[str]]]]


def replica(deployment: str, number: int, state: str) -> dict[str, Any]:
    """A `ReplicaDetails` (ServeActorDetails fields + replica_id, state, pid, start_time_s)."""
    return {"node_id": "a" * 56, "node_ip": "127.0.0.1", "node_instance_id": None, "actor_id": f"{number:032x}",
            "actor_name": f"SERVE_REPLICA::llm#{deployment}#{number}", "worker_id": "b" * 56,
            "log_file_path": f"/serve/replica_llm_{number}.log", "replica_id": f"{deployment}#{number}",
            "state": state, "pid": 4000 + number, "start_time_s": 1764590000.0 + number}


def deployment_details(name: str, target: int, states: Sequence[str]) -> dict[str, Any]:
    """A `DeploymentDetails` (extra="forbid": exactly its fields)."""
    status = "HEALTHY" if list(states).count("RUNNING") == target else "UPSCALING"
    return {"name": name, "status": status, "status_trigger": "AUTOSCALING", "message": "",
            "deployment_config": {"name": name, "max_ongoing_requests": 8,
                                  "autoscaling_config": {"min_replicas": 1, "max_replicas": 2}},
            "target_num_replicas": target, "required_resources": {"CPU": 1},
            "replicas": [replica(name, number, state) for number, state in enumerate(states)],
            "recent_dead_replicas": [], "autoscaling_detail": None}


def instance_details(deployments: dict[str, tuple[int, Sequence[str]]], app: str = "llm") -> dict[str, Any]:
    """A `ServeInstanceDetails` with one application holding `deployments`."""
    return {
        "controller_info": {"node_id": "a" * 56, "node_ip": "127.0.0.1", "actor_id": "c" * 32},
        "proxy_location": "EveryNode", "http_options": {"host": "0.0.0.0", "port": 8000},
        "grpc_options": {"port": 9000, "grpc_servicer_functions": []}, "proxies": {},
        "applications": {app: {
            "name": app, "route_prefix": "/", "docs_path": None, "status": "RUNNING", "message": "",
            "last_deployed_time_s": 1764590000.0, "deployed_app_config": None, "source": "declarative",
            "deployments": {name: deployment_details(name, target, states)
                            for name, (target, states) in deployments.items()},
            "external_scaler_enabled": False, "deployment_topology": None}},
        "target_capacity": None, "target_groups": [], "controller_health_metrics": {},
        "restores_unset_config_options": True,
    }


class ServeApi(LoopbackServer):
    """The REST API answering `instance_details(phases(t))`; `status` other than 200 answers an error."""

    def __init__(self, phases: Phases, app: str = "llm", status: int = 200) -> None:
        self.phases, self.app, self.status = phases, app, status
        self.first: Optional[float] = None  # perf_counter of the first request
        self.requests: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                fake.requests.append(self.path)
                now = time.perf_counter()
                fake.first = now if fake.first is None else fake.first
                if self.path.rstrip("/") != "/api/serve/applications" or fake.status != 200:
                    self._send(fake.status if fake.status != 200 else 404, {"error": "no"})
                    return
                self._send(200, instance_details(fake.phases(now - fake.first), fake.app))

            def _send(self, code: int, document: Any) -> None:
                body = json.dumps(document).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"
