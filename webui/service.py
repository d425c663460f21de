"""Deployment operations as the pages and the API see them; both blueprints call only this.

Views stay thin (parse, call one method, render), and the rules live once: which engine a
deployment belongs to, which statuses an operation moves it through, what the audit log says, and
that the HF token goes to the engine's `create` and nowhere else (not the store, not the summary).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Mapping, Optional

from components import defaults
from components.errors import FieldError, SpecError
from components.outputs import render_stack_outputs
from components.spec import HF_TOKEN_KEY, NAMESPACE, REGION_KEY, DeploymentSpec, validate_stack_name
from webui.engines.base import (
    OFFLINE_NOTICE,
    OPERATIONS,
    EngineError,
    EngineNotFound,
    EngineUnavailable,
    JobContext,
    OperationResult,
)
from webui.engines.select import EngineSet
from webui.jobs import Busy, JobRunner
from webui.redact import remember_secret
from webui.store import ACTIVE_STATUSES, NameTaken, Store
from webui.summary import summarize

logger = logging.getLogger(__name__)
audit_logger = logging.getLogger("raypd.audit")

RUNNING_STATUS = {"preview": "previewing", "up": "updating", "refresh": "refreshing",
                  "destroy": "destroying"}
# Statuses that say what exists; a preview or refresh leaves them as they were.
STANDING = ("planned (offline)", "deployed")


def status_tone(status: Optional[str]) -> str:
    """How a deployment or job status reads at a glance (the badge colour), from the rules above."""
    status = status or "unknown"
    if status in STANDING or status == "succeeded":
        return "ok"
    if "failed" in status or status == "interrupted":
        return "bad"
    if status in RUNNING_STATUS.values() or status in ACTIVE_STATUSES:
        return "busy"
    if "cancel" in status:
        return "warn"
    return "neutral"


class NotFound(Exception):
    """No deployment or job by that name/id."""


class Conflict(Exception):
    """The name is taken, or another operation runs; `job` is the running job's id when known."""

    def __init__(self, message: str, job: Optional[str] = None, field: str = "name"):
        super().__init__(message)
        self.message = message
        self.job = job
        self.field = field


def strip_token(config: Mapping[str, Any]) -> tuple[dict[str, Any], Optional[str]]:
    """Split the HF token from the rest of the config; an empty token means none."""
    rest = dict(config)
    token = rest.pop(HF_TOKEN_KEY, None)
    if token is None or token == "":
        return rest, None
    if not isinstance(token, str):
        raise SpecError.single(HF_TOKEN_KEY, "must be a string (the Hugging Face access token)")
    rest[HF_TOKEN_KEY] = token
    return rest, token


def check_config_keys(config: Mapping[str, Any]) -> None:
    """Only Contract 1 keys: the web app does not pass other providers' config through."""
    problems = [
        FieldError(str(key), "unknown key; only aws:region and raypd:* keys are accepted")
        for key in config
        if key != REGION_KEY and not str(key).startswith(f"{NAMESPACE}:")
    ]
    if problems:
        raise SpecError(problems)


def connect_info(spec: DeploymentSpec, outputs: Optional[Mapping[str, Any]]) -> dict[str, str]:
    """How to reach the endpoint: the port-forward command and a chat completion with curl."""
    planned = render_stack_outputs(
        spec, availability_zone=spec.availability_zone or "",
        cluster_name=spec.effective_cluster_name,
    )
    port_forward = (outputs or {}).get("portForwardCommand") or planned["portForwardCommand"]
    port = defaults.SERVE_PORT
    curl = (
        f"curl -s http://localhost:{port}/v1/chat/completions \\\n"
        "  -H 'Content-Type: application/json' \\\n"
        f"  -d '{{\"model\": \"{spec.model.id}\", \"messages\": "
        "[{\"role\": \"user\", \"content\": \"Hello!\"}], \"max_tokens\": 64}'"
    )
    kubeconfig = (
        f"aws eks update-kubeconfig --region {spec.region} --name {spec.effective_cluster_name}"
    )
    return {"portForward": port_forward, "curl": curl, "kubeconfig": kubeconfig,
            "openaiBaseUrl": planned["openaiBaseUrl"]}


