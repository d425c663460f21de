"""What the stack outputs (Contract 3) say should run (`VerifyPlan`), and the inputs it is read from:
the outputs JSON and the kubeconfig; `VerifyInputError` for input that cannot be used."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Mapping, Optional, TextIO

from components.config import defaults
from components.config.safe_documents import DocumentError, FileRefused, load_json, read_file, shown_name
from components.config.serving_spec import replicas_per_node
from components.config.spec import SECRET_PLACEHOLDER
from components.render.outputs import KUBECONFIG_KEY, OutputsError, validate_outputs
from components.render.serve_config import APP_NAME, serve_deployment_name
from serve.evidence.objects import labels_of

MAX_OUTPUTS_BYTES = 10 * 1024 * 1024
INGRESS_DEPLOYMENT = "OpenAiIngress"


class VerifyInputError(ValueError):
    """Input verify cannot work with: the CLI's exit 2, one readable line."""


# ---- the plan, as the outputs describe it ----

@dataclass(frozen=True)
class GroupPlan:
    name: str
    nodes: int  # where it starts
    gpus_per_node: Optional[int]
    instance_type: str
    phases: tuple[str, ...]
    # The node autoscaler keeps the group between these (both `nodes` when no phase autoscales).
    min_nodes: int = 0
    max_nodes: int = 0


@dataclass(frozen=True)
class PhasePlan:
    name: str
    deployment: str
    replicas: int  # where it starts
    group: str
    # Serve keeps an autoscaled phase between these (both `replicas` for a fixed count).
    min_replicas: int = 0
    max_replicas: int = 0


