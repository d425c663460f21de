"""The benchmark run as a Kubernetes Job (serve/benchmark/incluster.py), end to end on loopback.

The fake Kubernetes API (tests.fakes.kube_api) really runs the Job: the ConfigMap's files under a
temp root, the container's command as a process whose output is the pod's log. The endpoint is a
real OpenAI-compatible server (tests.fakes.openai_server). So every test here runs the same
`python -m serve.benchmark run --events` a pod would, and checks what InClusterRun makes of it and
that nothing is left behind in the cluster.
"""

from __future__ import annotations

import copy
import io
import json
import os
import signal
import socket
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Optional

import pytest

from serve.benchmark.__main__ import main
from serve.benchmark.events import RunResult, write_result
from serve.benchmark.incluster import (
    VERDICT_SECONDS,
    BenchmarkCancelled,
    BenchmarkFailed,
    InClusterRun,
    job_state,
    pod_problem,
    terminated_reason,
)
from serve.kube import KubeClient, KubeError, KubeNotFound, KubeUnreachable, client_from_kubeconfig
from tests.fakes.kube_api import FakeKubeApi
from tests.fakes.openai_server import OpenAIServer
from tests.patience import PATIENCE_S, until

SMALL = ["--rate", "20", "--requests", "30", "--output-tokens", "8", "--input-tokens", "16"]
NOTHING = {"configmaps": [], "jobs": [], "pods": []}


@contextmanager
def cluster(**knobs: Any) -> Iterator[tuple[FakeKubeApi, OpenAIServer, dict[str, Any], KubeClient]]:
    """A fake cluster whose stack endpoint is a real OpenAI server, and a client for it."""
    with FakeKubeApi(**knobs) as kube:
        outputs = kube.outputs()
        with OpenAIServer(outputs["modelId"], output_tokens=8) as api:
            outputs["openaiBaseUrl"] = api.base_url
            yield kube, api, outputs, client_from_kubeconfig(outputs["kubeconfig"])


def _run(client: KubeClient, outputs: dict[str, Any], args: list[str], *, name: str = "bench-1",
         run_seconds: float = 60.0, cancelled: Callable[[], bool] = lambda: False,
         progress: Optional[list[dict[str, Any]]] = None, **options: Any) -> RunResult:
    seen = progress if progress is not None else []
    options.setdefault("poll_seconds", 0.05)
    run = InClusterRun(client, outputs, name, args, run_seconds=run_seconds, **options)
    return run.run(seen.append, cancelled)


def _paths(kube: FakeKubeApi, method: str) -> list[str]:
    return [r["path"] for r in kube.requests if r["method"] == method]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_small_run_comes_back_whole_and_leaves_nothing_behind():
    progress: list[dict[str, Any]] = []
    with cluster() as (kube, api, outputs, client):
        result = _run(client, outputs, SMALL, progress=progress)
        assert result.summary["requests"] == {"sent": 30, "completed": 30, "failed": 0}
        assert sorted(r["index"] for r in result.records) == list(range(30))
        assert all(r["ok"] for r in result.records) and result.code == 0
        assert len([r for r in api.requests if r[1] == "/v1/chat/completions"]) == 30  # really sent
        assert kube.objects() == NOTHING
        (run,) = kube.runs
        assert run.process is not None and run.process.returncode == 0 and not run.killed
        # the fake kubelet removes the pod's files once the process has ended, on its own thread
        assert run.rootfs is not None
        until(lambda: not os.path.exists(str(run.rootfs)), "the pod's files to be removed")
        assert set(_paths(kube, "DELETE")) == {"/apis/batch/v1/namespaces/inference/jobs/bench-1",
                                               "/api/v1/namespaces/inference/configmaps/bench-1-code"}
        assert all(r["query"].get("propagationPolicy") == "Background"
                   for r in kube.requests if r["method"] == "DELETE")
    dones = [p["done"] for p in progress]
    assert dones, "no progress was reported while the pod ran"
    # never backwards (the run's closing flush may repeat the last count with a newer rate)
    assert dones == sorted(dones) and 1 <= dones[0] and dones[-1] <= 30
    assert {(p["total"], p["subruns"]) for p in progress} == {(30, 1)}


