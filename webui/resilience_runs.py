"""The Resilience tab's work (issue 31 §2): `python -m serve.resilience` as a job of the web app.

A resilience check DELETES A POD (or cordons and drains a GPU node) of a LIVE deployment under a
steady load and measures what its users see. So it starts only when the person asking typed the
deployment's name (`confirm`, like a repository delete), only on a real deployment that is
deployed (an offline plan has nothing to disrupt: it is told so, never shown invented numbers),
and, as every job, one at a time per deployment and never beside an up, destroy or benchmark (the
store's one lock: Conflict).

The run is serve.resilience's own (`measure`, with its faults from serve/resilience/faults.py,
which refuse pods outside the stack's namespace and labels), given the outputs with secrets and
the kubeconfig from the engine exactly as verify gets them (webui/checking.py). A cancel stops the
load at once (`measure`'s `cancelled`), stops a drain waiting on a disruption budget
(`KubeFault.interrupt`), and the node is uncordoned on every way out (`Fault.restore` in a
finally). The report (Contract 8) is stored; the kubeconfig and the outputs are dropped when the
job ends. `connect_fn` is the seam tests replace (a stand-in OpenAI server and a fault of their own).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional

from components.config.errors import FieldError
from serve.evidence import VerifyInputError, VerifyPlan, check_outputs, resolve_kubeconfig
from serve.kube import KubeConfigError, KubeError, client_from_kubeconfig
from serve.resilience import judge
from serve.resilience.faults import KubeDeployment, KubeFault, serve_proxy
from serve.resilience.golden import Workload
from serve.resilience.limits import DEFAULT_FAULT_AT_S, DEFAULT_TIMEOUT_S
from serve.resilience.report import Settings, build_report
from serve.resilience.run import READY_EVERY_S, Fault, FaultRefused, RunCancelled, Target, measure
from webui.api_models import BodyRefused, ResilienceRequest, ResilienceRun, ResilienceRuns, dump
from webui.deployments.commands import Deployments
from webui.deployments.errors import Conflict, NotFound
from webui.deployments.views import iso_time
from webui.engines.base import OFFLINE_NOTICE, JobContext, OperationCancelled, OperationFailed, OperationResult
from webui.status import Operation
from webui.store import STORE_ERRORS, error_text

logger = logging.getLogger(__name__)

NEEDS_A_REAL_DEPLOYMENT = (
    f"{OFFLINE_NOTICE}: nothing is serving, so there is nothing to disrupt. A resilience check deletes a "
    "pod (or drains a node) of a running deployment and measures what its users see: create one with "
    "the Pulumi engine and Deploy it"
)
# The job's steps, in order: the event of each carries done/total for the job's progress bar.
PHASES = ("golden", "load", "fault injected", "recovering", "done")


def what_users_see(fault: str) -> str:
    """The form's and the docs' warning in one place: what the endpoint's users see during the run."""
    if fault == "node":
        return ("the GPU node hosting a decode replica is cordoned and this deployment's pods on it are "
                "evicted (uncordoned when the run ends)")
    return {"prefill-pod": "a prefill engine's pod is deleted",
            "decode-pod": "a decode engine's pod is deleted",
            "head-pod": "the Ray head's pod is deleted (without GCS fault tolerance every worker restarts)"
            }.get(fault, f"the {fault} fault is injected")


def confirm_problem(name: str, typed: str) -> Optional[FieldError]:
    """A typed confirmation that is not exactly the deployment's name (case included) refuses the
    run; what was typed is not repeated (it may be anything)."""
    if typed == name:
        return None
    return FieldError("confirm", f"type the deployment's name, {name}, exactly: the run deletes a pod (or "
                                 "drains a node) of this LIVE deployment and its users see failed requests")


@dataclass
class Harness:
    """What one run acts on: the endpoint to load, the fault, the deployment's readiness and KV
    counters, and how to scrub a credential from an error message."""

    endpoint: str
    model: str
    fault: Fault
    target: Target
    connection: dict[str, Any] = field(default_factory=dict)
    scrub: Callable[[str], str] = str


# (outputs with secrets, kubeconfig or None, fault name) -> Harness
ConnectFn = Callable[[dict[str, Any], Optional[str], str], Harness]


def _connect(outputs: dict[str, Any], kubeconfig: Optional[str], fault: str) -> Harness:
    """The CLI's wiring (serve/resilience/__main__.py): the Kubernetes API from the outputs'
    kubeconfig, the fault checked against the stack's plan, the load through the service proxy."""
    check_outputs(outputs, have_kubeconfig=kubeconfig is not None)
    region = outputs.get("region")
    client = client_from_kubeconfig(resolve_kubeconfig(outputs, kubeconfig),
                                    region_hint=region if isinstance(region, str) else None)
    plan = VerifyPlan.from_outputs(outputs)
    deployment = KubeDeployment(client, plan)
    endpoint, connection = serve_proxy(client, plan)
    return Harness(endpoint, plan.model_id, KubeFault(fault, deployment), deployment, connection, client.scrub)


def phase_event(phase: str, words: str) -> dict[str, Any]:
    return {"kind": "resilience", "phase": phase, "done": PHASES.index(phase) + 1, "total": len(PHASES),
            "message": f"{phase}: {words}"}


