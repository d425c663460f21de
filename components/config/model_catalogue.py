"""The model table: the one place raypd knows the architecture of the models it serves most.

Each row holds what raypd needs to judge a model before anything starts: its layers, attention and
KV heads and head size (config.json), its parameters and checkpoint size, and where each number
comes from. The spec asks it whether tensor and pipeline parallelism divide the model as vLLM
needs (tensor_parallel_problem, pipeline_parallel_problem: vLLM refuses a size that does not when
the engine starts, 25-45 minutes into a deploy); the plan asks it for the GPU memory fit
(components.plan.model_shapes) and whether the model has linear-attention layers (topology). A
model not in the table is not judged: the spec warns instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

GIB = 1024 ** 3


@dataclass(frozen=True)
class ModelShape:
    repo_id: str
    params_b: float  # parameters, billions
    layers: int
    kv_layers: int  # layers that keep a per-token KV cache (full attention)
    kv_heads: int
    head_dim: int
    # Query heads of the full-attention layers (config.json num_attention_heads): what vLLM splits
    # across tensor-parallel ranks (tensor_parallel_problem).
    attention_heads: int
    source: str
    # Per-sequence memory that does not grow with tokens (linear-attention state, sliding windows).
    fixed_state_bytes: int = 0
    # Checkpoints stored quantized (MXFP4 etc.): the weights' size on the GPU, whatever --dtype says.
    checkpoint_gib: Optional[float] = None
    aliases: tuple[str, ...] = ()
    # Linear-attention layers (Mamba, Gated DeltaNet) beside full attention. The one source of this
    # fact: the RayService renders what vLLM's NixlConnector needs for such models from it.
    hybrid: bool = False

    def kv_bytes_per_token(self, element_bytes: int) -> int:
        return 2 * self.kv_layers * self.kv_heads * self.head_dim * element_bytes  # K and V

    def weights_gib(self, element_bytes: int) -> float:
        if self.checkpoint_gib is not None:
            return self.checkpoint_gib
        return self.params_b * 1e9 * element_bytes / GIB


_CONFIG_NOTE = "Hugging Face config.json (copies of the official repo's file)"

SHAPES: tuple[ModelShape, ...] = (
    ModelShape(
        "Qwen/Qwen3.5-9B", 9.66, 32, 8, 4, 256, 16,
        source=(
            "hybrid: 8 of 32 layers full attention (every 4th; the rest Gated DeltaNet), 16 attention "
            "heads, 4 KV heads x 256 head dim, per the HF config.json text_config and model card. Parameters: the "
            "model card says 9B (exact count unpublished); 9.66B is the reference deployment's "
            "~18 GiB bf16 checkpoint / 2 bytes (it includes the vision encoder and MTP head, which "
            "vLLM loads). Fixed state: Gated DeltaNet 24 layers x 32 value heads x 128 x 128, "
            "counted as fp32 (48 MiB per sequence; its dtype is not published)"
        ),
        fixed_state_bytes=24 * 32 * 128 * 128 * 4,
        hybrid=True,
    ),
    ModelShape("Qwen/Qwen3-8B", 8.19, 36, 36, 8, 128, 32,
               source=f"{_CONFIG_NOTE}; parameters computed from it (untied embeddings)"),
    ModelShape("Qwen/Qwen3-32B", 32.76, 64, 64, 8, 128, 64,
               source=f"{_CONFIG_NOTE}; parameters computed from it (untied embeddings)"),
    ModelShape("meta-llama/Llama-3.1-8B", 8.03, 32, 32, 8, 128, 32,
               source=f"{_CONFIG_NOTE}; parameters computed from it",
               aliases=("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B",
                        "meta-llama/Meta-Llama-3.1-8B-Instruct")),
    ModelShape("meta-llama/Llama-3.3-70B-Instruct", 70.55, 80, 80, 8, 128, 64,
               source=f"{_CONFIG_NOTE} (same shape as Llama-3.1-70B); parameters computed from it"),
    ModelShape("mistralai/Mistral-7B-v0.3", 7.25, 32, 32, 8, 128, 32,
               source=f"{_CONFIG_NOTE}, sliding_window null; parameters computed from it",
               aliases=("mistralai/Mistral-7B-Instruct-v0.3",)),
    ModelShape(
        "openai/gpt-oss-120b", 116.8, 36, 18, 8, 64, 64,
        source=(
            "MoE, 128 experts, 4 active; 18 full-attention + 18 sliding-window (128 tokens) layers, "
            "64 attention heads, 8 KV heads x 64 head dim (HF config.json). 117B parameters (OpenAI). The MoE weights "
            "are MXFP4 in the checkpoint: ~65 GB (60.8 GiB) of safetensors, which vLLM keeps "
            "MXFP4 on the GPU (the published 'fits one 80 GB GPU' figure); the byte count is from "
            "the repo's file listing, not confirmed to the byte"
        ),
        # The sliding-window layers hold at most 128 tokens each (bf16).
        fixed_state_bytes=128 * 2 * 18 * 8 * 64 * 2,
        checkpoint_gib=60.8,
    ),
)

_BY_REPO: dict[str, ModelShape] = {}
for _shape in SHAPES:
    for _name in (_shape.repo_id, *_shape.aliases):
        _BY_REPO[_name.lower()] = _shape
_BY_NAME: dict[str, ModelShape] = {key.split("/", 1)[1]: shape for key, shape in _BY_REPO.items()}

def find_shape(source: str, model_id: str = "") -> Optional[ModelShape]:
    """The table row for a model source: the HF repo id (any case); for an s3:// source, the last
    path component, then the served model id, matched against the repos' names."""
    key = source.strip().lower()
    if key in _BY_REPO:
        return _BY_REPO[key]
    if not key.startswith("s3://"):
        return None  # an HF repo id names the model; the served name is only a label
    candidates = [key.rstrip("/").rsplit("/", 1)[-1]]
    if model_id:
        candidates.append(model_id.strip().lower())
    for name in candidates:
        if name in _BY_REPO:
            return _BY_REPO[name]
        if name.rsplit("/", 1)[-1] in _BY_NAME:
            return _BY_NAME[name.rsplit("/", 1)[-1]]
    return None


