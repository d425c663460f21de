"""Hostile config documents: every reader (stack files for plan/render/preflight, kubeconfigs and
outputs for verify, Pulumi's JSON config text) refuses aliases, runaway nesting and numbers, keys
given twice and oversized files with exit 2 and one line naming the file, quickly (issue 16 §2)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from components.config.errors import SpecError
from components.config.safe_documents import MAX_DEPTH, DocumentError, DuplicateKeyError, load_json, load_yaml
from components.config.spec import DeploymentSpec
from components.config.stack_file import load_stack_file
from serve.kube import KubeConfigError, parse_kubeconfig_text
from tests.unit.cli_support import run_module, write_stack

_LAUGHS = "a: &a [lol,lol,lol,lol,lol,lol,lol,lol,lol]\n" + "".join(
    f"{name}: &{name} [{','.join([f'*{prev}'] * 9)}]\n" for prev, name in zip("abcdefgh", "bcdefghi", strict=True))
HOSTILE_YAML = {
    "recursive-alias": ("config: &a\n  raypd:model: *a\n", "alias"),
    "billion-laughs": (_LAUGHS + "config: {raypd:model: *i}\n", "alias"),
    "deep-flow": ("config:\n  raypd:model: " + "[" * 5000 + "]" * 5000 + "\n", f"nested more than {MAX_DEPTH}"),
    "deep-block": ("config:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(200)) + "  " * 201 + "x: 1\n",
                   f"nested more than {MAX_DEPTH}"),
    "5000-digits": ("config:\n  raypd:prefill: {replicas: " + "9" * 5000 + "}\n", "more than 100 digits"),
    "duplicate-key": ("config:\n  raypd:mode: colocated\n  raypd:mode: disaggregated\n", "twice"),
    "bad-date": ("config:\n  raypd:image: 2024-13-45\n", "cannot be read"),
    "control-char": ("config:\n  raypd:image: a\x01b\n", "#x0001"),
    "shell-syntax": ("config:\n  raypd:image: $(touch /tmp/x) `id` | rm -rf ~ ; &&\n",
                     "not valid YAML"),
}


def test_billion_laughs_is_under_400_bytes_and_refused_at_once() -> None:
    text = HOSTILE_YAML["billion-laughs"][0]
    assert len(text.encode()) < 400
    started = time.monotonic()
    with pytest.raises(DocumentError, match="alias"):
        load_yaml(text)
    assert time.monotonic() - started < 5  # unbounded expansion takes over 60 s


@pytest.mark.parametrize("name", sorted(HOSTILE_YAML))
def test_stack_file_refusals_are_one_config_error_naming_the_file(tmp_path: Path, name: str) -> None:
    text, fragment = HOSTILE_YAML[name]
    path = write_stack(tmp_path, text)
    try:
        config, _ = load_stack_file(path)
    except SpecError as exc:
        (error,) = exc.errors
        assert error.field == "--config" and str(path) in error.message and fragment in error.message
        assert "\n" not in error.message
        return
    # Shell syntax is plain text to YAML: the spec refuses it as an image reference instead.
    assert name == "shell-syntax"
    with pytest.raises(SpecError) as caught:
        DeploymentSpec.from_config(config)
    assert caught.value.errors[0].field == "raypd:image"


def test_yaml_the_readers_need_still_reads() -> None:
    text = ("config:\n  aws:region: us-west-2\n  raypd:prefill: {replicas: 2}\n  raypd:hfToken:\n"
            "    secure: v1:abc\n  anchored: &unused 1\n  merged:\n    <<: {a: 1}\n    b: 2\n")
    document = load_yaml(text)
    assert document["config"]["raypd:prefill"] == {"replicas": 2}
    assert document["config"]["merged"] == {"a": 1, "b": 2}
    assert load_yaml("n: 1_000") == {"n": 1000}


def test_size_is_bounded_before_parsing() -> None:
    with pytest.raises(DocumentError, match="larger than 1 KiB"):
        load_yaml("a: " + "x" * 2000, max_bytes=1024)
    with pytest.raises(DocumentError, match="larger than 1 KiB"):
        load_json('"' + "x" * 2000 + '"', max_bytes=1024)


@pytest.mark.parametrize("text, fragment", [
    ('{"a": 1, "a": 2}', "'a' twice"),
    ('{"a": {"b": [{"c": 1, "c": 2}]}}', "'a.b[0].c' twice"),
    ("[NaN]", "NaN"), ('{"x": -Infinity}', "Infinity"), ("[1e999]", "too large"),
    ("[" + "9" * 5000 + "]", "more than 100 digits"),
    ("[" * 100_000 + "]" * 100_000, "nested more than"), ("[" * 70 + "]" * 70, "nested more than"),
    ('{"a": 1', "not valid JSON"), (b"\xff\xfe\xfd", "not"),
])
def test_json_refusals(text: str, fragment: str) -> None:
    with pytest.raises(DocumentError) as caught:
        load_json(text)
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


def test_a_duplicate_json_key_names_its_path() -> None:
    with pytest.raises(DuplicateKeyError) as caught:
        load_json('{"config": {"raypd:model": {"id": "a", "id": "b"}}}')
    assert caught.value.path == "config.raypd:model.id"
    assert load_json('{"a": [1, {"b": null}], "c": 1.5}') == {"a": [1, {"b": None}], "c": 1.5}


@pytest.mark.parametrize("value, field", [
    ('{"replicas": ' + "9" * 5000 + "}", "raypd:prefill"),
    ('{"replicas": 1, "replicas": 2}', "raypd:prefill.replicas"),
    ("[" * 5000, "raypd:prefill"),
])
def test_pulumi_json_config_text_is_a_field_error(value: str, field: str) -> None:
    with pytest.raises(SpecError) as caught:
        DeploymentSpec.from_config({"raypd:prefill": value})
    assert caught.value.errors[0].field == field


@pytest.mark.parametrize("name", ["recursive-alias", "billion-laughs", "deep-flow", "5000-digits", "duplicate-key"])
def test_kubeconfig_refusals_never_quote_the_text(name: str) -> None:
    text = HOSTILE_YAML[name][0].replace("config:", "users:\n- token: SECRET-TOKEN-1\nconfig:", 1)
    with pytest.raises(KubeConfigError) as caught:
        parse_kubeconfig_text(text)
    assert str(caught.value).startswith("the kubeconfig ") and "SECRET-TOKEN-1" not in str(caught.value)


def test_yaml_problems_do_not_quote_document_text() -> None:
    with pytest.raises(DocumentError) as caught:
        load_yaml("token: !s3cr3t-value x\n")
    assert "s3cr3t" not in str(caught.value)


def assert_one_line_exit_2(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert all(fragment in lines[0] for fragment in fragments), result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("module", ["components.plan", "serve.render", "components.preflight"])
def test_stack_file_clis_exit_2_with_one_line(tmp_path: Path, module: str) -> None:
    for name in ("billion-laughs", "deep-flow", "5000-digits"):
        text, fragment = HOSTILE_YAML[name]
        path = write_stack(tmp_path, text, name=f"Pulumi.{name}.yaml")
        started = time.monotonic()
        assert_one_line_exit_2(run_module(module, "--config", str(path)), str(path), fragment)
        assert time.monotonic() - started < 60


@pytest.mark.slow
def test_verify_exits_2_with_one_line_naming_the_file(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs.json"
    outputs.write_text('{"kubeconfig": "x", "kubeconfig": "y"}', encoding="utf-8")
    assert_one_line_exit_2(run_module("serve.verify", "--outputs", str(outputs)), str(outputs), "twice")
    outputs.write_text('{"region": ' + "9" * 5000 + "}", encoding="utf-8")
    assert_one_line_exit_2(run_module("serve.verify", "--outputs", str(outputs)), str(outputs), "digits")
    outputs.write_text(json.dumps({"schemaVersion": 1}), encoding="utf-8")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(HOSTILE_YAML["billion-laughs"][0], encoding="utf-8")
    assert_one_line_exit_2(run_module("serve.verify", "--outputs", str(outputs), "--kubeconfig", str(kubeconfig)),
                           str(kubeconfig), "alias")
