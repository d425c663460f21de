"""`plain_ray`: a local Ray 2.60 head with no model, for Ray Serve's own update rules (../conftest.py).

The probe application (probe_app.py, this directory) reaches Ray's workers through PYTHONPATH,
which `ray start` passes to every worker it starts.
"""

from __future__ import annotations

import os
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
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), saved) if p)
    try:
        with machine_lock("tests/real/serve_updates"):
            ray = start_ray(real, log_dir, num_cpus=4, resources={})
            try:
                ray.app_name = "probe"
                yield ray
            finally:
                stop_ray(ray, keep_logs_in=log_dir / "ray-logs")
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
