"""The real engines' processes load NIXL with its progress thread quieted (tests/real/nixl_quiet).

Lost, nothing fails: every real test just runs on a machine saturated by two spinning engines
(CI then ran 50 minutes and timed browser tests out). So it is checked here, in the real venv,
with exactly the environment each kind of engine process gets.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.real.locate import RealVllm
from tests.real.pd_pair import engine_env
from tests.real.ray_serve import ray_env

# What NIXL's agent constructor is, after `import nixl` in the process.
PROBE = "import nixl._api as api; print(api.nixlBind.nixlAgent.__name__)"


@pytest.mark.parametrize("kind", ["vllm serve", "ray head and its workers"])
def test_engine_processes_load_nixl_with_the_quiet_progress_thread(real: RealVllm, tmp_path: Path, kind: str) -> None:
    env = engine_env(side_channel_port=40999, cpu=0) if kind == "vllm serve" else ray_env(tmp_path)
    done = subprocess.run([str(real.python), "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "quiet_agent", f"NIXL's agent is not wrapped in {kind}: {done.stdout!r}"