def tensor_parallel_problem(shape: ModelShape, tensor_parallel: int) -> Optional[str]:
    """Why vLLM refuses `tensor_parallel` ranks for the model (None when it takes them).

    vLLM splits the query heads across the ranks: ModelConfig.verify_with_parallel_config
    (vllm/config/model.py) raises "Total number of attention heads (N) must be divisible by tensor
    parallel size (T)". It shards the KV heads when T divides them and replicates them when they
    divide T; QKVParallelLinear (vllm/model_executor/layers/linear.py, `divide()`) refuses anything
    else. The linear-attention heads of the hybrid models in the table (Qwen3.5: 16 key and 32
    value heads) divide by every size their attention heads do.
    """
    heads, kv = shape.attention_heads, shape.kv_heads
    if heads % tensor_parallel:
        return (f"{tensor_parallel} does not divide the {heads} attention heads of {shape.repo_id}: vLLM "
                f"refuses it when the engine starts (\"Total number of attention heads ({heads}) must be "
                f"divisible by tensor parallel size ({tensor_parallel})\")")
    if kv % tensor_parallel and tensor_parallel % kv:
        return (f"{tensor_parallel} neither divides nor is a multiple of the {kv} KV heads of "
                f"{shape.repo_id}: vLLM shards KV heads across the ranks or replicates them, and "
                "refuses anything else when the engine starts")
    return None


def tensor_parallel_sizes(shape: ModelShape, most: int) -> list[int]:
    """The tensor-parallel sizes up to `most` (a node's GPUs) vLLM takes for the model."""
    return [size for size in range(1, most + 1) if tensor_parallel_problem(shape, size) is None]


def pipeline_parallel_problem(shape: ModelShape, pipeline_parallel: int) -> Optional[str]:
    """Why `pipeline_parallel` stages cannot hold the model (None when they can): vLLM gives each
    stage a share of the layers (vllm/distributed/utils.py get_pp_indices), so a stage needs one."""
    if pipeline_parallel > shape.layers:
        return (f"{pipeline_parallel} stages for the {shape.layers} layers of {shape.repo_id}: a "
                "pipeline stage would hold no layer")
    return None
