"""`python -m components.plan` as a user (and the web app's offline engine) runs it: a subprocess
for the reference plan, its repeat and the secrets; the CLI's `main` in this process for the other
cases (the same code after the interpreter starts, without a start of seconds each)."""

from __future__ import annotations

import json
import subprocess

import pytest

from components.stack.offline_plan import main
from tests.unit.cli_support import run_main, run_module, write_stack

BANNER = "OFFLINE PLAN (Pulumi mock runtime): nothing is created in AWS"
CIPHERTEXT = "v1:Zm9vYmFyLWNpcGhlcnRleHQtdGhhdC1tdXN0LW5vdC1sZWFr"
pytestmark = pytest.mark.slow


def run_plan_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_module("components.plan", *args)


def run_plan_main(*args: str) -> subprocess.CompletedProcess[str]:
    return run_main(main, *args)



@pytest.fixture(scope="module")
def reference_json() -> subprocess.CompletedProcess[str]:
    return run_plan_cli("--config", "Pulumi.dev.yaml", "--json")


def test_json_plan_has_the_contract_shape(reference_json):
    assert reference_json.returncode == 0, reference_json.stderr
    plan = json.loads(reference_json.stdout)
    assert plan["stack"] == "dev" and plan["project"] == "raypd" and plan["offline"] is True
    assert isinstance(plan["warnings"], list)
    for resource in plan["resources"]:
        assert {"type", "name", "inputs", "dependsOn"} <= set(resource)
        assert isinstance(resource["dependsOn"], list)
    types = {r["type"] for r in plan["resources"]}
    assert {"kubernetes:ray.io/v1:RayService", "eks:index:Cluster",
            "eks:index:ManagedNodeGroup", "kubernetes:helm.sh/v3:Release"} <= types
    assert plan["outputs"]["kubeconfig"] == "[secret]"
    assert plan["outputs"]["clusterName"] == "raypd-demo"


def test_the_plan_lists_the_values_it_made_up_and_the_summary_labels_each(reference_json):
    # Issue 29 §2: the NLB's name, the image digest, the zone and the metrics addresses read as real.
    plan = json.loads(reference_json.stdout)
    assert set(plan["placeholders"]) == {"endpoint.url", "image", "imageProvenance.digest", "availabilityZone",
                                         "observability.grafanaUrl", "observability.prometheusUrl"}
    summary = run_plan_main("--config", "Pulumi.dev.yaml").stdout.splitlines()
    url = plan["outputs"]["endpoint"]["url"]
    lines = [line for line in summary if url in line]
    assert lines and all("[placeholder:" in line for line in lines), lines
    for key in ("image", "imageProvenance", "availabilityZone", "observability"):
        (line,) = [line for line in summary if line.startswith(f"  {key}: ")]
        assert "[placeholder:" in line, line
    (cluster,) = [line for line in summary if line.startswith("  clusterName: ")]
    assert "placeholder" not in cluster  # the configured name is no placeholder


def test_two_runs_print_the_same_json(reference_json):
    again = run_plan_cli("--config", "Pulumi.dev.yaml", "--json")
    assert again.returncode == 0
    assert again.stdout == reference_json.stdout


def test_summary_says_offline_first_and_shows_the_gpu_nodes():
    result = run_plan_main("--config", "Pulumi.dev.yaml")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == BANNER
    gpu_line = next(line for line in lines if "g6.8xlarge" in line)
    assert "2 x g6.8xlarge" in gpu_line and "EFA on" in gpu_line and "us-east-2a" in gpu_line
    assert "kubeconfig: [secret]" in result.stdout
    assert "kubernetes:ray.io/v1:RayService" in result.stdout
    assert "public API from 0.0.0.0/0, private endpoint on" in result.stdout
    assert "raypd:apiAccessCidrs allows 0.0.0.0/0" in result.stdout  # the warning


def test_stack_name_comes_from_the_file_name_unless_given(tmp_path):
    stack = write_stack(tmp_path, "config:\n  aws:region: eu-west-1\n", "Pulumi.eu.yaml")
    by_file = json.loads(run_plan_main("--config", str(stack), "--json").stdout)
    assert by_file["stack"] == "eu" and by_file["outputs"]["clusterName"] == "raypd-eu"
    assert by_file["outputs"]["availabilityZone"] == "eu-west-1a"
    by_flag = json.loads(run_plan_main("--config", str(stack), "--stack", "other", "--json").stdout)
    assert by_flag["stack"] == "other"


def test_secure_config_values_never_appear_in_any_output(tmp_path):
    stack = write_stack(tmp_path, f"config:\n  raypd:hfToken:\n    secure: {CIPHERTEXT}\n")
    as_json = run_plan_cli("--config", str(stack), "--json")
    summary = run_plan_cli("--config", str(stack))
    for result in (as_json, summary):
        assert result.returncode == 0, result.stderr
        assert CIPHERTEXT not in result.stdout + result.stderr
    plan = json.loads(as_json.stdout)
    (secret,) = [r for r in plan["resources"] if r["type"] == "kubernetes:core/v1:Secret"
                 and r["name"].endswith("hf-token")]
    assert secret["inputs"]["stringData"] == "[secret]"


@pytest.mark.parametrize("body, field", [
    ("config:\n  raypd:replicas: 2\n", "raypd:replicas"),
    ("config:\n  raypd:prefill:\n    tensorParallelSize: 2\n", "raypd:prefill.tensorParallelSize"),
    ("config:\n  raypd:decode:\n    instanceType: g6.xlarge\n", "raypd:decode.instanceType"),
    ("config:\n  raypd:model: [unclosed\n", "--config"),
], ids=["unknown-key", "tp-too-big", "libfabric-without-efa", "bad-yaml"])
def test_invalid_config_exits_2_naming_the_field(tmp_path, body, field):
    result = run_plan_main("--config", str(write_stack(tmp_path, body)), "--json")
    assert result.returncode == 2
    assert result.stdout == ""
    assert any(line.startswith(f"{field}: ") for line in result.stderr.splitlines()), result.stderr
    assert "Traceback" not in result.stderr


def test_missing_file_exits_2_naming_the_option(tmp_path):
    result = run_plan_main("--config", str(tmp_path / "Pulumi.nope.yaml"))
    assert result.returncode == 2
    assert result.stderr.startswith("--config: no such file")
    assert "Traceback" not in result.stderr
