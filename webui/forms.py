"""The new-deployment form: Contract 1 as HTML fields, and the way back to a config dict.

Field names ARE the config keys (`raypd:prefill.tensorParallelSize`), so an error from
`DeploymentSpec.from_config` lands next to the field it names without a mapping table. Defaults come
from components.defaults and choices from the catalogue: the form cannot disagree with the spec.
Pure functions; the HF token field is never filled back in (it is a password field).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from components import catalogue, defaults
from components.errors import FieldError
from components.spec import HF_TOKEN_KEY, MODES, VLLM_DTYPES

NAME_FIELD = "name"
TOKEN_FIELD = HF_TOKEN_KEY


@dataclass(frozen=True)
class Field:
    key: str  # the config key (or "name")
    label: str
    kind: str = "text"  # text | int | float | bool | select | password | list (comma-separated)
    default: Any = ""
    choices: tuple[tuple[str, str], ...] = ()
    help: str = ""
    optional: bool = False
    section: str = "general"
    mode: Optional[str] = None  # only submitted in this mode
    wide: bool = False  # takes two grid columns (long choice labels)

    @property
    def dom_id(self) -> str:
        return "f-" + self.key.replace(":", "-").replace(".", "-")

    def default_text(self) -> str:
        if self.kind == "bool":
            return "on" if self.default else ""
        return "" if self.default is None else str(self.default)


def _gpu_choices() -> tuple[tuple[str, str], ...]:
    choices = []
    for item in catalogue.gpu_instance_types():
        efa = f", {item.max_efa_interfaces} EFA" if item.efa_supported else ", no EFA"
        price = f", ${item.usd_per_hour:.2f}/h" if item.usd_per_hour is not None else ""
        choices.append((item.name, f"{item.name} ({item.gpus}× {item.gpu_model}{efa}{price})"))
    return tuple(choices)


def _phase_fields(phase: str, replicas: int, mode: str) -> list[Field]:
    prefix = f"raypd:{phase}"
    section = phase
    return [
        Field(f"{prefix}.instanceType", "Instance type", "select", defaults.GPU_INSTANCE_TYPE,
              _gpu_choices(), "GPU type for this phase's nodes (GPUs, EFA, on-demand price)",
              section=section, mode=mode, wide=True),
        Field(f"{prefix}.replicas", "Replicas", "int", replicas, help="vLLM engines for this phase",
              section=section, mode=mode),
        Field(f"{prefix}.tensorParallelSize", "Tensor parallel size", "int", 1,
              help="GPUs per replica split by tensor parallelism", section=section, mode=mode),
        Field(f"{prefix}.pipelineParallelSize", "Pipeline parallel size", "int", 1,
              help="TP × PP must fit on one node", section=section, mode=mode),
    ]


def form_fields() -> list[Field]:
    cpu_types = tuple(
        (t.name, f"{t.name} ({t.vcpus} vCPU, {t.memory_gib} GiB)")
        for t in catalogue.CATALOGUE.values() if t.gpus == 0
    )
    fields = [
        Field(NAME_FIELD, "Deployment name", "text", "", help=(
            "the Pulumi stack name: lower-case letters, digits and '-', at most 40 characters"
        )),
        Field("aws:region", "AWS region", "text", defaults.REGION),
        Field("raypd:clusterName", "EKS cluster name", "text", "", optional=True,
              help="default raypd-<name>"),
        Field("raypd:kubernetesVersion", "Kubernetes version", "text", defaults.KUBERNETES_VERSION),
        Field("raypd:availabilityZone", "GPU availability zone", "text", "", optional=True,
              help="default: the first zone offering every GPU type (EFA cannot cross zones)"),
        Field("raypd:systemNodes.instanceType", "System node type", "select",
              defaults.SYSTEM_INSTANCE_TYPE, cpu_types, section="system"),
        Field("raypd:systemNodes.count", "System nodes", "int", defaults.SYSTEM_NODE_COUNT,
              section="system"),
        Field("raypd:mode", "Mode", "select", defaults.MODE, tuple((m, m) for m in MODES),
              help="disaggregated splits prefill and decode; colocated is the baseline",
              section="serving"),
        Field("raypd:model.id", "Served model name", "text", defaults.MODEL_ID, section="model"),
        Field("raypd:model.source", "Model source", "text", defaults.MODEL_SOURCE,
              help="Hugging Face repo id (org/name) or s3:// URI", section="model"),
        Field("raypd:model.maxModelLen", "Max model length", "int", defaults.MAX_MODEL_LEN,
              section="model"),
        Field("raypd:model.dtype", "dtype", "select", defaults.DTYPE,
              tuple((d, d) for d in VLLM_DTYPES), section="model"),
        Field("raypd:model.gpuMemoryUtilization", "GPU memory utilization", "float",
              defaults.GPU_MEMORY_UTILIZATION, help="0 < value ≤ 0.98", section="model"),
        Field("raypd:model.enforceEager", "Enforce eager (no CUDA graphs)", "bool",
              defaults.ENFORCE_EAGER, section="model"),
        *_phase_fields("prefill", defaults.PHASE_REPLICAS, "disaggregated"),
        *_phase_fields("decode", defaults.PHASE_REPLICAS, "disaggregated"),
        *_phase_fields("colocated", defaults.COLOCATED_REPLICAS, "colocated"),
        Field("raypd:kvTransfer.connector", "KV connector", "select", defaults.KV_CONNECTOR,
              (("NixlConnector", "NixlConnector"),), section="kv", mode="disaggregated"),
        Field("raypd:kvTransfer.backend", "KV transfer backend", "select", defaults.KV_BACKEND,
              (("LIBFABRIC", "LIBFABRIC (EFA)"), ("UCX", "UCX (TCP speed on EFA)")),
              section="kv", mode="disaggregated"),
        Field("raypd:image", "Container image", "text", "", optional=True,
              help="default: the Ray LLM Deep Learning Container of the region", section="cluster"),
        Field("raypd:rayVersion", "Ray version", "text", defaults.RAY_VERSION, section="cluster"),
        Field("raypd:kuberayVersion", "KubeRay version", "text", defaults.KUBERAY_VERSION,
              section="cluster"),
        Field("raypd:namespace", "Namespace", "text", defaults.NAMESPACE, section="cluster"),
        Field("raypd:serviceName", "RayService name", "text", defaults.SERVICE_NAME, section="cluster"),
        Field("raypd:adminRoleArns", "Admin IAM roles", "list", "", optional=True,
              help="comma-separated IAM role ARNs that get cluster-admin (EKS access entries): "
                   "the web app's role, CI", section="cluster", wide=True),
        Field(TOKEN_FIELD, "Hugging Face token", "password", "", optional=True,
              help="for gated models; stored only as an encrypted Pulumi secret, never shown again",
              section="cluster"),
    ]
    return fields


FIELDS: tuple[Field, ...] = tuple(form_fields())
FIELDS_BY_KEY = {field.key: field for field in FIELDS}
# A section belongs to a mode when its fields do (the page hides the other mode's sections).
SECTION_MODES = {field.section: field.mode for field in FIELDS if field.mode is not None}
SECTIONS = (
    ("general", "Deployment"),
    ("system", "System nodes"),
    ("serving", "Serving mode"),
    ("model", "Model"),
    ("prefill", "Prefill"),
    ("decode", "Decode"),
    ("colocated", "Colocated baseline"),
    ("kv", "KV transfer"),
    ("cluster", "Cluster and image"),
)


def default_values() -> dict[str, str]:
    return {field.key: field.default_text() for field in FIELDS}


def values_from_config(name: str, config: Mapping[str, Any]) -> dict[str, str]:
    """A deployment's stored Contract 1 config as the form shows it ("Change settings")."""
    values = default_values()
    values[NAME_FIELD] = name
    for field in FIELDS:
        if field.key == NAME_FIELD or field.kind == "password":
            continue
        top, _, sub = field.key.partition(".")
        value = config.get(top)
        if sub:
            value = value.get(sub) if isinstance(value, Mapping) else None
        if value is None:
            continue
        if field.kind == "bool":
            values[field.key] = "on" if value else ""
        elif field.kind == "list":
            values[field.key] = ", ".join(str(item) for item in value) if isinstance(value, list) else str(value)
        else:
            values[field.key] = str(value)
    return values


