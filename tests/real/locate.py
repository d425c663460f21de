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
