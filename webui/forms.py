"""The new-deployment form: Contract 1 as HTML fields, and the way back to a config dict.

Field names ARE the config keys (`raypd:prefill.tensorParallelSize`), so an error from
`DeploymentSpec.from_config` lands next to the field it names without a mapping table. The fields
are derived from the spec itself (its keys, types, defaults and choices; `PRESENTATION` only adds the
words and sections) and instance-type choices come from the catalogue: the form cannot disagree with
the spec.
Pure functions; the HF token field is never filled back in (it is a password field).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Optional, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr
from pydantic.alias_generators import to_camel

from components.config import catalogue, defaults
from components.config.errors import FieldError
from components.config.spec import HF_TOKEN_KEY, NAMESPACE, REGION_KEY, VLLM_DTYPES, DeploymentSpec

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
        price = (f", ${item.usd_per_hour:.2f}/h in {catalogue.PRICE_REGION}" if item.usd_per_hour is not None
                 else "")
        choices.append((item.name, f"{item.name} ({item.gpus}× {item.gpu_model}{efa}{price})"))
    return tuple(choices)


def _cpu_choices() -> tuple[tuple[str, str], ...]:
    return tuple((t.name, f"{t.name} ({t.vcpus} vCPU, {t.memory_gib} GiB)")
                 for t in catalogue.CATALOGUE.values() if t.gpus == 0)


# How each Contract 1 key looks on the page: the words, the section, choices the type alone does not
# give. Everything else (which keys exist, their types, defaults and Literal choices, which are
# optional) is read from DeploymentSpec, so the form cannot drift from the spec: a key the spec
# gains without an entry here fails at import.
_PHASE_WORDS: dict[str, dict[str, Any]] = {
    "instanceType": dict(label="Instance type", choices=_gpu_choices, wide=True,
                         help="GPU type for this phase's nodes (GPUs, EFA, on-demand price)"),
    "replicas": dict(label="Replicas", help="vLLM engines for this phase"),
    "tensorParallelSize": dict(label="Tensor parallel size", help="GPUs per replica split by tensor parallelism"),
    "pipelineParallelSize": dict(label="Pipeline parallel size", help="TP × PP must fit on one node"),
}
PRESENTATION: dict[str, dict[str, Any]] = {
    "aws:region": dict(label="AWS region"),
    "raypd:clusterName": dict(label="EKS cluster name", help="default raypd-<name>"),
    "raypd:kubernetesVersion": dict(label="Kubernetes version"),
    "raypd:availabilityZone": dict(
        label="GPU availability zone",
        help="default: the first zone offering every GPU type (EFA cannot cross zones)"),
    "raypd:systemNodes.instanceType": dict(label="System node type", section="system", choices=_cpu_choices),
    "raypd:systemNodes.count": dict(label="System nodes", section="system"),
    "raypd:mode": dict(label="Mode", section="serving",
                       help="disaggregated splits prefill and decode; colocated is the baseline"),
    "raypd:model.id": dict(label="Served model name", section="model"),
    "raypd:model.source": dict(label="Model source", section="model",
                               help="Hugging Face repo id (org/name) or s3:// URI"),
    "raypd:model.maxModelLen": dict(label="Max model length", section="model"),
    "raypd:model.dtype": dict(label="dtype", section="model",
                              choices=lambda: tuple((d, d) for d in VLLM_DTYPES)),
    "raypd:model.gpuMemoryUtilization": dict(label="GPU memory utilization", section="model",
                                             help="0 < value ≤ 0.98"),
    "raypd:model.enforceEager": dict(label="Enforce eager (no CUDA graphs)", section="model"),
    **{f"raypd:{phase}.{key}": dict(words, section=phase)
       for phase in ("prefill", "decode", "colocated") for key, words in _PHASE_WORDS.items()},
    "raypd:upgradeStrategy": dict(label="Rollout of disruptive changes", section="serving", wide=True,
                                  choices=lambda: (
        ("inPlace", "in place: about one model load of downtime, no extra nodes"),
        ("newCluster", "zero downtime: a second Ray cluster on extra GPU nodes during the switch"))),
    "raypd:kvTransfer.connector": dict(label="KV connector", section="kv"),
    "raypd:kvTransfer.backend": dict(label="KV transfer backend", section="kv", choices=lambda: (
        ("LIBFABRIC", "LIBFABRIC (EFA)"), ("UCX", "UCX (TCP speed on EFA)"))),
    # issue 31 (components.config.serving_spec.KvTransferSpec, docs/resilience.md).
    "raypd:kvTransfer.loadFailurePolicy": dict(label="On a failed KV load", section="kv", wide=True, choices=lambda: (
        ("fail", "fail: the request gets an error (seen by clients and alerts)"),
        ("recompute", "recompute: decode redoes the prefill, answers 200 (hides the failure)"))),
    "raypd:kvTransfer.leaseSeconds": dict(label="KV lease (seconds)", section="kv",
                                          help="how long prefill keeps a request's KV blocks for decode; "
                                               "6-3600, default 300"),
    "raypd:image": dict(label="Container image", section="cluster",
                        help="default: the Ray LLM Deep Learning Container of the region"),
    "raypd:rayVersion": dict(label="Ray version", section="cluster"),
    "raypd:kuberayVersion": dict(label="KubeRay version", section="cluster"),
    "raypd:namespace": dict(label="Namespace", section="cluster"),
    "raypd:serviceName": dict(label="RayService name", section="cluster"),
    "raypd:hfToken": dict(label="Hugging Face token", section="cluster",
                          help="for gated models; stored only as an encrypted Pulumi secret, never shown again"),
    "raypd:apiAccessCidrs": dict(label="Kubernetes API access (CIDRs)", section="cluster", wide=True,
                                 help="comma-separated IPv4 CIDRs that may reach the cluster's public "
                                      "API endpoint: where Deploy, the web app and kubectl run; empty: "
                                      "every address (0.0.0.0/0), with a warning"),
    # raypd:endpoint (issue 17; components.config.endpoint_spec, docs/endpoint.md).
    "raypd:endpoint.scope": dict(label="Endpoint reachable from", section="endpoint", choices=lambda: (
        ("vpc", "vpc: an internal load balancer, the VPC (and peered networks) only"),
        ("internet", "internet: an internet-facing load balancer, TLS (needs a certificate)"),
        ("cluster", "cluster: pods in the cluster only, no load balancer"))),
    "raypd:endpoint.auth": dict(label="Endpoint authentication", section="endpoint", choices=lambda: (
        ("apiKey", "API keys (Authorization: Bearer <key>)"),
        ("none", "none (cluster or vpc only; anyone who can reach it may use it)"))),
    "raypd:endpoint.certificateArn": dict(label="TLS certificate (ACM ARN)", section="endpoint", wide=True,
                                          help="required for internet; optional for vpc (HTTPS)"),
    "raypd:endpoint.allowedCidrs": dict(label="Endpoint allowed CIDRs", section="endpoint", wide=True,
                                        help="comma-separated IPv4 CIDRs that may connect; empty: the "
                                             "VPC's range (vpc) or every address (internet)"),
    "raypd:endpoint.host": dict(label="Endpoint host name", section="endpoint",
                                help="optional: the DNS name you point at the load balancer"),
    "raypd:adminRoleArns": dict(label="Admin IAM roles", section="cluster", wide=True,
                                help="comma-separated IAM role ARNs that get cluster-admin (EKS access "
                                     "entries): CI's, teammates'; not the role that deploys (it is admin "
                                     "already, and listing it fails the first Deploy)"),
    # raypd:observability (issue 18; components.config.observability_spec, docs/observability.md).
    "raypd:observability.enabled": dict(label="Metrics stack", section="observability",
                                        help="Prometheus, Grafana, dcgm-exporter and the PodMonitors"),
    "raypd:observability.prometheusStorageSize": dict(label="Prometheus volume", section="observability",
                                                      help="e.g. 50Gi"),
    "raypd:observability.prometheusRetention": dict(label="Prometheus retention", section="observability",
                                                    help="e.g. 15d"),
    "raypd:observability.grafanaStorageSize": dict(label="Grafana volume", section="observability",
                                                   help="e.g. 10Gi"),
    # raypd:faultTolerance (issue 31; components.config.fault_tolerance_spec, docs/resilience.md).
    "raypd:faultTolerance.gcs": dict(label="Head fault tolerance (GCS)", section="faultTolerance", wide=True,
                                     choices=lambda: (
        ("", "default: ElastiCache when disaggregated, off when colocated"),
        ("elasticache", "elasticache: a managed Valkey in the VPC (TLS, auth token)"),
        ("external", "external: your Redis (address and password Secret below)"),
        ("off", "off: a head restart restarts every engine"))),
    "raypd:faultTolerance.cacheNodeType": dict(label="ElastiCache node type", section="faultTolerance",
                                               help="gcs elasticache only; e.g. cache.t4g.small"),
    "raypd:faultTolerance.redisAddress": dict(label="Redis address", section="faultTolerance", wide=True,
                                              help="gcs external only: rediss://host:port"),
    "raypd:faultTolerance.redisPasswordSecret": dict(
        label="Redis password Secret", section="faultTolerance",
        help="gcs external only: <Secret name>/<key> in the deployment's namespace"),
    "raypd:inClusterClients": dict(label="In-cluster client namespaces", section="cluster", wide=True,
                                   help="comma-separated namespaces whose pods may call the Serve port "
                                        "directly, without the gateway or an API key; empty: none"),
}
# Keys the form leaves to the stack file and the JSON API for now: a phase's autoscaling block (issue
# 30 §1; its fields on this form are issue 30 §3). A "Change settings" PATCH sends each phase as an
# object, which merges into the stored one, so a block set elsewhere is kept.
NOT_ON_THE_FORM = frozenset(f"raypd:{phase}.autoscaling" for phase in ("prefill", "decode", "colocated"))
# Sections that belong to one mode (the page hides the other mode's sections).
_MODE_OF_SECTION = {"prefill": "disaggregated", "decode": "disaggregated", "kv": "disaggregated",
                    "colocated": "colocated"}


def _kind(annotation: Any) -> tuple[str, bool, tuple[tuple[str, str], ...]]:
    """(form kind, optional, Literal choices) of a spec field's type."""
    optional = False
    if get_origin(annotation) is Union:
        members = [a for a in get_args(annotation) if a is not type(None)]
        optional, annotation = len(members) < len(get_args(annotation)), members[0]
    if get_origin(annotation) is Literal:
        return "select", optional, tuple((str(v), str(v)) for v in get_args(annotation))
    if get_origin(annotation) is tuple:
        return "list", True, ()
    kinds = {bool: "bool", int: "int", float: "float", SecretStr: "password"}
    return kinds.get(annotation, "text"), optional or annotation is SecretStr, ()


