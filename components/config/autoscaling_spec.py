"""A phase's `autoscaling` block (issue 30): how far Ray Serve may grow and shrink its engines.

```yaml
raypd:decode:
  replicas: 1                  # the starting count (Serve's initial_replicas)
  autoscaling:                 # optional; absent = fixed at `replicas`
    minReplicas: 1
    maxReplicas: 4
    targetOngoingRequests: 8   # per replica; required: Ray Serve LLM's fallback is 1e9 (never scales)
    upscaleDelaySeconds: 30    # optional, Serve's default
    downscaleDelaySeconds: 600 # optional, Serve's default
```

The block checks its own fields (numbers in ASCII digits, as every Contract 1 number: pydantic
parses them, and refuses "٣" or "３"; no NaN or infinity). What depends on the phase around it
(`1 <= minReplicas <= replicas <= maxReplicas`, a target one engine can hold) is
`autoscaling_problems`, which the spec's cross-field checks run with every other, so all problems
are reported at once, each under its own key. How a phase scales, on what signal and at what cost:
docs/scaling.md; what is rendered from the block: components.render.serve_autoscaling.
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import ConfigDict, Field, SerializerFunctionWrapHandler, ValidationInfo, field_validator, model_serializer

from components.config import defaults
from components.config.catalogue import InstanceType
from components.config.errors import FieldError
from components.config.rules import SpecModel

# vLLM's default max_num_seqs, the most sequences one engine runs at once, in the usage context Ray
# Serve LLM 2.58 starts its engines with (ray/llm/_internal/serve/engines/vllm/vllm_engine.py:
# `create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)`): vllm/engine/arg_utils.py
# `get_batch_defaults` (read in vLLM 0.32's source; the DLC runs 0.26) gives 1024 on GPUs of at
# least 70 GiB that are not A100s (H100, H200, B200) and 256 on the others (L4, A10G, L40S, A100).
# raypd renders no max_num_seqs (adding one to the engine args would restart every engine of every
# stack), so this is what its engines run with; the one home of the fact.
VLLM_MAX_NUM_SEQS = 256
VLLM_MAX_NUM_SEQS_LARGE_GPU = 1024
VLLM_LARGE_GPU_GIB = 70.0
VLLM_SMALL_DEFAULT_MODELS = ("A100",)  # vLLM keeps these at the small defaults whatever their memory
_REQUIRED_WHY = {
    "min_replicas": "the fewest engines the phase keeps",
    "max_replicas": "the most engines Serve may start",
    "target_ongoing_requests": (
        "the requests per engine Serve scales to; without it Ray Serve LLM would use 1e9 and the "
        "phase would never grow past minReplicas"),
}


def _required_in_schema(schema: dict[str, Any]) -> None:
    """The JSON Schema (the web API's OpenAPI document) says what the validator enforces: the three
    values are required and never null (the model holds them as Optional only to word the error)."""
    properties = schema["properties"]
    required = []
    for field, info in AutoscalingSpec.model_fields.items():
        if field not in _REQUIRED_WHY:
            continue
        key = info.alias or field
        entry = properties[key]
        (given,) = [option for option in entry.pop("anyOf") if option.get("type") != "null"]
        entry.pop("default", None)
        entry.update(given)
        required.append(key)
    schema["required"] = required


def engine_max_num_seqs(hardware: InstanceType) -> int:
    """The sequences one engine on `hardware`'s GPUs runs at once (vLLM's default max_num_seqs)."""
    large = (hardware.gpu_memory_gib >= VLLM_LARGE_GPU_GIB
             and hardware.gpu_model not in VLLM_SMALL_DEFAULT_MODELS)
    return VLLM_MAX_NUM_SEQS_LARGE_GPU if large else VLLM_MAX_NUM_SEQS


class AutoscalingSpec(SpecModel):
    """Serve's autoscaling bounds and signal target for one phase (None fields: not given)."""

    model_config = ConfigDict(json_schema_extra=_required_in_schema)

    min_replicas: Optional[int] = Field(None, ge=1, le=defaults.MAX_PHASE_REPLICAS)
    max_replicas: Optional[int] = Field(None, ge=1, le=defaults.MAX_PHASE_REPLICAS)
    target_ongoing_requests: Optional[float] = Field(None, gt=0, allow_inf_nan=False)
    upscale_delay_seconds: Optional[float] = Field(None, ge=0, allow_inf_nan=False)
    downscale_delay_seconds: Optional[float] = Field(None, ge=0, allow_inf_nan=False)

    @field_validator("min_replicas", "max_replicas", "target_ongoing_requests")
    @classmethod
    def _required(cls, value: Any, info: ValidationInfo) -> Any:
        # A default of None, validated (SpecModel validates defaults): the error names the key.
        if value is None:
            raise ValueError(f"is required: {_REQUIRED_WHY[str(info.field_name)]}")
        return value

    @model_serializer(mode="wrap")
    def _given_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The block as the user wrote it: a delay left out stays out (config round trips, diffs)."""
        return {key: value for key, value in handler(self).items() if value is not None}

    # The three required values, typed (the validator above guarantees them).
    @property
    def minimum(self) -> int:
        assert self.min_replicas is not None
        return self.min_replicas

    @property
    def maximum(self) -> int:
        assert self.max_replicas is not None
        return self.max_replicas

    @property
    def target(self) -> float:
        assert self.target_ongoing_requests is not None
        return self.target_ongoing_requests

    @property
    def upscale_delay(self) -> float:
        """Seconds of high load before Serve adds a replica (Serve's default when not given)."""
        given = self.upscale_delay_seconds
        return defaults.SERVE_UPSCALE_DELAY_SECONDS if given is None else given

    @property
    def downscale_delay(self) -> float:
        """Seconds of low load before Serve stops a replica (Serve's default when not given)."""
        given = self.downscale_delay_seconds
        return defaults.SERVE_DOWNSCALE_DELAY_SECONDS if given is None else given


def autoscaling_problems(phase_name: str, replicas: int, autoscaling: AutoscalingSpec,
                         hardware: InstanceType, instance_type: str) -> list[FieldError]:
    """What is wrong between the block, the phase's starting `replicas` and its engines (empty
    when nothing): `1 <= minReplicas <= replicas <= maxReplicas` and a target one engine can hold."""
    key = f"raypd:{phase_name}"
    problems: list[FieldError] = []
    low, high = autoscaling.minimum, autoscaling.maximum
    if low > high:
        problems.append(FieldError(
            f"{key}.autoscaling.minReplicas",
            f"minReplicas {low} is above maxReplicas {high}; the fewest engines cannot exceed the most"))
    elif not low <= replicas <= high:
        problems.append(FieldError(
            f"{key}.replicas",
            f"the starting count {replicas} is outside autoscaling's {low}..{high} "
            f"(minReplicas..maxReplicas); start within it, e.g. replicas: {min(max(replicas, low), high)}"))
    seqs = engine_max_num_seqs(hardware)
    if autoscaling.target > seqs:
        problems.append(FieldError(
            f"{key}.autoscaling.targetOngoingRequests",
            f"{autoscaling.target:g} requests per engine is more than one {instance_type} engine runs at "
            f"once (vLLM's max_num_seqs {seqs} on its {hardware.gpu_model}), which is also the most "
            f"Serve sends a replica (max_ongoing_requests): the load would never reach the target and "
            f"Serve would never scale up; use at most {seqs}"))
    return problems
