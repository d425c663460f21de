"""Running the benchmark Job in a cluster and bringing its results back, through the Kubernetes API.

The web app's Benchmark tab uses this (the CLI prints the same manifests for `kubectl apply`):
create the Job and the ConfigMap it owns (job.py, `for_program=True`), follow the pod's log for
progress events, read the whole log once the Job has ended and decode the summary and every
request's record from it (events.py), then delete both. Nothing is left half-created: a failed
create removes whatever the other created, and cancel, failure and success all end with both
deleted. When nobody is left to delete them (the web server stopped, the API unreachable), the
Job's activeDeadlineSeconds stops the run, its ttlSecondsAfterFinished removes the Job, and the
garbage collector removes the ConfigMap with its owner.

Needs only what `serve.kube.KubeClient` offers: create, delete, get, list pods, pod log.
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence
from urllib.parse import quote

from serve.benchmark.events import EventsError, RunResult, last_progress, read_result
from serve.benchmark.job import LABEL, package_sources, render_benchmark_job
from serve.kube import KubeClient, KubeError, KubeNotFound

log = logging.getLogger(__name__)

POLL_SECONDS = 2.0
START_TIMEOUT_SECONDS = 900.0  # pulling the serving image (~20 GB) onto a fresh system node takes minutes
LOG_LIMIT_BYTES = 128 * 1024 * 1024
PROGRESS_TAIL_LINES = 30
API_PATIENCE_SECONDS = 60.0  # how long the Kubernetes API may fail polls before the run is given up
# How long the Job controller may take to give its verdict (Complete, Failed and why) once the pod has
# ended or gone: it writes it only after it has counted the pod, so a look can see the pod first.
VERDICT_SECONDS = 30.0
# Waiting reasons that do not fix themselves: fail at once instead of waiting out the start timeout.
FATAL_WAITING = ("ErrImageNeverPull", "InvalidImageName", "CreateContainerConfigError", "CreateContainerError")


class BenchmarkFailed(Exception):
    """The in-cluster run failed; the message says why in words a user can act on."""


class BenchmarkCancelled(Exception):
    """Cancelled on request; the Job and its ConfigMap were deleted."""


@dataclass(frozen=True)
class Paths:
    namespace: str
    name: str

    @property
    def config_maps(self) -> str:
        return f"/api/v1/namespaces/{quote(self.namespace, safe='')}/configmaps"

    @property
    def jobs(self) -> str:
        return f"/apis/batch/v1/namespaces/{quote(self.namespace, safe='')}/jobs"

    @property
    def config_map(self) -> str:
        return f"{self.config_maps}/{quote(self.name + '-code', safe='')}"

    @property
    def job(self) -> str:
        return f"{self.jobs}/{quote(self.name, safe='')}"


def expected_seconds(requests: int, rates: Sequence[float], concurrency: Optional[int], timeout_s: float,
                     duration_s: Optional[float] = None) -> float:
    """A generous bound on how long the run itself takes (sending + the last answers), per sub-run."""
    total = 0.0
    loads: Sequence[Optional[float]] = list(rates) or [None]
    for rate in loads:
        sending = requests / rate * 1.5 + 10 if rate else requests / max(concurrency or 1, 1) * timeout_s
        if duration_s is not None:
            sending = min(sending, duration_s)
        total += sending + timeout_s + 10
    return total


def job_state(job: Mapping[str, Any]) -> Optional[str]:
    """'succeeded', 'failed' or None (still running), from a batch/v1 Job's status."""
    status = job.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") in ("Complete", "SuccessCriteriaMet"):
            return "succeeded"
        if condition.get("type") in ("Failed", "FailureTarget"):
            return "failed"
    if status.get("succeeded"):
        return "succeeded"
    if status.get("failed"):
        return "failed"
    return None


