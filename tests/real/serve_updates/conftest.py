"""`plain_ray`: a local Ray 2.60 head with no model, for Ray Serve's own rules (../conftest.py).

The probe application (probe_app.py, this directory) reaches Ray's workers through PYTHONPATH,
which `ray start` passes to every worker it starts. The head runs with a HOME that holds
`.ray/auth_token`, as every machine where `ray.init()` ran once does: Ray 2.60 turns token
authentication on by itself then, unless told not to (tests/real/ray_serve.py `ray_env`), and
`plain_ray.home` lets a test check it stayed off.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import Iterator

import pytest

from tests.real.locate import RealVllm
from tests.real.machine_lock import machine_lock
from tests.real.ray_serve import RayServe, start_ray, stop_ray

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="package")
def plain_ray(real: RealVllm, real_artifacts: Path, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[RayServe]:
    log_dir = real_artifacts / "serve-updates"
    log_dir.mkdir(parents=True, exist_ok=True)
    home = tmp_path_factory.mktemp("ray-home")
    (home / ".ray").mkdir()
    (home / ".ray" / "auth_token").write_text(secrets.token_hex(16))  # what ray.init() leaves behind
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), saved) if p)
    try:
        with machine_lock("tests/real/serve_updates"):
            ray = start_ray(real, log_dir, num_cpus=4, resources={}, home=home)
            try:
                ray.app_name = "probe"
                ray.home = home
                yield ray
            finally:
                stop_ray(ray, keep_logs_in=log_dir / "ray-logs")
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
