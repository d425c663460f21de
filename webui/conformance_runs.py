"""The Conformance tab's work: serve.conformance against a real deployment as a job, its report kept.

A run is a job (operation `conformance`, one per deployment at a time, like verify and benchmark):
it reads the deployment's outputs (secrets in clear) and kubeconfig from the engine as verify's job
does, reaches the OpenAI server as verify's api-parity does (serve/verify/endpoint.py: the Serve
Service through the Kubernetes API server's service proxy, with the kubeconfig's credentials; the
proxy drops a client's Authorization header, so no API key travels or is needed) and runs every
feature with serve.conformance's `run_features` and the official `openai` client. A reference,
another deployment of this app serving the same model id (typically a colocated one), is reached
the same way, and the same requests compared (Contract 7's `reference` and `pdOnly`).

Only a real deployment has an endpoint: an offline plan gets a plain statement, never a made-up
matrix. The API keys of both deployments are replaced before anything is emitted or stored (the
report holds no raw exchanges; `redact` catches what has a key's shape); the kubeconfig is used for
the run and dropped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from components.config.errors import FieldError
from serve.conformance import FeatureResult, Report, Session, run_features
from serve.conformance.groups import FEATURE_IDS
from serve.evidence import Evidence, VerifyInputError, VerifyPlan, check_outputs, resolve_kubeconfig, shorten
from serve.kube import KubeConfigError, KubeError, client_from_kubeconfig
from serve.verify.endpoint import proxied_endpoint
from webui.api_models import BodyRefused, ConformanceRequest, ConformanceRun, dump
from webui.deployments.commands import Deployments
from webui.deployments.errors import Conflict, NotFound
from webui.deployments.views import iso_time
from webui.engines.base import OFFLINE_NOTICE, JobContext, OperationCancelled, OperationFailed, OperationResult
from webui.redact import MASK, redact
from webui.status import Operation
from webui.store import STORE_ERRORS, error_text

logger = logging.getLogger(__name__)

NEEDS_A_REAL_DEPLOYMENT = (
    f"{OFFLINE_NOTICE}: nothing is serving, so there is no OpenAI endpoint to check. Conformance sends "
    "real requests, through the official openai client, to a running deployment: create one with the "
    "Pulumi engine and Deploy it"
)
REQUEST_TIMEOUT_S = 60.0  # each request; serve.conformance's own default (120 s) is for a CLI run
EVIDENCE_CHARS = 160

OnResult = Callable[[FeatureResult], None]


@dataclass(frozen=True)
class Target:
    """A deployment to send the requests to: its live outputs (secrets in clear) and kubeconfig."""

    name: str
    outputs: Mapping[str, Any]
    kubeconfig: Optional[str]


# (the deployment, the reference or None, called after each feature) -> the Contract 7 report
RunFn = Callable[[Target, Optional[Target], OnResult], Report]


def session_for(target: Target, timeout_s: float = REQUEST_TIMEOUT_S) -> Session:
    """An openai-client Session on the deployment's Serve Service through the API server's proxy,
    built as verify builds api-parity's (serve/verify/run.py, serve/verify/api_parity.py)."""
    check_outputs(target.outputs, have_kubeconfig=target.kubeconfig is not None)
    plan = VerifyPlan.from_outputs(target.outputs)
    try:
        client = client_from_kubeconfig(resolve_kubeconfig(target.outputs, target.kubeconfig),
                                        region_hint=plan.region)
    except KubeConfigError as exc:
        raise VerifyInputError(str(exc)) from None
    endpoint = proxied_endpoint(Evidence(client, plan))
    return Session(endpoint.base_url, plan.model_id, api_key=endpoint.api_key, timeout_s=timeout_s,
                   transport=endpoint.transport())


def _run_through_the_api_server(target: Target, reference: Optional[Target], on_result: OnResult) -> Report:
    session = session_for(target)
    ref_session = session_for(reference) if reference is not None else None
    try:
        return run_features(session, reference=ref_session, on_result=on_result)
    finally:
        session.close()
        if ref_session is not None:
            ref_session.close()