def test_a_sweep_brings_back_the_sweep_summary_with_goodput():
    args = ["--rate", "10,20", "--requests", "8", "--output-tokens", "4", "--input-tokens", "8",
            "--slo-ttft-ms", "60000", "--slo-tpot-ms", "10000"]
    progress: list[dict[str, Any]] = []
    with cluster() as (kube, _, outputs, client):
        result = _run(client, outputs, args, name="sweep-1", progress=progress)
        assert kube.objects() == NOTHING
    summary = result.summary
    assert summary["load"] == {"rates": [10.0, 20.0]}
    assert [s["rate"] for s in summary["sweep"]] == [10.0, 20.0]
    assert "goodput" in summary and summary["goodput"]["rate"] == 20.0  # every request meets a 60 s SLO
    assert summary["requests"]["sent"] == 16 and len(result.records) == 16
    assert sorted({r["rate"] for r in result.records}) == [10.0, 20.0]
    assert progress and {p["subruns"] for p in progress} == {2} and {p["total"] for p in progress} == {16}


def test_cancel_kills_the_running_pod_and_deletes_everything():
    progress: list[dict[str, Any]] = []
    asked: list[float] = []  # when the cancel was first asked for (the pod's start before it is not timed)

    def cancelled() -> bool:
        if progress and not asked:
            asked.append(time.monotonic())
        return bool(progress)

    with cluster() as (kube, _, outputs, client):
        with pytest.raises(BenchmarkCancelled):
            # 120 s of load (longer than the patience below): cancelled after the first progress
            _run(client, outputs, ["--rate", "1", "--requests", "120"], progress=progress, run_seconds=600,
                 cancelled=cancelled)
        assert kube.objects() == NOTHING
        (run,) = kube.runs
        assert run.killed and run.process is not None and run.process.returncode == -signal.SIGKILL
        assert '"event": "end"' not in run.log()  # it did not get to finish
    assert len(progress) == 1 and asked and time.monotonic() - asked[0] < PATIENCE_S


@pytest.mark.parametrize("refusal", [403, 422])
def test_a_job_the_api_refuses_leaves_nothing_and_says_why(refusal: int):
    with cluster(refuse_jobs=refusal) as (kube, _, outputs, client):
        with pytest.raises(BenchmarkFailed, match="cannot create the benchmark Job") as failed:
            _run(client, outputs, SMALL, name="refused-1")
        assert f"HTTP {refusal}" in str(failed.value)
        if refusal == 422:
            assert 'Job.batch "refused-1" is invalid' in str(failed.value)
        assert _paths(kube, "POST") == ["/apis/batch/v1/namespaces/inference/jobs"]
        # an answer lost on the way may have created it: both are deleted, a 404 is harmless
        assert sorted(_paths(kube, "DELETE")) == ["/api/v1/namespaces/inference/configmaps/refused-1-code",
                                                  "/apis/batch/v1/namespaces/inference/jobs/refused-1"]
        assert kube.objects() == NOTHING and kube.runs == []


def test_a_config_map_the_api_refuses_takes_the_job_created_first_with_it():
    with cluster(refuse_config_maps=403) as (kube, _, outputs, client):
        with pytest.raises(BenchmarkFailed, match="cannot create the benchmark's ConfigMap") as failed:
            _run(client, outputs, SMALL, name="refused-2")
        assert "HTTP 403" in str(failed.value) and "configmaps" in str(failed.value)
        assert kube.objects() == NOTHING
        assert all(run.process is None or run.killed for run in kube.runs)  # its pod never ran the benchmark


def test_the_config_map_is_owned_by_the_job_so_nothing_outlives_it():
    with cluster() as (kube, _, outputs, client):
        run = InClusterRun(client, outputs, "owned-1", SMALL, run_seconds=60, poll_seconds=0.05)
        run._create()
        job = client.get_json("/apis/batch/v1/namespaces/inference/jobs/owned-1")
        config_map = client.get_json("/api/v1/namespaces/inference/configmaps/owned-1-code")
        assert config_map["metadata"]["ownerReferences"] == [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "owned-1", "uid": job["metadata"]["uid"]}]
        assert job["spec"]["activeDeadlineSeconds"] == 60 + 900 + 60  # the cluster stops it without us
        client.delete("/apis/batch/v1/namespaces/inference/jobs/owned-1")  # as the Job's TTL would
        assert kube.objects() == NOTHING


