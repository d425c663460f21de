"""Stack outputs (Contract 3): what other programs read from a raypd stack, versioned.

`render_stack_outputs` is pure: the Pulumi program exports each key (and adds `kubeconfig` as a
secret), the offline plan prints the same dict, and `validate_outputs` checks a full document
against schemas/stack-outputs.v1.json, the published form of the contract (docs/outputs.md).
Renaming or removing a key, or changing its meaning, is a breaking change: bump SCHEMA_VERSION and
add a new schema file. Adding a key is not.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Optional, Union

import jsonschema

from components.config import catalogue, defaults
from components.config.spec import DeploymentSpec
from components.plan.topology import DeploymentPlan, as_plan
from components.render import observability_names
from components.render.serve_config import APP_NAME

SCHEMA_VERSION = 1
# Found beside the package, not the working directory: the program and the web app run anywhere.
SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / f"stack-outputs.v{SCHEMA_VERSION}.json"
KUBECONFIG_KEY = "kubeconfig"  # added by the Pulumi program, as a secret
# Added by the Pulumi program with auth apiKey (components.stack.endpoint_stack): the first key, a secret.
API_KEY_OUTPUT = "apiKey"
# The configured image and the digest it was pinned to (components.config.image); issue 17.
IMAGE_PROVENANCE_KEY = "imageProvenance"
# The metrics stack's in-cluster URLs (issue 18); absent with raypd:observability.enabled false.
OBSERVABILITY_KEY = "observability"
# The zone of the system nodes and the metrics stack's volumes (issue 29).
SYSTEM_ZONE_KEY = "systemZone"
# The cost estimate with every autoscaled phase at its minimum and at its maximum (issue 30); present
# with estimatedUsdPerHour when some phase autoscales.
COST_AT_MIN_KEY = "estimatedUsdPerHourAtMinimum"
COST_AT_MAX_KEY = "estimatedUsdPerHourAtMaximum"
# Where the Ray head's GCS keeps its state (issue 31): {"gcs": "elasticache" | "external" | "off"}.
FAULT_TOLERANCE_KEY = "faultTolerance"


class OutputsError(ValueError):
    """A stack-outputs document that breaks the contract; one line per problem."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


# Every key a full outputs document must have (kubeconfig included), as the schema lists them.
OUTPUT_KEYS: tuple[str, ...] = tuple(load_schema()["required"])


def serve_service_name(spec: DeploymentSpec) -> str:
    """The Service KubeRay creates for a RayService's Serve endpoint."""
    return f"{spec.service_name}-serve-svc"


def dashboard_service_name(spec: DeploymentSpec) -> str:
    return f"{spec.service_name}-head-svc"


def _phase_outputs(plan: DeploymentPlan) -> dict[str, dict[str, Any]]:
    topology: dict[str, dict[str, Any]] = {}
    for name, phase in plan.spec.phases.items():
        group = plan.group_for(name)
        topology[name] = {
            "instanceType": phase.instance_type,
            "nodes": phase.nodes,
            "replicas": phase.replicas,
            "tensorParallelSize": phase.tensor_parallel_size,
            "pipelineParallelSize": phase.pipeline_parallel_size,
            "nodeGroup": group.name,
            "gpusPerNode": group.gpus_per_node,
        }
        if phase.autoscaling is not None:  # issue 30: `replicas` and `nodes` are where it starts
            topology[name].update(minReplicas=phase.min_replicas, maxReplicas=phase.max_replicas)
    return topology


def kv_transfer_output(spec: DeploymentSpec) -> Optional[dict[str, str]]:
    """The KV hand-over as users see it; None in colocated mode, where nothing is handed over."""
    if spec.mode != "disaggregated":
        return None
    return {"connector": spec.kv_transfer.connector, "backend": spec.kv_transfer.backend}


def observability_output(spec: DeploymentSpec) -> Optional[dict[str, str]]:
    """Where Grafana and Prometheus answer inside the cluster (components.render.observability_names);
    None when the stack has no metrics stack."""
    if not spec.observability.enabled:
        return None
    return {"grafanaUrl": observability_names.grafana_url(),
            "prometheusUrl": observability_names.prometheus_url()}


