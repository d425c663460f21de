"""The in-cluster benchmark Job: rendered by a pure function, checked like the RayService is (what
Kubernetes requires of a Job and its pod), and its mounted files run on their own."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from typing import Any

import pytest
import yaml

from components.config.spec import DeploymentSpec
from components.render.outputs import render_stack_outputs
from components.render.serve_config import serve_safe_model_id
from serve.benchmark.job import (
    MOUNT_ROOT,
    RUN_FILES,
    JobError,
    package_sources,
    render_benchmark_job,
)
from tests.fakes.openai_server import OpenAIServer
from tests.fakes.serve_api import ServeApi
from tests.unit.cli_support import run_module

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")


def _outputs() -> dict[str, Any]:
    spec = DeploymentSpec.from_config({}, "dev")
    return render_stack_outputs(spec, availability_zone="us-east-2a", cluster_name="raypd-dev")


def _render(run_args: list[str], name: str = "bench-1") -> tuple[dict[str, Any], dict[str, Any]]:
    config_map, job = render_benchmark_job(_outputs(), name, run_args, package_sources())
    return config_map, job


def test_the_job_is_what_kubernetes_requires_of_a_job_and_its_pod():
    config_map, job = _render(["--rate", "2", "--requests", "100", "--preset", "chat"])
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    assert (config_map["apiVersion"], config_map["kind"]) == ("v1", "ConfigMap")
    for manifest in (config_map, job):
        assert DNS_LABEL.fullmatch(manifest["metadata"]["name"]) and len(manifest["metadata"]["name"]) <= 63
        assert manifest["metadata"]["namespace"] == "inference"
    pod = job["spec"]["template"]["spec"]
    assert pod["restartPolicy"] in ("Never", "OnFailure")  # a Job's pods may not restart Always
    assert job["spec"]["backoffLimit"] == 0
    (container,) = pod["containers"]
    assert DNS_LABEL.fullmatch(container["name"]) and container["image"] == _outputs()["image"]
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    for mount in container["volumeMounts"]:
        assert mount["name"] in volumes and mount["mountPath"].startswith("/")
    assert volumes["code"]["configMap"]["name"] == config_map["metadata"]["name"]
    assert all(CONFIG_MAP_KEY.fullmatch(key) for key in config_map["data"])
    assert all(isinstance(value, str) for value in config_map["data"].values())
    assert pod["nodeSelector"] == {"role": "system"}  # never on a GPU node
    yaml.safe_dump_all([config_map, job])  # plain data all the way down


def test_the_job_benchmarks_the_stacks_own_endpoint_with_the_given_load():
    _, job = _render(["--rate", "2", "--requests", "100"])
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:4] == ["python", "-m", "serve.benchmark", "run"]
    assert command[command.index("--endpoint") + 1] == _outputs()["openaiBaseUrl"]
    assert _outputs()["openaiBaseUrl"] == "http://ray-llm-serve-svc.inference.svc.cluster.local:8000/v1"
    assert command[command.index("--model") + 1] == "qwen3.5-9b"
    assert command[command.index("--rate") + 1] == "2" and command[-1] == "--json"


@pytest.mark.parametrize("name,args,message", [
    ("Bad_Name", [], "DNS-1123"),
    ("x" * 53, [], "at most 52"),
    ("ok", ["--endpoint", "http://elsewhere"], "--endpoint is set by the Job"),
    ("ok", ["--out", "/tmp/x"], "--out is set by the Job"),
])
def test_bad_names_and_arguments_the_job_sets_itself_are_refused(name, args, message):
    with pytest.raises(JobError, match=message):
        render_benchmark_job(_outputs(), name, args, package_sources())


def test_the_mounted_files_alone_run_a_benchmark(tmp_path):
    """As in the pod: only the ConfigMap's files under MOUNT_ROOT, no raypd, no matplotlib."""
    config_map, job = _render(["--concurrency", "2", "--requests", "4", "--output-tokens", "8"])
    root = tmp_path / MOUNT_ROOT.strip("/")
    package = root / "serve" / "benchmark"
    package.mkdir(parents=True)
    for key, source in config_map["data"].items():
        (package / key).write_text(source, encoding="utf-8")
    assert sorted(config_map["data"]) == sorted(RUN_FILES)
    with OpenAIServer("qwen3.5-9b") as server:
        command = job["spec"]["template"]["spec"]["containers"][0]["command"]
        command = [sys.executable, *command[1:]]
        command[command.index("--endpoint") + 1] = server.url
        command[command.index("--out") + 1] = str(tmp_path / "results")
        env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(root)}
        result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["requests"] == {"sent": 4, "completed": 4, "failed": 0}


