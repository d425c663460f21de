"""`python -m serve.render` as a user runs it: a subprocess, exit codes, stdout and stderr."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment
from components.render.serve_config import render_serve_config
from tests.unit.cli_support import run_module, write_stack

pytestmark = pytest.mark.slow


def run_render(*args: str) -> subprocess.CompletedProcess[str]:
    return run_module("serve.render", *args)



def test_sample_stack_renders_yaml_for_serve_deploy():
    result = run_render("--config", "Pulumi.dev.yaml")
    assert result.returncode == 0, result.stderr
    document = yaml.safe_load(result.stdout)
    assert document["applications"][0]["import_path"] == "ray.serve.llm:build_pd_openai_app"
    assert document["http_options"]["port"] == 8000


def test_output_is_the_serve_config_of_the_stack_file(tmp_path):
    body = ("config:\n  aws:region: us-west-2\n  raypd:mode: colocated\n"
            "  raypd:colocated: {instanceType: g6.12xlarge, replicas: 3, tensorParallelSize: 2}\n")
    path = write_stack(tmp_path, body)
    result = run_render("--config", str(path))
    assert result.returncode == 0, result.stderr
    expected = render_serve_config(plan_deployment(DeploymentSpec.from_config(yaml.safe_load(body)["config"], "demo")))
    assert yaml.safe_load(result.stdout) == expected


def test_output_file_option_writes_the_file_and_nothing_to_stdout(tmp_path):
    target = tmp_path / "serve.yaml"
    result = run_render("--config", "Pulumi.dev.yaml", "--output", str(target))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert yaml.safe_load(target.read_text())["applications"][0]["name"]


def test_invalid_config_exits_2_naming_the_field_without_traceback(tmp_path):
    path = write_stack(tmp_path, "config:\n  raypd:prefill: {tensorParallelSize: 2}\n")
    result = run_render("--config", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("raypd:prefill.tensorParallelSize: ")
    assert "Traceback" not in result.stderr


def test_every_error_gets_its_own_line(tmp_path):
    path = write_stack(tmp_path, "config:\n  raypd:namespace: Not_Valid\n  raypd:serviceName: -x\n")
    result = run_render("--config", str(path))
    assert result.returncode == 2
    fields = sorted(line.split(": ", 1)[0] for line in result.stderr.splitlines())
    assert fields == ["raypd:namespace", "raypd:serviceName"]


def test_missing_file_exits_2_with_a_clear_message(tmp_path):
    result = run_render("--config", str(tmp_path / "Pulumi.nope.yaml"))
    assert result.returncode == 2
    assert result.stderr.startswith("--config: no such file")
    assert "Traceback" not in result.stderr


def test_encrypted_token_in_the_stack_file_is_neither_needed_nor_printed(tmp_path):
    path = write_stack(tmp_path, "config:\n  raypd:hfToken:\n    secure: v1:abc:CIPHERTEXT\n")
    result = run_render("--config", str(path))
    assert result.returncode == 0, result.stderr
    assert "CIPHERTEXT" not in result.stdout + result.stderr


def test_risky_choices_are_warned_about_on_stderr_only(tmp_path):
    path = write_stack(tmp_path, "config:\n  raypd:kvTransfer: {backend: UCX}\n")
    result = run_render("--config", str(path))
    assert result.returncode == 0
    assert "warning: raypd:kvTransfer.backend is UCX" in result.stderr
    assert yaml.safe_load(result.stdout)["applications"]


def test_a_bad_stack_name_is_rejected(tmp_path):
    result = run_render("--config", "Pulumi.dev.yaml", "--stack", "Bad_Name")
    assert result.returncode == 2
    assert result.stderr.startswith("name: ")