def _nodes_for(entry: Mapping[str, Any], replicas: int) -> int:
    """Whole nodes for `replicas` engines of a topology entry (the spec's rule, read back from
    the outputs)."""
    gpus = max(1, int(entry.get("tensorParallelSize", 1)) * int(entry.get("pipelineParallelSize", 1)))
    return -(-replicas // replicas_per_node(int(entry.get("gpusPerNode") or gpus), gpus))


@dataclass(frozen=True)
class VerifyPlan:
    namespace: str
    rayservice: str
    serve_service: str
    dashboard_service: str
    app: str
    model_id: str
    mode: str
    availability_zone: str
    region: str
    kv_backend: Optional[str]
    groups: dict[str, GroupPlan]
    phases: dict[str, PhasePlan]

    @property
    def pinned(self) -> bool:
        """More than one GPU node group: each carries raypd.io/phase=<group> (components.plan.topology)."""
        return len(self.groups) > 1

    @property
    def deployments(self) -> list[str]:
        return [phase.deployment for phase in self.phases.values()] + [INGRESS_DEPLOYMENT]

    def group_of_node(self, node: Mapping[str, Any]) -> Optional[str]:
        labels = labels_of(node)
        if defaults.PHASE_LABEL_KEY in labels:
            return labels[defaults.PHASE_LABEL_KEY]
        if len(self.groups) == 1:
            return next(iter(self.groups))
        return None

    @classmethod
    def from_outputs(cls, outputs: Mapping[str, Any]) -> "VerifyPlan":
        groups: dict[str, dict[str, Any]] = {}
        phases: dict[str, PhasePlan] = {}
        for phase, entry in outputs["topology"].items():
            group = groups.setdefault(entry["nodeGroup"], {
                "nodes": 0, "min": 0, "max": 0, "gpus": entry.get("gpusPerNode"),
                "type": entry["instanceType"], "phases": []})
            low, high = entry.get("minReplicas", entry["replicas"]), entry.get("maxReplicas", entry["replicas"])
            autoscaled = "minReplicas" in entry
            group["nodes"] += entry["nodes"]
            group["min"] += _nodes_for(entry, low) if autoscaled else entry["nodes"]
            group["max"] += _nodes_for(entry, high) if autoscaled else entry["nodes"]
            group["phases"].append(phase)
            phases[phase] = PhasePlan(phase, serve_deployment_name(phase, outputs["modelId"]), entry["replicas"],
                                      entry["nodeGroup"], low, high)
        kv = outputs.get("kvTransfer")
        return cls(
            namespace=outputs["namespace"],
            rayservice=outputs["rayServiceName"],
            serve_service=outputs["serveService"],
            dashboard_service=outputs.get("dashboardService") or f"{outputs['rayServiceName']}-head-svc",
            app=outputs.get("serveApplication") or APP_NAME,
            model_id=outputs["modelId"],
            mode=outputs["mode"],
            availability_zone=outputs["availabilityZone"],
            region=outputs["region"],
            kv_backend=kv.get("backend") if isinstance(kv, Mapping) else None,
            groups={name: GroupPlan(name, g["nodes"], g["gpus"], g["type"], tuple(g["phases"]),
                                    g["min"], g["max"])
                    for name, g in groups.items()},
            phases=phases,
        )


# ---- the inputs: stack outputs and the kubeconfig ----

def parse_outputs_text(text: str, name: str = "the outputs") -> dict[str, Any]:
    """JSON text of `pulumi stack output --json --show-secrets` to a dict; VerifyInputError, one
    line starting with `name` (components.config.safe_documents: bounded size, nesting and numbers, no
    key twice, no NaN)."""
    try:
        document = load_json(text, max_bytes=MAX_OUTPUTS_BYTES)
    except DocumentError as exc:
        raise VerifyInputError(f"{name} {exc}: give the output of "
                               "`pulumi stack output --json --show-secrets`") from None
    if not isinstance(document, dict):
        raise VerifyInputError(f"{name} must be a JSON object (from `pulumi stack output "
                               "--json --show-secrets`)")
    return document


def read_outputs(source: str, stdin: Optional[TextIO] = None) -> dict[str, Any]:
    """`--outputs FILE|-` of every raypd CLI: stdin, or a regular file read by
    components.config.safe_documents (bounded, never a FIFO), parsed by parse_outputs_text;
    VerifyInputError naming the file or stdin."""
    name = "the outputs on stdin" if source == "-" else f"the outputs file {shown_name(source)}"
    if source == "-":
        text = (stdin or sys.stdin).read(MAX_OUTPUTS_BYTES + 1)
    else:
        try:
            text = read_file(source, MAX_OUTPUTS_BYTES).decode("utf-8", errors="replace")
        except FileRefused as exc:
            raise VerifyInputError(exc.about(name)) from None
    return parse_outputs_text(text, name)


def check_outputs(outputs: Mapping[str, Any], have_kubeconfig: bool) -> None:
    if not isinstance(outputs, Mapping):
        raise VerifyInputError("the outputs must be a JSON object")
    document = dict(outputs)
    missing = KUBECONFIG_KEY not in document
    if missing or (have_kubeconfig and not isinstance(document.get(KUBECONFIG_KEY), str)):
        document[KUBECONFIG_KEY] = SECRET_PLACEHOLDER  # judged below; only the rest is validated here
    try:
        validate_outputs(document)
    except OutputsError as exc:
        raise VerifyInputError(f"the outputs break the stack-outputs contract: {exc}") from None
    except RecursionError:
        raise VerifyInputError("the outputs are nested too deeply") from None
    if missing and not have_kubeconfig:
        raise VerifyInputError("no kubeconfig: the outputs have none and --kubeconfig was not given")


def resolve_kubeconfig(outputs: Mapping[str, Any], kubeconfig: Optional[str]) -> str:
    text = kubeconfig if kubeconfig is not None else outputs.get(KUBECONFIG_KEY)
    if not isinstance(text, str) or not text.strip():
        raise VerifyInputError("no kubeconfig: the outputs have none and --kubeconfig was not given")
    if text.strip() == SECRET_PLACEHOLDER:
        raise VerifyInputError("the outputs' kubeconfig is masked ([secret]): run `pulumi stack "
                               "output --json --show-secrets`, or pass --kubeconfig FILE")
    return text