def test_the_cli_prints_the_manifests_for_kubectl(tmp_path):
    outputs = tmp_path / "outputs.json"
    secret = "apiVersion: v1 # SECRET-KUBECONFIG-7788"
    outputs.write_text(json.dumps({**_outputs(), "kubeconfig": secret}), encoding="utf-8")
    result = run_module("serve.benchmark", "job", "--outputs", str(outputs), "--name", "cmp-1",
                        "--", "--rate", "1", "--requests", "10")
    assert result.returncode == 0, result.stderr
    kinds = [doc["kind"] for doc in yaml.safe_load_all(result.stdout)]
    assert kinds == ["ConfigMap", "Job"]
    assert "SECRET-KUBECONFIG-7788" not in result.stdout  # nothing secret from the outputs ends up in the Job
    bad = run_module("serve.benchmark", "job", "--outputs", str(tmp_path / "missing.json"))
    assert bad.returncode == 2 and "--outputs" in bad.stderr and "Traceback" not in bad.stderr


def test_a_scheduled_job_samples_the_heads_serve_api_for_raypds_deployments():
    outputs = _outputs()
    _, job = _render(["--schedule", "0s:1,60s:8,180s:end"])
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("--dashboard") + 1] == (
        f"http://{outputs['dashboardService']}.{outputs['namespace']}.svc.cluster.local:8265")
    assert outputs["dashboardService"] == "ray-llm-head-svc"
    model = serve_safe_model_id(outputs["modelId"])
    assert json.loads(command[command.index("--serve-deployments") + 1]) == {
        "decode": f"Decode:{model}", "prefill": f"Prefill:{model}"}
    _, steady = _render(["--rate", "2", "--requests", "10"])  # a steady load samples nothing
    assert "--dashboard" not in steady["spec"]["template"]["spec"]["containers"][0]["command"]


@pytest.mark.parametrize("args,message", [
    (["--trace", "mine.jsonl"], "the pod cannot read files"),
    (["--schedule-file", "s.yaml"], "give the schedule inline"),
    (["--schedule", "0s:1,9s:end", "--dashboard", "http://x:8265"], "--dashboard is set by the Job"),
])
def test_files_and_the_sampling_flags_are_not_for_the_job(args, message):
    with pytest.raises(JobError, match=message):
        render_benchmark_job(_outputs(), "ok", args, package_sources())


def test_the_cli_sends_a_schedule_file_inline(tmp_path):
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(_outputs()), encoding="utf-8")
    schedule = tmp_path / "s.json"
    schedule.write_text(json.dumps({"steps": [{"at": 0, "rate": 1}, {"at": "1m", "rate": 2, "to": 6}],
                                    "end": "5m"}), encoding="utf-8")
    result = run_module("serve.benchmark", "job", "--outputs", str(outputs), "--", "--schedule-file", str(schedule))
    assert result.returncode == 0, result.stderr
    command = list(yaml.safe_load_all(result.stdout))[1]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("--schedule") + 1] == "0s:1,60s:2->6,300s:end"
    assert "--schedule-file" not in command


def test_the_mounted_files_alone_run_a_scheduled_benchmark_and_sample_the_replicas(tmp_path):
    """As in the pod, with a schedule: the replica sampling needs nothing beyond RUN_FILES either."""
    config_map, job = _render(["--schedule", "0s:4,1s:end", "--arrivals", "uniform", "--output-tokens", "2",
                               "--input-tokens", "3", "--sample-every", "0.2"])
    root = tmp_path / MOUNT_ROOT.strip("/")
    package = root / "serve" / "benchmark"
    package.mkdir(parents=True)
    for key, source in config_map["data"].items():
        (package / key).write_text(source, encoding="utf-8")
    deployments = json.loads(job["spec"]["template"]["spec"]["containers"][0]["command"][
        job["spec"]["template"]["spec"]["containers"][0]["command"].index("--serve-deployments") + 1])
    with OpenAIServer("qwen3.5-9b") as server, ServeApi(
            lambda t: {name: (1, ["RUNNING"]) for name in deployments.values()}) as api:
        command = job["spec"]["template"]["spec"]["containers"][0]["command"]
        command = [sys.executable, *command[1:]]
        command[command.index("--endpoint") + 1] = server.url
        command[command.index("--dashboard") + 1] = api.url
        command[command.index("--out") + 1] = str(tmp_path / "results")
        env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(root)}
        result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["requests"] == {"sent": 4, "completed": 4, "failed": 0}
    assert summary["replicas"]["sampled"] and summary["replicas"]["max_running"] == {"decode": 1, "prefill": 1}
