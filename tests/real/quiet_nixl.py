"""Where the real engines' processes find tests/real/nixl_quiet/sitecustomize.py (it says why).

Every process that may load NIXL gets it on its PYTHONPATH: plain `vllm serve` engines (pd_pair)
and the Ray head, so every worker it starts (ray_serve). raypd's rendered Serve application sets
`PYTHONPATH: <policy dir>:${PYTHONPATH}`, which Ray expands from the worker's inherited
environment, so the directory stays on it there too.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

QUIET_NIXL_DIR = Path(__file__).with_name("nixl_quiet")


def with_quiet_nixl(pythonpath: Optional[str]) -> str:
    """`pythonpath` with the quieting directory first (once)."""
    parts = [part for part in (pythonpath or "").split(os.pathsep) if part and part != str(QUIET_NIXL_DIR)]
    return os.pathsep.join([str(QUIET_NIXL_DIR), *parts])
