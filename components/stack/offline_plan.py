"""`python -m components.plan --config Pulumi.<stack>.yaml [--stack NAME] [--json]`: the offline plan.

Runs the real program (`components.stack.program.build`) under Pulumi's mock runtime: no Pulumi CLI, no
cloud, no credentials, nothing created. Prints every resource the program would register (Pulumi
type token, logical name, the camelCase inputs the engine would receive, dependencies) and the
stack outputs, with secrets shown as "[secret]" (Contract 2). The web app's offline engine runs this
command as a subprocess and reads the `--json` document, so that document is a contract.

Exit 0 on success; exit 2 with one `field: message` line per problem on stderr when the stack file
or its configuration is invalid.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any, Iterable, Mapping, Optional, Sequence

from pulumi.runtime import rpc

from components.config import catalogue, defaults
from components.config.defaults import SYSTEM_LABELS
from components.config.errors import SpecError
from components.config.spec import DeploymentSpec, validate_stack_name
from components.config.stack_file import DEFAULT_STACK, SECRET_PLACEHOLDER, add_stack_arguments, read_stack
from components.render import observability_names as metrics_names
from components.render.outputs import (
    PLACEHOLDER_WORD,
    PLACEHOLDERS_KEY,
    offline_placeholders,
    placeholders_under,
)
from components.stack.endpoint_stack import OFFLINE_CREATED_AT
from components.stack.mockrun import offline_gpu_zone, offline_zones, run_program
from components.stack.node_groups import GPU_AMI_TYPE
from components.stack.program import build

PROJECT = "raypd"
EXIT_INVALID = 2
SECRET = "[secret]"
UNKNOWN = "[unknown]"
BANNER = "OFFLINE PLAN (Pulumi mock runtime): nothing is created in AWS"
# Input and output keys that hold credentials whatever the engine says about them.
ALWAYS_SECRET_KEYS = frozenset({"kubeconfig", "apiKey"})


def offline_notes(region: str) -> list[str]:
    return [
        f"availability zones are assumed, not asked: {offline_gpu_zone(region)} offers every GPU "
        f"type and the region has {', '.join(offline_zones(region))}; `pulumi up` asks EC2",
        "ids, ARNs, endpoints, the image digest and the kubeconfig are placeholders made up by the "
        f"mocks (the outputs that are: `{PLACEHOLDERS_KEY}`)",
    ]


def observability_notes(spec: DeploymentSpec) -> list[str]:
    """What the metrics stack would be (issue 18), and that an offline plan collects nothing."""
    settings = spec.observability
    if not settings.enabled:
        return ["observability is off (raypd:observability.enabled false): no metrics stack"]
    return [
        f"observability: would install kube-prometheus-stack {defaults.KUBE_PROMETHEUS_STACK_VERSION} "
        f"(Prometheus {settings.prometheus_storage_size} kept {settings.prometheus_retention}, "
        f"Grafana {settings.grafana_storage_size}) and dcgm-exporter "
        f"{defaults.DCGM_EXPORTER_VERSION} in namespace {metrics_names.NAMESPACE}, with PodMonitors for "
        "the Ray head and GPU workers; nothing is collected yet: no Prometheus runs until "
        "`pulumi up`, so there are no metrics to show",
    ]


# ---- turning recorded requests into plain, deterministic, secret-free JSON ----

def _secret_values(config: Mapping[str, Any], secret_keys: Iterable[str]) -> list[str]:
    """Plain-text values of config keys marked secret (dotted keys reach into objects)."""
    values: list[str] = []
    for key in secret_keys:
        head, *path = key.split(".")
        value: Any = config.get(head)
        for part in path:
            value = value.get(part) if isinstance(value, Mapping) else None
        if isinstance(value, str) and value and value != SECRET_PLACEHOLDER:
            values.append(value)
    return values


def _clean(value: Any, secrets: Sequence[str], key: Optional[str] = None) -> Any:
    if key in ALWAYS_SECRET_KEYS or rpc.is_rpc_secret(value):
        return SECRET
    if isinstance(value, Mapping):
        return {str(k): _clean(v, secrets, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(item, secrets) for item in value]
    if isinstance(value, float) and value.is_integer():
        # The engine protocol carries every number as a double; 200.0 GiB reads better as 200.
        return int(value)
    if isinstance(value, str):
        if value == rpc.UNKNOWN:
            return UNKNOWN
        if any(secret in value for secret in secrets):
            return SECRET
    return value


def _resources(run: Any, secrets: Sequence[str]) -> list[dict[str, Any]]:
    """Resources in tree order (parents first, siblings by name) with names for URNs."""
    names = {r.urn: r.name for r in run.resources}
    children: dict[str, list[Any]] = {}
    for resource in run.resources:
        parent = resource.parent_urn if resource.parent_urn in names else ""
        children.setdefault(parent, []).append(resource)
    ordered: list[dict[str, Any]] = []

    def visit(parent_urn: str) -> None:
        for resource in sorted(children.get(parent_urn, []), key=lambda r: (r.name, r.type)):
            ordered.append({
                "type": resource.type,
                "name": resource.name,
                "parent": names.get(resource.parent_urn),
                "inputs": _clean(resource.inputs, secrets),
                "dependsOn": sorted({names.get(urn, urn) for urn in resource.dependencies}),
                # Which input changes the program asks Pulumi to replace on (the web app's change
                # preview reads it); absent when none.
                **({"replaceOnChanges": list(resource.replace_on_changes)}
                   if resource.replace_on_changes else {}),
                # Inputs Pulumi never updates after creation; absent when none.
                **({"ignoreChanges": list(resource.ignore_changes)}
                   if resource.ignore_changes else {}),
            })
            visit(resource.urn)

    visit("")
    return ordered


def _outputs(run: Any, secrets: Sequence[str]) -> dict[str, Any]:
    outputs: dict[str, Any] = {}
    for key in sorted(run.outputs):
        output = run.outputs[key]
        if output.secret:
            outputs[key] = SECRET
        elif not output.known:
            outputs[key] = UNKNOWN
        else:
            outputs[key] = _clean(output.value, secrets, key)
    return outputs


def plan_spec(spec: DeploymentSpec, secret_values: Sequence[str] = ()) -> dict[str, Any]:
    """Run `build(spec)` under mocks; return the Contract 2 document. Raises SpecError."""
    secrets = [s for s in secret_values if s]
    if spec.hf_token is not None:
        token = spec.hf_token.get_secret_value()
        if token and token != SECRET_PLACEHOLDER:
            secrets.append(token)
    # A fixed first-key time: an offline plan is the same document however often it runs.
    run = run_program(lambda: build(spec, OFFLINE_CREATED_AT), project=PROJECT, stack=spec.stack,
                      region=spec.region)
    outputs = _outputs(run, secrets)
    return {
        "stack": spec.stack,
        "project": PROJECT,
        "offline": True,
        "mode": spec.mode,
        "warnings": list(spec.warnings),
        "notes": offline_notes(spec.region) + observability_notes(spec),
        "resources": _resources(run, secrets),
        "outputs": outputs,
        # The outputs the mocks made up, by path, with why (components.render.outputs): a program
        # reading `outputs` must not take these for real values.
        PLACEHOLDERS_KEY: offline_placeholders(spec, outputs),
    }


def run_plan(
    config: Mapping[str, Any], secret_keys: Iterable[str] = (), stack: str = DEFAULT_STACK
) -> dict[str, Any]:
    """The offline plan of Contract 1 config keys; raises SpecError on invalid input.

    `secret_keys` names config keys whose values must never be printed (as `load_stack_file`
    reports them); their values are masked wherever they would appear.
    """
    validate_stack_name(stack)
    spec = DeploymentSpec.from_config(config, stack)
    return plan_spec(spec, _secret_values(config, secret_keys))


def plan_file(config_path: str, stack: Optional[str] = None) -> dict[str, Any]:
    name, config, secret_keys = read_stack(config_path, stack)
    return run_plan(config, secret_keys, name)


# ---- the readable summary ----

def _format_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def gpu_node_groups(plan: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The GPU node groups the plan registers, read back from the ManagedNodeGroup inputs."""
    groups = []
    for resource in plan["resources"]:
        inputs = resource["inputs"]
        if resource["type"] != "eks:index:ManagedNodeGroup" or inputs.get("amiType") != GPU_AMI_TYPE:
            continue
        instance_type = inputs["instanceTypes"][0]
        hardware = catalogue.CATALOGUE[instance_type]
        nodes = inputs["scalingConfig"]["desiredSize"]
        groups.append({
            "name": resource["parent"] or resource["name"],
            "instanceType": instance_type,
            "nodes": nodes,
            "gpusPerNode": hardware.gpus,
            "gpuModel": hardware.gpu_model,
            "gpus": nodes * hardware.gpus,
            "efa": bool(inputs.get("enableEfaSupport")),
            "efaInterfacesPerNode": hardware.max_efa_interfaces,
            "availabilityZone": inputs.get("placementGroupAvailabilityZone")
            or plan["outputs"].get("availabilityZone"),
            "labels": inputs.get("labels", {}),
            "diskSizeGb": inputs.get("diskSize"),
        })
    return groups


