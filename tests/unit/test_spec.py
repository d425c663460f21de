"""DeploymentSpec: reference defaults and every validation rule, each with a failing and a passing case."""

from __future__ import annotations

from typing import Any

import pytest

from components.config.errors import SpecError
from components.config.spec import DeploymentSpec, validate_stack_name


def errors_of(config: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(SpecError) as caught:
        DeploymentSpec.from_config(config, "dev")
    return {e.field: e.message for e in caught.value.errors}


def accepts(config: dict[str, Any]) -> DeploymentSpec:
    return DeploymentSpec.from_config(config, "dev")


# ---- defaults: the AWS reference deployment ----

def test_empty_config_is_the_reference_deployment():
    spec = accepts({})
    assert spec.region == "us-east-2"
    assert spec.effective_cluster_name == "raypd-dev"
    assert spec.kubernetes_version == "1.35"
    assert spec.availability_zone is None
    assert (spec.system_nodes.instance_type, spec.system_nodes.count) == ("m7i.xlarge", 1)
    assert spec.mode == "disaggregated"
    assert spec.model.id == "qwen3.5-9b"
    assert spec.model.source == "Qwen/Qwen3.5-9B"
    assert spec.model.max_model_len == 4096
    assert spec.model.dtype == "bfloat16"
    assert spec.model.gpu_memory_utilization == 0.9
    assert spec.model.enforce_eager is True
    for phase in (spec.prefill, spec.decode):
        assert phase.instance_type == "g6.8xlarge"
        assert (phase.replicas, phase.tensor_parallel_size, phase.pipeline_parallel_size) == (1, 1, 1)
    assert spec.colocated.instance_type == "g6.8xlarge"
    assert spec.colocated.replicas == 2
    assert (spec.kv_transfer.connector, spec.kv_transfer.backend) == ("NixlConnector", "LIBFABRIC")
    assert spec.image_uri == "763104351884.dkr.ecr.us-east-2.amazonaws.com/ray:serve-llm-cuda-v1.0"
    assert (spec.ray_version, spec.kuberay_version) == ("2.58.0", "1.4.0")
    assert (spec.namespace, spec.service_name) == ("inference", "ray-llm")
    assert spec.hf_token is None
    assert spec.api_access_cidrs == ("0.0.0.0/0",)
    # The reference's one risky choice: EKS's open public API endpoint (see test_control_plane.py).
    assert len(spec.warnings) == 1 and spec.warnings[0].startswith("raypd:apiAccessCidrs allows 0.0.0.0/0")


def test_default_cluster_name_follows_the_stack():
    assert DeploymentSpec.from_config({}, "team-a").effective_cluster_name == "raypd-team-a"
    assert accepts({"raypd:clusterName": "mine"}).effective_cluster_name == "mine"


def test_default_image_follows_the_region():
    assert accepts({"aws:region": "us-west-2"}).image_uri.startswith("763104351884.dkr.ecr.us-west-2.")
    assert accepts({"raypd:image": "example.com/ray:1"}).image_uri == "example.com/ray:1"


def test_structured_values_arrive_as_json_text_from_pulumi():
    spec = accepts({"raypd:prefill": '{"instanceType": "g6e.12xlarge", "tensorParallelSize": 4}'})
    assert spec.prefill.instance_type == "g6e.12xlarge"
    assert spec.prefill.tensor_parallel_size == 4


def test_provider_keys_of_other_namespaces_are_left_alone():
    assert accepts({"aws:profile": "ops", "kubernetes:context": "x"}).region == "us-east-2"


# ---- field rules ----

def test_unknown_raypd_key_is_named():
    assert "raypd:replicas" in errors_of({"raypd:replicas": 3})
    assert accepts({"raypd:namespace": "serving"}).namespace == "serving"


def test_unknown_nested_key_is_named():
    assert errors_of({"raypd:model": {"idd": "x"}})["raypd:model.idd"] == "unknown key"


def test_instance_type_must_be_a_known_gpu_type():
    message = errors_of({"raypd:decode": {"instanceType": "m7i.xlarge"}})["raypd:decode.instanceType"]
    assert "not a GPU instance type" in message and "g6.8xlarge" in message
    assert accepts({"raypd:decode": {"instanceType": "p5en.48xlarge", "tensorParallelSize": 8}})


@pytest.mark.parametrize("typo,suggested", [
    ("g6.8xlarg", "g6.8xlarge"), ("G6.8XLARGE", "g6.8xlarge"), ("p5.48xlarg", "p5.48xlarge"),
    ("g7.8xlarge", "g5.8xlarge or g6.8xlarge"),
])
def test_a_misspelt_instance_type_gets_the_close_names_not_the_catalogue(typo: str, suggested: str):
    message = errors_of({"raypd:decode": {"instanceType": typo}})["raypd:decode.instanceType"]
    assert message == f"'{typo}' is not a GPU instance type raypd knows; did you mean {suggested}?"


def test_a_name_close_to_no_gpu_type_lists_them_and_a_blob_is_not_echoed():
    assert "known: g5.xlarge, g5.2xlarge" in errors_of({"raypd:decode": {"instanceType": "h100"}})[
        "raypd:decode.instanceType"]
    message = errors_of({"raypd:decode": {"instanceType": "g6" * 5000}})["raypd:decode.instanceType"]
    assert message.startswith("is 10000 characters long") and "g6g6" not in message


def test_tensor_parallel_must_fit_the_node_gpus():
    errors = errors_of({"raypd:prefill": {"tensorParallelSize": 2}})
    assert errors["raypd:prefill.tensorParallelSize"] == (
        "tensorParallelSize x pipelineParallelSize = 2 needs 2 GPUs per replica but g6.8xlarge has 1"
    )
    assert accepts({"raypd:prefill": {"instanceType": "g6.12xlarge", "tensorParallelSize": 4}})


def test_pipeline_parallel_counts_against_the_node_gpus():
    config = {"raypd:decode": {"instanceType": "g6.12xlarge", "tensorParallelSize": 2,
                               "pipelineParallelSize": 4}}
    assert "raypd:decode.pipelineParallelSize" in errors_of(config)
    config["raypd:decode"]["pipelineParallelSize"] = 2
    assert accepts(config).decode.gpus_per_replica == 4


def test_replicas_must_be_at_least_one():
    assert "raypd:decode.replicas" in errors_of({"raypd:decode": {"replicas": 0}})
    assert accepts({"raypd:decode": {"replicas": 3}}).decode.nodes == 3


def test_wrong_types_name_the_field():
    assert "raypd:prefill.replicas" in errors_of({"raypd:prefill": {"replicas": "two"}})
    assert "raypd:model" in errors_of({"raypd:model": 7})


def test_libfabric_requires_efa_capable_instance():
    message = errors_of({"raypd:prefill": {"instanceType": "g5.xlarge"}})["raypd:prefill.instanceType"]
    assert "EFA" in message and "g5.xlarge" in message
    assert accepts({"raypd:prefill": {"instanceType": "g5.8xlarge"}})


def test_ucx_backend_allows_non_efa_instances_but_warns():
    spec = accepts({"raypd:prefill": {"instanceType": "g5.xlarge"},
                    "raypd:decode": {"instanceType": "g5.xlarge"},
                    "raypd:kvTransfer": {"backend": "UCX"}})
    assert any("TCP speed" in w for w in spec.warnings)


def test_colocated_mode_does_not_need_efa():
    spec = accepts({"raypd:mode": "colocated", "raypd:colocated": {"instanceType": "g5.xlarge"}})
    assert list(spec.phases) == ["colocated"]


def test_kv_backend_must_be_libfabric_or_ucx():
    assert "raypd:kvTransfer.backend" in errors_of({"raypd:kvTransfer": {"backend": "TCP"}})
    assert "raypd:kvTransfer.connector" in errors_of({"raypd:kvTransfer": {"connector": "LMCache"}})


def test_model_id_and_source_are_required():
    assert "raypd:model.id" in errors_of({"raypd:model": {"id": " "}})
    assert "raypd:model.source" in errors_of({"raypd:model": {"source": ""}})
    assert "raypd:model.source" in errors_of({"raypd:model": {"source": "not a repo"}})
    assert accepts({"raypd:model": {"source": "s3://my-models/qwen3.5-9b/"}})


def test_dtype_must_be_one_of_vllms():
    assert "raypd:model.dtype" in errors_of({"raypd:model": {"dtype": "int4"}})
    assert accepts({"raypd:model": {"dtype": "float16"}}).model.dtype == "float16"


@pytest.mark.parametrize("value", [0, -0.1, 0.99, 1.5])
def test_gpu_memory_utilization_must_be_in_range(value):
    assert "raypd:model.gpuMemoryUtilization" in errors_of({"raypd:model": {"gpuMemoryUtilization": value}})


def test_gpu_memory_utilization_upper_bound_is_allowed():
    assert accepts({"raypd:model": {"gpuMemoryUtilization": 0.98}}).model.gpu_memory_utilization == 0.98


def test_max_model_len_must_be_positive():
    assert "raypd:model.maxModelLen" in errors_of({"raypd:model": {"maxModelLen": 0}})
    assert accepts({"raypd:model": {"maxModelLen": 32768}}).model.max_model_len == 32768


def test_rayservice_name_is_at_most_47_characters():
    assert "raypd:serviceName" in errors_of({"raypd:serviceName": "a" * 48})
    assert accepts({"raypd:serviceName": "a" * 47})


@pytest.mark.parametrize("key", ["raypd:serviceName", "raypd:namespace"])
def test_names_must_be_dns_1123_labels(key):
    assert "DNS-1123" in errors_of({key: "Ray_LLM"})[key]
    assert accepts({key: "ray-llm-2"})


def test_mode_must_be_disaggregated_or_colocated():
    assert "raypd:mode" in errors_of({"raypd:mode": "split"})


def test_region_and_availability_zone_must_agree():
    message = errors_of({"aws:region": "us-east-2", "raypd:availabilityZone": "us-west-2a"})
    assert "us-west-2a" in message["raypd:availabilityZone"]
    assert accepts({"aws:region": "us-west-2", "raypd:availabilityZone": "us-west-2c"})


def test_region_must_look_like_a_region():
    assert "aws:region" in errors_of({"aws:region": "ohio"})


@pytest.mark.parametrize(("typo", "suggested"), [
    ("us-east-3", "us-east-2"), ("eu-west", "eu-west-1"), ("ap-southeast-9", "ap-southeast-7"),
])
def test_region_must_be_one_botocore_knows_and_typos_get_the_close_names(typo: str, suggested: str):
    # Shaped like a region, but no partition has it: refused offline, before any AWS call.
    message = errors_of({"aws:region": typo})["aws:region"]
    assert f"'{typo}' is not an AWS region" in message
    assert "did you mean" in message and suggested in message


def test_regions_of_every_partition_are_accepted():
    for region in ("us-east-1", "eu-central-2", "cn-northwest-1", "us-gov-west-1", "me-central-1"):
        image = "example.com/ray:1" if region.startswith("us-gov-") else ""
        assert accepts({"aws:region": region, "raypd:image": image}).region == region


def test_a_huge_region_is_refused_without_being_echoed():
    message = errors_of({"aws:region": "us-east-" + "1" * 100_000})["aws:region"]
    assert len(message) < 200 and "not an AWS region" in message


def test_default_image_comes_from_the_regions_own_dlc_registry():
    # aws/deep-learning-containers docs/reference/region_availability.md: account per region.
    assert accepts({"aws:region": "af-south-1"}).image_uri == (
        "626614931356.dkr.ecr.af-south-1.amazonaws.com/ray:serve-llm-cuda-v1.0")
    assert accepts({"aws:region": "cn-north-1"}).image_uri.startswith(
        "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/")


def test_a_region_without_a_dlc_registry_needs_raypd_image():
    errors = errors_of({"aws:region": "us-gov-west-1"})
    assert list(errors) == ["raypd:image"]
    assert "us-gov-west-1 has no AWS Deep Learning Containers registry" in errors["raypd:image"]
    assert "set raypd:image" in errors["raypd:image"]
    own_image = "123456789012.dkr.ecr.us-gov-west-1.amazonaws.com/ray:1"
    own = accepts({"aws:region": "us-gov-west-1", "raypd:image": own_image})
    assert own.image_uri.startswith("123456789012.dkr.ecr.us-gov-west-1.")


def test_kubernetes_version_must_be_a_supported_minor():
    assert "raypd:kubernetesVersion" in errors_of({"raypd:kubernetesVersion": "v1.35"})
    assert "raypd:kubernetesVersion" in errors_of({"raypd:kubernetesVersion": "1.20"})
    assert accepts({"raypd:kubernetesVersion": "1.34"})


def test_versions_must_be_semver():
    assert "raypd:rayVersion" in errors_of({"raypd:rayVersion": "latest"})
    assert "raypd:kuberayVersion" in errors_of({"raypd:kuberayVersion": "1.4"})


def test_different_tensor_parallel_sizes_are_allowed_with_a_warning():
    spec = accepts({"raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 8},
                    "raypd:decode": {"instanceType": "g6e.12xlarge", "tensorParallelSize": 4}})
    assert any("tensorParallelSize" in w and "fragile" in w for w in spec.warnings)


def test_every_problem_is_reported_at_once():
    errors = errors_of({"raypd:model": {"dtype": "int4", "maxModelLen": -1}, "raypd:mode": "x"})
    assert {"raypd:model.dtype", "raypd:model.maxModelLen", "raypd:mode"} <= set(errors)


@pytest.mark.parametrize("strict", [False, True], ids=["stack-file", "json-api"])
def test_a_refused_key_hides_no_other_problem(strict: bool):
    # pydantic runs the cross-field checks only when every field is valid, and a key refused
    # before validation (unknown, not text, a JSON key twice) used to end it: a typo hid the rest.
    config = {
        "raypd:decode": {"instanceType": "g6.8xlarg"},        # a field
        "raypd:prefill": {"tensorParallelSize": 2},           # between keys: TP x PP vs the GPUs
        "raypd:bogus": 1,                                     # unknown
        "raypd:namespace": "a\nb",                            # not text
        "raypd:inClusterClients": ["Bad_NS"],                 # a validator with its own keys
        "raypd:model": '{"id": "a", "id": "b"}',              # JSON text with a key twice
        "raypd:adminRoleArns": ["arn:aws:iam::1:role/x"],     # checked between keys, by index
    }
    with pytest.raises(SpecError) as caught:
        DeploymentSpec.from_config(config, "dev", strict=strict)
    # The JSON API does not read JSON text as an object (issue 29): there the model is refused whole.
    model = "raypd:model" if strict else "raypd:model.id"
    assert sorted(e.field for e in caught.value.errors) == sorted([
        "raypd:decode.instanceType", "raypd:prefill.tensorParallelSize", "raypd:bogus",
        "raypd:namespace", "raypd:inClusterClients[0]", model, "raypd:adminRoleArns[0]"])


def test_a_check_between_keys_is_not_run_on_the_default_of_a_refused_key():
    # The zone is judged against the region: with the region refused, nothing says it is wrong.
    assert set(errors_of({"aws:region": "us-east-9", "raypd:availabilityZone": "eu-west-1a"})) == {"aws:region"}
    # A mode typo: which phases run is unknown, so none is judged against its GPUs.
    assert set(errors_of({"raypd:mode": "colocatd", "raypd:prefill": {"tensorParallelSize": 2}})) == {"raypd:mode"}
    # The KV backend refused: the EFA rule that reads it is not run; the GPU count still is.
    errors = errors_of({"raypd:kvTransfer": {"backend": "TCP"},
                        "raypd:prefill": {"instanceType": "g5.xlarge", "tensorParallelSize": 2}})
    assert set(errors) == {"raypd:kvTransfer.backend", "raypd:prefill.tensorParallelSize"}


def test_public_config_hides_the_hf_token_and_round_trips():
    spec = accepts({"raypd:hfToken": "hf_SECRET_value", "raypd:prefill": {"replicas": 2}})
    public = spec.public_config()
    assert public["raypd:hfToken"] == "[secret]"
    assert "hf_SECRET_value" not in repr(public) and "hf_SECRET_value" not in repr(spec)
    again = DeploymentSpec.from_config({k: v for k, v in public.items() if k != "raypd:hfToken"}, "dev")
    assert again.prefill.replicas == 2


@pytest.mark.parametrize("name", ["Dev", "a_b", "-x", "", "x" * 41])
def test_bad_stack_names_are_rejected(name):
    with pytest.raises(SpecError) as caught:
        validate_stack_name(name)
    assert caught.value.errors[0].field == "name"


def test_good_stack_name_is_accepted():
    assert validate_stack_name("team-a-prod") == "team-a-prod"


@pytest.mark.parametrize("key,value", [
    ("raypd:serviceName", "ray-llm\n"), ("raypd:namespace", "inference\n"),
    ("raypd:clusterName", "demo\n"), ("aws:region", "us-east-2\n"), ("raypd:rayVersion", "2.58.0\n"),
])
def test_a_trailing_newline_is_not_part_of_a_valid_name(key, value):
    assert key in errors_of({key: value})


def test_a_trailing_newline_is_not_part_of_a_stack_name():
    with pytest.raises(SpecError):
        validate_stack_name("demo\n")