def form_to_patch(form: Mapping[str, str]) -> tuple[dict[str, Any], list[FieldError]]:
    """The change form -> a PATCH body's config: every shown key; an optional field left empty
    resets its key (None); an empty token field keeps the token the stack has."""
    _, config, errors = form_to_config(form)
    for field in FIELDS:
        if field.optional and field.kind != "password" and "." not in field.key and field.key not in config:
            config[field.key] = None
    return config, errors


def form_values(form: Mapping[str, str]) -> dict[str, str]:
    """The submitted values to show again (every field except the token)."""
    values = {}
    for field in FIELDS:
        if field.kind == "password":
            continue
        if field.kind == "bool":
            values[field.key] = "on" if form.get(field.key) else ""
        else:
            values[field.key] = str(form.get(field.key, ""))
    return values


def _convert(field: Field, raw: str) -> Any:
    if field.kind == "list":
        return [item for item in re.split(r"[\s,]+", raw.strip()) if item]
    if field.kind == "int":
        try:
            return int(raw.strip())
        except ValueError:
            raise ValueError("must be a whole number") from None
    if field.kind == "float":
        try:
            return float(raw.strip())
        except ValueError:
            raise ValueError("must be a number such as 0.9") from None
    return raw.strip() if field.kind != "password" else raw


def form_to_config(form: Mapping[str, str]) -> tuple[str, dict[str, Any], list[FieldError]]:
    """Form values -> (name, Contract 1 config, type errors). Values are checked by the spec later."""
    mode = (form.get("raypd:mode") or defaults.MODE).strip()
    config: dict[str, Any] = {}
    errors: list[FieldError] = []
    name = str(form.get(NAME_FIELD, "")).strip()
    for field in FIELDS:
        if field.key == NAME_FIELD:
            continue
        if field.mode is not None and field.mode != mode:
            continue
        if field.kind == "bool":
            value: Any = bool(form.get(field.key))
        else:
            raw = str(form.get(field.key, ""))
            if not raw.strip() and (field.optional or field.kind == "password"):
                continue
            if not raw.strip():
                errors.append(FieldError(field.key, "is required"))
                continue
            try:
                value = _convert(field, raw)
            except ValueError as exc:
                errors.append(FieldError(field.key, str(exc)))
                continue
        top, _, sub = field.key.partition(".")
        if sub:
            config.setdefault(top, {})[sub] = value
        else:
            config[top] = value
    return name, config, errors


def split_errors(errors: list[FieldError]) -> tuple[dict[str, str], list[FieldError]]:
    """Errors that belong next to a field, and the rest (shown above the form)."""
    by_field: dict[str, str] = {}
    general: list[FieldError] = []
    for error in errors:
        key = re.sub(r"\[\d+\]$", "", error.field)  # raypd:adminRoleArns[1] -> its field
        if key in FIELDS_BY_KEY:
            message = error.message if key == error.field else f"{error.field}: {error.message}"
            by_field.setdefault(key, message)
        else:
            general.append(error)
    return by_field, general
