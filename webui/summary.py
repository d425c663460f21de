"""What the list page, the API and the preview say about a deployment: pure functions of its plan.

Computed once when a deployment is created and stored with it, so listing hundreds of deployments
never re-validates a spec or touches an engine. Each function takes the deployment plan
(`components.plan.topology.plan_deployment`); given a spec, it plans it (pass the plan when one request
renders several of these, so it is built once).
"""

from __future__ import annotations

from typing import Any, Union

from components.config import catalogue
from components.config.spec import DeploymentSpec
from components.plan.scaling import plan_warnings
from components.plan.topology import DeploymentPlan, as_plan
from components.render.outputs import kv_transfer_output
from components.render.rayservice import render_rayservice
from components.render.serve_config import to_yaml

PlanOrSpec = Union[DeploymentPlan, DeploymentSpec]


def phase_line(name: str, spec: DeploymentSpec) -> str:
    phase = spec.phases[name]
    parallel = f"TP{phase.tensor_parallel_size}"
    if phase.pipeline_parallel_size > 1:
        parallel += f"×PP{phase.pipeline_parallel_size}"
    replicas = "replica" if phase.replicas == 1 else "replicas"
    nodes = "node" if phase.nodes == 1 else "nodes"
    return f"{name}: {phase.replicas} {replicas} {parallel} on {phase.nodes} {phase.instance_type} {nodes}"


def summarize(plan: PlanOrSpec) -> dict[str, Any]:
    plan = as_plan(plan)
    spec, groups, cost = plan.spec, plan.groups, plan.cost
    return {
        "modelId": spec.model.id,
        "modelSource": spec.model.source,
        "mode": spec.mode,
        "region": spec.region,
        "clusterName": spec.effective_cluster_name,
        "topology": " · ".join(phase_line(name, spec) for name in spec.phases),
        "phases": {
            name: {
                "instanceType": phase.instance_type,
                "gpuModel": phase.hardware.gpu_model,
                "replicas": phase.replicas,
                "tensorParallelSize": phase.tensor_parallel_size,
                "pipelineParallelSize": phase.pipeline_parallel_size,
                "gpusPerReplica": phase.gpus_per_replica,
                "nodes": phase.nodes,
                "gpus": phase.gpus,
            }
            for name, phase in spec.phases.items()
        },
        "nodeGroups": [
            {
                "name": group.name,
                "instanceType": group.instance_type,
                "nodes": group.nodes,
                "gpusPerNode": group.gpus_per_node,
                "gpus": group.gpus,
                "efaInterfacesPerNode": group.efa_interfaces_per_node,
                "phases": list(group.phases),
                "labels": dict(group.labels),
                "rayResource": group.ray_resource,
                "rootVolumeGb": group.root_volume_gb,
                "usdPerHour": group.usd_per_hour,
            }
            for group in groups
        ],
        "systemNodes": {
            "instanceType": spec.system_nodes.instance_type, "count": spec.system_nodes.count,
        },
        "gpus": plan.gpus,
        "gpuNodes": plan.gpu_nodes,
        "usdPerHour": cost.usd_per_hour,
        "priceBasis": catalogue.price_basis(spec.region),
        "unpriced": list(cost.unpriced),
        "warnings": plan_warnings(plan),
        "kvTransfer": kv_transfer_output(spec),
        "namespace": spec.namespace,
        "serviceName": spec.service_name,
        "hasHfToken": spec.hf_token is not None,
    }


def rayservice_yaml(plan: PlanOrSpec) -> str:
    """The RayService manifest as people read it (it references the HF token Secret, never the value)."""
    return to_yaml(render_rayservice(as_plan(plan)))