def _failed_condition(job: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    for condition in (job.get("status") or {}).get("conditions") or []:
        if condition.get("type") in ("Failed", "FailureTarget") and condition.get("status") == "True":
            return condition
    return None


def failure_reason(job: Mapping[str, Any]) -> str:
    """" (DeadlineExceeded: ...)" from a failed Job's condition, or "" when it gives none."""
    condition = _failed_condition(job) or {}
    words = ": ".join(str(part)[:200] for part in (condition.get("reason"), condition.get("message")) if part)
    return f" ({words})" if words else ""


def why_it_ended(job: Mapping[str, Any], pod: Optional[Mapping[str, Any]]) -> str:
    """" (DeadlineExceeded: ...)" when the Job controller stopped the run, else how the container
    ended (" (OOMKilled, exit code 137)"), else whatever the Job's condition says, else "".

    With backoffLimit 0 a Job's BackoffLimitExceeded only repeats that its one pod failed, so then
    the container's own end is the news; any other reason (DeadlineExceeded above all) is why the
    container was stopped, and what a user has to change."""
    job_reason = failure_reason(job)
    if job_reason and (_failed_condition(job) or {}).get("reason") != "BackoffLimitExceeded":
        return job_reason
    return terminated_reason(pod or {}) or job_reason


def container_ended(pod: Mapping[str, Any]) -> bool:
    """Whether the pod's container has a terminated state (the kubelet wrote how it ended)."""
    return any((c.get("state") or {}).get("terminated")
               for c in (pod.get("status") or {}).get("containerStatuses") or [])


def terminated_reason(pod: Mapping[str, Any]) -> str:
    """" (OOMKilled, exit code 137)" from the container's terminated state, or ""."""
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        ended = (container.get("state") or {}).get("terminated") or {}
        if ended and (ended.get("reason") not in (None, "Completed") or ended.get("exitCode") not in (None, 0)):
            return f" ({ended.get('reason') or 'Error'}, exit code {ended.get('exitCode')})"
    return ""


def pod_problem(pod: Mapping[str, Any]) -> Optional[tuple[str, bool]]:
    """(why the pod is not running yet, whether that is fatal), or None when nothing is wrong."""
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or []:
        waiting = (container.get("state") or {}).get("waiting") or {}
        reason = waiting.get("reason")
        if reason and reason != "ContainerCreating":
            message = str(waiting.get("message") or "")[:300]
            return f"{reason}{': ' + message if message else ''}", reason in FATAL_WAITING
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return f"not scheduled: {str(condition.get('message') or condition.get('reason') or '')[:300]}", False
    return None


def _log_tail(text: str, lines: int = 2) -> str:
    """The last lines a person would read (not the event lines), for a failure message."""
    plain = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith('{"event"')]
    return " | ".join(line.strip()[:300] for line in plain[-lines:])