def _spec_keys() -> list[tuple[str, Any, Any]]:
    """(Contract 1 key, field type, reference default) for every key, in the spec's order."""
    reference = DeploymentSpec.from_config({}, "dev")
    keys: list[tuple[str, Any, Any]] = []
    for name, info in DeploymentSpec.model_fields.items():
        if name == "stack":
            continue
        key = REGION_KEY if name == "region" else f"{NAMESPACE}:{to_camel(name)}"
        value = getattr(reference, name)
        nested = info.annotation if isinstance(info.annotation, type) else None
        if nested is not None and issubclass(nested, BaseModel):
            for sub, sub_info in nested.model_fields.items():
                keys.append((f"{key}.{to_camel(sub)}", sub_info.annotation, getattr(value, sub)))
        else:
            keys.append((key, info.annotation, value))
    return keys


def form_fields() -> list[Field]:
    fields = [Field(NAME_FIELD, "Deployment name", "text", "", help=(
        "the Pulumi stack name: lower-case letters, digits and '-', at most 40 characters"))]
    for key, annotation, default in _spec_keys():
        if key in NOT_ON_THE_FORM:
            continue
        words = dict(PRESENTATION[key])  # KeyError: a new spec key needs its words here
        kind, optional, choices = _kind(annotation)
        made = words.pop("choices", None)
        if made is not None:
            kind, choices = "select", made()
        section = words.pop("section", "general")
        if isinstance(default, (tuple, list)) or default is None:
            default = ""
        fields.append(Field(key, words.pop("label"), kind, default, choices, words.pop("help", ""),
                            optional=optional or (kind == "text" and default == ""), section=section,
                            mode=_MODE_OF_SECTION.get(section), **words))
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
    ("endpoint", "Endpoint"),
    ("observability", "Observability"),
    ("faultTolerance", "Head fault tolerance"),
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
    """The change form -> a PATCH body's config, applied as the API's PATCH is (a JSON Merge Patch,
    webui.merge_patch): every shown key; an optional field left empty resets its key (None), a
    nested one too, since a merge keeps a sub-key the patch leaves out; an empty token field keeps
    the token the stack has. Keys of the other mode's sections are left out, so they keep their values."""
    _, config, errors = form_to_config(form)
    mode = _form_mode(form)
    for field in FIELDS:
        if not field.optional or field.kind == "password" or field.key == NAME_FIELD:
            continue
        if field.mode is not None and field.mode != mode:
            continue
        top, _, sub = field.key.partition(".")
        if not sub:
            config.setdefault(top, None)
        elif isinstance(config.setdefault(top, {}), dict):
            config[top].setdefault(sub, None)
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


