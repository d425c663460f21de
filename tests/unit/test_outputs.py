"""Stack outputs (Contract 3): content, schema validation, and what counts as a broken document."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components.render import outputs
from components.render.outputs import (
    OUTPUT_KEYS,
    SCHEMA_VERSION,
    OutputsError,
    render_stack_outputs,
    validate_outputs,
)

CONTRACT_3_KEYS = {  # DESIGN.md, Contract 3 ("at least")
    "schemaVersion", "region", "clusterName", "availabilityZone", "namespace", "rayServiceName",
    "serveService", "openaiBaseUrl", "portForwardCommand", "modelId", "mode", "topology",
    "kvTransfer", "kubeconfig",
}
KUBECONFIG = json.dumps({"apiVersion": "v1", "kind": "Config", "clusters": []})


def full_document(spec, **overrides: Any) -> dict[str, Any]:
    document = render_stack_outputs(spec, availability_zone=f"{spec.region}a",
                                     cluster_name=spec.effective_cluster_name)
    document["kubeconfig"] = KUBECONFIG
    document.update(overrides)
    return document


def test_reference_outputs_tell_a_client_where_the_endpoint_is(reference_spec):
    document = render_stack_outputs(reference_spec, availability_zone="us-east-2a",
                                    cluster_name="raypd-demo")
    assert document["schemaVersion"] == 1
    assert (document["region"], document["clusterName"], document["availabilityZone"]) == (
        "us-east-2", "raypd-demo", "us-east-2a")
    assert document["serveService"] == "ray-llm-serve-svc"
    assert document["openaiBaseUrl"] == "http://ray-llm-serve-svc.inference.svc.cluster.local:8000/v1"
    assert document["portForwardCommand"] == (
        "kubectl -n inference port-forward svc/ray-llm-serve-svc 8000:8000")
    assert (document["modelId"], document["mode"]) == ("qwen3.5-9b", "disaggregated")
    assert document["kvTransfer"] == {"connector": "NixlConnector", "backend": "LIBFABRIC"}


def test_rendered_outputs_have_every_contract_key_except_the_kubeconfig(reference_spec):
    document = render_stack_outputs(reference_spec, availability_zone="us-east-2a",
                                    cluster_name="raypd-dev")
    assert CONTRACT_3_KEYS - set(document) == {"kubeconfig"}
    assert set(OUTPUT_KEYS) == CONTRACT_3_KEYS


def test_reference_topology_reports_one_node_per_phase_on_the_shared_group(reference_spec):
    topology = full_document(reference_spec)["topology"]
    assert set(topology) == {"prefill", "decode"}
    for phase in topology.values():
        assert phase == {"instanceType": "g6.8xlarge", "nodes": 1, "replicas": 1,
                         "tensorParallelSize": 1, "pipelineParallelSize": 1, "nodeGroup": "gpu",
                         "gpusPerNode": 1}


def test_heterogeneous_topology_names_each_phases_node_group(heterogeneous_spec):
    topology = full_document(heterogeneous_spec)["topology"]
    prefill, decode = topology["prefill"], topology["decode"]
    assert (prefill["instanceType"], prefill["nodeGroup"], prefill["nodes"]) == ("p5.48xlarge", "prefill", 1)
    assert (decode["instanceType"], decode["nodeGroup"], decode["nodes"]) == ("g6e.48xlarge", "decode", 2)
    assert (decode["replicas"], decode["tensorParallelSize"]) == (2, 8)


def test_colocated_outputs_have_no_kv_transfer_and_validate(colocated_spec):
    document = full_document(colocated_spec)
    assert set(document["topology"]) == {"colocated"}
    assert document["kvTransfer"] is None
    validate_outputs(document)


@pytest.mark.parametrize("spec_fixture", ["reference_spec", "heterogeneous_spec", "colocated_spec"])
def test_full_documents_validate_against_the_schema(spec_fixture, request):
    validate_outputs(full_document(request.getfixturevalue(spec_fixture)))


def test_masked_kubeconfig_as_pulumi_prints_it_still_validates(reference_spec):
    validate_outputs(full_document(reference_spec, kubeconfig="[secret]"))


@pytest.mark.parametrize("key", sorted(CONTRACT_3_KEYS))
def test_a_document_missing_any_contract_key_fails(reference_spec, key):
    document = full_document(reference_spec)
    del document[key]
    with pytest.raises(OutputsError) as caught:
        validate_outputs(document)
    assert any(key in problem for problem in caught.value.problems)


def test_another_schema_version_fails(reference_spec):
    with pytest.raises(OutputsError, match="schemaVersion"):
        validate_outputs(full_document(reference_spec, schemaVersion=SCHEMA_VERSION + 1))


def test_disaggregated_document_needs_both_phases_and_kv_transfer(reference_spec):
    document = full_document(reference_spec, kvTransfer=None)
    del document["topology"]["decode"]
    with pytest.raises(OutputsError) as caught:
        validate_outputs(document)
    text = " ".join(caught.value.problems)
    assert "decode" in text and "kvTransfer" in text


def test_added_keys_are_not_a_breaking_change(reference_spec):
    validate_outputs(full_document(reference_spec, grafanaUrl="http://grafana.example"))


def test_a_bad_kubeconfig_is_reported_without_echoing_it(reference_spec):
    with pytest.raises(OutputsError) as caught:
        validate_outputs(full_document(reference_spec, kubeconfig={"token": "k8s-aws-v1.SECRET"}))
    assert "SECRET" not in str(caught.value)
    assert "kubeconfig" in str(caught.value)


def test_schema_is_found_from_any_working_directory(reference_spec, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    outputs.load_schema.cache_clear()
    validate_outputs(full_document(reference_spec))


def test_cost_estimate_is_left_out_when_a_price_is_unknown(make_spec, reference_spec):
    assert full_document(reference_spec)["estimatedUsdPerHour"] > 0
    unpriced = make_spec({"raypd:mode": "colocated",
                          "raypd:colocated": {"instanceType": "p5e.48xlarge", "tensorParallelSize": 8}})
    assert "estimatedUsdPerHour" not in full_document(unpriced)


def test_the_cost_estimate_says_where_its_price_comes_from(make_spec, reference_spec):
    # The reference runs in us-east-2, but the catalogue's prices are us-east-1's list prices.
    basis = full_document(reference_spec)["estimatedCostBasis"]
    assert basis.startswith("us-east-1 on-demand list price") and "this is not us-east-2's" in basis
    east = full_document(make_spec({"aws:region": "us-east-1"}))["estimatedCostBasis"]
    assert east.startswith("us-east-1 on-demand list price") and "not" not in east
    unpriced = make_spec({"raypd:mode": "colocated",
                          "raypd:colocated": {"instanceType": "p5e.48xlarge", "tensorParallelSize": 8}})
    assert "estimatedCostBasis" not in full_document(unpriced)  # no figure, nothing to explain


# ---- what an offline plan made up (issue 29 §2): one list of paths, read by every place that shows them ----

def offline_outputs(spec, digest: Any = "sha256:" + "0ff1" * 16) -> dict[str, Any]:
    document = render_stack_outputs(spec, availability_zone=f"{spec.region}a",
                                    cluster_name=spec.effective_cluster_name,
                                    image_provenance={"reference": "r", "digest": digest})
    document["endpoint"] = {"url": "http://k8s-envoygat-x-1.elb.us-east-2.amazonaws.com/v1",
                            "scope": spec.endpoint.scope, "auth": spec.endpoint.auth}
    return document


def test_an_offline_plan_names_every_value_it_made_up(reference_spec):
    found = outputs.offline_placeholders(reference_spec, offline_outputs(reference_spec))
    assert set(found) == {"endpoint.url", "image", "imageProvenance.digest", "availabilityZone",
                          "observability.grafanaUrl", "observability.prometheusUrl"}
    assert all(why for why in found.values())


def test_values_the_settings_fix_are_not_placeholders(reference_spec):
    spec = reference_spec.model_copy(update={
        "availability_zone": "us-east-2b",
        "endpoint": reference_spec.endpoint.model_copy(update={"host": "llm.example.com"}),
        "observability": reference_spec.observability.model_copy(update={"enabled": False})})
    assert outputs.offline_placeholders(spec, offline_outputs(spec, digest=None)) == {}
    in_cluster = reference_spec.model_copy(update={
        "endpoint": reference_spec.endpoint.model_copy(update={"scope": "cluster"})})
    assert "endpoint.url" not in outputs.offline_placeholders(in_cluster, offline_outputs(in_cluster))


def test_placeholders_under_an_output_key_name_the_sub_key():
    marks = {"endpoint.url": "made up", "image": "no registry", "imageProvenance.digest": "no registry"}
    assert outputs.placeholders_under(marks, "endpoint") == [("url", "made up")]
    assert outputs.placeholders_under(marks, "image") == [("", "no registry")]
    assert outputs.placeholders_under(marks, "imageProvenance") == [("digest", "no registry")]
    assert outputs.placeholders_under(None, "image") == []
