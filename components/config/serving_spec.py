"""What is served and on which nodes: the blocks of DeploymentSpec that describe serving.

```yaml
raypd:model:       {id: ..., source: org/name or s3://..., maxModelLen: ..., dtype: auto, ...}
raypd:prefill:     {instanceType: g6.12xlarge, replicas: 1, tensorParallelSize: 1, ...,
                    autoscaling: {minReplicas: 1, maxReplicas: 4, ...}}   # optional (autoscaling_spec)
raypd:decode:      {...}   # as prefill
raypd:colocated:   {...}   # the one phase of mode colocated
raypd:kvTransfer:  {connector: NixlConnector, backend: LIBFABRIC,
                    loadFailurePolicy: fail, leaseSeconds: 300}   # issue 31: docs/resilience.md
raypd:systemNodes: {instanceType: m7i.xlarge, count: 2}
```

Each block checks its own fields; what depends on the rest of the spec (the mode, the KV
backend) is `phase_problems`, which DeploymentSpec calls with every other cross-field check so
all problems are reported at once. Defaults live in components.config.defaults.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field, SerializerFunctionWrapHandler, field_validator, model_serializer

from components.config import catalogue, defaults, model_catalogue
from components.config.autoscaling_spec import AutoscalingSpec, autoscaling_problems
from components.config.errors import FieldError
from components.config.rules import SpecModel, ascii_pattern, instance_type_name_problem

# vLLM's --dtype choices.
VLLM_DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
# A Hub repo id: org/name in ASCII letters, digits, "_", "." and "-" (huggingface_hub's
# utils/_validators.py REPO_ID_REGEX says "alphanumeric + . _ -", but compiles its `\w` as Unicode).
_HF_REPO = ascii_pattern(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
# s3://bucket[/prefix]: S3's bucket naming rules; the prefix in the characters S3 calls safe for
# object keys (its user guide, "Naming Amazon S3 objects") except "*", which the pods' IAM policy
# would read as a wildcard (components/render/model_access.py puts the prefix in its ARNs).
_S3_URI = ascii_pattern(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[A-Za-z0-9!_.'()/-]*)?$")
# A served model name as clients send it in "model": letters, digits and . _ - / : + @ only.
_MODEL_ID = ascii_pattern(r"[A-Za-z0-9][A-Za-z0-9._:/+@-]{0,127}")


class SystemNodes(SpecModel):
    instance_type: str = defaults.SYSTEM_INSTANCE_TYPE
    count: int = Field(defaults.SYSTEM_NODE_COUNT, ge=1, le=10)

    @field_validator("instance_type")
    @classmethod
    def _known_shape(cls, value: str) -> str:
        problem = instance_type_name_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class ModelSpec(SpecModel):
    id: str = defaults.MODEL_ID
    source: str = defaults.MODEL_SOURCE
    max_model_len: int = Field(defaults.MAX_MODEL_LEN, gt=0, le=10_000_000)
    dtype: str = defaults.DTYPE
    gpu_memory_utilization: float = Field(defaults.GPU_MEMORY_UTILIZATION, gt=0, le=0.98)
    enforce_eager: bool = defaults.ENFORCE_EAGER

    @field_validator("id")
    @classmethod
    def _id_present(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the served model name is required")
        if not _MODEL_ID.fullmatch(value):
            raise ValueError(
                f"'{value}' is not a served model name: 1-128 letters, digits and . _ - / : + @, "
                "starting with a letter or digit"
            )
        return value

    @field_validator("source")
    @classmethod
    def _source_shape(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the model source is required (a Hugging Face repo id or an s3:// URI)")
        if not (_HF_REPO.fullmatch(value) or _S3_URI.fullmatch(value)):
            raise ValueError(
                f"'{value}' is neither a Hugging Face repo id (org/name) nor an s3://bucket/path URI"
            )
        return value

    @field_validator("dtype")
    @classmethod
    def _vllm_dtype(cls, value: str) -> str:
        if value not in VLLM_DTYPES:
            raise ValueError(f"'{value}' is not a vLLM dtype; use one of {', '.join(VLLM_DTYPES)}")
        return value


class PhaseSpec(SpecModel):
    """One serving phase (prefill, decode, or the colocated baseline) and the nodes it runs on."""

    instance_type: str = defaults.GPU_INSTANCE_TYPE
    # The count the phase starts with; with `autoscaling`, Serve's initial_replicas.
    replicas: int = Field(defaults.PHASE_REPLICAS, ge=1, le=defaults.MAX_PHASE_REPLICAS)
    tensor_parallel_size: int = Field(1, ge=1, le=64)
    pipeline_parallel_size: int = Field(1, ge=1, le=64)
    # Issue 30: None keeps the phase at `replicas` (components.config.autoscaling_spec).
    autoscaling: Optional[AutoscalingSpec] = None

    @field_validator("instance_type")
    @classmethod
    def _gpu_type(cls, value: str) -> str:
        problem = catalogue.gpu_type_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @property
    def hardware(self) -> catalogue.InstanceType:
        found = catalogue.lookup(self.instance_type)
        assert found is not None  # guaranteed by the validator
        return found

    @property
    def gpus_per_replica(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size

    @property
    def replicas_per_node(self) -> int:
        return replicas_per_node(self.hardware.gpus, self.gpus_per_replica)

    @model_serializer(mode="wrap")
    def _fixed_count_has_no_block(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """No `autoscaling` key for a fixed count: the config (public_config, the web app's store,
        the Pulumi config it writes) reads exactly as before the block existed."""
        body: dict[str, Any] = handler(self)
        if self.autoscaling is None:
            body.pop("autoscaling", None)
        return body

    def nodes_for(self, replicas: int) -> int:
        """Whole nodes for `replicas` engines, each on one node so TP/PP traffic stays on NVLink/PCIe."""
        return -(-replicas // self.replicas_per_node)

    @property
    def nodes(self) -> int:
        """The nodes of the starting count."""
        return self.nodes_for(self.replicas)

    @property
    def min_replicas(self) -> int:
        """The fewest engines the phase runs (`replicas` when it does not autoscale)."""
        return self.replicas if self.autoscaling is None else self.autoscaling.minimum

    @property
    def max_replicas(self) -> int:
        """The most engines the phase runs (`replicas` when it does not autoscale)."""
        return self.replicas if self.autoscaling is None else self.autoscaling.maximum

    @property
    def min_nodes(self) -> int:
        return self.nodes_for(self.min_replicas)

    @property
    def max_nodes(self) -> int:
        return self.nodes_for(self.max_replicas)

    @property
    def gpus(self) -> int:
        return self.replicas * self.gpus_per_replica


def replicas_per_node(gpus_per_node: int, gpus_per_replica: int) -> int:
    """Engines one node holds: each engine on one node, so TP/PP traffic stays on NVLink/PCIe (an
    engine wider than a node still counts one per node). One home for the rule: serve.verify reads
    it back from the outputs' topology."""
    return max(1, gpus_per_node // gpus_per_replica)


def colocated_default() -> PhaseSpec:
    return PhaseSpec(replicas=defaults.COLOCATED_REPLICAS)


class KvTransferSpec(SpecModel):
    """How prefill hands its KV cache to decode (mode disaggregated only; components.config.defaults
    says why each default)."""

    connector: Literal["NixlConnector"] = defaults.KV_CONNECTOR
    backend: Literal["LIBFABRIC", "UCX"] = defaults.KV_BACKEND
    # vLLM's kv_transfer_config.kv_load_failure_policy, on both phases.
    load_failure_policy: Literal["fail", "recompute"] = defaults.KV_LOAD_FAILURE_POLICY
    # NIXL's kv_connector_extra_config.kv_lease_duration (whole seconds: vLLM reads an int), on both phases.
    lease_seconds: int = Field(defaults.KV_LEASE_SECONDS, ge=defaults.MIN_KV_LEASE_SECONDS,
                               le=defaults.MAX_KV_LEASE_SECONDS)

    @property
    def resilience_settings(self) -> dict[str, Any]:
        """The issue 31 keys that differ from their defaults (what a colocated stack ignores)."""
        chosen = {"loadFailurePolicy": self.load_failure_policy, "leaseSeconds": self.lease_seconds}
        reference = {"loadFailurePolicy": defaults.KV_LOAD_FAILURE_POLICY, "leaseSeconds": defaults.KV_LEASE_SECONDS}
        return {key: value for key, value in chosen.items() if value != reference[key]}


def kv_transfer_warnings(mode: str, kv_transfer: KvTransferSpec) -> list[str]:
    """Allowed but risky KV-transfer choices (docs/resilience.md). In mode colocated nothing moves
    KV between engines, so a chosen policy or lease is ignored, with a warning rather than an error:
    a stack file that switches `mode` for a baseline comparison keeps working unchanged."""
    if mode == "colocated":
        ignored = ", ".join(f"raypd:kvTransfer.{key} {value}"
                            for key, value in kv_transfer.resilience_settings.items())
        return [f"{ignored}: ignored in mode colocated (no KV transfer between engines)"] if ignored else []
    notes = []
    if kv_transfer.load_failure_policy == "recompute":
        notes.append(
            "raypd:kvTransfer.loadFailurePolicy is recompute: when decode cannot load a request's KV "
            "cache it redoes the prefill and still answers 200, so clients, verify's kv-transfer check "
            "and the alerts see no failure, decode spends prefill compute, and a wrong-output bug was "
            "reported for it (vllm#49250); fail (the default) returns the error instead")
    if kv_transfer.lease_seconds < defaults.VLLM_KV_LEASE_SECONDS:
        notes.append(
            f"raypd:kvTransfer.leaseSeconds {kv_transfer.lease_seconds} is shorter than vLLM's own "
            f"{defaults.VLLM_KV_LEASE_SECONDS} s: a decode that reads later than the lease gets blocks "
            "prefill has freed, and answers 200 with wrong text (docs/resilience.md)")
    return notes


def phase_problems(phase_name: str, phase: PhaseSpec, mode: str, kv_transfer: Optional[KvTransferSpec],
                   model: Optional[ModelSpec]) -> list[FieldError]:
    """What is wrong with phase `phase_name` given the spec's mode, KV transfer and model (empty
    when nothing). `kv_transfer` or `model` None: it was refused itself, so what depends on it is
    not judged."""
    problems: list[FieldError] = []
    hardware = phase.hardware
    if phase.gpus_per_replica > hardware.gpus:
        field = (
            "tensorParallelSize" if phase.tensor_parallel_size > hardware.gpus
            else "pipelineParallelSize"
        )
        problems.append(FieldError(
            f"raypd:{phase_name}.{field}",
            f"tensorParallelSize x pipelineParallelSize = {phase.gpus_per_replica} needs "
            f"{phase.gpus_per_replica} GPUs per replica but {phase.instance_type} has "
            f"{hardware.gpus}",
        ))
    elif model is not None:  # a replica that fits its node: does the model divide as vLLM needs?
        problems.extend(_model_parallel_problems(phase_name, phase, model))
    if phase.autoscaling is not None:
        problems.extend(autoscaling_problems(phase_name, phase.replicas, phase.autoscaling, hardware,
                                             phase.instance_type))
    if (mode == "disaggregated" and kv_transfer is not None and kv_transfer.backend == "LIBFABRIC"
            and not hardware.efa_supported):
        problems.append(FieldError(
            f"raypd:{phase_name}.instanceType",
            f"kvTransfer.backend LIBFABRIC needs EFA, and {phase.instance_type} has no EFA "
            "interface; pick an EFA-capable type (e.g. g6.8xlarge) or backend UCX",
        ))
    return problems


def _model_parallel_problems(phase_name: str, phase: PhaseSpec, model: ModelSpec) -> list[FieldError]:
    """TP and PP against the model's heads and layers (components.config.model_catalogue), with the
    tensor-parallel sizes the node takes for it; nothing for a model not in the table (warned)."""
    shape = model_catalogue.find_shape(model.source, model.id)
    if shape is None:
        return []
    problems: list[FieldError] = []
    tensor = model_catalogue.tensor_parallel_problem(shape, phase.tensor_parallel_size)
    if tensor is not None:
        most = phase.hardware.gpus // phase.pipeline_parallel_size
        sizes = model_catalogue.tensor_parallel_sizes(shape, most)
        named = ", ".join(str(size) for size in sizes[:-1]) + (" or " if len(sizes) > 1 else "") + str(sizes[-1])
        pipeline_parallel = phase.pipeline_parallel_size
        with_pp = f" with pipelineParallelSize {pipeline_parallel}" if pipeline_parallel > 1 else ""
        problems.append(FieldError(
            f"raypd:{phase_name}.tensorParallelSize",
            f"{tensor}; on {phase.instance_type} ({phase.hardware.gpus} GPUs{with_pp}) use {named}",
        ))
    pipeline = model_catalogue.pipeline_parallel_problem(shape, phase.pipeline_parallel_size)
    if pipeline is not None:
        problems.append(FieldError(f"raypd:{phase_name}.pipelineParallelSize", pipeline))
    return problems


def serving_warnings(mode: str, prefill: PhaseSpec, decode: PhaseSpec, kv_transfer: KvTransferSpec,
                     phases: dict[str, PhaseSpec], model: ModelSpec) -> list[str]:
    """Allowed but risky serving choices: disaggregated layouts NIXL handles badly, parallelism
    raypd cannot judge for the model, and phases the cost estimate cannot price."""
    notes: list[str] = []
    parallel = {name: phase for name, phase in phases.items() if phase.gpus_per_replica > 1}
    if parallel and model_catalogue.find_shape(model.source, model.id) is None:
        sizes = ", ".join(f"raypd:{name}: tensorParallelSize {phase.tensor_parallel_size}, pipelineParallelSize "
                          f"{phase.pipeline_parallel_size}" for name, phase in parallel.items())
        notes.append(
            f"raypd:model.source {model.source} is not in raypd's model table, so whether its attention "
            f"heads divide by tensorParallelSize and its layers by pipelineParallelSize is not checked "
            f"before deploy ({sizes}): vLLM refuses a size that does not when the engine starts; check "
            "num_attention_heads and num_key_value_heads in the model's config.json"
        )
    notes.extend(kv_transfer_warnings(mode, kv_transfer))
    if mode == "disaggregated":
        if prefill.tensor_parallel_size != decode.tensor_parallel_size:
            notes.append(
                "raypd:prefill.tensorParallelSize "
                f"({prefill.tensor_parallel_size}) differs from raypd:decode."
                f"tensorParallelSize ({decode.tensor_parallel_size}): NIXL KV transfer "
                "between different TP layouts is fragile in the field; verify transfers after deploy"
            )
        if kv_transfer.backend == "UCX":
            notes.append(
                "raypd:kvTransfer.backend is UCX: on EFA, UCX moves the KV cache at TCP speed "
                "(100-600x slower than LIBFABRIC) without reporting an error"
            )
    for phase_name, phase in phases.items():
        if phase.hardware.usd_per_hour is None:
            notes.append(
                f"raypd:{phase_name}.instanceType {phase.instance_type} has no public "
                "on-demand price on record; the cost estimate leaves it out"
            )
    return notes