def test_a_fatal_waiting_reason_fails_at_once_with_that_reason():
    started = time.monotonic()
    with cluster(job_waiting_reason="InvalidImageName") as (kube, _, outputs, client):
        with pytest.raises(BenchmarkFailed, match="cannot start: InvalidImageName: .*invalid reference format"):
            _run(client, outputs, SMALL, start_timeout_seconds=2 * PATIENCE_S)
        assert kube.objects() == NOTHING
        (run,) = kube.runs
        assert run.process is None  # it never ran
    assert time.monotonic() - started < PATIENCE_S  # not the start timeout, twice as long


class FakeClock:
    """Time that moves only when the run sleeps. `settled` (say, the fake kubelet has set the pod's
    state) is waited for in real time at each sleep, so the fake's thread is never outrun, however
    slowly a busy machine runs it."""

    def __init__(self, settled: Callable[[], bool] = lambda: True) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.settled = settled

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        until(self.settled, "the fake cluster to settle")
        self.sleeps.append(seconds)
        self.now += seconds


def test_a_pod_that_cannot_pull_its_image_fails_after_the_start_timeout_with_the_reason():
    with cluster(job_waiting_reason="ImagePullBackOff") as (kube, _, outputs, client):
        clock = FakeClock(lambda: any(run.waiting_reason() == "ImagePullBackOff" for run in kube.runs))
        with pytest.raises(BenchmarkFailed, match=r"did not start within 30 s: ImagePullBackOff: Back-off pulling"):
            _run(client, outputs, SMALL, poll_seconds=5.0, start_timeout_seconds=30.0,
                 sleep=clock.sleep, clock=clock)
        assert kube.objects() == NOTHING
    assert len(clock.sleeps) == 7  # it waited the timeout out (35 s > 30 s), not failed at the first look


def test_an_unreachable_endpoint_fails_saying_so():
    port = _closed_port()
    with cluster() as (kube, _, outputs, client):
        outputs["openaiBaseUrl"] = f"http://127.0.0.1:{port}/v1"
        with pytest.raises(BenchmarkFailed, match="unreachable for every request") as failed:
            _run(client, outputs, ["--rate", "50", "--requests", "5", "--timeout", "5"])
        assert f"127.0.0.1:{port}" in str(failed.value)
        assert kube.objects() == NOTHING
        assert kube.runs[0].process is not None and kube.runs[0].process.returncode == 1


def test_a_run_longer_than_its_load_allows_is_stopped_and_deleted():
    started = time.monotonic()
    with cluster() as (kube, _, outputs, client):
        with pytest.raises(BenchmarkFailed, match="ran longer than the 1 s its load allows"):
            _run(client, outputs, ["--rate", "2", "--requests", "240"], run_seconds=1.0)  # 120 s of load
        assert kube.objects() == NOTHING
        (run,) = kube.runs
        assert run.killed and run.process is not None and run.process.returncode == -signal.SIGKILL
    assert time.monotonic() - started < PATIENCE_S  # not the 120 s the load would take


def test_arguments_the_cli_refuses_fail_with_the_clis_own_line(capsys):
    args = ["--rate", "5", "--requests", "0"]
    with cluster() as (kube, _, outputs, client):
        command = InClusterRun(client, outputs, "bad-args", args, run_seconds=60).manifests[1][
            "spec"]["template"]["spec"]["containers"][0]["command"]
        assert main(command[3:]) == 2  # what the pod runs: `python -m serve.benchmark` + these
        (cli_line,) = capsys.readouterr().err.strip().splitlines()
        assert "--requests" in cli_line
        with pytest.raises(BenchmarkFailed) as failed:
            _run(client, outputs, args, name="bad-args")
        assert cli_line in str(failed.value) and "Traceback" not in str(failed.value)
        assert "failed (Error, exit code 2) without results" in str(failed.value)  # what the kubelet saw
        assert kube.objects() == NOTHING
        state = kube.runs[0].pod["status"]["containerStatuses"][0]["state"]
        assert state["terminated"]["exitCode"] == 2


# ---- the fake cluster itself, where the run relies on it behaving like Kubernetes ----

def _job(name: str, config_map: str, code: str) -> dict[str, Any]:
    labels = {"raypd.io/benchmark": name}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "inference"},
            "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": labels}, "spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "python:3.11", "command": ["python", "-c", code],
                                "env": [{"name": "CODE_DIR", "value": "/opt/code"}],
                                "volumeMounts": [{"name": "code", "mountPath": "/opt/code"}]}],
                "volumes": [{"name": "code", "configMap": {"name": config_map}}]}}}}