class DeploymentService:
    def __init__(self, store: Store, runner: JobRunner, engines: EngineSet):
        self.store = store
        self.runner = runner
        self.engines = engines
        self._create_lock = threading.Lock()

    # ---- reading (SQLite only) ----

    def _engine_fields(self, engine: str) -> dict[str, Any]:
        fields: dict[str, Any] = {"engine": engine}
        if engine == "offline":
            fields["notice"] = OFFLINE_NOTICE
        return fields

    def list(self) -> list[dict[str, Any]]:
        rows = []
        for row in self.store.list_deployments():
            summary = row["summary"]
            rows.append({
                "name": row["name"],
                **self._engine_fields(row["engine"]),
                "status": row["status"],
                "modelId": summary.get("modelId"),
                "mode": summary.get("mode"),
                "topology": summary.get("topology"),
                "region": summary.get("region"),
                "gpus": summary.get("gpus"),
                "estimatedUsdPerHour": summary.get("usdPerHour"),
                "lastOperation": row["lastOperation"],
                "lastResult": row["lastResult"],
                "lastOperationAt": _iso(row["lastOperationAt"]),
                "lastJob": row["lastJob"],
                "createdAt": _iso(row["createdAt"]),
            })
        return rows

    def record(self, name: str) -> dict[str, Any]:
        record = self.store.get_deployment(name)
        if record is None:
            raise NotFound(f"no deployment named {name}")
        return record

    def spec_of(self, record: Mapping[str, Any]) -> tuple[Optional[DeploymentSpec], Optional[str]]:
        """The stored public config, validated again (the token shows as a placeholder).

        A config stored by an older raypd may not validate any more (say, an instance type left
        the catalogue): the deployment must still be shown and torn down, so this reports the
        problem instead of raising.
        """
        try:
            return DeploymentSpec.from_config(record["config"], record["name"]), None
        except SpecError as exc:
            return None, f"the stored configuration no longer validates: {exc}"

    def get(self, name: str, jobs: int = 10) -> dict[str, Any]:
        return self.get_with_spec(name, jobs)[0]

    def get_with_spec(self, name: str, jobs: int = 10) -> tuple[dict[str, Any], Optional[DeploymentSpec]]:
        """`get`, plus the spec it validated (None when it no longer does), for the page's picture.

        One read and one validation per page: the page must not look the record up again.
        """
        record = self.record(name)
        spec, problem = self.spec_of(record)
        warnings = list(record["summary"].get("warnings", []))
        if problem:
            warnings.append(problem)
        detail = {
            "name": record["name"],
            **self._engine_fields(record["engine"]),
            "status": record["status"],
            "spec": record["config"],
            "summary": record["summary"],
            "warnings": warnings,
            "estimatedUsdPerHour": record["summary"].get("usdPerHour"),
            "outputs": record["outputs"],
            "resources": record["resources"],
            "connect": connect_info(spec, record["outputs"]) if spec else None,
            "lastOperation": record["lastOperation"],
            "lastResult": record["lastResult"],
            "lastOperationAt": _iso(record["lastOperationAt"]),
            "createdAt": _iso(record["createdAt"]),
            "jobs": [public_job(job) for job in self.store.jobs_for(name, limit=jobs)],
        }
        return detail, spec

    def job(self, job_id: str) -> dict[str, Any]:
        job = self.store.get_job(job_id)
        if job is None:
            raise NotFound(f"no job with id {job_id}")
        return job

    # ---- changing ----

    def validate(self, name: Any, config: Mapping[str, Any]) -> tuple[DeploymentSpec, Optional[str]]:
        """Name and Contract 1 config -> (spec, HF token); every problem as a FieldError."""
        problems: list[FieldError] = []
        stack = ""
        try:
            stack = validate_stack_name(name)  # whole-name match: "demo\n" is refused there
        except SpecError as exc:
            problems.extend(exc.errors)
        try:
            check_config_keys(config)
            rest, token = strip_token(config)
            spec = DeploymentSpec.from_config(rest, stack or "dev")
        except SpecError as exc:
            problems.extend(exc.errors)
        if problems:
            raise SpecError(problems)
        remember_secret(token)  # from now on masked in every event, error and log line
        return spec, token

    def create(self, name: Any, config: Mapping[str, Any], actor: str) -> dict[str, Any]:
        spec, token = self.validate(name, config)
        engine = self.engines.default
        with self._create_lock:
            if self.store.get_deployment(spec.stack) is not None:
                raise Conflict(f"a deployment named {spec.stack} already exists")
            try:
                engine.create(spec, token)
            except EngineError as exc:
                self.audit(actor, "create", spec.stack, "failed", exc.message)
                raise
            try:
                self.store.create_deployment(spec.stack, engine.name, spec.public_config(), summarize(spec))
            except NameTaken:
                raise Conflict(f"a deployment named {spec.stack} already exists") from None
        self.audit(actor, "create", spec.stack, "succeeded", None)
        return self.get(spec.stack)

    def start(self, name: str, operation: str, actor: str) -> str:
        if operation not in OPERATIONS:
            raise NotFound(f"unknown operation {operation}")
        record = self.record(name)
        engine = self.engines.get(record["engine"])
        if engine is None:
            raise EngineUnavailable(
                f"{name} was created with the {record['engine']} engine, which is not available "
                "here (is the Pulumi CLI installed?)"
            )
        known = record["resources"]

        def work(ctx: JobContext) -> OperationResult:
            return engine.run(name, operation, ctx, known_resources=known)

        def finish(job_id: str, status: str, result: Optional[OperationResult]) -> None:
            self._finish(job_id, name, operation, engine, status, result)

        try:
            job_id = self.runner.submit(
                name, operation, engine.name, actor, RUNNING_STATUS[operation], work, finish,
            )
        except Busy as busy:
            raise Conflict(
                f"{name} is busy: job {busy.job_id} is still running; wait for it or cancel it",
                job=busy.job_id, field="job",
            ) from None
        self.audit(actor, f"{operation} requested", name, "accepted", f"job {job_id}")
        return job_id

    def _finish(
        self, job_id: str, name: str, operation: str, engine: Any, status: str,
        result: Optional[OperationResult],
    ) -> None:
        """Move the deployment to where the operation left it (called on the job's thread)."""
        job = self.store.get_job(job_id) or {}
        previous = job.get("previousStatus") or "created"
        if status != "succeeded" or result is None:
            self.store.update_deployment(name, status=f"{operation} {status}")
            return
        if operation == "destroy":
            engine.remove(name)
            self.store.delete_deployment(name)
            return
        fields: dict[str, Any] = {}
        if operation == "up":
            fields["status"] = "deployed" if engine.real else "planned (offline)"
        elif operation == "preview":
            fields["status"] = previous if previous in STANDING else "previewed"
        else:  # refresh: what exists has not changed, only what is recorded about it
            fields["status"] = previous
        # A real preview changes nothing, so what it reports is not what exists.
        if not engine.real or operation != "preview":
            if result.outputs is not None:
                fields["outputs"] = result.outputs
            if result.resources is not None:
                fields["resources"] = result.resources
        self.store.update_deployment(name, **fields)

    def cancel(self, job_id: str, actor: str) -> dict[str, Any]:
        job = self.job(job_id)
        engine = self.engines.get(job["engine"])

        def release() -> None:
            if engine is not None:
                engine.release(job["deployment"])

        record = self.store.get_deployment(job["deployment"])
        if job["status"] == "interrupted" and record is not None and record["lastJob"] == job_id:
            self.store.update_deployment(
                job["deployment"], status=job.get("previousStatus") or "created",
            )
        result = self.runner.cancel(job_id, actor, release)
        self.audit(actor, "cancel requested", job["deployment"], result["status"], f"job {job_id}")
        return result

    def audit(self, actor: str, action: str, target: str, result: str, detail: Optional[str]) -> None:
        self.store.add_audit(actor, action, target, result, detail)
        audit_logger.info("actor=%s action=%r target=%s result=%s%s", actor, action, target, result,
                          f" detail={detail!r}" if detail else "")


def public_job(job: Mapping[str, Any]) -> dict[str, Any]:
    """A job as Contract 4 shows it (plus when, who and a hint where there is one)."""
    answer = {
        "id": job["id"],
        "deployment": job["deployment"],
        "operation": job["operation"],
        "engine": job["engine"],
        "status": job["status"],
        "progress": dict(job["progress"]),
        "error": job["error"],
        "createdAt": _iso(job["createdAt"]),
        "startedAt": _iso(job["startedAt"]),
        "finishedAt": _iso(job["finishedAt"]),
        "actor": job["actor"],
    }
    if job.get("hint"):
        answer["hint"] = job["hint"]
    if job.get("summary"):
        answer["summary"] = job["summary"]
    if job["engine"] == "offline":
        answer["notice"] = OFFLINE_NOTICE
    return answer


def _iso(timestamp: Optional[float]) -> Optional[str]:
    if timestamp is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


__all__ = [
    "Conflict", "DeploymentService", "EngineNotFound", "NotFound", "connect_info", "public_job",
]
