"""What the list page, the API and the preview say about a spec: pure functions of the spec.

Computed once when a deployment is created and stored with it, so listing hundreds of deployments
never re-validates a spec or touches an engine.
"""

from __future__ import annotations

from typing import Any


from components.outputs import kv_transfer_output
from components.rayservice import render_rayservice
from components.spec import DeploymentSpec
from components.topology import estimate_cost, plan_gpu_groups
from serve.config import to_yaml


def phase_line(name: str, spec: DeploymentSpec) -> str:
    phase = spec.phases[name]
    parallel = f"TP{phase.tensor_parallel_size}"
    if phase.pipeline_parallel_size > 1:
        parallel += f"×PP{phase.pipeline_parallel_size}"
    replicas = "replica" if phase.replicas == 1 else "replicas"
    nodes = "node" if phase.nodes == 1 else "nodes"
    return f"{name}: {phase.replicas} {replicas} {parallel} on {phase.nodes} {phase.instance_type} {nodes}"


def summarize(spec: DeploymentSpec) -> dict[str, Any]:
    groups = plan_gpu_groups(spec)
    cost = estimate_cost(spec)
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
        "gpus": sum(group.gpus for group in groups),
        "gpuNodes": sum(group.nodes for group in groups),
        "usdPerHour": cost.usd_per_hour,
        "unpriced": list(cost.unpriced),
        "warnings": list(spec.warnings),
        "kvTransfer": kv_transfer_output(spec),
        "namespace": spec.namespace,
        "serviceName": spec.service_name,
        "hasHfToken": spec.hf_token is not None,
    }


def rayservice_yaml(spec: DeploymentSpec) -> str:
    """The RayService manifest as people read it (it references the HF token Secret, never the value)."""
    return to_yaml(render_rayservice(spec))
