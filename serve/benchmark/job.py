"""The benchmark as a Kubernetes Job next to the endpoint: a pure renderer, manifests out.

Latencies measured through `kubectl port-forward` include the tunnel; from a pod in the same
cluster they are the endpoint's own. The serving image already has Python and aiohttp, so the Job
runs that image with this package's files mounted from a ConfigMap (the `run` command imports
nothing else: no matplotlib, no raypd), on a system node so it never takes a GPU node's CPUs. It
prints the Contract 6 summary as JSON on stdout, which `kubectl logs job/<name>` returns.

    python -m serve.benchmark job --outputs FILE|- --name NAME [-- RUN ARGS] | kubectl apply -f -
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from components.config import defaults
from components.render.serve_config import serve_deployment_name

PACKAGE_DIR = Path(__file__).resolve().parent
# The files `python -m serve.benchmark run` needs, and nothing that pulls heavy imports.
RUN_FILES = ("__init__.py", "__main__.py", "cli_args.py", "events.py", "loadgen.py", "replicas.py", "runfiles.py",
             "schedule.py", "summary.py", "table.py", "trace.py", "usage.py", "varying.py", "workload.py")
MOUNT_ROOT = "/opt/raypd"
RESULTS_DIR = "/tmp/benchmark"
JOB_TTL_SECONDS = 24 * 3600
_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


JOB_NAME_PREFIX = "raypd-bench-"
LABEL = "raypd.io/benchmark"  # on the ConfigMap, the Job and its pod: the Job's name


def job_name_for(run_id: str) -> str:
    """The Job of one web benchmark run: DNS-1123, unique per run."""
    return f"{JOB_NAME_PREFIX}{run_id.lower()}"[:52].rstrip("-")


class JobError(ValueError):
    """Outputs or a name the Job cannot be rendered from: exit 2 in the CLI."""


def package_sources() -> dict[str, str]:
    """The run command's source files, read from this package (what the ConfigMap carries)."""
    return {name: (PACKAGE_DIR / name).read_text(encoding="utf-8") for name in RUN_FILES}


def endpoint_of(outputs: Mapping[str, Any]) -> str:
    """The OpenAI base URL inside the cluster: the stack outputs' own `openaiBaseUrl` (Contract 3)."""
    url = outputs.get("openaiBaseUrl")
    if not isinstance(url, str) or not url:
        raise JobError("the outputs have no openaiBaseUrl (not raypd stack outputs?)")
    return url


def dashboard_of(outputs: Mapping[str, Any]) -> str:
    """The Ray head's dashboard inside the cluster, where the Serve REST API answers: the outputs'
    `dashboardService` (docs/outputs.md; KubeRay's `<rayServiceName>-head-svc`), port 8265."""
    service = outputs.get("dashboardService") or f"{outputs.get('rayServiceName') or ''}-head-svc"
    return f"http://{service}.{outputs.get('namespace')}.svc.cluster.local:{defaults.DASHBOARD_PORT}"


def sampling_args(outputs: Mapping[str, Any], run_args: Sequence[str]) -> list[str]:
    """For a schedule: `--dashboard` and `--serve-deployments` ({phase: deployment}, raypd's names
    for the outputs' phases), so the run in the pod samples each phase's replicas. The run's own
    varying.FLAGS are not imported here (this module renders; the pod parses)."""
    def given(flag: str) -> bool:
        return any(arg == flag or arg.startswith(flag + "=") for arg in run_args)

    if given("--trace") or given("--schedule-file"):
        raise JobError("the pod cannot read files from here: give the schedule inline (--schedule); "
                       "replay a trace from your machine (run --trace FILE --outputs ...)")
    if not given("--schedule"):
        return []
    phases = sorted((outputs.get("topology") or {}).keys()) or ["prefill", "decode"]
    deployments = {phase: serve_deployment_name(phase, str(outputs.get("modelId"))) for phase in phases}
    return ["--dashboard", dashboard_of(outputs), "--serve-deployments", json.dumps(deployments)]


def render_benchmark_job(
    outputs: Mapping[str, Any], name: str, run_args: Sequence[str], sources: Mapping[str, str],
    *, for_program: bool = False, deadline_seconds: Optional[int] = None,
) -> list[dict[str, Any]]:
    """[ConfigMap, Job] that run `serve.benchmark run` against the stack's own endpoint.

    `run_args` are the run command's arguments after `--endpoint/--model/--out` (which the Job
    sets): the load and the workload (`--rate 2 --requests 200 --preset chat`...). The log is the
    summary JSON for a person (`kubectl logs`), or with `for_program` the event stream
    (serve/benchmark/events.py) that carries progress and every request's record. A
    `deadline_seconds` (activeDeadlineSeconds) stops the Job on the cluster's side even when
    whoever started it is gone.
    """
    if not _NAME.fullmatch(name) or len(name) > 52:  # the Job's pods add a suffix to 63
        raise JobError(f"--name {name!r} must be a DNS-1123 label of at most 52 characters")
    for flag in ("--endpoint", "--model", "--out", "--json", "--events", "--dashboard", "--serve-deployments"):
        if flag in run_args:
            raise JobError(f"{flag} is set by the Job itself; leave it out of the run arguments")
    namespace = str(outputs.get("namespace") or "")
    image, model = outputs.get("image"), outputs.get("modelId")
    if not namespace or not image or not model:
        raise JobError("the outputs need namespace, image and modelId (raypd stack outputs, Contract 3)")
    labels = {"app.kubernetes.io/part-of": "raypd", "app.kubernetes.io/component": "benchmark",
              LABEL: name}
    command = ["python", "-m", "serve.benchmark", "run", "--endpoint", endpoint_of(outputs),
               "--model", str(model), *run_args, *sampling_args(outputs, run_args), "--out", RESULTS_DIR,
               "--events" if for_program else "--json"]
    config_map = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": f"{name}-code", "namespace": namespace, "labels": labels},
        "data": dict(sources),
    }
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels,
                     "annotations": {"raypd.io/command": shlex.join(command)}},
        "spec": {
            "backoffLimit": 0,  # a failed benchmark is a result to read, not something to retry
            "ttlSecondsAfterFinished": JOB_TTL_SECONDS,
            **({"activeDeadlineSeconds": int(deadline_seconds)} if deadline_seconds else {}),
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": dict(defaults.SYSTEM_LABELS),
                    "containers": [{
                        "name": "benchmark",
                        "image": str(image),
                        "command": command,
                        "env": [{"name": "PYTHONPATH", "value": MOUNT_ROOT},
                                {"name": "PYTHONUNBUFFERED", "value": "1"}],
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                      "limits": {"memory": "2Gi"}},
                        "volumeMounts": [
                            # `serve` without an __init__.py is a namespace package: enough for -m.
                            {"name": "code", "mountPath": f"{MOUNT_ROOT}/serve/benchmark", "readOnly": True},
                            {"name": "results", "mountPath": RESULTS_DIR},
                        ],
                    }],
                    "volumes": [
                        {"name": "code", "configMap": {"name": f"{name}-code"}},
                        {"name": "results", "emptyDir": {}},
                    ],
                },
            },
        },
    }
    return [config_map, job]