def render_summary(plan: Mapping[str, Any]) -> str:
    outputs = plan["outputs"]
    lines = [
        BANNER,
        "",
        f"stack: {plan['stack']}    project: {plan['project']}    mode: {plan['mode']}",
        f"region: {outputs.get('region')}    cluster: {outputs.get('clusterName')}    "
        f"availability zone: {outputs.get('availabilityZone')}",
        "",
        "GPU node groups:",
    ]
    for group in gpu_node_groups(plan):
        efa = (
            f"EFA on ({group['efaInterfacesPerNode']} interface(s)/node)" if group["efa"] else "no EFA"
        )
        labels = ",".join(f"{k}={v}" for k, v in sorted(group["labels"].items()))
        lines.append(
            f"  {group['name']}: {group['nodes']} x {group['instanceType']}, "
            f"{group['gpus']} GPU(s) ({group['gpusPerNode']} {group['gpuModel']}/node), {efa}, "
            f"AZ {group['availabilityZone']}, {group['diskSizeGb']} GB root, labels {labels}"
        )
    for resource in plan["resources"]:
        inputs = resource["inputs"]
        if resource["type"] == "eks:index:Cluster":
            lines.append(
                f"Control plane: Kubernetes {inputs.get('version')}, public API from "
                f"{', '.join(inputs.get('publicAccessCidrs') or ['(EKS default)'])}, private endpoint "
                f"{'on' if inputs.get('endpointPrivateAccess') else 'off'}, logs "
                f"{', '.join(inputs.get('enabledClusterLogTypes') or ['off'])}, upgrade policy "
                f"{(inputs.get('upgradePolicy') or {}).get('supportType', '(EKS default)')}"
            )
        if resource["type"] == "eks:index:ManagedNodeGroup" and inputs.get("labels") == SYSTEM_LABELS:
            labels = ",".join(f"{k}={v}" for k, v in sorted(inputs["labels"].items()))
            lines.append(
                f"System nodes: {inputs['scalingConfig']['desiredSize']} x "
                f"{inputs['instanceTypes'][0]} (KubeRay operator, Ray head; labels {labels})"
            )
    endpoint_line = _endpoint_summary(plan)
    if endpoint_line:
        lines.append(endpoint_line)
    observability_line = _observability_summary(plan)
    if observability_line:
        lines.append(observability_line)
    counts = Counter(resource["type"] for resource in plan["resources"])
    lines += ["", f"Resources ({len(plan['resources'])}):"]
    lines += [f"  {count:3d}  {kind}" for kind, count in sorted(counts.items())]
    lines += ["", "Outputs:"]
    lines += [f"  {key}: {_format_value(value)}{_placeholder_marks(plan, key)}" for key, value in outputs.items()]
    if plan["warnings"]:
        lines += ["", "Warnings:"]
        lines += [f"  - {warning}" for warning in plan["warnings"]]
    lines += ["", "Offline assumptions:"]
    lines += [f"  - {note}" for note in plan["notes"]]
    return "\n".join(lines) + "\n"


