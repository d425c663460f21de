"""What goes to the Pulumi CLI and what comes back, as pure functions: the spec as stack config
(the HF token as a secret), outputs masked, a CommandError cut down to what a person needs and
mapped to the engine error (and HTTP status) the API answers, an update's summary without its
config, and pending operations read from an export without keeping any of its plaintext."""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Optional

from pulumi import automation as auto

from components.config.spec import HF_TOKEN_KEY, DeploymentSpec
from webui.engines.base import EngineConflict, EngineError, EngineNotFound, EngineUnavailable, OperationFailed
from webui.engines.events import strip_markup, urn_name
from webui.redact import MASK, redact

MAX_ERROR_CHARS = 2000


def config_map(spec: DeploymentSpec, hf_token: Optional[str]) -> dict[str, auto.ConfigValue]:
    """Contract 1 keys of the spec as Pulumi config values; the HF token as a secret."""
    values: dict[str, auto.ConfigValue] = {}
    for key, value in spec.public_config().items():
        if key == HF_TOKEN_KEY:
            continue  # public_config only says "[secret]"; the real value comes from hf_token
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        values[key] = auto.ConfigValue(value=text, secret=False)
    if hf_token:
        values[HF_TOKEN_KEY] = auto.ConfigValue(value=hf_token, secret=True)
    return values


def write_config(stack: Any, spec: DeploymentSpec, hf_token: Optional[str]) -> None:
    """Replace the stack's config with the spec's (path=False: keys are whole `ns:key` names)."""
    stack.set_all_config(config_map(spec, hf_token), path=False)