@dataclass
class Resilience:
    """Runs a resilience job's work. The judging and the fault's time are serve.resilience's
    defaults; tests shorten them (and replace `connect_fn`)."""

    connect_fn: ConnectFn = _connect
    fault_at_s: float = DEFAULT_FAULT_AT_S
    timeout_s: float = DEFAULT_TIMEOUT_S
    settle_s: float = judge.SETTLE_S
    bucket_s: float = judge.BUCKET_S
    workload: Workload = field(default_factory=Workload)
    ready_every_s: float = READY_EVERY_S

    def settings(self, request: ResilienceRequest) -> Settings:
        return Settings(request.rate, request.durationSeconds, self.fault_at_s, self.timeout_s,
                        bucket_s=self.bucket_s, settle_s=self.settle_s)

    def run(self, ctx: JobContext, outputs: dict[str, Any], request: ResilienceRequest) -> dict[str, Any]:
        kubeconfig = outputs.get("kubeconfig")
        try:
            harness = self.connect_fn(outputs, kubeconfig if isinstance(kubeconfig, str) else None, request.fault)
        except (VerifyInputError, KubeConfigError, KubeError, FaultRefused) as exc:
            raise OperationFailed(f"cannot run the resilience check from the stack's outputs: {exc}") from None
        fault = harness.fault
        interrupt = getattr(fault, "interrupt", None)  # KubeFault: a drain stops waiting, no cordon after
        if callable(interrupt):
            ctx.on_cancel(interrupt)
        settings = self.settings(request)
        try:
            try:
                measured = measure(harness.endpoint, harness.model, fault, harness.target, settings, self.workload,
                                   ready_every_s=self.ready_every_s, connection=harness.connection,
                                   cancelled=lambda: ctx.cancelled,
                                   on_phase=lambda phase, words: ctx.emit(phase_event(phase, words)))
            finally:
                fault.restore()  # uncordon, however the run ended (a cancel included)
        except RunCancelled:
            raise OperationCancelled() from None
        except (FaultRefused, KubeError, VerifyInputError) as exc:
            raise OperationFailed(harness.scrub(str(exc))) from None
        return build_report(measured, settings)


def settings_of(request: ResilienceRequest, resilience: Resilience) -> dict[str, Any]:
    """What a run remembers of how it was asked (never the confirmation: it is only a gesture)."""
    return {"fault": request.fault, "rate": request.rate, "durationSeconds": request.durationSeconds,
            "faultAtSeconds": resilience.fault_at_s}


class ResilienceService:
    """Start resilience checks and read their runs; pages and the API call only this for the tab."""

    def __init__(self, deployments: Deployments, resilience: Optional[Resilience] = None):
        self.deployments = deployments
        self.store = deployments.store
        self.resilience = resilience or Resilience()

    def available(self, record: Mapping[str, Any]) -> Optional[str]:
        """Why this deployment cannot be disrupted now, or None when it can."""
        engine = self.deployments.engines.get(record["engine"])
        if engine is None:
            return f"the {record['engine']} engine is not available on this server"
        if not engine.real:
            return NEEDS_A_REAL_DEPLOYMENT
        if not self.deployments.serving(record):
            return (f"{record['name']} is {record['status']}, not deployed: a resilience check needs its "
                    "endpoint serving; Deploy it first")
        return None

    def start(self, name: str, request: ResilienceRequest, actor: str) -> str:
        record = self.deployments.record(name)
        engine = self.deployments.engine_of(name, record)
        why_not = self.available(record)
        if why_not is not None:
            raise Conflict(why_not, field="deployment")
        problem = confirm_problem(name, request.confirm)
        if problem is not None:
            raise BodyRefused([problem])
        settings = settings_of(request, self.resilience)

        def work(ctx: JobContext) -> OperationResult:
            outputs = engine.live_outputs(name)
            if not outputs:
                raise OperationFailed("the stack has no outputs: run Deploy first")
            report = self.resilience.run(ctx, outputs, request)
            try:
                self.store.save_resilience(ctx.job_id, name, actor, settings, report)
            except STORE_ERRORS as exc:
                raise OperationFailed("the resilience check finished but its report could not be stored "
                                      f"({error_text(exc)})") from None
            recovery = report["recovery"]
            ctx.emit(phase_event("done", (
                f"{'recovered' if recovery['recovered'] else 'NOT recovered'}; {report['requests']['wrong']} "
                "WRONG answer(s); the report is on the Resilience tab")))
            ctx.findings["resilience"] = {"run": ctx.job_id, "ok": report["ok"],
                                          "checks": {c["id"]: c["status"] for c in report["checks"]}}
            return OperationResult()

        return self.deployments.submit(name, Operation.RESILIENCE.value, engine, actor, work,
                                       note=f" ({request.fault} fault, confirmed by name)")

    @staticmethod
    def _view(run: Mapping[str, Any]) -> dict[str, Any]:
        return dump(ResilienceRun(
            id=run["id"], deployment=run["deployment"], createdAt=iso_time(run["createdAt"]), actor=run["actor"],
            settings=run["settings"], report=run["report"],
            plotUrl=f"/resilience/{run['id']}/timeline.png"))

    def runs(self, deployment: str) -> dict[str, Any]:
        """The deployment's runs, newest first (the deployment must exist)."""
        self.deployments.record(deployment)
        return dump(ResilienceRuns(runs=[ResilienceRun.model_validate(self._view(run))
                                         for run in self.store.resilience_runs(deployment)]))

    def run(self, run_id: str) -> dict[str, Any]:
        found = self.store.resilience_run(run_id)
        if found is None:
            raise NotFound(f"no resilience run with id {run_id}")
        return self._view(found)

    def plot(self, run_id: str) -> bytes:
        """The run's timeline (serve/resilience/plot.py), drawn from the stored report."""
        from serve.resilience.plot import timeline_png  # matplotlib: ~1.7 s, so at first use

        found = self.store.resilience_run(run_id)
        if found is None:
            raise NotFound(f"no resilience run with id {run_id}")
        return timeline_png(found["report"])