# What a number field takes: ASCII digits only. Python's int() and float() also take "1_0", full-width
# and Arabic-Indic digits, "nan" and "inf"; a form shows one thing and means another with those.
_FORM_INT = re.compile(r"[+-]?[0-9]{1,18}")
_FORM_FLOAT = re.compile(r"[+-]?(?:[0-9]{1,18}(?:\.[0-9]{0,18})?|\.[0-9]{1,18})(?:[eE][+-]?[0-9]{1,3})?")


def parse_form_int(text: str) -> int:
    """A whole number as typed in a form (ASCII digits, at most 18); ValueError otherwise."""
    if not _FORM_INT.fullmatch(text.strip()):
        raise ValueError("not a whole number")
    return int(text.strip())


def parse_form_float(text: str) -> float:
    """A decimal number as typed in a form (ASCII digits, optional exponent); ValueError otherwise."""
    if not _FORM_FLOAT.fullmatch(text.strip()):
        raise ValueError("not a number")
    return float(text.strip())


def _convert(field: Field, raw: str) -> Any:
    if field.kind == "list":
        return [item for item in re.split(r"[\s,]+", raw.strip()) if item]
    if field.kind == "int":
        try:
            return parse_form_int(raw)
        except ValueError:
            raise ValueError("must be a whole number (digits 0-9)") from None
    if field.kind == "float":
        try:
            return parse_form_float(raw)
        except ValueError:
            raise ValueError("must be a number such as 0.9") from None
    return raw.strip() if field.kind != "password" else raw


def _form_mode(form: Mapping[str, str]) -> str:
    """The serving mode the form was submitted in (its sections are the ones shown)."""
    return (form.get("raypd:mode") or defaults.MODE).strip()


def form_to_config(form: Mapping[str, str]) -> tuple[str, dict[str, Any], list[FieldError]]:
    """Form values -> (name, Contract 1 config, type errors). Values are checked by the spec later."""
    mode = _form_mode(form)
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


def split_errors(errors: list[FieldError], fields: Optional[Mapping[str, Field]] = None,
                 ) -> tuple[dict[str, str], list[FieldError]]:
    """Errors that belong next to a field of `fields` (default: the deployment form's), and the rest
    (shown above the form)."""
    known = FIELDS_BY_KEY if fields is None else fields
    by_field: dict[str, str] = {}
    general: list[FieldError] = []
    for error in errors:
        key = re.sub(r"(\[\d+\]|\.\d+)$", "", error.field)  # raypd:adminRoleArns[1], rates.0 -> the field
        if key in known:
            message = error.message if key == error.field else f"{error.field}: {error.message}"
            by_field.setdefault(key, message)
        else:
            general.append(error)
    return by_field, general