def masked_outputs(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """Stack outputs with every secret replaced by "[secret]" (the kubeconfig, for one)."""
    masked: dict[str, Any] = {}
    for key, output in outputs.items():
        secret = bool(getattr(output, "secret", False))
        masked[key] = MASK if secret else getattr(output, "value", output)
    return masked


_SECTIONS = re.compile(r"\n\s*(code|stdout|stderr):\s?")


def clean_command_error(exc: BaseException) -> str:
    """A CommandError's text (code, whole stdout, whole stderr) cut down to what a person needs."""
    text = redact(strip_markup(str(exc)))
    parts: dict[str, str] = {}
    pieces = _SECTIONS.split("\n" + text)
    for label, body in zip(pieces[1::2], pieces[2::2], strict=True):
        parts[label] = body
    lines: list[str] = []
    for source in (parts.get("stderr", ""), parts.get("stdout", "")):
        for line in source.splitlines():
            stripped = line.strip()
            if re.match(r"^(error|raypd:|aws:)", stripped) or " error: " in stripped:
                if stripped not in lines:
                    lines.append(stripped)
    if not lines:
        tail = [line.strip() for line in parts.get("stderr", "").splitlines() if line.strip()]
        lines = tail[-10:]
    if not lines:
        lines = [f"pulumi exited with code {parts.get('code', '?').strip()}"]
    message = "\n".join(lines)
    return message if len(message) <= MAX_ERROR_CHARS else message[: MAX_ERROR_CHARS - 1] + "…"


# What the CLI says when the passphrase opens no secret of the stack (pkg/secrets/passphrase/manager.go,
# ErrIncorrectPassphrase); it may come wrapped ("constructing secrets manager ...: incorrect passphrase").
WRONG_SECRETS_KEY = "incorrect passphrase"


def map_command_error(exc: BaseException, stack: str) -> EngineError:
    """Automation API errors -> engine errors with the HTTP status the API answers."""
    if isinstance(exc, auto.ConcurrentUpdateError):
        return EngineConflict(
            f"stack {stack} is locked by another update; wait for it to finish, or cancel it"
        )
    if isinstance(exc, auto.StackNotFoundError):
        return EngineNotFound(f"the Pulumi backend has no stack named {stack}")
    if isinstance(exc, auto.StackAlreadyExistsError):
        return EngineConflict(f"the Pulumi backend already has a stack named {stack}")
    if isinstance(exc, auto.CommandError):
        message = clean_command_error(exc)
        if WRONG_SECRETS_KEY in message:
            # Not the request's fault and not a bug: this server holds another key than the one the
            # stack was sealed with. A 503 tells a load balancer's client another server may do it.
            return EngineUnavailable(
                f"this server cannot open the secrets of stack {stack} ({message}): its "
                "PULUMI_CONFIG_PASSPHRASE[_FILE] is not the passphrase the stack was created with; "
                "give it the team's, then try again (nothing was changed)")
        return OperationFailed(message)
    return OperationFailed(redact(str(exc)) or type(exc).__name__)


def update_summary(summary: Any) -> dict[str, Any]:
    """The parts of an UpdateSummary worth keeping (never its `config`, which holds secrets)."""
    if summary is None:
        return {}
    return {
        "kind": getattr(summary, "kind", None),
        "result": getattr(summary, "result", None),
        "version": getattr(summary, "version", None),
        "changes": dict(getattr(summary, "resource_changes", None) or {}),
    }


# ---- pending operations ----

PENDING_KINDS = ("creating", "updating", "deleting", "reading")

# Where a person looks for a resource an interrupted update may or may not have made, by type
# prefix (first match wins). Physical names are the logical name plus a random suffix.
_CONSOLE_CHECKS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("eks:index:ManagedNodeGroup", "eks:index:NodeGroup", "aws:eks/nodeGroup:", "aws:autoscaling/"),
     "EKS console > Clusters > the cluster > Compute > Node groups, and EC2 console > Auto Scaling "
     "groups: a group whose name starts with '{name}'"),
    (("eks:index:Cluster", "aws:eks/cluster:"),
     "EKS console > Clusters: a cluster whose name starts with '{name}'"),
    (("aws:eks/",), "EKS console > Clusters > the cluster (add-ons, access entries): '{name}'"),
    (("aws:ec2/vpc:", "aws:ec2/subnet:", "aws:ec2/natGateway:", "aws:ec2/internetGateway:",
      "aws:ec2/routeTable", "aws:ec2/route:", "aws:ec2/eip:", "aws:ec2/securityGroup",
      "aws:ec2/vpcEndpoint:", "awsx:ec2:Vpc"),
     "VPC console (Your VPCs, Subnets, NAT gateways, Elastic IPs, Security groups): "
     "Name tag starting with '{name}'"),
    (("aws:iam/",), "IAM console > Roles / Policies: a name starting with '{name}'"),
    (("aws:ec2/",), "EC2 console (Launch templates, Placement groups, Instances): '{name}'"),
    (("kubernetes:helm.sh/",), "on the cluster: `helm list -A` and `kubectl get all -A` for '{name}'"),
    (("kubernetes:",), "on the cluster: `kubectl get {kind} -A` for '{name}'"),
)


def console_check(type_: str, name: str) -> str:
    """What to check, and where, before clearing a pending operation on this resource type."""
    kind = type_.rsplit(":", 1)[-1].lower() if type_ else "all"
    for prefixes, text in _CONSOLE_CHECKS:
        if type_.startswith(prefixes):
            return text.format(name=name, kind=kind)
    return f"the AWS console page for {type_ or 'this resource'}: a resource named like '{name}'"


def pending_from_deployment(deployment: Optional[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The pending operations of an exported deployment, cut down to what is safe to show.

    The export holds every resource's inputs and outputs in plaintext (the kubeconfig, the HF
    token): only urn, type, the logical name and the operation are read, nothing else is kept.
    """
    operations: list[dict[str, str]] = []
    for item in (deployment or {}).get("pending_operations") or []:
        if not isinstance(item, Mapping):
            continue
        found = item.get("resource")
        resource: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        urn = str(resource.get("urn") or "")
        type_ = str(resource.get("type") or "")
        operation = str(item.get("type") or "")
        name = urn_name(urn)
        operations.append({
            "urn": urn, "type": type_, "name": name,
            "operation": operation if operation in PENDING_KINDS else "unknown",
            "check": console_check(type_, name),
        })
    return operations
