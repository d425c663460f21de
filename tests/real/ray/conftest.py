"""`real_ray_serve`: raypd's small stack on a local Ray 2.60 with Serve LLM (see ../conftest.py)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterator

import pytest

from tests.real.locate import RealVllm
from tests.real.machine_lock import machine_lock
from tests.real.ray_serve import RayServe, deploy, small_stack_for_cpu, start_ray, stop_ray, wait_app_running

log = logging.getLogger(__name__)


SCALING_MODULE = "test_phases_scale_on_their_own_load.py"
KILL_MODULE = "test_decode_replica_killed_under_load.py"
LAST = {SCALING_MODULE: 1, KILL_MODULE: 2}  # the kill after the scaling tests: it leaves a new decode replica


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The scaling tests next to last in this package: they grow a phase to two engines and wait for it
    to come back to one; every other test here sees the app at its starting size. The decode-replica
    kill is last: Serve replaces the replica, and nothing after it needs the first one. Only this package's
    places in the list are reordered (pytest calls this hook with the whole session's items, and a
    package's tests must stay together, or its Ray head would be stopped and started again)."""
    here = Path(__file__).parent
    places = [i for i, item in enumerate(items) if item.path.parent == here]
    ours = sorted((items[i] for i in places), key=lambda item: LAST.get(item.path.name, 0))
    for place, item in zip(places, ours, strict=True):
        items[place] = item


@pytest.fixture(scope="package")
def real_ray_serve(real: RealVllm, real_artifacts: Path) -> Iterator[RayServe]:
    """Ray head on 127.0.0.1, the rendered app deployed through Serve's REST API and RUNNING.

    Stopped after this package's last test; Ray's session logs are copied to
    test-artifacts/real/ray/ray-logs/ before its temp dir goes.
    """
    log_dir = real_artifacts / "ray"
    with machine_lock("tests/real/ray"):
        ray = start_ray(real, log_dir)
        try:
            deploy(ray, small_stack_for_cpu(real, ray))
            ray.ready_s = wait_app_running(ray)
            log.info("Ray Serve LLM app RUNNING %.0f s after deploy", ray.ready_s)
            yield ray
        finally:
            stop_ray(ray, keep_logs_in=log_dir / "ray-logs")
