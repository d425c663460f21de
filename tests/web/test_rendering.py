"""Pure pieces behind the pages: form <-> config, the architecture picture, redaction, summaries."""

from __future__ import annotations

import re

import pytest

from components.config.spec import DeploymentSpec
from webui import forms
from webui.diagram import architecture_svg
from webui.redact import redact, redact_value
from webui.summary import rayservice_yaml, summarize


def test_default_form_submits_the_reference_deployment():
    name, config, errors = forms.form_to_config(forms.default_values() | {"name": "ref"})
    assert errors == [] and name == "ref"
    assert DeploymentSpec.from_config(config, "ref") == DeploymentSpec.from_config({}, "ref")


def test_form_sends_only_the_phases_of_the_chosen_mode():
    _, config, _ = forms.form_to_config(forms.default_values() | {"raypd:mode": "colocated"})
    assert "raypd:colocated" in config
    assert "raypd:prefill" not in config and "raypd:kvTransfer" not in config


def test_form_reports_non_numbers_and_missing_values_per_field():
    values = forms.default_values() | {"raypd:model.gpuMemoryUtilization": "lots", "raypd:namespace": " "}
    _, _, errors = forms.form_to_config(values)
    assert {e.field: e.message for e in errors} == {
        "raypd:model.gpuMemoryUtilization": "must be a number such as 0.9",
        "raypd:namespace": "is required",
    }


def test_unchecked_checkbox_means_false_and_optional_blanks_are_left_out():
    values = forms.default_values() | {"raypd:model.enforceEager": "", "raypd:clusterName": ""}
    _, config, _ = forms.form_to_config(values)
    assert config["raypd:model"]["enforceEager"] is False
    assert "raypd:clusterName" not in config


def test_form_values_never_echo_the_token():
    shown = forms.form_values(forms.default_values() | {"raypd:hfToken": "hf_secretvalue123456"})
    assert "raypd:hfToken" not in shown


def test_errors_split_into_field_and_general():
    from components.config.errors import FieldError

    by_field, general = forms.split_errors([
        FieldError("raypd:prefill.replicas", "too many"), FieldError("config", "bad"),
    ])
    assert by_field == {"raypd:prefill.replicas": "too many"}
    assert [e.field for e in general] == ["config"]


def test_form_choices_come_from_the_catalogue():
    field = forms.FIELDS_BY_KEY["raypd:prefill.instanceType"]
    names = [value for value, _ in field.choices]
    assert "g6.8xlarge" in names and "p5.48xlarge" in names
    assert all("." in name for name in names)


def test_architecture_shows_prefill_decode_and_the_kv_path():
    spec = DeploymentSpec.from_config({"raypd:decode": {"replicas": 3}}, "pd")
    svg = str(architecture_svg(spec))
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert "Prefill" in svg and "Decode" in svg and "KV cache" in svg
    assert "NIXL over EFA" in svg and "LIBFABRIC" in svg
    assert "3 vLLM replicas" in svg
    assert "svc/ray-llm-serve-svc:8000" in svg
    assert " style=" not in svg and "<script" not in svg


def test_architecture_of_colocated_has_no_kv_path():
    svg = str(architecture_svg(DeploymentSpec.from_config({"raypd:mode": "colocated"}, "c")))
    assert "Colocated" in svg and "KV cache" not in svg


def _with_model_id(model_id: str) -> DeploymentSpec:
    """A spec whose model id the grammar would refuse (it did not always): the renderers must
    stay safe on their own, not only because validation caught it first."""
    spec = DeploymentSpec.from_config({}, "esc")
    return spec.model_copy(update={"model": spec.model.model_copy(update={"id": model_id})})


def test_model_ids_with_markup_or_shell_syntax_are_refused_by_the_grammar():
    from components.config.errors import SpecError

    for bad in ("m<x>", "a'b", "$(x)", "a;b", "a`b`", "-leading"):
        with pytest.raises(SpecError, match="raypd:model.id"):
            DeploymentSpec.from_config({"raypd:model": {"id": bad}})


def test_architecture_escapes_what_it_draws():
    assert "<x>" not in str(architecture_svg(_with_model_id("m<x>")))


def test_redact_masks_credentials_and_colour_codes():
    text = "\x1b[31mtoken=abcdefgh123\x1b[0m and hf_abcdefghijklmnop and Authorization: Bearer abc.def.ghi123"
    clean = redact(text)
    assert "abcdefgh123" not in clean and "hf_abcdefghijklmnop" not in clean and "abc.def.ghi123" not in clean
    assert "\x1b" not in clean
    assert redact_value({"a": ["hf_abcdefghijklmnop"], "n": 3}) == {"a": ["[secret]"], "n": 3}


