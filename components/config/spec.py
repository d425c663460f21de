"""DeploymentSpec: the validated, typed form of a raypd stack configuration (Contract 1).

Stack config (Pulumi config, a stack YAML file, or the web API's JSON) enters raypd only through
``DeploymentSpec.from_config``. After that, every renderer and component trusts the spec: nothing
downstream re-validates or reads config. Error fields use the user-facing key
(``raypd:prefill.tensorParallelSize``) so people can find what to fix.

The spec is the top of the config layer's modules: its blocks live in serving_spec, endpoint_spec
and observability_spec, the rules they share in rules, and the reading of config keys in
reading. The names other code has always imported from here (the keys, the stack-name rule, the
EKS version rules, PhaseSpec...) are still importable from here (`__all__`).
"""

from __future__ import annotations

import json
import re
from typing import Any, Collection, Literal, Mapping, Optional

from pydantic import Field, SecretStr, ValidationInfo, field_validator, model_validator
from pydantic.alias_generators import to_camel

from components.config import defaults
from components.config.endpoint_spec import EndpointSpec, endpoint_problems, endpoint_warnings
from components.config.errors import FieldError, SpecError
from components.config.fault_tolerance_spec import (
    FaultToleranceSpec,
    fault_tolerance_problems,
    fault_tolerance_warnings,
)
from components.config.image import IMAGE_KEY, reference_problem, unpinned_warning
from components.config.observability_spec import ObservabilitySpec
from components.config.reading import (
    NAMESPACE,
    REGION_KEY,
    config_key,
    read_fields,
    top_level_key,
    validate_each_field,
)
from components.config.regions import region_problem
from components.config.rules import (
    MAX_STACK_NAME,
    SpecModel,
    ascii_pattern,
    cidr_list_problems,
    cidr_problem,
    dns_label,
    eks_cluster_name_problem,
    eks_support_type,
    eks_version_problem,
    kubernetes_version_problem,
    role_arn_problem,
    utc_today,
    validate_stack_name,
)
from components.config.serve_clients import KEY as IN_CLUSTER_CLIENTS_KEY
from components.config.serve_clients import client_namespaces_problem
from components.config.serving_spec import (
    VLLM_DTYPES,
    KvTransferSpec,
    ModelSpec,
    PhaseSpec,
    SystemNodes,
    colocated_default,
    phase_problems,
    serving_warnings,
)

__all__ = [
    "ADMIN_ROLE_ARNS_KEY", "API_ACCESS_CIDRS_KEY", "HF_TOKEN_KEY", "IMAGE_KEY", "MAX_HF_TOKEN",
    "MAX_STACK_NAME", "NAMESPACE", "REGION_KEY", "SECRET_PLACEHOLDER", "VLLM_DTYPES",
    "DeploymentSpec", "KvTransferSpec", "ModelSpec", "PhaseSpec", "SystemNodes",
    "cidr_problem", "config_key", "eks_support_type", "eks_version_problem", "validate_stack_name",
]

