"""`scaling_ray`: the small stack, autoscaled per phase under raypd's PD policy, on a local Ray 2.60.

A package of its own (like tests/real/ray/ and tests/real/serve_updates/): one Ray head for this
package's tests, started once, under the machine-wide lock, stopped after its last test. Not the
head of tests/real/ray/: this app's config differs (tests/real/autoscaled_stack.py), and
redeploying it there would rebuild that app twice (Serve restarts every replica on a new
`autoscaling_policy`, and once more to put it back), which costs more than this head's own start.

What the head gets that a RayService pod gets from raypd (components/render/scaling_policy/
delivery.py): the policy file, written from the ConfigMap's data into a directory that PYTHONPATH
names; `ray start` hands its environment to every Ray worker, so Serve's build task finds the
module there. Test-only: Serve's handles and replicas push autoscaling metrics every 2 s instead
of 10 s, so that decisions follow the load within the test's short look-back window.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterator

import pytest

from components.render.scaling_policy.delivery import policy_config_map
from tests.real.autoscaled_stack import autoscaled_small_stack, side_channel_bases
from tests.real.locate import RealVllm
from tests.real.machine_lock import machine_lock
from tests.real.ray_serve import RayServe, deploy, serve_http_port, start_ray, stop_ray, wait_app_running

log = logging.getLogger(__name__)
METRIC_PUSH_ENV = {"RAY_SERVE_HANDLE_AUTOSCALING_METRIC_PUSH_INTERVAL_S": "2",
                   "RAY_SERVE_REPLICA_AUTOSCALING_METRIC_PUSH_INTERVAL_S": "2"}


def write_policy_mount(directory: Path) -> Path:
    """The directory the ConfigMap's volume would be: each data key a file."""
    for key, text in policy_config_map("ray-llm", "inference", {})["data"].items():
        (directory / key).write_text(text, encoding="utf-8")
    return directory


@pytest.fixture(scope="package")
def scaling_ray(real: RealVllm, real_artifacts: Path, tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[RayServe]:
    log_dir = real_artifacts / "scaling"
    log_dir.mkdir(parents=True, exist_ok=True)
    policy_dir = write_policy_mount(tmp_path_factory.mktemp("serve-policy"))
    added = {"PYTHONPATH": os.pathsep.join(p for p in (str(policy_dir), os.environ.get("PYTHONPATH")) if p),
             **METRIC_PUSH_ENV}
    saved = {key: os.environ.get(key) for key in added}
    os.environ.update(added)  # start_ray passes our environment to `ray start` (ray_serve.ray_env)
    try:
        with machine_lock("tests/real/scaling"):
            ray = start_ray(real, log_dir)
            try:
                deploy(ray, autoscaled_small_stack(model_dir=str(real.model_dir), http_port=serve_http_port(ray),
                                                   port_bases=side_channel_bases()))
                ray.ready_s = wait_app_running(ray)
                log.info("autoscaled PD app RUNNING %.0f s after deploy", ray.ready_s)
                yield ray
            finally:
                stop_ray(ray, keep_logs_in=log_dir / "ray-logs")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