def render_stack_outputs(
    plan: Union[DeploymentPlan, DeploymentSpec], *, availability_zone: str, cluster_name: str,
    image_provenance: Optional[Mapping[str, Optional[str]]] = None,
    system_zone: Optional[str] = None,
) -> dict[str, Any]:
    """Every Contract 3 key except `kubeconfig`; plain values, no Pulumi types.

    Takes the deployment plan (the program passes the one it built); a spec is planned here, for
    callers outside the program that hold only a spec. `image_provenance` is what the program
    resolved (components.config.image.ResolvedImage.as_output); `image` is then the pinned reference
    every Ray pod runs. `system_zone` is the one zone of the system nodes and the metrics stack's
    volumes (components.plan.zones.system_zone); a stack whose outputs lack it was last deployed
    with system nodes in both zones (components.changes.node_groups.system_zone_migration).
    """
    plan = as_plan(plan)
    spec = plan.spec
    serve_service = serve_service_name(spec)
    port = defaults.SERVE_PORT
    cost = plan.cost
    outputs: dict[str, Any] = {
        "schemaVersion": SCHEMA_VERSION,
        "region": spec.region,
        "clusterName": cluster_name,
        "availabilityZone": availability_zone,
        "namespace": spec.namespace,
        "rayServiceName": spec.service_name,
        "serveService": serve_service,
        "openaiBaseUrl": f"http://{serve_service}.{spec.namespace}.svc.cluster.local:{port}/v1",
        "portForwardCommand": (
            f"kubectl -n {spec.namespace} port-forward svc/{serve_service} {port}:{port}"
        ),
        "dashboardService": dashboard_service_name(spec),
        "serveApplication": APP_NAME,
        "modelId": spec.model.id,
        "modelSource": spec.model.source,
        "mode": spec.mode,
        "topology": _phase_outputs(plan),
        "kvTransfer": kv_transfer_output(spec),
        "image": spec.image_uri,
        "rayVersion": spec.ray_version,
        FAULT_TOLERANCE_KEY: {"gcs": spec.gcs_store},
    }
    if image_provenance is not None:
        outputs[IMAGE_PROVENANCE_KEY] = dict(image_provenance)
    if system_zone is not None:
        outputs[SYSTEM_ZONE_KEY] = system_zone
    observability = observability_output(spec)
    if observability is not None:
        outputs[OBSERVABILITY_KEY] = observability
    # A partial sum would read as the whole bill; leave the estimate out when a price is missing.
    if not cost.unpriced:
        outputs["estimatedUsdPerHour"] = cost.usd_per_hour  # at the starting counts, autoscaled or not
        outputs["estimatedCostBasis"] = catalogue.price_basis(spec.region)
        if plan.autoscaling:
            outputs[COST_AT_MIN_KEY] = plan.cost_at_min.usd_per_hour
            outputs[COST_AT_MAX_KEY] = plan.cost_at_max.usd_per_hour
    return outputs


# ---- what an offline plan cannot know (issue 29 §2) ----

# Where an offline plan's invented values are listed, by dotted path into its outputs: the plan
# document (Contract 2), the web app's deployment answer and its page all read this one key.
PLACEHOLDERS_KEY = "placeholders"
PLACEHOLDER_WORD = "placeholder"


def offline_placeholders(spec: DeploymentSpec, outputs: Mapping[str, Any]) -> dict[str, str]:
    """The outputs of an offline plan that stand for values only a real `pulumi up` learns,
    {dotted path: why}; shown as they are, they would read as real.

    The mocks answer what AWS would be asked (components.stack.mockrun): the load balancer's DNS
    name, the digest ECR pins the image tag to, the GPU zone EC2 offers. The metrics stack's
    addresses are the names a real deploy gives its Services, but offline nothing answers there.
    Every place that shows an offline plan's outputs labels these, and none offers one in a command.
    """
    found: dict[str, str] = {}
    endpoint = outputs.get("endpoint")
    if spec.endpoint.load_balanced and not spec.endpoint.host and isinstance(endpoint, Mapping):
        found["endpoint.url"] = ("made up offline: AWS names the load balancer when `pulumi up` creates it, "
                                 "and the real URL is read from it then")
    provenance = outputs.get(IMAGE_PROVENANCE_KEY)
    if isinstance(provenance, Mapping) and provenance.get("digest"):
        why = "made up offline: no registry was asked; `pulumi up` pins the tag to the digest ECR gives"
        found[f"{IMAGE_PROVENANCE_KEY}.digest"] = why
        found["image"] = why
    if spec.availability_zone is None and outputs.get("availabilityZone"):
        found["availabilityZone"] = "assumed offline: `pulumi up` asks EC2 which zone offers every GPU type"
    observability = outputs.get(OBSERVABILITY_KEY)
    if isinstance(observability, Mapping):
        for key, what in (("grafanaUrl", "Grafana"), ("prometheusUrl", "Prometheus")):
            if key in observability:
                found[f"{OBSERVABILITY_KEY}.{key}"] = (
                    f"{what}'s address in the cluster once deployed; offline nothing runs, nothing answers there")
    return found


def placeholders_under(placeholders: Optional[Mapping[str, str]], key: str) -> list[tuple[str, str]]:
    """The placeholders at output `key` or inside it: [(path below key, "" for key itself; why)]."""
    return [("" if path == key else path[len(key) + 1:], why)
            for path, why in sorted((placeholders or {}).items())
            if path == key or path.startswith(key + ".")]


def _describe(error: jsonschema.ValidationError) -> str:
    path = [str(part) for part in error.absolute_path]
    if path and path[0] in (KUBECONFIG_KEY, API_KEY_OUTPUT):
        # jsonschema quotes the offending value; these are secrets, so say less.
        return f"{path[0]}: must be a non-empty string"
    if not path and error.validator == "type":
        return "(document): must be a JSON object"
    return f"{'.'.join(path) or '(document)'}: {error.message}"


def validate_outputs(document: dict[str, Any]) -> None:
    """Check a full outputs document (kubeconfig included, as a string); raise OutputsError."""
    validator = jsonschema.Draft202012Validator(load_schema())
    errors = sorted(validator.iter_errors(document), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        raise OutputsError([_describe(error) for error in errors])
