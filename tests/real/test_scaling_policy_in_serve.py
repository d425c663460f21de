"""raypd's PD scaling policy inside Ray Serve 2.60's own code, without a cluster (seconds, no engines).

tests/real/scaling/serve_policy_probe.py runs in the real venv and answers with what Serve itself did:
its schema validated the Serve config the scaling tests deploy in a process that cannot import
the policy (as the dashboard does), the policy named at the deployment level instead failed that
validation (why raypd names it at the application level), and the policy, pickled by value as the
build task does and loaded where its module is absent (as the controller does), ran inside Serve's
application-level wrapper with Serve's AutoscalingContext, AutoscalingConfig and DeploymentID
over a fake clock. The scaling itself on real engines: tests/real/scaling/.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.render.scaling_policy.delivery import POLICY_MODULE
from tests.real.cpu_serve_config import for_cpu
from tests.real.locate import RealVllm
from tests.real.ray_serve import write_policy_files
from tests.real.scaling.serve_policy_probe import DECODE, LOAD_S, PREFILL
from tests.real.stacks import SCALING_TEST_BOUNDS, autoscaled_small_stack_serve_config, scaling_test_shape

PROBE = Path(__file__).with_name("scaling") / "serve_policy_probe.py"


@pytest.fixture(scope="module")
def serve_says(real: RealVllm, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    policy_dir = write_policy_files(tmp_path_factory.mktemp("serve-policy"))  # what the ConfigMap mounts
    config = for_cpu(scaling_test_shape(autoscaled_small_stack_serve_config()), model_dir=str(real.model_dir),
                     http_port=8000, side_channel_ports={"prefill": 20000, "decode": 22000},
                     policy_dir=str(policy_dir))
    result = subprocess.run([str(real.python), str(PROBE), str(policy_dir)], input=json.dumps(config),
                            capture_output=True, text=True, timeout=300, cwd=tmp_path_factory.mktemp("cwd"),
                            env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "RAY_USAGE_STATS_ENABLED": "0"})
    assert result.returncode == 0, f"probe exited {result.returncode}: {result.stderr[-3000:]}"
    return json.loads([line for line in result.stdout.splitlines() if line.startswith("{")][-1])


def test_serve_accepts_the_config_where_the_policy_module_is_absent(serve_says: dict[str, Any]) -> None:
    assert serve_says["validates_without_the_module"] is True
    assert serve_says["module_importable_here"] is False


def test_a_deployment_level_policy_would_need_the_module_wherever_the_config_is_validated(
        serve_says: dict[str, Any]) -> None:
    error = serve_says["deployment_level_needs_the_module"]
    assert error is not None and "ModuleNotFoundError" in error and POLICY_MODULE in error, error


def test_a_prefill_bound_load_scales_prefill_after_the_delays_and_decode_never(serve_says: dict[str, Any]) -> None:
    up, down = SCALING_TEST_BOUNDS["upscaleDelaySeconds"], SCALING_TEST_BOUNDS["downscaleDelaySeconds"]
    assert serve_says["timeline_prefill_bound"] == [
        {"t": up, "deployment": PREFILL, "replicas": 2},  # not before upscale_delay_s of load
        {"t": LOAD_S + down, "deployment": PREFILL, "replicas": 1},  # back to min, downscale_delay_s after it
    ]
    assert serve_says["default_policy_prefill_bound"][DECODE] > 1, "Serve's default would have grown decode"


def test_a_decode_bound_load_scales_decode_after_the_delays_and_prefill_never(serve_says: dict[str, Any]) -> None:
    up, down = SCALING_TEST_BOUNDS["upscaleDelaySeconds"], SCALING_TEST_BOUNDS["downscaleDelaySeconds"]
    assert serve_says["timeline_decode_bound"] == [
        {"t": up, "deployment": DECODE, "replicas": 2},
        {"t": LOAD_S + down, "deployment": DECODE, "replicas": 1},
    ]
