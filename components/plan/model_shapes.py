"""Model shapes and the GPU memory fit: will the model load, with its KV cache, on the GPUs chosen?

vLLM refuses to start when the weights plus the KV cache for one `maxModelLen` sequence do not fit
in `gpuMemoryUtilization` x GPU memory ("... larger than the maximum number of tokens that can be
stored in KV cache"). On EKS that failure surfaces 20+ minutes into a deploy, after the GPU nodes are
up and the checkpoint is downloaded; this module predicts it from the spec alone (no AWS, no network).

The model table (components.config.model_catalogue) holds a few common models, keyed by Hugging
Face repo id, with the numbers the estimate needs; each row names its source. A model not in the
table is estimated from a size in its name ("70B", "1.5b", "8x7B"); with no size at all the check
says it cannot estimate.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from components.config import catalogue
from components.config.checks import Check
from components.config.model_catalogue import GIB, ModelShape, find_shape
from components.config.rules import ascii_pattern
from components.config.spec import DeploymentSpec, PhaseSpec

CHECK_ID = "gpu-memory-fit"
TITLE = "model weights and KV cache fit in GPU memory"

# Bytes per weight and per KV element for vLLM's --dtype values. "auto" takes the checkpoint's
# dtype; every model in the table ships bf16 (and vLLM's "auto" maps fp32 checkpoints to 16-bit).
DTYPE_BYTES: dict[str, int] = {
    "auto": 2, "bfloat16": 2, "float16": 2, "half": 2, "float": 4, "float32": 4,
}

# Per-GPU memory that is neither weights nor KV cache, charged against the vLLM budget: the CUDA
# context and cuBLAS/NCCL workspaces (~0.5-1 GiB with PyTorch on L4/A10G/H100) plus vLLM's profiled
# activation peak for one prefill batch (max_num_batched_tokens, a few hundred MiB for 7-9B models
# at the default batch size). 1.5 GiB is the conservative sum; it is the number that still lets the
# reference (Qwen3.5-9B, one L4, 4096 tokens, 0.9 utilization) fit, which runs in production.
# CUDA graphs (enforceEager false) add a few hundred MiB more, not counted separately here.
OVERHEAD_GIB_PER_GPU = 1.5

# An estimate (no table row) passes only when it fits with this share of the budget to spare: its
# parameter count is rounded from the name and its KV cache is unknown, so a tight fit is a warning.
ESTIMATE_HEADROOM = 0.8


# "70B", "8b", "1.5B", "8x7B": a number then B, standing alone between separators.
_SIZE = ascii_pattern(r"(?:^|[-_/.])(?:(\d+)x)?(\d+(?:\.\d+)?)b(?=$|[-_/.])", re.IGNORECASE)


def params_from_name(*names: str) -> Optional[float]:
    """Billions of parameters read from a size in the name (largest match wins); "8x7B" is counted
    as 56 (an overestimate for MoE models that share attention weights, which errs towards safety)."""
    found: list[float] = []
    for name in names:
        for match in _SIZE.finditer(name):
            experts = int(match.group(1)) if match.group(1) else 1
            found.append(experts * float(match.group(2)))
    return max(found) if found else None


@dataclass(frozen=True)
class PhaseFit:
    phase: str
    weights_gib: float
    kv_gib: float  # KV for maxModelLen tokens plus any fixed per-sequence state
    overhead_gib: float
    usable_gib: float
    gpus: int
    gpu_memory_gib: float
    utilization: float
    kv_counted: bool = True

    @property
    def needed_gib(self) -> float:
        return self.weights_gib + self.kv_gib + self.overhead_gib

    @property
    def fits(self) -> bool:
        return self.needed_gib <= self.usable_gib

    def describe(self, tokens: int) -> str:
        gpu_word = "GPU" if self.gpus == 1 else "GPUs"
        kv = f"KV {self.kv_gib:.2f} GiB ({tokens} tokens)" if self.kv_counted else "KV not counted"
        return (
            f"{self.phase}: weights {self.weights_gib:.1f} GiB + {kv} + overhead "
            f"{self.overhead_gib:.1f} GiB = {self.needed_gib:.1f} GiB "
            f"of {self.usable_gib:.1f} GiB usable ({self.utilization:g} x {self.gpu_memory_gib:g} "
            f"GiB x {self.gpus} {gpu_word})"
        )


def phase_fit(
    phase_name: str, phase: PhaseSpec, spec: DeploymentSpec, shape: Optional[ModelShape],
    params_b: float, tensor_parallel: Optional[int] = None,
) -> PhaseFit:
    """Memory one replica of a phase needs vs what vLLM may use, over all its TP x PP GPUs.

    With no shape (an estimate) the KV cache is not counted: it is unknown without the model's
    layer and head counts.
    """
    element = DTYPE_BYTES[spec.model.dtype]
    tp = tensor_parallel or phase.tensor_parallel_size
    gpus = tp * phase.pipeline_parallel_size
    if shape is not None:
        weights = shape.weights_gib(element)
        # With more TP ranks than KV heads, vLLM replicates KV heads so each rank holds one.
        replication = max(1.0, tp / shape.kv_heads)
        kv_bytes = shape.kv_bytes_per_token(element) * spec.model.max_model_len * replication
        kv = (kv_bytes + shape.fixed_state_bytes) / GIB
    else:
        weights = params_b * 1e9 * element / GIB
        kv = 0.0
    gpu_memory = phase.hardware.gpu_memory_gib
    utilization = spec.model.gpu_memory_utilization
    return PhaseFit(
        phase=phase_name, weights_gib=weights, kv_gib=kv, overhead_gib=OVERHEAD_GIB_PER_GPU * gpus,
        usable_gib=utilization * gpu_memory * gpus, gpus=gpus, gpu_memory_gib=gpu_memory,
        utilization=utilization, kv_counted=shape is not None,
    )


def _smallest_fitting_tp(
    phase_name: str, phase: PhaseSpec, spec: DeploymentSpec, shape: Optional[ModelShape], params_b: float,
) -> Optional[int]:
    tp = phase.tensor_parallel_size * 2
    while tp * phase.pipeline_parallel_size <= phase.hardware.gpus:
        if phase_fit(phase_name, phase, spec, shape, params_b, tensor_parallel=tp).fits:
            return tp
        tp *= 2
    return None


def _fitting_instance_type(
    phase_name: str, phase: PhaseSpec, spec: DeploymentSpec, shape: Optional[ModelShape], params_b: float,
) -> Optional[tuple[str, int]]:
    """The cheapest catalogue GPU type (and TP) on which one replica fits, to name in the remedy."""
    priced = sorted(
        catalogue.gpu_instance_types(),
        key=lambda t: (t.usd_per_hour is None, t.usd_per_hour or 0.0),
    )
    needs_efa = spec.mode == "disaggregated" and spec.kv_transfer.backend == "LIBFABRIC"
    for hardware in priced:
        if needs_efa and not hardware.efa_supported:
            continue  # the spec would refuse it
        tp = 1
        while tp * phase.pipeline_parallel_size <= hardware.gpus:
            candidate = phase.model_copy(update={"instance_type": hardware.name, "tensor_parallel_size": tp})
            if phase_fit(phase_name, candidate, spec, shape, params_b).fits:
                return hardware.name, tp
            tp *= 2
    return None


def _remedy(phase_name: str, phase: PhaseSpec, spec: DeploymentSpec, fit: PhaseFit,
            shape: Optional[ModelShape], params_b: float) -> str:
    options: list[str] = []
    tp = _smallest_fitting_tp(phase_name, phase, spec, shape, params_b)
    if tp is not None:
        options.append(f"set raypd:{phase_name}.tensorParallelSize to {tp} ({phase.instance_type} "
                       f"has {phase.hardware.gpus} GPUs)")
    else:
        bigger = _fitting_instance_type(phase_name, phase, spec, shape, params_b)
        example = (
            f" (e.g. {bigger[0]} with tensorParallelSize {bigger[1]})" if bigger is not None else ""
        )
        options.append(f"an instance type with more or bigger GPUs in raypd:{phase_name}.instanceType"
                       f" and a matching raypd:{phase_name}.tensorParallelSize{example}")
    if fit.kv_gib > 0 and fit.weights_gib + fit.overhead_gib < fit.usable_gib:
        spare = fit.usable_gib - fit.weights_gib - fit.overhead_gib
        tokens = int(spec.model.max_model_len * spare / fit.kv_gib)
        if tokens > 0:
            options.append(f"lower raypd:model.maxModelLen to at most {tokens}")
    options.append("serve a lower-precision (quantized) checkpoint (raypd:model.source)")
    if spec.model.dtype in ("float", "float32"):
        options.append("use raypd:model.dtype bfloat16 (half the weight memory of float32)")
    return "; ".join(options)


def memory_fit(spec: DeploymentSpec) -> Check:
    """The `gpu-memory-fit` check: per phase, weights / (TP x PP) + KV for one maxModelLen sequence
    + overhead must fit gpuMemoryUtilization x GPU memory on each GPU of a replica.

    Known model that does not fit: fail. Estimate (size from the name) that does not fit: fail,
    naming it an estimate (weights alone already overflow, so it will not load). Estimate that fits
    with room to spare: pass, named an estimate; tightly: warn. No size at all: warn.
    """
    model = spec.model
    shape = find_shape(model.source, model.id)
    named = model.source
    params_b = shape.params_b if shape is not None else params_from_name(model.source)
    if params_b is None and model.source.startswith("s3://"):
        named = model.id  # an s3 path may not name the model; the served id might
        params_b = params_from_name(model.id)
    if params_b is None:
        return Check.warned(
            CHECK_ID, TITLE,
            f"cannot estimate: {model.source} is not in raypd's model table and its name has no "
            "size such as 7B or 70B",
            "check by hand that weights + KV cache fit raypd:model.gpuMemoryUtilization x GPU memory",
        )
    basis = (
        f"{shape.repo_id} ({model.dtype})" if shape is not None
        else f"estimate: {params_b:g}B parameters read from the model's name ({named}), "
             f"KV cache not counted ({model.dtype})"
    )
    lines: list[str] = []
    remedies: list[str] = []
    tight = False
    for phase_name, phase in spec.phases.items():
        fit = phase_fit(phase_name, phase, spec, shape, params_b)
        lines.append(fit.describe(model.max_model_len))
        if not fit.fits:
            remedies.append(f"{phase_name}: " + _remedy(phase_name, phase, spec, fit, shape, params_b))
        elif shape is None and fit.needed_gib > ESTIMATE_HEADROOM * fit.usable_gib:
            tight = True
    detail = f"{basis}; " + "; ".join(lines)
    if remedies:
        return Check.failed(CHECK_ID, TITLE, "does not fit: " + detail, " | ".join(remedies))
    if tight:
        return Check.warned(
            CHECK_ID, TITLE, "may not fit (less than 20% to spare): " + detail,
            "confirm the checkpoint size and KV cache by hand, or add GPUs (tensorParallelSize)",
        )
    return Check.passed(CHECK_ID, TITLE, detail)

