"""The deployment plan (issue 8): phases pinned to their own nodes, KubeRay's resources string,
hybrid-model settings, one plan built once, and imports that run one way (serve -> components)."""

from __future__ import annotations

import ast
import json
import shlex
from itertools import product
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment
from components.render.rayservice import render_rayservice

ROOT = Path(__file__).resolve().parents[2]


def spec_of(config: dict[str, Any]) -> DeploymentSpec:
    return DeploymentSpec.from_config(config, "dev")


def workers(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["groupName"]: g for g in manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"]}


def application(manifest: dict[str, Any]) -> dict[str, Any]:
    return yaml.safe_load(manifest["spec"]["serveConfigV2"])["applications"][0]


def kuberay_resources(value: str) -> dict[str, float]:
    """KubeRay 1.4's getResourcesMap: trim quotes, backticks and spaces, then parse as JSON."""
    return json.loads(value.strip("'\"` "))


def advertised(group: dict[str, Any]) -> dict[str, float]:
    """Every Ray resource one worker of a group advertises: its GPUs plus rayStartParams.resources."""
    params = group["rayStartParams"]
    resources = {"GPU": float(params["num-gpus"])}
    if "resources" in params:
        resources.update(kuberay_resources(params["resources"]))
    return resources


def engines(manifest: dict[str, Any]) -> dict[str, list[dict[str, float]]]:
    """Each phase's bundles (one engine); no placement config is one GPU bundle."""
    args = application(manifest)["args"]
    configs = {"prefill": args["prefill_config"], "decode": args["decode_config"]}
    return {
        name: config.get("placement_group_config", {}).get("bundles", [{"GPU": 1}])
        for name, config in configs.items()
    }


def fits(bundles: list[dict[str, float]], node: dict[str, float]) -> bool:
    need: dict[str, float] = {}
    for bundle in bundles:
        for key, value in bundle.items():
            need[key] = need.get(key, 0) + value
    return all(node.get(key, 0) >= value for key, value in need.items())


SAME_TYPE_MULTI_GPU = [
    # Both phases on one multi-GPU type with engines smaller than a node: today one shared group,
    # so a prefill and a decode engine can land on the same node and leave another idle.
    {"raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 4},
     "raypd:decode": {"instanceType": "p5.48xlarge", "tensorParallelSize": 4}},
    {"raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 2, "replicas": 3},
     "raypd:decode": {"instanceType": "p5.48xlarge", "tensorParallelSize": 4, "replicas": 2}},
    {"raypd:prefill": {"instanceType": "g6e.12xlarge", "tensorParallelSize": 2},
     "raypd:decode": {"instanceType": "g6e.12xlarge", "tensorParallelSize": 2}},
    {"raypd:prefill": {"instanceType": "g6e.12xlarge", "tensorParallelSize": 1},
     "raypd:decode": {"instanceType": "g6e.12xlarge", "tensorParallelSize": 4}},
]


@pytest.mark.parametrize("config", SAME_TYPE_MULTI_GPU)
def test_prefill_and_decode_engines_never_share_a_node_on_one_multi_gpu_type(config):
    manifest = render_rayservice(plan_deployment(spec_of(config)))
    groups = workers(manifest)
    bundles = engines(manifest)
    # One worker group per phase, each advertising only its own resource ...
    assert set(groups) == {"prefill", "decode"}
    for name, group in groups.items():
        assert set(advertised(group)) == {"GPU", f"raypd_{name}"}
    # ... so an engine of one phase fits on no worker of the other phase's group.
    for phase, group_name in product(("prefill", "decode"), repeat=2):
        assert fits(bundles[phase], advertised(groups[group_name])) == (phase == group_name)


@pytest.mark.parametrize("config", SAME_TYPE_MULTI_GPU)
def test_pinned_phases_on_one_type_get_their_own_labelled_node_groups(config):
    spec = spec_of(config)
    groups = workers(render_rayservice(plan_deployment(spec)))
    for name in ("prefill", "decode"):
        assert groups[name]["template"]["spec"]["nodeSelector"] == {
            "role": "gpu-worker", "raypd.io/phase": name, "raypd.io/node-group": name,
            "node.kubernetes.io/instance-type": spec.phases[name].instance_type,
        }
        assert groups[name]["replicas"] == spec.phases[name].nodes


@pytest.mark.parametrize("config", [
    {},  # the reference: 1-GPU nodes, one GPU per engine
    {"raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 8},
     "raypd:decode": {"instanceType": "p5.48xlarge", "tensorParallelSize": 8, "replicas": 2}},
])
def test_phases_whose_engines_fill_whole_nodes_keep_one_shared_group(config):
    spec = spec_of(config)
    (group,) = workers(render_rayservice(plan_deployment(spec))).values()
    assert group["groupName"] == "gpu"
    assert "resources" not in group["rayStartParams"]
    # Every engine needs every GPU of a node, so there is exactly one node per engine.
    node = advertised(group)
    for bundles in engines(render_rayservice(plan_deployment(spec))).values():
        assert sum(b.get("GPU", 0) for b in bundles) == node["GPU"]
    assert group["replicas"] == spec.prefill.replicas + spec.decode.replicas


def test_resources_param_is_the_single_quoted_json_kuberay_writes():
    manifest = render_rayservice(plan_deployment(spec_of({
        "raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 8},
        "raypd:decode": {"instanceType": "g6e.48xlarge", "tensorParallelSize": 8},
    })))
    for name, group in workers(manifest).items():
        value = group["rayStartParams"]["resources"]
        assert value == f"'{{\"raypd_{name}\": 8}}'"
        assert "\\" not in value
        assert kuberay_resources(value) == {f"raypd_{name}": 8}
        # KubeRay pastes `--resources=<value>` into the shell line that runs `ray start`.
        (argument,) = shlex.split(f"--resources={value}")
        assert json.loads(argument.removeprefix("--resources=")) == {f"raypd_{name}": 8}


def _worker_env(spec: DeploymentSpec) -> list[dict[str, str]]:
    manifest = render_rayservice(plan_deployment(spec))
    return [{e["name"]: e.get("value") for e in g["template"]["spec"]["containers"][0]["env"]}
            for g in workers(manifest).values()]


def test_hybrid_model_gets_the_conv_state_layout_nixl_needs(reference_spec):
    from components.config.model_catalogue import find_shape

    assert find_shape(reference_spec.model.source).hybrid  # Qwen3.5: Gated DeltaNet layers
    for env in _worker_env(reference_spec):
        assert env["VLLM_SSM_CONV_STATE_LAYOUT"] == "DS"


@pytest.mark.parametrize("config", [
    {"raypd:model": {"id": "llama", "source": "meta-llama/Llama-3.1-8B-Instruct"}},
    {"raypd:model": {"id": "unknown", "source": "example/not-in-the-table"}},
    {"raypd:mode": "colocated"},  # hybrid, but nothing is handed over
])
def test_hybrid_settings_only_for_hybrid_models_with_kv_transfer(config):
    for env in _worker_env(spec_of(config)):
        assert "VLLM_SSM_CONV_STATE_LAYOUT" not in env


def test_hybrid_engines_keep_the_hybrid_kv_cache_manager(reference_spec):
    # vLLM 0.26's NixlConnector supports it; turning it off would break hybrid models.
    for config in application(render_rayservice(plan_deployment(reference_spec)))["args"].values():
        assert "disable_hybrid_kv_cache_manager" not in config["engine_kwargs"]


@pytest.mark.parametrize("config", [{}, SAME_TYPE_MULTI_GPU[1]])
def test_raypd_never_fixes_the_nixl_side_channel_port(config):
    # Ray picks a free port per engine (plus a per-replica offset) unless the variable is set;
    # a fixed port would make two engines on one node collide.
    manifest = render_rayservice(plan_deployment(spec_of(config)))
    text = json.dumps(manifest) + manifest["spec"]["serveConfigV2"]
    assert "VLLM_NIXL_SIDE_CHANNEL_PORT" not in text
    assert "NIXL_SIDE_CHANNEL_PORT_BASE" not in text
    assert "VLLM_NIXL_SIDE_CHANNEL_HOST" not in text


# ---- structure: one plan, imports one way ----

def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_components_never_import_serve():
    offenders = {
        str(path.relative_to(ROOT)): sorted(n for n in _imports(path) if n.split(".")[0] == "serve")
        for path in (ROOT / "components").glob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_only_the_plan_module_derives_node_groups_from_a_spec():
    callers = []
    # (perf/plan_bench.py replaces the planner in components.plan.topology, its one home, to fake 8 groups.)
    for folder in ("components", "serve", "webui"):
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "topology.py" and folder == "components":
                continue
            if "plan_gpu_groups" in path.read_text(encoding="utf-8"):
                callers.append(str(path.relative_to(ROOT)))
    assert callers == []