def _placeholder_marks(plan: Mapping[str, Any], key: str) -> str:
    """" [placeholder: why]" for each invented value at or under output `key` ("" for none)."""
    return "".join(f"  [{PLACEHOLDER_WORD}: {f'{where}: ' if where else ''}{why}]"
                   for where, why in placeholders_under(plan.get(PLACEHOLDERS_KEY), key))


def _endpoint_summary(plan: Mapping[str, Any]) -> Optional[str]:
    """Who may reach the OpenAI endpoint, read back from the NLB's Service (issue 17)."""
    endpoint = plan["outputs"].get("endpoint")
    if not isinstance(endpoint, Mapping):
        return None
    services = [r["inputs"] for r in plan["resources"] if r["type"] == "kubernetes:core/v1:Service"
                and (r["inputs"].get("spec") or {}).get("type") == "LoadBalancer"]
    if not services:
        reach = "pods in the cluster only (no load balancer)"
    else:
        scheme = (services[0]["metadata"].get("annotations") or {}).get(
            "service.beta.kubernetes.io/aws-load-balancer-scheme", "internal")
        ranges = services[0]["spec"].get("loadBalancerSourceRanges") or []
        reach = f"{scheme} NLB from {', '.join(ranges)}"
    url = endpoint.get("url")
    if "endpoint.url" in (plan.get(PLACEHOLDERS_KEY) or {}):
        url = f"{url} [{PLACEHOLDER_WORD}: made up offline]"
    return (f"Endpoint: scope {endpoint.get('scope')}, {reach}, auth {endpoint.get('auth')}, "
            f"{url} (only /v1 is routed)")


def _observability_summary(plan: Mapping[str, Any]) -> Optional[str]:
    """The metrics stack, read back from the plan's releases and monitors (issue 18)."""
    releases = [r["inputs"] for r in plan["resources"] if r["type"] == "kubernetes:helm.sh/v3:Release"
                and r["inputs"].get("namespace") == metrics_names.NAMESPACE]
    monitors = [r for r in plan["resources"]
                if r["type"].startswith("kubernetes:monitoring.coreos.com/")]
    if not releases:
        return None
    charts = ", ".join(f"{r.get('chart')} {r.get('version')}" for r in releases)
    return (f"Observability: {charts} in namespace {metrics_names.NAMESPACE}, {len(monitors)} monitor/rule "
            "object(s); offline, nothing is collected yet (no Prometheus runs until `pulumi up`)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.plan",
        description="Plan a raypd stack offline (Pulumi mock runtime; nothing is created).",
    )
    add_stack_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the plan as JSON (Contract 2)")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        plan = plan_file(args.config, args.stack)
    except SpecError as exc:
        for error in exc.errors:
            print(error, file=sys.stderr)
        return EXIT_INVALID
    if args.json:
        sys.stdout.write(json.dumps(plan, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_summary(plan))
    return 0


if __name__ == "__main__":
    sys.exit(main())