def hider(*outputs: Optional[Mapping[str, Any]]) -> Callable[[str], str]:
    """Text with these deployments' API keys masked, and anything shaped like a credential."""
    keys = [o.get("apiKey") for o in outputs if o is not None]
    secrets = sorted({k for k in keys if isinstance(k, str) and len(k) >= 4 and k != MASK}, key=len, reverse=True)

    def hide(text: str) -> str:
        for secret in secrets:
            text = text.replace(secret, MASK)
        return redact(text)

    return hide


def hidden(value: Any, hide: Callable[[str], str]) -> Any:
    """Every string in a JSON-like value passed through `hide` (keys too: a judge's data is free-form)."""
    if isinstance(value, str):
        return hide(value)
    if isinstance(value, Mapping):
        return {hide(str(k)): hidden(v, hide) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [hidden(v, hide) for v in value]
    return value


def result_event(result: FeatureResult, done: int, total: int, hide: Callable[[str], str]) -> dict[str, Any]:
    """A job event for one feature's verdict: done/total drive the bar, the line says what was found."""
    against = f" (reference: {result.reference.verdict.value})" if result.reference is not None else ""
    return {"kind": "conformance", "done": done, "total": total, "feature": result.id,
            "verdict": result.verdict.value,
            "message": hide(f"{result.id}: {result.verdict.value}{against}: "
                            f"{shorten(result.outcome.evidence, EVIDENCE_CHARS)}")}


@dataclass
class Conformer:
    """Runs a conformance job's work; `run_fn` is the seam tests replace (default: through the
    Kubernetes API server's service proxy, with serve.conformance's run_features)."""

    run_fn: RunFn = _run_through_the_api_server

    def run(self, ctx: JobContext, target: Target, reference: Optional[Target], total: int) -> Report:
        hide = hider(target.outputs, reference.outputs if reference is not None else None)
        done = 0

        def on_result(result: FeatureResult) -> None:
            nonlocal done
            done += 1
            ctx.emit(result_event(result, done, max(total, done), hide))
            if ctx.cancelled:  # run_features has no cancel hook: this ends it between features
                raise OperationCancelled()

        try:
            return self.run_fn(target, reference, on_result)
        except (VerifyInputError, KubeError) as exc:
            raise OperationFailed(hide(f"cannot run conformance on {target.name}: {shorten(str(exc), 400)}")) from None


class ConformanceService:
    """Start conformance runs and read the last one; pages and the API call only this for the tab."""

    def __init__(self, deployments: Deployments, conformer: Optional[Conformer] = None):
        self.deployments = deployments
        self.store = deployments.store
        self.conformer = conformer or Conformer()

    # ---- what can run ----

    def available(self, record: Mapping[str, Any]) -> Optional[str]:
        """Why this deployment's conformance cannot run now, or None when it can."""
        engine = self.deployments.engines.get(record["engine"])
        if engine is None:
            return f"the {record['engine']} engine is not available on this server"
        if not engine.real:
            return NEEDS_A_REAL_DEPLOYMENT
        if not self.deployments.serving(record):
            return (f"{record['name']} is {record['status']}, not deployed: conformance needs its endpoint "
                    "serving; Deploy it first")
        return None

    def model_of(self, record: Mapping[str, Any]) -> Optional[str]:
        """The model id the deployment serves: the deployed settings' (not pending ones)."""
        spec = self.deployments.deployed_spec(record["name"])
        if spec is not None:
            return spec.model.id
        model = (record.get("summary") or {}).get("modelId")
        return model if isinstance(model, str) else None

    def reference_problem(self, name: str, record: Mapping[str, Any], other: Mapping[str, Any]) -> Optional[str]:
        """Why `other` cannot be the reference of `name`'s run, or None when it can."""
        if other["name"] == name:
            return "is this deployment itself: choose another one serving the same model, or none"
        why = self.available(other)
        if why is not None:
            return f"{other['name']} cannot answer: {why}"
        mine, theirs = self.model_of(record), self.model_of(other)
        if mine is None or theirs != mine:
            return (f"{other['name']} serves {theirs or 'an unknown model'}, not {mine or 'a known model'}: "
                    "a reference must serve the same model id")
        return None

    def reference_choices(self, name: str) -> list[str]:
        """The deployments a run of `name` may be compared with (the page's select)."""
        record = self.deployments.record(name)
        choices = []
        for row in self.store.list_deployments():
            if row["name"] == name:
                continue
            other = self.store.get_deployment(row["name"])
            if other is not None and self.reference_problem(name, record, other) is None:
                choices.append(row["name"])
        return choices

    def _reference(self, name: str, record: Mapping[str, Any], wanted: Optional[str]) -> Optional[Any]:
        if wanted is None:
            return None
        other = self.store.get_deployment(wanted)  # `wanted` passed ConformanceRequest's stack-name pattern
        if other is None:
            raise BodyRefused([FieldError("reference", f"there is no deployment named {wanted}")])
        if wanted == name:
            raise BodyRefused([FieldError("reference", self.reference_problem(name, record, other) or "")])
        problem = self.reference_problem(name, record, other)
        if problem is not None:
            raise Conflict(problem, field="reference")
        return other

    # ---- the job ----

    def start(self, name: str, request: ConformanceRequest, actor: str) -> str:
        record = self.deployments.record(name)
        engine = self.deployments.engine_of(name, record)
        why_not = self.available(record)
        if why_not is not None:
            raise Conflict(why_not, field="deployment")
        other = self._reference(name, record, request.reference)
        ref_engine = self.deployments.engine_of(other["name"], other) if other is not None else None
        total = len(FEATURE_IDS)

        def work(ctx: JobContext) -> OperationResult:
            target = _target(name, engine)
            reference = _target(other["name"], ref_engine) if other is not None and ref_engine is not None else None
            _same_model(target, reference)
            ctx.emit({"kind": "conformance", "done": 0, "total": total, "message": (
                f"conformance: {total} features of the OpenAI API on {name}"
                + (f", the same requests to {reference.name} as the reference" if reference else "")
                + ", through the Kubernetes API server's service proxy with the openai client")})
            report = self.conformer.run(ctx, target, reference, total)
            document = hidden(report.to_json(), hider(target.outputs, reference.outputs if reference else None))
            try:
                self.store.save_conformance(ctx.job_id, name, reference.name if reference else None, actor, document)
            except STORE_ERRORS as exc:
                raise OperationFailed("conformance finished but its report could not be stored "
                                      f"({error_text(exc)})") from None
            counts = ", ".join(f"{n} {verdict}" for verdict, n in document["counts"].items() if n)
            ctx.emit({"kind": "conformance", "message": (
                f"conformance done: {counts}; the matrix is on the Conformance tab")})
            ctx.findings["conformance"] = {"run": ctx.job_id, "ok": document["ok"], "counts": document["counts"]}
            return OperationResult()

        return self.deployments.submit(name, Operation.CONFORMANCE.value, engine, actor, work,
                                       note=f", reference {other['name']}" if other is not None else "")

    # ---- reads ----

    def last(self, name: str) -> dict[str, Any]:
        """The deployment's last run (NotFound when it has none, or no such deployment)."""
        self.deployments.record(name)
        found = self.store.last_conformance(name)
        if found is None:
            raise NotFound(f"{name} has no conformance report yet: run conformance first")
        return dump(ConformanceRun(id=found["id"], deployment=found["deployment"], reference=found["reference"],
                                   createdAt=iso_time(found["createdAt"]), actor=found["actor"],
                                   report=found["report"]))


def _target(name: str, engine: Any) -> Target:
    outputs = engine.live_outputs(name)
    if not outputs:
        raise OperationFailed(f"{name} has no stack outputs: run Deploy first")
    kubeconfig = outputs.get("kubeconfig")
    return Target(name, outputs, kubeconfig if isinstance(kubeconfig, str) else None)


def _same_model(target: Target, reference: Optional[Target]) -> None:
    """The outputs as they are now (a Deploy since the request may have changed the model)."""
    if reference is None:
        return
    mine, theirs = target.outputs.get("modelId"), reference.outputs.get("modelId")
    if mine != theirs:
        raise OperationFailed(f"{reference.name} serves {theirs}, not {mine} (its outputs now): a reference must "
                              "serve the same model id")
