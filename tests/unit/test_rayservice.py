"""The RayService manifest: the reference's facts, heterogeneous and colocated variants, secrets."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

import pytest
import yaml

from components.config import catalogue
from components.plan.topology import plan_deployment
from components.render.rayservice import hf_token_secret_name, render_rayservice, worker_resources
from components.render.serve_config import render_serve_config

CHECKPOINT_GIB = 18  # the reference model's checkpoint (Qwen3.5-9B)
_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def to_bytes(quantity: str) -> int:
    match = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti)?", quantity)
    assert match, f"not a binary memory quantity: {quantity}"
    return int(match.group(1)) * _UNITS.get(match.group(2) or "", 1)


def head(manifest: dict[str, Any]) -> dict[str, Any]:
    return manifest["spec"]["rayClusterConfig"]["headGroupSpec"]


def workers(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["groupName"]: g for g in manifest["spec"]["rayClusterConfig"]["workerGroupSpecs"]}


def container(group: dict[str, Any]) -> dict[str, Any]:
    return group["template"]["spec"]["containers"][0]


def env_of(group: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container(group)["env"]}


def ray_start_resources(value: str) -> dict[str, Any]:
    """What `ray start` receives after KubeRay pastes `--resources=<value>` into a shell line."""
    (argument,) = shlex.split(f"--resources={value}")
    return json.loads(argument.removeprefix("--resources="))


# ---- the reference deployment ----

def test_reference_metadata_and_readiness(reference_spec):
    manifest = render_rayservice(plan_deployment(reference_spec))
    assert (manifest["apiVersion"], manifest["kind"]) == ("ray.io/v1", "RayService")
    assert manifest["metadata"]["name"] == "ray-llm"
    assert manifest["metadata"]["namespace"] == "inference"
    annotations = manifest["metadata"]["annotations"]
    # Ready AND the app RUNNING, both at the current generation (components.render.rollout).
    assert json.loads(annotations["pulumi.com/waitFor"]) == [
        "condition=Ready",
        "jsonpath={.status.activeServiceStatus.applicationStatuses.llm.status}=RUNNING",
    ]
    assert int(annotations["pulumi.com/timeoutSeconds"]) >= 1800  # model loads take a while
    assert manifest["spec"]["rayClusterConfig"]["rayVersion"] == "2.58.0"


def test_reference_head_is_cpu_only_on_system_nodes(reference_spec):
    group = head(render_rayservice(plan_deployment(reference_spec)))
    assert group["rayStartParams"] == {"dashboard-host": "0.0.0.0", "num-gpus": "0"}
    assert group["template"]["spec"]["nodeSelector"] == {
        "role": "system", "node.kubernetes.io/instance-type": "m7i.xlarge"}
    ports = {p["name"]: p["containerPort"] for p in container(group)["ports"]}
    # With the metrics stack on (the default, issue 18): the ports the head PodMonitor scrapes.
    assert ports == {"gcs": 6379, "dashboard": 8265, "serve": 8000,
                     "metrics": 8080, "as-metrics": 44217, "dash-metrics": 44227}
    assert "ray stop" in " ".join(container(group)["lifecycle"]["preStop"]["exec"]["command"])
    assert "HF_HOME" in env_of(group)
    assert "nvidia.com/gpu" not in container(group)["resources"]["requests"]


def test_reference_workers_match_the_aws_deployment(reference_spec):
    (group,) = workers(render_rayservice(plan_deployment(reference_spec))).values()
    # Two nodes to start with; from then on the Ray autoscaler owns the count (KubeRay never
    # carries a RayService's replicas to its RayCluster).
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (2, 0, 128)
    assert group["rayStartParams"] == {"num-gpus": "1"}
    assert group["template"]["spec"]["nodeSelector"] == {
        "role": "gpu-worker", "raypd.io/node-group": "gpu", "node.kubernetes.io/instance-type": "g6.8xlarge"}
    box = container(group)
    for side in ("requests", "limits"):
        assert box["resources"][side]["nvidia.com/gpu"] == "1"
        assert box["resources"][side]["vpc.amazonaws.com/efa"] == "1"
    assert box["securityContext"]["privileged"] is True
    env = env_of(group)
    assert env["FI_PROVIDER"] == "efa"
    assert env["VLLM_HOST_IP"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert env["VLLM_SSM_CONV_STATE_LAYOUT"] == "DS"
    assert "HF_HOME" in env
    shm = [m for m in box["volumeMounts"] if m["mountPath"] == "/dev/shm"]
    (volume,) = [v for v in group["template"]["spec"]["volumes"] if v["name"] == shm[0]["name"]]
    assert volume["emptyDir"] == {"medium": "Memory"}
    assert "ray stop" in " ".join(box["lifecycle"]["preStop"]["exec"]["command"])


def test_reference_memory_limit_lets_the_page_cache_hold_the_checkpoint(reference_spec):
    (group,) = workers(render_rayservice(plan_deployment(reference_spec))).values()
    limit = to_bytes(container(group)["resources"]["limits"]["memory"])
    assert limit >= 4 * CHECKPOINT_GIB * 2**30


def test_reference_serve_config_v2_is_the_reference_application(reference_spec):
    manifest = render_rayservice(plan_deployment(reference_spec))
    parsed = yaml.safe_load(manifest["spec"]["serveConfigV2"])
    expected = render_serve_config(plan_deployment(reference_spec))["applications"]
    assert parsed == {"applications": expected}
    assert parsed["applications"][0]["import_path"] == "ray.serve.llm:build_pd_openai_app"


def test_no_deprecated_health_thresholds(reference_spec):
    spec_part = render_rayservice(plan_deployment(reference_spec))["spec"]
    assert "serviceUnhealthySecondThreshold" not in spec_part
    assert "deploymentUnhealthySecondThreshold" not in spec_part


def test_every_pod_runs_the_spec_image(make_spec):
    manifest = render_rayservice(plan_deployment(make_spec({"raypd:image": "example.com/ray-llm:custom"})))
    groups = [head(manifest), *workers(manifest).values()]
    assert {container(g)["image"] for g in groups} == {"example.com/ray-llm:custom"}


def test_default_image_is_the_regional_dlc(make_spec):
    manifest = render_rayservice(plan_deployment(make_spec({"aws:region": "us-west-2"})))
    assert container(head(manifest))["image"].startswith("763104351884.dkr.ecr.us-west-2.amazonaws.com/")


# ---- heterogeneous prefill/decode ----

def test_heterogeneous_phases_get_their_own_worker_groups(heterogeneous_spec):
    groups = workers(render_rayservice(plan_deployment(heterogeneous_spec)))
    assert set(groups) == {"prefill", "decode"}
    expected = {"prefill": (1, "8", "32"), "decode": (2, "8", "4")}
    for name, (nodes, gpus, efa) in expected.items():
        group = groups[name]
        assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (nodes, 0, 128)
        assert group["rayStartParams"]["num-gpus"] == gpus
        for side in ("requests", "limits"):
            resources = container(group)["resources"][side]
            assert (resources["nvidia.com/gpu"], resources["vpc.amazonaws.com/efa"]) == (gpus, efa)
        assert group["template"]["spec"]["nodeSelector"] == {
            "role": "gpu-worker", "raypd.io/phase": name, "raypd.io/node-group": name,
            "node.kubernetes.io/instance-type": heterogeneous_spec.phases[name].instance_type,
        }


def test_heterogeneous_workers_advertise_the_resource_their_engines_ask_for(heterogeneous_spec):
    manifest = render_rayservice(plan_deployment(heterogeneous_spec))
    groups = workers(manifest)
    app = yaml.safe_load(manifest["spec"]["serveConfigV2"])["applications"][0]
    for name in ("prefill", "decode"):
        advertised = ray_start_resources(groups[name]["rayStartParams"]["resources"])
        assert advertised == {f"raypd_{name}": 8}
        bundles = app["args"][f"{name}_config"]["placement_group_config"]["bundles"]
        # Every bundle of one engine fits on one worker of its own group, and only there.
        assert sum(b[f"raypd_{name}"] for b in bundles) <= advertised[f"raypd_{name}"]


@pytest.mark.parametrize("instance_type", [t.name for t in catalogue.gpu_instance_types()])
def test_worker_pod_fits_on_its_node_with_room_for_the_kubelet(make_spec, instance_type):
    spec = make_spec({"raypd:mode": "colocated", "raypd:kvTransfer": {"backend": "UCX"},
                      "raypd:colocated": {"instanceType": instance_type}})
    (group,) = workers(render_rayservice(plan_deployment(spec))).values()
    hardware = catalogue.CATALOGUE[instance_type]
    resources = container(group)["resources"]
    memory = to_bytes(resources["limits"]["memory"])
    assert resources["requests"]["memory"] == resources["limits"]["memory"]
    assert memory <= (hardware.memory_gib - 4) * 2**30
    assert memory >= 0.8 * hardware.memory_gib * 2**30 or hardware.memory_gib < 32
    assert 1 <= int(resources["requests"]["cpu"]) <= hardware.vcpus - 2
    assert "cpu" not in resources["limits"]


# ---- colocated, UCX, no EFA ----

def test_colocated_mode_has_one_worker_group_and_the_openai_app(colocated_spec):
    manifest = render_rayservice(plan_deployment(colocated_spec))
    (group,) = workers(manifest).values()
    assert group["groupName"] == "colocated"
    assert group["replicas"] == colocated_spec.colocated.nodes
    assert "resources" not in group["rayStartParams"]
    app = yaml.safe_load(manifest["spec"]["serveConfigV2"])["applications"][0]
    assert app["import_path"] == "ray.serve.llm:build_openai_app"


def test_ucx_backend_sets_no_libfabric_provider(make_spec):
    manifest = render_rayservice(plan_deployment(make_spec({"raypd:kvTransfer": {"backend": "UCX"}})))
    for group in workers(manifest).values():
        assert "FI_PROVIDER" not in env_of(group)
    app = yaml.safe_load(manifest["spec"]["serveConfigV2"])["applications"][0]
    backends = app["args"]["decode_config"]["engine_kwargs"]["kv_transfer_config"]
    assert backends["kv_connector_extra_config"]["backends"] == ["UCX"]


def test_instances_without_efa_request_no_efa_interfaces(make_spec):
    spec = make_spec({"raypd:mode": "colocated", "raypd:colocated": {"instanceType": "g5.xlarge"}})
    (group,) = workers(render_rayservice(plan_deployment(spec))).values()
    for side in ("requests", "limits"):
        assert "vpc.amazonaws.com/efa" not in container(group)["resources"][side]


# ---- the Hugging Face token ----

def test_hf_token_comes_from_a_secret_and_never_appears_in_the_manifest(make_spec):
    token = "hf_VerySecretTokenValue123"
    spec = make_spec({"raypd:hfToken": token})
    manifest = render_rayservice(plan_deployment(spec))
    assert token not in json.dumps(manifest)
    expected = {"secretKeyRef": {"name": hf_token_secret_name(spec), "key": "token"}}
    for group in [head(manifest), *workers(manifest).values()]:
        assert env_of(group)["HF_TOKEN"] == expected


def test_no_token_means_no_token_env(reference_spec):
    manifest = render_rayservice(plan_deployment(reference_spec))
    for group in [head(manifest), *workers(manifest).values()]:
        assert "HF_TOKEN" not in env_of(group)


def test_secret_name_is_a_valid_kubernetes_name(make_spec):
    name = hf_token_secret_name(make_spec({"raypd:serviceName": "a" * 47}))
    assert len(name) <= 253 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name)


# ---- what KubeRay's CRD requires (1.4.0 and 1.7.0), copied as a minimal check ----

@pytest.mark.parametrize("spec_fixture", ["reference_spec", "heterogeneous_spec", "colocated_spec"])
def test_manifest_has_every_field_kuberay_requires(spec_fixture, request):
    manifest = render_rayservice(plan_deployment(request.getfixturevalue(spec_fixture)))
    cluster = manifest["spec"]["rayClusterConfig"]
    assert head(manifest)["template"]["spec"]["containers"]
    for group in [head(manifest), *workers(manifest).values()]:
        # rayStartParams is a map of strings in the CRD; a bare number is rejected.
        assert all(isinstance(v, str) for v in group["rayStartParams"].values())
    for group in cluster["workerGroupSpecs"]:
        assert {"groupName", "minReplicas", "maxReplicas", "template"} <= set(group)
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
    assert isinstance(manifest["spec"]["serveConfigV2"], str)
    # The CRD's enums (1.4.0: autoscalerOptions.upscalingMode; upgradeStrategy.type is a string
    # KubeRay compares with NewCluster / None).
    assert cluster["enableInTreeAutoscaling"] is True
    assert cluster["autoscalerOptions"]["upscalingMode"] in ("Default", "Aggressive", "Conservative")
    assert isinstance(cluster["autoscalerOptions"]["idleTimeoutSeconds"], int)
    assert manifest["spec"]["upgradeStrategy"]["type"] in ("NewCluster", "None")


def test_zero_downtime_stacks_also_wait_for_kuberay_to_finish_the_cluster_switch(make_spec):
    # KubeRay's NewCluster upgrade keeps UpgradeInProgress True from the status write that first
    # carries the new generation until it promotes the pending cluster (components.render.rollout,
    # 3): Pulumi's update of the RayService waits for that, whatever else changed.
    def wait_for(config):
        manifest = render_rayservice(plan_deployment(make_spec(config)), "us-east-2a")
        return json.loads(manifest["metadata"]["annotations"]["pulumi.com/waitFor"])

    assert wait_for({"raypd:upgradeStrategy": "newCluster"}) == [
        "condition=Ready",
        "condition=UpgradeInProgress=False",
        "jsonpath={.status.activeServiceStatus.applicationStatuses.llm.status}=RUNNING",
    ]
    # In-place stacks (upgradeStrategy None) never get a pending cluster: their await is unchanged.
    assert "condition=UpgradeInProgress=False" not in wait_for({})


def test_the_cluster_digest_ignores_exactly_what_kuberay_ignores(make_spec):
    from components.render.rayservice import RAY_CLUSTER_DIGEST_ANNOTATION

    def digest(config):
        return render_rayservice(plan_deployment(make_spec(config)), "us-east-2a")[
            "metadata"]["annotations"][RAY_CLUSTER_DIGEST_ANNOTATION]

    base = digest({})
    assert digest({"raypd:decode": {"replicas": 3}}) == base  # replica counts: KubeRay keeps the cluster
    assert digest({"raypd:model": {"maxModelLen": 8192}}) == base  # the Serve config is not in it
    assert digest({"raypd:image": "example.com/ray-llm:2"}) != base
    assert digest({"raypd:kvTransfer": {"backend": "UCX"}}) != base  # FI_PROVIDER leaves the env


def test_zero_downtime_stacks_get_a_node_set_that_follows_rebuilds_not_replica_counts(make_spec):
    from components.render.rayservice import node_set

    def of(config):
        return node_set(plan_deployment(make_spec({"raypd:upgradeStrategy": "newCluster", **config})),
                        "us-east-2a")

    base = of({})
    assert base and of({"raypd:decode": {"replicas": 2}}) == base
    assert of({"raypd:model": {"maxModelLen": 8192}}) != base  # engines would restart: new cluster
    assert node_set(plan_deployment(make_spec({})), "us-east-2a") is None  # in-place stacks: none
    manifest = render_rayservice(plan_deployment(make_spec({"raypd:upgradeStrategy": "newCluster"})),
                                 "us-east-2a")
    (group,) = workers(manifest).values()
    assert group["template"]["spec"]["nodeSelector"]["raypd.io/node-set"] == base
    assert manifest["spec"]["upgradeStrategy"] == {"type": "NewCluster"}
    # Two heads share the system node during the switch: each takes a quarter of it.
    assert container(head(manifest))["resources"]["requests"]["cpu"] == "1"


def _allocatable_gib(memory_gib: float) -> float:
    """A conservative estimate of what the kubelet offers pods on an EKS node: ~3% of nominal
    memory is never seen by the OS (firmware, kernel), kube-reserved is 255 MiB + 11 MiB per pod
    (EKS's AL2023 formula; 250 pods taken as the worst case) and the hard eviction threshold 100 MiB."""
    return memory_gib * 0.97 - (255 + 11 * 250 + 100) / 1024


@pytest.mark.parametrize("instance_type", [t.name for t in catalogue.gpu_instance_types()])
def test_a_worker_pod_never_asks_for_more_memory_than_its_node_can_allocate(instance_type):
    from components.plan.topology import GpuGroupPlan

    hardware = catalogue.CATALOGUE[instance_type]
    group = GpuGroupPlan(name="gpu", instance_type=instance_type, nodes=1, gpus_per_node=hardware.gpus,
                         efa_interfaces_per_node=hardware.max_efa_interfaces, phases=("prefill",),
                         labels={}, ray_resource=None, root_volume_gb=200)
    resources = worker_resources(group)
    requested = float(resources["requests"]["memory"].removesuffix("Gi"))
    assert requested <= _allocatable_gib(hardware.memory_gib), (instance_type, requested)
    assert resources["limits"]["memory"] == resources["requests"]["memory"]  # Guaranteed QoS for memory


def test_two_heads_fit_one_system_node_during_the_first_zero_downtime_switch(make_spec):
    """The first switch to newCluster runs the old head (half a system node, in place) beside the
    new one (a quarter) on the single default m7i.xlarge, with what else runs there: the KubeRay
    operator (chart 1.4.0: 100m), CoreDNS (EKS add-on: 2 x 100m), kube-proxy (EKS: 100m) and the
    VPC CNI (aws-node: 25m), against the kubelet's allocatable (4 vCPU minus EKS's 80m kube-reserved
    for 4 cores)."""
    def head_cpu_m(config):
        manifest = render_rayservice(plan_deployment(make_spec(config)), "us-east-2a")
        cluster = manifest["spec"]["rayClusterConfig"]
        requests = container(head(manifest))["resources"]["requests"]["cpu"]
        autoscaler = cluster["autoscalerOptions"]["resources"]["requests"]["cpu"]
        return int(requests) * 1000 + int(autoscaler.removesuffix("m"))

    system_pods_m = 100 + 2 * 100 + 100 + 25
    allocatable_m = 4000 - 80
    both = head_cpu_m({}) + head_cpu_m({"raypd:upgradeStrategy": "newCluster"}) + system_pods_m
    assert both <= allocatable_m, both
