"""What raypd reads from a real Ray 2.60 head, and how the tests start one.

- Ray's log API (`/api/v0/logs/file`, ray/dashboard/modules/state/state_head.py `get_logs`) answers a
  log's raw bytes, and an unknown actor with HTTP 500: serve.evidence `Evidence.ray_log` must return
  a log whose tail starts with "0" as it is (the old Ray format prefixed every chunk with "1"/"0",
  which raypd once stripped and read as an error), and turn the 500 into an error. Read through the
  Kubernetes stand-in's head Service proxy, as verify reads it on a cluster. (Ray 2.58, the DLC's,
  has the same `get_logs`; it cannot run on this machine.)
- The head runs with a HOME holding `.ray/auth_token` (conftest.py): token authentication must stay
  off, or every dashboard call of the real tests answers 401.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from serve.evidence import Evidence, VerifyPlan
from serve.kube import KubeError, client_from_kubeconfig
from tests.fakes.kube_api import FakeKubeApi
from tests.real.processes import wait_until
from tests.real.ray_serve import RayServe, deploy, serve_http_port

PROBE = {"import_path": "probe_app:build", "args": {"purpose": "log api"}}
UNKNOWN_ACTOR = "ffffffffffffffffffffffff01000000"
ZERO_LINE = "0it [00:00, ?it/s]"  # what probe_app.py prints at start (only Ray's workers import it)


def probe_replica(ray: RayServe) -> dict[str, Any]:
    """The probe deployment's RUNNING replica (deployed here if the app is not running)."""
    def running() -> list[dict[str, Any]]:
        app = (ray.applications().get("applications") or {}).get("probe") or {}
        replicas = ((app.get("deployments") or {}).get("Decode:tiny") or {}).get("replicas") or []
        return [r for r in replicas if r.get("state") == "RUNNING"] if app.get("status") == "RUNNING" else []

    if not running():
        deploy(ray, {"http_options": {"host": "127.0.0.1", "port": serve_http_port(ray)},
                     "applications": [{"name": "probe", "route_prefix": "/", **PROBE}]})
    wait_until("a RUNNING probe replica", lambda: bool(running()), deadline_s=600, interval_s=2)
    return running()[0]


def test_a_token_file_in_home_leaves_the_dashboard_open(plain_ray: RayServe) -> None:
    assert plain_ray.home is not None and (plain_ray.home / ".ray" / "auth_token").is_file()
    for path in ("/api/v0/nodes", "/api/serve/applications/", "/api/v0/actors"):
        response = plain_ray.get(path)
        assert response.status_code == 200, f"{path}: HTTP {response.status_code} {response.text[:200]}"
    assert "Token authentication is enabled" not in plain_ray.process.output()


def test_the_log_api_gives_a_log_starting_with_zero_as_it_is_and_an_unknown_actor_is_an_error(
        plain_ray: RayServe) -> None:
    assert f'ZERO_LINE = "{ZERO_LINE}"' in (Path(__file__).parent / "probe_app.py").read_text()
    actor = str(probe_replica(plain_ray)["actor_id"])
    with FakeKubeApi("healthy") as kube:
        kube.dashboard_upstream = plain_ray.dashboard_url
        client = client_from_kubeconfig(kube.kubeconfig(), timeout=60)
        plan = VerifyPlan.from_outputs(kube.outputs())

        def read(lines: int) -> str:
            return Evidence(client, plan, log_lines=lines).ray_log({"actor_id": actor, "suffix": "out"})

        whole = read(5000)
        assert ZERO_LINE in whole.splitlines(), whole[-2000:]
        tail: list[str] = []

        def tail_starts_with_zero() -> bool:  # the tail from ZERO_LINE on (the log may grow meanwhile)
            lines = read(5000).splitlines()
            since = len(lines) - max(i for i, line in enumerate(lines) if line == ZERO_LINE)
            tail[:] = [read(since)]
            return tail[0].startswith("0it")

        wait_until("a log tail that starts with the probe's 0 line", tail_starts_with_zero, deadline_s=120)
        assert tail[0].splitlines()[0] == ZERO_LINE  # nothing stripped, and no error made of it
        with pytest.raises(KubeError) as unknown:
            Evidence(client, plan).ray_log({"actor_id": UNKNOWN_ACTOR, "suffix": "out"})
    assert "HTTP 500" in str(unknown.value) and "not found" in str(unknown.value), str(unknown.value)