def test_the_fake_runs_a_job_with_its_config_map_mounted_and_serves_its_log():
    jobs, config_maps = "/apis/batch/v1/namespaces/inference/jobs", "/api/v1/namespaces/inference/configmaps"
    code = ("import os; print(open(os.path.join(os.environ['CODE_DIR'], 'greeting.txt')).read()); "
            "print('line 2'); print('line 3')")
    with FakeKubeApi() as kube:
        client = client_from_kubeconfig(kube.kubeconfig())
        config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "hello-code", "namespace": "inference"}, "data": {"greeting.txt": "hi"}}
        assert client.create(config_maps, config_map)["metadata"]["name"] == "hello-code"
        with pytest.raises(KubeError) as exists:
            client.create(config_maps, config_map)
        assert exists.value.status == 409
        client.create(jobs, _job("hello", "hello-code", code))
        (pod,) = client.list_pods("inference", "raypd.io/benchmark=hello")
        assert pod["metadata"]["name"].startswith("hello-") and pod["metadata"]["creationTimestamp"]
        assert pod["status"]["containerStatuses"][0]["name"] == "main"
        until(lambda: client.get_json(f"{jobs}/hello").get("status", {}).get("succeeded") == 1)
        assert client.get_json(f"{jobs}/hello")["status"]["conditions"][0]["type"] == "Complete"
        (pod,) = client.list_pods("inference", "raypd.io/benchmark=hello")
        name = pod["metadata"]["name"]
        assert pod["status"]["phase"] == "Succeeded"
        assert client.pod_log("inference", name) == "hi\nline 2\nline 3\n"
        assert client.pod_log("inference", name, tail_lines=2) == "line 2\nline 3\n"
        assert client.pod_log("inference", name, tail_lines=2, limit_bytes=4) == "line"
        assert client.delete(f"{jobs}/hello") and client.delete(f"{config_maps}/hello-code")
        assert not client.delete(f"{jobs}/hello")  # 404: already gone
        assert kube.objects() == NOTHING