# The one Contract 1 key that is a secret, and how raypd shows a secret it will not print.
HF_TOKEN_KEY = f"{NAMESPACE}:hfToken"
SECRET_PLACEHOLDER = "[secret]"
# major.minor.patch in ASCII digits without leading zeros ("2.58.0"; not "٢.٥٨.٠", not "2.058.0").
_SEMVER = ascii_pattern(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")
# The HF token is sent as `Authorization: Bearer <token>`: RFC 6750's b64token grammar (Hub tokens
# are "hf_" and 34 letters and digits). Its errors never quote it: it is a secret.
_BEARER_TOKEN = ascii_pattern(r"[A-Za-z0-9._~+/-]+=*")
MAX_HF_TOKEN = 256
ADMIN_ROLE_ARNS_KEY = f"{NAMESPACE}:adminRoleArns"
API_ACCESS_CIDRS_KEY = f"{NAMESPACE}:apiAccessCidrs"

class DeploymentSpec(SpecModel):
    stack: str = Field("dev", exclude=True)
    region: str = defaults.REGION
    cluster_name: Optional[str] = None
    kubernetes_version: str = defaults.KUBERNETES_VERSION
    availability_zone: Optional[str] = None
    system_nodes: SystemNodes = SystemNodes()
    mode: Literal["disaggregated", "colocated"] = defaults.MODE
    model: ModelSpec = ModelSpec()
    prefill: PhaseSpec = PhaseSpec()
    decode: PhaseSpec = PhaseSpec()
    colocated: PhaseSpec = Field(default_factory=colocated_default)
    kv_transfer: KvTransferSpec = KvTransferSpec()
    image: str = ""
    ray_version: str = defaults.RAY_VERSION
    kuberay_version: str = defaults.KUBERAY_VERSION
    namespace: str = defaults.NAMESPACE
    service_name: str = defaults.SERVICE_NAME
    hf_token: Optional[SecretStr] = None
    # IAM roles given cluster-admin through EKS access entries (the web app's, CI's...).
    admin_role_arns: tuple[str, ...] = ()
    # Who may reach the cluster's public Kubernetes API endpoint (EKS publicAccessCidrs).
    api_access_cidrs: tuple[str, ...] = defaults.API_ACCESS_CIDRS
    upgrade_strategy: Literal["inPlace", "newCluster"] = defaults.UPGRADE_STRATEGY
    # Who may reach the OpenAI endpoint and how (components.config.endpoint_spec, issue 17).
    endpoint: EndpointSpec = EndpointSpec()
    # Namespaces whose pods may call the Serve port directly (components.config.serve_clients).
    in_cluster_clients: tuple[str, ...] = ()
    # The metrics stack, PodMonitors and dcgm-exporter (components.config.observability_spec, issue 18).
    observability: ObservabilitySpec = ObservabilitySpec()
    # The Ray head's GCS fault tolerance (components.config.fault_tolerance_spec, issue 31).
    fault_tolerance: FaultToleranceSpec = FaultToleranceSpec()

    @field_validator("region")
    @classmethod
    def _real_region(cls, value: str) -> str:
        # Offline and without credentials: botocore's own partition data (components.config.regions).
        problem = region_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("cluster_name")
    @classmethod
    def _cluster_name(cls, value: Optional[str]) -> Optional[str]:
        problem = None if value is None else eks_cluster_name_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("kubernetes_version")
    @classmethod
    def _k8s_version(cls, value: str) -> str:
        problem = kubernetes_version_problem(value, utc_today())
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("ray_version", "kuberay_version")
    @classmethod
    def _semver(cls, value: str) -> str:
        if not _SEMVER.fullmatch(value):
            raise ValueError(f"'{value}' is not a version such as 2.58.0")
        return value

    @field_validator("image")
    @classmethod
    def _image_ref(cls, value: str) -> str:
        problem = reference_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("hf_token")
    @classmethod
    def _hf_token(cls, value: Optional[SecretStr]) -> Optional[SecretStr]:
        if value is None:
            return None
        token = value.get_secret_value()
        if token == SECRET_PLACEHOLDER:
            return value  # a `{secure: ...}` stack-file value the offline tools cannot decrypt
        if not token.strip():
            raise ValueError("is empty or only whitespace; give the token, or leave the key out")
        if len(token) > MAX_HF_TOKEN:
            raise ValueError(f"is longer than {MAX_HF_TOKEN} characters, which no Hugging Face token is "
                             "(the value is not shown: it is a secret)")
        if not _BEARER_TOKEN.fullmatch(token):
            raise ValueError("is not a Hugging Face token: letters, digits and - . _ ~ + / only (then = "
                             "padding), no spaces (the value is not shown: it is a secret)")
        return value

    @field_validator("api_access_cidrs", mode="before")
    @classmethod
    def _cidr_list(cls, value: Any) -> Any:
        """The list itself: its type, size and that every entry is text (each entry's CIDR is
        checked, by its index, in _cross_field_checks)."""
        if not isinstance(value, (list, tuple)):
            kind = "text" if isinstance(value, str) else type(value).__name__
            raise ValueError(f"must be a list of IPv4 CIDRs such as [\"203.0.113.0/24\"], not {kind}")
        if not value:
            raise ValueError(
                "is empty; list at least one IPv4 CIDR, or leave the key out for EKS's default "
                f"{defaults.OPEN_CIDR} (an empty list would leave every address allowed)")
        if len(value) > defaults.MAX_API_ACCESS_CIDRS:
            raise ValueError(
                f"has {len(value)} entries; EKS takes at most {defaults.MAX_API_ACCESS_CIDRS} public "
                "access CIDRs per cluster (a quota that cannot be raised): merge neighbouring ranges")
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise ValueError(f"[{index}] is {type(item).__name__}, not text; write each CIDR "
                                 "as a string such as \"203.0.113.0/24\"")
        # A tuple: after a before-validator, strict (JSON API) mode takes no list for a tuple.
        return tuple(value)

    @field_validator("in_cluster_clients", mode="before")
    @classmethod
    def _client_namespaces(cls, value: Any) -> Any:
        namespaces, problems = client_namespaces_problem(value)
        if problems:
            raise SpecError([FieldError(f"{IN_CLUSTER_CLIENTS_KEY}{where}", why)
                             for where, why in problems])
        return namespaces

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        return dns_label(value)

    @field_validator("service_name")
    @classmethod
    def _service_name(cls, value: str) -> str:
        return dns_label(value, defaults.MAX_RAYSERVICE_NAME)

    @model_validator(mode="after")
    def _cross_field_checks(self, info: ValidationInfo) -> "DeploymentSpec":
        if info.context and info.context.get(_CROSS_CHECKS_LATER):
            return self  # from_config runs them, with the field problems
        problems = self.cross_field_problems()
        if problems:
            # SpecError is not a ValueError, so pydantic lets it through with its own field names.
            raise SpecError(problems)
        return self

    def cross_field_problems(self, failed: Collection[str] = ()) -> list[FieldError]:
        """What is wrong between keys (empty when nothing). `failed`: the keys (camelCase) whose
        own values were refused, so their defaults stand in here: a check that reads one of them
        is not run (a region typo says nothing about the zone)."""
        def judged(*keys: str) -> bool:
            return not set(keys) & set(failed)

        problems: list[FieldError] = []
        if judged("image", "region") and not self.image and defaults.dlc_image(self.region) is None:
            problems.append(FieldError(
                IMAGE_KEY,
                f"{REGION_KEY} {self.region} has no AWS Deep Learning Containers registry, so the "
                f"default Ray LLM image cannot be pulled there; set {IMAGE_KEY} to an image the "
                f"nodes can pull (e.g. a copy of {defaults.DLC_PUBLIC_IMAGE} in your own ECR)",
            ))
        if judged("adminRoleArns"):
            problems.extend(FieldError(f"{ADMIN_ROLE_ARNS_KEY}[{index}]", problem)
                            for index, arn in enumerate(self.admin_role_arns)
                            if (problem := role_arn_problem(arn)) is not None)
        if judged("apiAccessCidrs"):
            problems.extend(FieldError(f"{API_ACCESS_CIDRS_KEY}[{index}]", problem)
                            for index, problem in cidr_list_problems(self.api_access_cidrs))
        if judged("endpoint", "region"):
            problems.extend(endpoint_problems(self.endpoint, self.region))
        if judged("availabilityZone", "region") and self.availability_zone is not None and not re.fullmatch(
            re.escape(self.region) + r"[a-z]", self.availability_zone
        ):
            problems.append(FieldError(
                "raypd:availabilityZone",
                f"'{self.availability_zone}' is not an availability zone of region {self.region} "
                f"(expected {self.region}a, {self.region}b, ...)",
            ))
        if judged("mode"):
            kv_transfer = self.kv_transfer if judged("kvTransfer") else None
            model = self.model if judged("model") else None
            for phase_name, phase in self.phases.items():
                if judged(phase_name):
                    problems.extend(phase_problems(phase_name, phase, self.mode, kv_transfer, model))
        if judged("faultTolerance", "mode"):
            problems.extend(fault_tolerance_problems(self.fault_tolerance, self.mode))
        return problems

    # ---- derived facts (no state of their own) ----

    @property
    def effective_cluster_name(self) -> str:
        return self.cluster_name or f"raypd-{self.stack}"

    @property
    def image_uri(self) -> str:
        image = self.image or defaults.dlc_image(self.region)
        assert image is not None  # a region without a DLC registry needs raypd:image (validated)
        return image

    @property
    def phases(self) -> dict[str, PhaseSpec]:
        """The phases this mode actually runs, in a stable order."""
        if self.mode == "colocated":
            return {"colocated": self.colocated}
        return {"prefill": self.prefill, "decode": self.decode}

    @property
    def gcs_store(self) -> str:
        """Where the Ray head's GCS keeps its tables: elasticache | external | off."""
        return self.fault_tolerance.effective_gcs(self.mode)

    @property
    def support_type(self) -> str:
        """The cluster's EKS upgrade policy (see eks_support_type), as of today."""
        return eks_support_type(self.kubernetes_version, utc_today())

    @property
    def warnings(self) -> list[str]:
        """Allowed but risky choices, shown in the plan and the web UI."""
        notes: list[str] = []
        if defaults.OPEN_CIDR in self.api_access_cidrs:
            notes.append(
                f"{API_ACCESS_CIDRS_KEY} allows {defaults.OPEN_CIDR}: the cluster's Kubernetes API "
                "endpoint answers every address on the internet (it still needs AWS credentials); "
                f"narrow it to the ranges that run pulumi up, the web app and kubectl, e.g. "
                f"{API_ACCESS_CIDRS_KEY}: [\"203.0.113.0/24\"] (the nodes use the private endpoint)"
            )
        notes.extend(endpoint_warnings(self.endpoint))
        unpinned = unpinned_warning(self.image_uri)
        if unpinned is not None:
            notes.append(unpinned)
        if self.support_type == defaults.SUPPORT_EXTENDED:
            standard_end = defaults.EKS_KUBERNETES_VERSIONS[self.kubernetes_version][0]
            notes.append(
                f"raypd:kubernetesVersion {self.kubernetes_version} left EKS standard support on "
                f"{standard_end}: the cluster runs in extended support, billed at the extended rate "
                "per cluster hour (EKS cannot take a cluster out of it); raise the version one minor "
                "at a time to one in standard support"
            )
        notes.extend(serving_warnings(self.mode, self.prefill, self.decode, self.kv_transfer, self.phases,
                                      self.model))
        notes.extend(fault_tolerance_warnings(self.fault_tolerance, self.mode))
        return notes

    def public_config(self) -> dict[str, Any]:
        """The spec as Contract 1 config keys, with the HF token reduced to whether it is set."""
        body = self.model_dump(by_alias=True, exclude={"hf_token", "region", "stack"})
        if not self.admin_role_arns:
            body.pop("adminRoleArns", None)  # the default: no key, as before the key existed
        else:
            body["adminRoleArns"] = list(self.admin_role_arns)
        if self.upgrade_strategy == defaults.UPGRADE_STRATEGY:
            body.pop("upgradeStrategy", None)  # the default: no key, as before the key existed
        if not self.in_cluster_clients:
            body.pop("inClusterClients", None)  # the default: no key, as before the key existed
        else:
            body["inClusterClients"] = list(self.in_cluster_clients)
        if self.api_access_cidrs == defaults.API_ACCESS_CIDRS:
            body.pop("apiAccessCidrs", None)  # the default: no key, as before the key existed
        else:
            body["apiAccessCidrs"] = list(self.api_access_cidrs)
        if self.endpoint == EndpointSpec():
            body.pop("endpoint", None)  # the default: no key, as before the key existed
        else:
            body["endpoint"] = self.endpoint.public()
        if self.observability == ObservabilitySpec():
            body.pop("observability", None)  # the default: no key, as before the key existed
        body["faultTolerance"] = self.fault_tolerance.public() or None  # the default: no key
        config: dict[str, Any] = {REGION_KEY: self.region}
        for key, value in body.items():
            if value is not None:
                config[f"{NAMESPACE}:{key}"] = value
        if self.hf_token is not None:
            config[HF_TOKEN_KEY] = SECRET_PLACEHOLDER
        return config

    @classmethod
    def from_config(
        cls, config: Mapping[str, Any], stack: str = "dev", strict: bool = False,
    ) -> "DeploymentSpec":
        """Validate Contract 1 keys (``aws:region``, ``raypd:<key>``) into a spec.

        Values may be native (YAML, JSON API) or strings (Pulumi passes structured config as JSON
        text). Keys of other namespaces (``aws:profile``, ``kubernetes:...``) belong to providers
        and are left alone. `strict` (the JSON API): every value must have its JSON type already
        ("2" is not an integer, 1 is not a boolean, JSON text is not an object); Pulumi config and
        stack files, which carry numbers and objects as text, are read leniently.
        """
        fields, problems = read_fields(config, stack, _ALIASES, json_text=not strict)
        context = {_CROSS_CHECKS_LATER: True}

        def validate(data: dict[str, Any]) -> "DeploymentSpec":
            if strict:
                # JSON mode: arrays are lists (and tuples), but no text is taken for a number.
                return cls.model_validate_json(json.dumps(data), strict=True, context=context)
            return cls.model_validate(data, context=context)

        spec, field_problems, failed = validate_each_field(validate, fields)
        problems.extend(field_problems)
        if spec is not None:
            problems.extend(spec.cross_field_problems({*failed, *(top_level_key(p.field) for p in problems)}))
        if problems or spec is None:
            raise SpecError(problems)
        return spec


# Validation context: the cross-field checks are left to from_config, which knows which keys failed.
_CROSS_CHECKS_LATER = "raypd.cross_checks_later"
_ALIASES: dict[str, str] = {
    to_camel(name): name for name in DeploymentSpec.model_fields if name not in ("stack", "region")
}