def test_secrets_are_known_by_their_field_and_format_not_their_value():
    key = "rpd_" + "A1b2" * 11
    text = (f'set-all --secret raypd:hfToken=us-east-2 {{"password": "hunter22"}} key {key} '
            "postgresql://raypd:s3cretpw@db:5432/raypd")
    assert redact(text) == ('set-all --secret raypd:hfToken=[secret] {"password": "[secret]"} key [secret] '
                            "postgresql://raypd:[secret]@db:5432/raypd")
    # The same words where no field says they are a secret stay as they are.
    assert redact("network-private-us-east-2a hunter22") == "network-private-us-east-2a hunter22"
    value = {"raypd:hfToken": "us-east-2", "aws:region": "us-east-2", "hasHfToken": True,
             "outputs": {"kubeconfig": "apiVersion: v1", "apiKey": None, "region": "us-east-2"},
             "gcs": {"redisPassword": "us-east-2", "output_tokens_per_s": 3}}
    assert redact_value(value) == {"raypd:hfToken": "[secret]", "aws:region": "us-east-2", "hasHfToken": True,
                                   "outputs": {"kubeconfig": "[secret]", "apiKey": None, "region": "us-east-2"},
                                   "gcs": {"redisPassword": "[secret]", "output_tokens_per_s": 3}}


def test_ordinary_text_is_left_alone():
    text = "create aws:ec2/vpc:Vpc network-vpc (10.0.0.0/16); tokens per second: 35"
    assert redact(text) == text


def test_summary_prices_and_counts_the_reference():
    summary = summarize(DeploymentSpec.from_config({}, "dev"))
    assert summary["gpus"] == 2 and summary["gpuNodes"] == 2
    assert summary["usdPerHour"] > 4
    assert [g["name"] for g in summary["nodeGroups"]] == ["gpu"]
    assert summary["kvTransfer"] == {"connector": "NixlConnector", "backend": "LIBFABRIC"}
    assert re.match(r"prefill: 1 replica TP1 on 1 g6\.8xlarge node", summary["topology"])


def test_rayservice_yaml_references_the_token_secret_not_its_value():
    spec = DeploymentSpec.from_config({"raypd:hfToken": "hf_realvalue1234567"}, "dev")
    text = rayservice_yaml(spec)
    assert "kind: RayService" in text and "secretKeyRef" in text
    assert "hf_realvalue1234567" not in text


def test_the_connect_curl_command_is_safe_to_paste_whatever_the_model_id(tmp_path):
    import json
    import subprocess

    from webui.deployments.views import connect_info

    hostile = "x';touch${IFS}pwned;echo${IFS}'$(touch${IFS}pwned2)`touch${IFS}pwned3`"
    spec = _with_model_id(hostile)
    command = connect_info(spec, None)["curl"]
    script = 'curl() { for a in "$@"; do printf "%s\\0" "$a"; done > args; }\n' + command
    subprocess.run(["bash", "-c", script], cwd=tmp_path, check=True, timeout=10)
    assert not any((tmp_path / name).exists() for name in ("pwned", "pwned2", "pwned3"))
    args = (tmp_path / "args").read_text().split("\0")
    assert json.loads(args[args.index("-d") + 1])["model"] == hostile


def test_the_form_has_one_field_per_contract_1_key_derived_from_the_spec():
    from webui.resource_steps import config_diff

    every_key_set = DeploymentSpec.from_config({
        "raypd:clusterName": "c", "raypd:availabilityZone": "us-east-2a", "raypd:image": "x/ray:1",
        "raypd:hfToken": "hf_formtestformtestformtest", "raypd:adminRoleArns": ["arn:aws:iam::123456789012:role/a"],
        "raypd:upgradeStrategy": "newCluster", "raypd:apiAccessCidrs": ["203.0.113.0/24"],
        "raypd:endpoint": {"scope": "vpc", "host": "llm.example.com", "allowedCidrs": ["10.0.0.0/8"],
                           "certificateArn": "arn:aws:acm:us-east-2:123456789012:certificate/"
                                             "0f3c7d2e-1b4a-4c5d-9e8f-a1b2c3d4e5f6"},
        "raypd:inClusterClients": ["apps"],
        "raypd:observability": {"enabled": False, "prometheusRetention": "30d"},
        "raypd:faultTolerance": {"gcs": "external", "redisAddress": "rediss://r.example:6379",
                                 "redisPasswordSecret": "gcs-redis/password"},
        **{f"raypd:{phase}": {"replicas": 2, "autoscaling": {
            "minReplicas": 1, "maxReplicas": 3, "targetOngoingRequests": 8, "upscaleDelaySeconds": 30,
            "downscaleDelaySeconds": 900}} for phase in ("prefill", "decode", "colocated")},
    })
    contract_keys = {item["key"] for item in config_diff({}, every_key_set.public_config())}
    form_keys = {field.key for field in forms.FIELDS if field.key != forms.NAME_FIELD}
    assert form_keys == contract_keys
    by_key = forms.FIELDS_BY_KEY
    assert by_key["raypd:mode"].choices == (("disaggregated", "disaggregated"), ("colocated", "colocated"))
    assert by_key["raypd:colocated.replicas"].default == 2  # the spec's own default for that phase
    assert by_key["raypd:model.enforceEager"].kind == "bool"
    assert by_key["raypd:hfToken"].kind == "password"