def test_the_fake_waits_for_a_missing_config_map_and_collects_what_a_job_owns():
    with FakeKubeApi() as kube:
        client = client_from_kubeconfig(kube.kubeconfig())
        created = client.create("/apis/batch/v1/namespaces/inference/jobs", _job("lost", "lost-code", "print(1)"))
        until(lambda: (client.list_pods("inference", "raypd.io/benchmark=lost") or [{}])[0].get("status", {})
               .get("containerStatuses"))
        (pod,) = client.list_pods("inference", "raypd.io/benchmark=lost")
        waiting = pod["status"]["containerStatuses"][0]["state"]["waiting"]
        assert pod["status"]["phase"] == "Pending" and waiting["reason"] == "ContainerCreating"
        assert 'configmap "lost-code" not found' in waiting["message"] and kube.runs[0].process is None
        client.create("/api/v1/namespaces/inference/configmaps", {
            "kind": "ConfigMap", "data": {"x": "1"}, "metadata": {"name": "lost-code", "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "lost", "uid": created["metadata"]["uid"]}]}})
        until(lambda: client.get_json("/apis/batch/v1/namespaces/inference/jobs/lost")
               .get("status", {}).get("succeeded") == 1)
        assert client.delete("/apis/batch/v1/namespaces/inference/jobs/lost")
        assert kube.objects() == NOTHING  # the ConfigMap went with the Job that owns it


def test_the_fake_keeps_a_pending_pod_pending_and_kills_what_still_runs_when_it_stops():
    with FakeKubeApi(job_pending_s=1.0) as kube:
        client = client_from_kubeconfig(kube.kubeconfig())
        client.create("/api/v1/namespaces/inference/configmaps", {
            "kind": "ConfigMap", "metadata": {"name": "slow-code"}, "data": {"x": "1"}})
        client.create("/apis/batch/v1/namespaces/inference/jobs",
                      _job("slow", "slow-code", "import time; print('up', flush=True); time.sleep(60)"))
        (pod,) = client.list_pods("inference", "raypd.io/benchmark=slow")
        assert pod["status"]["phase"] == "Pending"
        assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
        with pytest.raises(KubeError, match="waiting to start: ContainerCreating"):
            client.pod_log("inference", pod["metadata"]["name"])
        until(lambda: "up" in kube.runs[0].log())
        assert client.list_pods("inference", "raypd.io/benchmark=slow")[0]["status"]["phase"] == "Running"
        assert client.get_json("/apis/batch/v1/namespaces/inference/jobs/slow")["status"]["active"] == 1
        run = kube.runs[0]
    assert run.killed and run.process is not None and run.process.returncode == -signal.SIGKILL
    assert run.rootfs is not None and not os.path.exists(run.rootfs)


def test_without_a_propagation_policy_the_fake_orphans_the_pod_as_kubernetes_does():
    with FakeKubeApi() as kube:
        client = client_from_kubeconfig(kube.kubeconfig())
        client.create("/api/v1/namespaces/inference/configmaps", {
            "kind": "ConfigMap", "metadata": {"name": "o-code"}, "data": {"x": "1"}})
        client.create("/apis/batch/v1/namespaces/inference/jobs",
                      _job("o", "o-code", "import time; time.sleep(60)"))
        response = client.request("DELETE", "/apis/batch/v1/namespaces/inference/jobs/o")
        assert response.status == 200 and json.loads(response.body)["metadata"]["name"] == "o"
        assert kube.objects()["jobs"] == [] and len(kube.objects()["pods"]) == 1
        assert not kube.runs[0].killed


def test_the_fake_keeps_a_jobs_active_deadline_as_the_job_controller_does():
    with FakeKubeApi() as kube:
        client = client_from_kubeconfig(kube.kubeconfig())
        client.create("/api/v1/namespaces/inference/configmaps", {
            "kind": "ConfigMap", "metadata": {"name": "late-code"}, "data": {"x": "1"}})
        job = _job("late", "late-code", "import time; print('up', flush=True); time.sleep(60)")
        job["spec"]["activeDeadlineSeconds"] = 1
        client.create("/apis/batch/v1/namespaces/inference/jobs", job)
        until(lambda: client.get_json("/apis/batch/v1/namespaces/inference/jobs/late")
               .get("status", {}).get("failed") == 1)
        (condition,) = client.get_json("/apis/batch/v1/namespaces/inference/jobs/late")["status"]["conditions"]
        assert (condition["type"], condition["reason"]) == ("Failed", "DeadlineExceeded")
        assert client.list_pods("inference", "raypd.io/benchmark=late") == []  # its active pod was deleted
        run = kube.runs[0]
        assert run.killed and run.process is not None
        # The Job's status can be written before the killed process is reaped (a busy machine).
        until(lambda: run.process.poll() is not None)
        assert run.process.returncode == -signal.SIGKILL


@pytest.mark.parametrize("status, state", [
    ({"active": 1}, None),
    ({"conditions": [{"type": "Complete", "status": "True"}]}, "succeeded"),
    ({"conditions": [{"type": "SuccessCriteriaMet", "status": "True"}]}, "succeeded"),
    ({"conditions": [{"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}]}, "failed"),
    ({"conditions": [{"type": "FailureTarget", "status": "True"}]}, "failed"),  # before the pods are gone
    ({"conditions": [{"type": "Failed", "status": "False"}], "active": 1}, None),  # a condition not (yet) true
    ({"succeeded": 1}, "succeeded"),  # an API server that sets only the counts
    ({"failed": 1}, "failed"),
    ({}, None),
])
def test_job_state_reads_the_conditions_kubernetes_sets(status: dict[str, Any], state: Optional[str]) -> None:
    assert job_state({"status": status}) == state


def test_pod_problem_tells_fatal_reasons_from_ones_that_may_pass() -> None:
    def waiting(reason: str) -> dict[str, Any]:
        return {"status": {"phase": "Pending", "containerStatuses": [
            {"state": {"waiting": {"reason": reason, "message": f"why {reason}"}}}]}}

    assert pod_problem(waiting("InvalidImageName")) == ("InvalidImageName: why InvalidImageName", True)
    assert pod_problem(waiting("ImagePullBackOff")) == ("ImagePullBackOff: why ImagePullBackOff", False)
    assert pod_problem(waiting("ContainerCreating")) is None
    unschedulable = {"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes are available"}]}}
    assert pod_problem(unschedulable) == ("not scheduled: 0/3 nodes are available", False)


def test_a_job_the_cluster_ends_by_its_deadline_fails_at_once_not_at_the_run_bound():
    with cluster(job_pending_s=0.0) as (kube, api, outputs, client):
        api.ttft_s = 5.0  # every answer hangs past the Job's deadline
        run = InClusterRun(client, outputs, "bench-late", ["--rate", "5", "--requests", "5", "--timeout", "30"],
                           run_seconds=600, poll_seconds=0.05, start_timeout_seconds=30)
        run.manifests[1]["spec"]["activeDeadlineSeconds"] = 1
        started = time.monotonic()
        with pytest.raises(BenchmarkFailed) as failed:
            run.run(lambda progress: None, lambda: False)
        assert time.monotonic() - started < PATIENCE_S  # not the 600 s run bound
        assert "Job failed (DeadlineExceeded" in str(failed.value) and "pod is gone" in str(failed.value)
        assert kube.objects() == NOTHING


# ---- the orders in which a client can see a Job end, whatever the fake's timing ----
# kubernetes pkg/controller/job/job_controller.go (syncJob): past activeDeadlineSeconds the controller
# deletes the active pods (deleteActivePods: DELETE with their finalizer kept), and writes the Failed
# condition only once they are counted (enactJobFinished waits for uncounted and, since 1.31, for
# terminating pods; meanwhile the Job may carry FailureTarget). A pod that ends by itself is counted
# the same way, so its Complete or Failed condition also follows the pod's phase. A client listing
# pods and getting the Job can therefore see the pod ended or gone before the Job's verdict.

_DEADLINE = {"type": "Failed", "status": "True", "reason": "DeadlineExceeded",
             "message": "Job was active longer than specified deadline"}


def _scripted_pod(phase: str, terminated: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    state = {"terminated": terminated} if terminated else {"running": {"startedAt": "2025-12-01T10:00:01Z"}}
    return {"metadata": {"name": "bench-s-x7k2p", "creationTimestamp": "2025-12-01T10:00:00Z",
                         "labels": {"raypd.io/benchmark": "bench-s"}},
            "status": {"phase": phase, "containerStatuses": [{"name": "benchmark", "state": state}]}}


def _scripted_job(*conditions: dict[str, Any], **counts: int) -> dict[str, Any]:
    return {"metadata": {"name": "bench-s", "uid": "5f0c6a2e-0000-4000-8000-000000000001"},
            "status": {"startTime": "2025-12-01T10:00:00Z", **counts, "conditions": list(conditions)}}


def _result_log() -> str:
    out = io.StringIO()
    out.write(json.dumps({"event": "progress", "done": 1, "total": 1, "subrun": 1, "subruns": 1}) + "\n")
    write_result(out, {"requests": {"sent": 1, "completed": 1, "failed": 0}}, [{"index": 0, "ok": True}], 0)
    return out.getvalue()


class _Scripted(KubeClient):
    """A client that sees the cluster go through `looks`, one (pods, Job) pair per poll (the last one
    repeats), whichever of the two the code asks for first; `logs` maps a pod name to its log, a
    name not there is a deleted pod (404)."""

    def __init__(self, looks: list[tuple[list[dict[str, Any]], dict[str, Any]]], logs: dict[str, str]):
        super().__init__(server="https://127.0.0.1:9", ssl_context=None)
        self.looks, self.logs, self.deleted = looks, logs, []
        self.polls, self._asked = 0, {"pods", "job"}

    def _look(self, what: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        if what in self._asked:  # asked again: the next poll
            self.polls, self._asked = self.polls + 1, set()
        self._asked.add(what)
        return copy.deepcopy(self.looks[min(self.polls, len(self.looks)) - 1])

    def create(self, path: str, document: Any) -> dict[str, Any]:
        return {"metadata": {**document["metadata"], "uid": "5f0c6a2e-0000-4000-8000-000000000001"}}

    def delete(self, path: str) -> bool:
        self.deleted.append(path)
        return True

    def list_pods(self, namespace: str, label_selector: Optional[str] = None) -> list[dict[str, Any]]:
        assert label_selector == "raypd.io/benchmark=bench-s"
        return self._look("pods")[0]

    def get_json(self, path: str, query: Any = None, timeout: Any = None) -> dict[str, Any]:
        assert path == "/apis/batch/v1/namespaces/inference/jobs/bench-s", path
        return self._look("job")[1]

    def pod_log(self, namespace: str, pod: str, **options: Any) -> str:
        if pod not in self.logs:
            raise KubeNotFound(f"no log for pod {namespace}/{pod}: pods \"{pod}\" not found", status=404)
        return self.logs[pod]


_OUTPUTS = {"openaiBaseUrl": "http://raypd-serve-svc.inference.svc:8000/v1", "modelId": "m",
            "namespace": "inference", "image": "rayproject/ray-llm:2.52.0-py311-cu128"}
KILLED = {"exitCode": 137, "reason": "Error"}
RUNNING = _scripted_pod("Running")


def _scripted_run(client: _Scripted, clock: Optional[FakeClock] = None) -> RunResult:
    clock = clock or FakeClock()
    run = InClusterRun(client, {**_OUTPUTS}, "bench-s", SMALL, run_seconds=600, poll_seconds=2.0,
                       sleep=clock.sleep, clock=clock)
    return run.run(lambda progress: None, lambda: False)


def test_a_pod_gone_before_its_jobs_verdict_is_reported_with_the_verdict_not_as_a_lost_node():
    # the older controller: the pod is deleted and gone, the Job says nothing for two looks, then Failed
    client = _Scripted([([RUNNING], _scripted_job(active=1)), ([], _scripted_job(active=0)),
                        ([], _scripted_job(active=0)), ([], _scripted_job(_DEADLINE, failed=1))],
                       {"bench-s-x7k2p": "up\n"})
    with pytest.raises(BenchmarkFailed) as failed:
        _scripted_run(client)
    assert str(failed.value) == ("the benchmark Job failed (DeadlineExceeded: Job was active longer than "
                                 "specified deadline) but its pod is gone, and with it the results")
    assert client.polls == 4 and len(client.deleted) == 2


def test_a_pod_listed_just_before_it_ended_is_read_again_for_how_it_ended():
    # listed while it still ran; then it exits 2, the Job controller fails the Job, and the Job is read
    # (seen once under two CPU hogs: the message had only BackoffLimitExceeded, not the exit code)
    backoff = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
               "message": "Job has reached the specified backoff limit"}
    ended = _scripted_pod("Failed", {"exitCode": 2, "reason": "Error"})
    client = _Scripted([([RUNNING], _scripted_job(active=1)), ([RUNNING], _scripted_job(backoff, failed=1)),
                        ([ended], _scripted_job(backoff, failed=1))],
                       {"bench-s-x7k2p": "benchmark: argument --requests: out of range\n"})
    with pytest.raises(BenchmarkFailed) as failed:
        _scripted_run(client)
    assert str(failed.value).startswith("the benchmark failed (Error, exit code 2) without results"), failed.value
    assert "argument --requests" in str(failed.value)


def test_a_pod_deleted_between_the_look_and_its_log_is_gone_with_the_jobs_reason():
    client = _Scripted([([RUNNING], _scripted_job(active=1)), ([RUNNING], _scripted_job(_DEADLINE, failed=1))],
                       {})
    with pytest.raises(BenchmarkFailed, match=r"Job failed \(DeadlineExceeded: .*\) but its pod is gone"):
        _scripted_run(client)


def test_a_pod_killed_for_the_deadline_names_the_deadline_not_the_kill():
    # 1.31+: FailureTarget while the killed pod still terminates, its log without the results
    target = {**_DEADLINE, "type": "FailureTarget"}
    client = _Scripted([([RUNNING], _scripted_job(active=1)),
                        ([_scripted_pod("Failed", KILLED)], _scripted_job(target, active=0, terminating=1))],
                       {"bench-s-x7k2p": "up\n"})
    with pytest.raises(BenchmarkFailed) as failed:
        _scripted_run(client)
    assert str(failed.value).startswith("the benchmark failed (DeadlineExceeded: Job was active longer than "
                                        "specified deadline) without results (the benchmark's log has no end marker")


def test_a_pod_that_ended_before_its_job_completed_waits_for_the_verdict_and_brings_the_results():
    done = _scripted_pod("Succeeded", {"exitCode": 0, "reason": "Completed"})
    client = _Scripted([([RUNNING], _scripted_job(active=1)), ([done], _scripted_job(active=0)),
                        ([done], _scripted_job({"type": "Complete", "status": "True"}, succeeded=1))],
                       {"bench-s-x7k2p": _result_log()})
    result = _scripted_run(client)
    assert result.summary["requests"]["completed"] == 1 and result.records == [{"index": 0, "ok": True}]
    assert client.polls == 3


def test_a_pod_that_stops_running_and_gets_no_verdict_is_a_lost_node_after_the_verdict_wait():
    clock = FakeClock()
    client = _Scripted([([RUNNING], _scripted_job(active=1)), ([], _scripted_job(active=1))], {})
    with pytest.raises(BenchmarkFailed) as failed:
        _scripted_run(client, clock)
    assert str(failed.value) == ("the benchmark pod stopped running (phase gone) and its Job gave no verdict "
                                 f"within {VERDICT_SECONDS:.0f} s: was its node lost? Look at the system node group")
    assert sum(clock.sleeps) > VERDICT_SECONDS  # it waited for the Job controller, not failed at the first look
    assert sum(clock.sleeps) <= VERDICT_SECONDS + 2 * 2.0


def test_a_failed_pod_without_a_verdict_is_read_after_the_verdict_wait_with_its_own_reason():
    clock = FakeClock()
    oom = _scripted_pod("Failed", {"exitCode": 137, "reason": "OOMKilled"})
    client = _Scripted([([RUNNING], _scripted_job(active=1)), ([oom], _scripted_job(active=0))],
                       {"bench-s-x7k2p": "up\nKilled\n"})
    with pytest.raises(BenchmarkFailed) as failed:
        _scripted_run(client, clock)
    assert str(failed.value).startswith("the benchmark failed (OOMKilled, exit code 137) without results")
    assert sum(clock.sleeps) > VERDICT_SECONDS


class _Flaky(KubeClient):
    """A client whose GETs fail (API unreachable) while `down` is set, as during a control-plane blip."""

    down = False

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        if self.down and method == "GET":
            raise KubeUnreachable("cannot reach the Kubernetes API (connection refused)")
        return super().request(method, path, **kwargs)


def _flaky(outputs: dict[str, Any]) -> _Flaky:
    real = client_from_kubeconfig(outputs["kubeconfig"])
    flaky = _Flaky(server=real.server, ssl_context=real.ssl_context, timeout=real.timeout,
                   allow_http_credentials=real.allow_http_credentials)
    flaky.token = real.token
    return flaky


def test_a_blip_of_the_kubernetes_api_does_not_end_the_run_but_a_lasting_outage_does(monkeypatch):
    with cluster() as (kube, api, outputs, _):
        client = _flaky(outputs)
        polls = {"n": 0}

        def sleep(seconds: float) -> None:  # the API is down for the 2nd to 4th polls
            polls["n"] += 1
            client.down = 2 <= polls["n"] <= 4
            time.sleep(0.05)

        result = InClusterRun(client, outputs, "bench-blip", SMALL, run_seconds=60, poll_seconds=0.05,
                              sleep=sleep).run(lambda progress: None, lambda: False)
        assert result.summary["requests"]["completed"] == 30 and kube.objects() == NOTHING

    monkeypatch.setattr("serve.benchmark.incluster.API_PATIENCE_SECONDS", 0.3)
    with cluster() as (kube, api, outputs, _):
        client = _flaky(outputs)

        def down_for_good(seconds: float) -> None:
            client.down = True
            time.sleep(0.05)

        with pytest.raises(BenchmarkFailed) as failed:
            InClusterRun(client, outputs, "bench-gone", SMALL, run_seconds=60, poll_seconds=0.05,
                         sleep=down_for_good).run(lambda progress: None, lambda: False)
        assert str(failed.value).startswith("lost the Kubernetes API for over 0 s while the benchmark ran: "
                                            "cannot reach the Kubernetes API")
        client.down = False
        assert kube.objects() == NOTHING  # the DELETEs still went out (they are not GETs)


def test_terminated_reason_names_what_killed_the_container() -> None:
    def ended(reason: Optional[str], code: int) -> dict[str, Any]:
        return {"status": {"containerStatuses": [{"state": {"terminated": {"reason": reason, "exitCode": code}}}]}}

    assert terminated_reason(ended("OOMKilled", 137)) == " (OOMKilled, exit code 137)"
    assert terminated_reason(ended("Error", 2)) == " (Error, exit code 2)"
    assert terminated_reason(ended("Completed", 0)) == ""
    assert terminated_reason({"status": {}}) == ""