class InClusterRun:
    """One benchmark Job's life: create, follow, collect, delete."""

    def __init__(self, client: KubeClient, outputs: Mapping[str, Any], name: str, run_args: Sequence[str], *,
                 run_seconds: float, poll_seconds: Optional[float] = None,
                 start_timeout_seconds: Optional[float] = None,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic):
        self.client = client
        # Defaults read at call time, so a test can shorten them for every run it starts.
        self.poll_seconds = POLL_SECONDS if poll_seconds is None else poll_seconds
        self.start_timeout = START_TIMEOUT_SECONDS if start_timeout_seconds is None else start_timeout_seconds
        self.run_seconds = run_seconds
        self.manifests = render_benchmark_job(
            outputs, name, run_args, package_sources(), for_program=True,
            deadline_seconds=int(run_seconds + self.start_timeout) + 60)
        self.paths = Paths(str(self.manifests[1]["metadata"]["namespace"]), name)
        self._sleep, self._clock = sleep, clock

    def run(self, on_progress: Callable[[dict[str, Any]], None], cancelled: Callable[[], bool]) -> RunResult:
        self._create()
        try:
            return self._follow(on_progress, cancelled)
        finally:
            self.clean_up()

    def _create(self) -> None:
        """The Job first, then its ConfigMap owned by it: the pod waits in ContainerCreating for the
        volume meanwhile, and whatever removes the Job (a delete, its TTL) takes the ConfigMap along."""
        config_map, job = self.manifests
        try:
            created = self.client.create(self.paths.jobs, job)
        except KubeError as exc:
            self.clean_up()  # an answer lost on the way may still have created it
            raise BenchmarkFailed(f"cannot create the benchmark Job: {exc}") from None
        uid = (created.get("metadata") or {}).get("uid")
        owned = copy.deepcopy(config_map)
        if uid:
            owned["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job",
                                                     "name": self.paths.name, "uid": uid}]
        try:
            self.client.create(self.paths.config_maps, owned)
        except KubeError as exc:
            self.clean_up()
            raise BenchmarkFailed(f"cannot create the benchmark's ConfigMap: {exc}") from None

    def clean_up(self) -> None:
        self._delete(self.paths.job)
        self._delete(self.paths.config_map)

    def _delete(self, path: str) -> None:
        try:
            self.client.delete(path)
        except KubeError as exc:  # the Job's ttlSecondsAfterFinished removes it later anyway
            log.warning("could not delete %s: %s", path, exc)

    def _pod(self) -> Optional[dict[str, Any]]:
        pods = self.client.list_pods(self.paths.namespace, f"{LABEL}={self.paths.name}")
        pods.sort(key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""))
        return pods[-1] if pods else None

    def _follow(self, on_progress: Callable[[dict[str, Any]], None], cancelled: Callable[[], bool]) -> RunResult:
        self._started = self._clock()
        self._running_since: Optional[float] = None
        self._ended_since: Optional[float] = None
        self._last_seen: Optional[dict[str, Any]] = None
        lost_since: Optional[float] = None
        while True:
            if cancelled():
                raise BenchmarkCancelled()
            problem: Optional[KubeError] = None
            result: Optional[RunResult] = None
            try:
                result = self._poll(on_progress)
            except KubeError as exc:
                if exc.status in (401, 403):  # not a blip: credentials or RBAC
                    raise BenchmarkFailed(str(exc)) from None
                problem = exc
            if result is not None:
                return result
            if problem is None:
                lost_since = None
            else:  # one unanswered poll must not end a half-hour benchmark; a minute of them does
                lost_since = lost_since if lost_since is not None else self._clock()
                if self._clock() - lost_since > API_PATIENCE_SECONDS:
                    raise BenchmarkFailed(f"lost the Kubernetes API for over {API_PATIENCE_SECONDS:.0f} s "
                                          f"while the benchmark ran: {problem}")
                log.warning("benchmark %s: the Kubernetes API failed a poll (%s); trying again",
                            self.paths.name, problem)
            self._sleep(self.poll_seconds)

    def _poll(self, on_progress: Callable[[dict[str, Any]], None]) -> Optional[RunResult]:
        """One look at the pod and its Job: the result once the Job ended, None while it runs.

        The pod is read first: the Job controller writes its verdict only after it has seen the
        pod end (or, past activeDeadlineSeconds, deleted it), so a Job read after the pod is at
        least as new, unless the pod ended between the two reads: then the pod is read again, so
        how the container ended is not lost. A look can also find the pod ended or gone before the
        verdict is written (kubernetes pkg/controller/job/job_controller.go: deleteActivePods, then
        the Failed or Complete condition once the pod is counted); the verdict is then waited for, for up to
        VERDICT_SECONDS, since it says why (DeadlineExceeded) where the pod cannot.
        """
        pod = self._pod()
        try:
            job = self.client.get_json(self.paths.job)
        except KubeNotFound:
            raise BenchmarkFailed("the benchmark Job was deleted while it ran") from None
        state = job_state(job)
        name = str(((pod or {}).get("metadata") or {}).get("name") or "")
        phase = str(((pod or {}).get("status") or {}).get("phase") or "")
        if state is not None:
            if pod is not None and not container_ended(pod):
                # Read while it still ran, the Job read after: the pod now holds how it ended.
                pod = self._pod() or pod
            return self._collect(pod, state, why_it_ended(job, pod))
        now = self._clock()
        if phase == "Running":
            self._running_since = self._running_since if self._running_since is not None else now
            progress = last_progress(self.client.pod_log(self.paths.namespace, name,
                                                         tail_lines=PROGRESS_TAIL_LINES))
            if progress is not None and progress != self._last_seen:
                self._last_seen = progress
                on_progress(progress)
            if now - self._running_since > self.run_seconds:
                raise BenchmarkFailed(f"the benchmark ran longer than the {self.run_seconds:.0f} s its load "
                                      "allows; it was stopped")
            return None
        if phase in ("Succeeded", "Failed") or self._running_since is not None:
            # It ended, or it ran and is not Running now: the Job controller's verdict says how.
            self._ended_since = self._ended_since if self._ended_since is not None else now
            if now - self._ended_since <= VERDICT_SECONDS:
                return None
            if phase in ("Succeeded", "Failed"):  # no verdict came: the pod's own end is all there is
                return self._collect(pod, phase.lower(), terminated_reason(pod or {}))
            raise BenchmarkFailed(f"the benchmark pod stopped running (phase {phase or 'gone'}) and its Job "
                                  f"gave no verdict within {VERDICT_SECONDS:.0f} s: was its node lost? "
                                  "Look at the system node group")
        problem = pod_problem(pod) if pod is not None else ("no pod yet", False)
        if problem is not None and problem[1]:
            raise BenchmarkFailed(f"the benchmark pod cannot start: {problem[0]}")
        if now - self._started > self.start_timeout:
            why = problem[0] if problem else "it stayed pending"
            raise BenchmarkFailed(f"the benchmark pod did not start within {self.start_timeout:.0f} s: {why}")
        return None

    def _collect(self, pod: Optional[dict[str, Any]], state: str, why: str = "") -> RunResult:
        """The results from the ended pod's log; `why` is why_it_ended's words, for a failure."""
        name = str(((pod or {}).get("metadata") or {}).get("name") or "")
        gone = f"the benchmark Job {state}{why} but its pod is gone, and with it the results"
        if not name:
            raise BenchmarkFailed(gone)
        try:
            text = self.client.pod_log(self.paths.namespace, name, limit_bytes=LOG_LIMIT_BYTES, timeout=60.0)
        except KubeNotFound:  # deleted since it was listed (past its deadline, say): the same loss
            raise BenchmarkFailed(gone) from None
        except KubeError as exc:
            if exc.status != 400:
                raise  # the API itself: the follow loop tries again
            raise BenchmarkFailed(f"the benchmark Job {state}{why} but its pod's log is gone, and with it "
                                  f"the results ({exc})") from None
        try:
            result = read_result(text)
        except EventsError as exc:
            tail = _log_tail(text)
            raise BenchmarkFailed(f"the benchmark {'failed' if state == 'failed' else 'ended'}{why} without "
                                  f"results ({exc}){': ' + tail if tail else ''}") from None
        if result.code != 0:
            raise BenchmarkFailed("the endpoint was unreachable for every request "
                                  f"({_log_tail(text, 1) or 'connection refused'})")
        return result
