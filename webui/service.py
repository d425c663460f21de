"""Deployment operations as the pages and the API see them; both blueprints call only this.

Views stay thin (parse, call one method, render), and the rules live once: which engine a
deployment belongs to, which statuses an operation moves it through, what the audit log says, and
that the HF token goes to the engine's `create` and nowhere else (not the store, not the summary).
"""

from __future__ import annotations

import json
import logging
import shlex
import threading
import time
from pathlib import Path
from typing import Any, Callable, List, Mapping, Optional

from components import defaults
from components.changes import assess
from components.checks import Check, Report
from components.errors import FieldError, SpecError
from components.outputs import render_stack_outputs
from components.spec import (
    HF_TOKEN_KEY,
    NAMESPACE,
    REGION_KEY,
    SECRET_PLACEHOLDER,
    DeploymentSpec,
    validate_stack_name,
)
from components.topology import plan_deployment
from webui.api_models import (
    ChecksView,
    DeployedSettings,
    DeploymentRow,
    DeploymentView,
    JobView,
    LastReport,
    LiveStatus,
    PendingSettings,
    PendingView,
    dump,
)
from webui.change import config_diff, consequences, cost_change
from webui.checking import Checker
from webui.deployments.lifecycle import CHECK_OPERATIONS, RUNNING_STATUS, STANDING, Standing, settle
from webui.engines.base import (
    OFFLINE_NOTICE,
    OPERATIONS,
    EngineError,
    EngineNotFound,
    EngineUnavailable,
    JobContext,
    OperationResult,
    PendingOperations,
)
from webui.engines.select import EngineSet
from webui.engines.workdir import legacy_stack_file, stack_file_name
from webui.jobs import Busy, JobRunner
from webui.pending_changes import (
    DEPLOYED_LABEL,
    deployed_kind,
    discard_target,
    left_after_discard,
    pending_changes,
    settings_kind,
    token_replaced,
)
from webui.progress import ProgressPlan, durations_for, planned_total
from webui.redact import remember_secret
from webui.store import ACTIVE_STATUSES, STORE_ERRORS, NameTaken, Store
from webui.summary import summarize

logger = logging.getLogger(__name__)
audit_logger = logging.getLogger("raypd.audit")

LIST_TTL_SECONDS = 1.0
# What may refuse Discard's writes: the engine (the stack's config) or the store.
WRITE_BACK_ERRORS: tuple[type[BaseException], ...] = (EngineError, *STORE_ERRORS)


class PreflightBlocked(EngineError):
    """A launch stopped before any cloud action because a preflight check failed."""

    http_status = 409

    def __init__(self, report: Report):
        ids = ", ".join(check.id for check in report.failed)
        super().__init__(
            f"preflight failed ({ids}): nothing was launched. Fix what the report says, or launch "
            "anyway (\"force\": true in the API, \"Launch anyway\" on the page)"
        )


def check_events(report: Report, counted: bool) -> list[dict[str, Any]]:
    """One progress line per check, so the event log reads like the CLI's report.

    `counted`: the checks are the job's progress (a preflight or verify job); inside a deploy
    the progress counts resources, and the checks must not overwrite it.
    """
    severity = {"pass": "info", "skip": "info", "warn": "warning", "fail": "error"}
    total = len(report.checks)
    events = []
    for number, check in enumerate(report.checks, start=1):
        event: dict[str, Any] = {
            "kind": "check", "check": check.id, "status": check.status,
            "severity": severity[check.status],
            "message": f"{report.kind} {check.status.upper()} {check.id}: {check.detail}"
                       + (f" Fix: {check.remedy}" if check.remedy and check.status != "pass" else ""),
        }
        if counted:
            event.update(done=number, total=total)
        events.append(event)
    return events


class NotFound(Exception):
    """No deployment or job by that name/id."""


class Conflict(Exception):
    """The name is taken, or another operation runs; `job` is the running job's id when known."""

    def __init__(self, message: str, job: Optional[str] = None, field: str = "name"):
        super().__init__(message)
        self.message = message
        self.job = job
        self.field = field


def busy_conflict(name: str, busy: Busy, advice: str) -> Conflict:
    """The 409 for a deployment whose job is still running: one wording, the job named."""
    return Conflict(f"{name} is busy: job {busy.job_id} is still running; {advice}",
                    job=busy.job_id, field="job")


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
    # Every value that lands in a command people paste is shell-quoted, whatever the spec allowed.
    payload = json.dumps({"model": spec.model.id, "messages": [{"role": "user", "content": "Hello!"}],
                          "max_tokens": 64})
    curl = (
        f"curl -s http://localhost:{port}/v1/chat/completions \\\n"
        "  -H 'Content-Type: application/json' \\\n"
        f"  -d {shlex.quote(payload)}"
    )
    kubeconfig = (
        f"aws eks update-kubeconfig --region {shlex.quote(spec.region)} "
        f"--name {shlex.quote(spec.effective_cluster_name)}"
    )
    return {"portForward": port_forward, "curl": curl, "kubeconfig": kubeconfig,
            "openaiBaseUrl": planned["openaiBaseUrl"]}


class DeploymentService:
    def __init__(self, store: Store, runner: JobRunner, engines: EngineSet,
                 checker: Optional[Checker] = None):
        self.store = store
        self.runner = runner
        self.engines = engines
        self.checker = checker or Checker()
        self._blocked_jobs: set[str] = set()  # launches a preflight stopped: nothing changed
        self._listing: Optional[tuple[float, list[dict[str, Any]]]] = None
        self._listing_lock = threading.Lock()
        self._create_lock = threading.Lock()

    # ---- reading (SQLite only) ----

    def _engine_fields(self, engine: str) -> dict[str, Any]:
        fields: dict[str, Any] = {"engine": engine}
        if engine == "offline":
            fields["notice"] = OFFLINE_NOTICE
        return fields

    def list(self) -> list[dict[str, Any]]:
        """Every deployment as the list shows it, read at most once a LIST_TTL_SECONDS: the list
        page and GET /deployments are what a team's browsers poll, and 200 rows cost a query and
        200 models. Changes made through this service are seen at once; a job's status at most
        a second late."""
        now = time.monotonic()
        with self._listing_lock:
            if self._listing is not None and now - self._listing[0] < LIST_TTL_SECONDS:
                return self._listing[1]
        rows = self._list_rows()
        with self._listing_lock:
            self._listing = (now, rows)
        return rows

    def _stale_listing(self) -> None:
        with self._listing_lock:
            self._listing = None

    def _list_rows(self) -> List[dict[str, Any]]:  # `list` here would name the method above
        rows = []
        for row in self.store.list_deployments():
            deployed = row["deployed"]
            # What runs (or was planned) is what the list shows, the store's `summary` says; the
            # stack's own settings only when nothing was ever deployed (`settings`: "pending").
            summary = row["summary"] or {}
            rows.append(dump(DeploymentRow(
                name=row["name"],
                **self._engine_fields(row["engine"]),
                status=row["status"],
                settings=settings_kind(row["engine"], deployed is not None),
                hasPendingChanges=deployed is not None and (deployed["configDiffers"] or deployed["tokenReplaced"]),
                deployedAt=iso_time(deployed["time"]) if deployed is not None else None,
                modelId=summary.get("modelId"),
                mode=summary.get("mode"),
                topology=summary.get("topology"),
                region=summary.get("region"),
                gpus=summary.get("gpus"),
                estimatedUsdPerHour=summary.get("usdPerHour"),
                lastOperation=row["lastOperation"],
                lastResult=row["lastResult"],
                lastOperationAt=iso_time(row["lastOperationAt"]),
                lastJob=row["lastJob"],
                createdAt=iso_time(row["createdAt"]),
            )))
        return rows

    def record(self, name: str) -> dict[str, Any]:
        try:
            validate_stack_name(name)
        except SpecError:  # every deployment was created with a valid name: junk never reaches the store
            raise NotFound(f"no deployment named {name!r}") from None
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
        """`get`, plus the spec of what the page draws (None when it no longer validates): the
        deployed one when something is deployed (or planned), else the stack's own.

        One read and one validation per page: the page must not look the record up again.
        """
        record = self.record(name)
        spec, problem = self.spec_of(record)
        warnings = list(record["summary"].get("warnings", []))
        if problem:
            warnings.append(problem)
        deployed = self.store.deployed(name)
        deployed_spec: Optional[DeploymentSpec] = None
        deployed_view = None
        if deployed is not None:
            deployed_spec, deployed_problem = self._validated(deployed["config"], name)
            if deployed_problem:
                warnings.append(f"the deployed settings no longer validate: {deployed_problem}")
            deployed_view = self._deployed_view(record["engine"], deployed, deployed_spec)
        pending = self._pending_view(record, deployed, deployed_view)
        shown = deployed_spec if deployed is not None else spec
        detail = dump(DeploymentView(
            name=record["name"],
            **self._engine_fields(record["engine"]),
            status=record["status"],
            spec=record["config"],
            summary=record["summary"],
            warnings=warnings,
            estimatedUsdPerHour=record["summary"].get("usdPerHour"),
            deployed=deployed_view,
            pending=pending,
            outputs=record["outputs"],
            resources=record["resources"],
            connect=connect_info(shown, record["outputs"]) if shown else None,
            pendingChanges=(
                {"config": pending.changes, "usdPerHour": pending.usdPerHour}
                if pending is not None and deployed is not None else None),
            lastOperation=record["lastOperation"],
            lastResult=record["lastResult"],
            lastOperationAt=iso_time(record["lastOperationAt"]),
            createdAt=iso_time(record["createdAt"]),
            jobs=[job_view(self._as_known(job)) for job in self.store.jobs_for(name, limit=jobs)],
        ))
        return detail, shown

    @staticmethod
    def _validated(config: Mapping[str, Any], name: str) -> tuple[Optional[DeploymentSpec], Optional[str]]:
        try:
            return DeploymentSpec.from_config(config, name), None
        except SpecError as exc:
            return None, str(exc)

    @staticmethod
    def _deployed_view(engine: str, deployed: Mapping[str, Any],
                       spec: Optional[DeploymentSpec]) -> DeployedSettings:
        summary = deployed["summary"] or (summarize(spec) if spec is not None else {})
        kind = deployed_kind(engine)
        return DeployedSettings(
            kind=kind, label=DEPLOYED_LABEL[kind], at=iso_time(deployed["time"]), job=deployed["job"],
            spec=deployed["config"], summary=summary, estimatedUsdPerHour=summary.get("usdPerHour"),
        )

    @staticmethod
    def _pending_view(record: Mapping[str, Any], deployed: Optional[Mapping[str, Any]],
                      deployed_view: Optional[DeployedSettings]) -> Optional[PendingSettings]:
        """The stack's settings that no up has deployed: all of them when none ran, else the ones
        that differ (None when nothing does). Costs from the stored summaries, as the list shows them."""
        current, summary = record["config"], record["summary"]
        if deployed is None or deployed_view is None:
            changes: list[dict[str, Any]] = []
            before = None
            replaced = False
        else:
            changes = pending_changes(deployed["config"], current, deployed["tokenReplaced"])
            if not changes:
                return None
            before = deployed_view.estimatedUsdPerHour
            replaced = token_replaced(deployed["config"], current, deployed["tokenReplaced"])
        return PendingSettings.model_validate({
            "spec": current, "summary": summary, "estimatedUsdPerHour": summary.get("usdPerHour"),
            "changes": changes, "usdPerHour": cost_change(before, summary.get("usdPerHour")),
            "hfTokenReplaced": replaced,
        })

    def job(self, job_id: str) -> dict[str, Any]:
        job = self.store.get_job(job_id)
        if job is None:
            raise NotFound(f"no job with id {job_id}")
        return self._as_known(job)

    def _as_known(self, job: dict[str, Any]) -> dict[str, Any]:
        """The job as this process knows it: an end the store could not take yet (a full disk)
        is answered from memory, so nobody waits on a "running" job that has stopped."""
        ended = self.runner.ended(job["id"])
        if ended is None or job["status"] not in ACTIVE_STATUSES:
            return job
        return {**job, **ended}

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
            spec = DeploymentSpec.from_config(rest, stack or "dev", strict=True)
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
            # The row first: it is what makes the name taken on every server sharing the store, so
            # two servers creating one name cannot both write its stack settings file.
            try:
                self.store.create_deployment(spec.stack, engine.name, spec.public_config(), summarize(spec))
            except NameTaken:
                raise Conflict(f"a deployment named {spec.stack} already exists") from None
            try:
                engine.create(spec, token)
            except BaseException as exc:
                self.store.delete_deployment(spec.stack)  # nothing half-created
                if isinstance(exc, EngineError):
                    self.audit(actor, "create", spec.stack, "failed", exc.message)
                raise
            finally:
                self._stale_listing()
        self.audit(actor, "create", spec.stack, "succeeded", None)
        return self.get(spec.stack)

    def change(self, name: str, patch: Mapping[str, Any], actor: str) -> dict[str, Any]:
        """Merge Contract 1 keys over the deployment's config (`None` resets a key to its default)
        and write it to the stack: validated first, refused while a job runs, no cloud action."""
        record = self.record(name)
        engine = self.engines.get(record["engine"])
        if engine is None:
            raise EngineUnavailable(f"the {record['engine']} engine of {name} is not available here")
        check_config_keys(patch)
        merged = dict(record["config"])
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)
            elif key != HF_TOKEN_KEY or value != SECRET_PLACEHOLDER:
                merged[key] = value
        new_token = patch.get(HF_TOKEN_KEY)
        if new_token is not None and (not isinstance(new_token, str) or not new_token.strip()):
            raise SpecError.single(HF_TOKEN_KEY, "must be the new token, or null to remove it")
        if new_token == SECRET_PLACEHOLDER:
            new_token = None  # "[secret]" as shown: keep the token the stack has
        if new_token is not None:
            merged[HF_TOKEN_KEY] = SECRET_PLACEHOLDER  # the spec only needs to know one is set
        spec = DeploymentSpec.from_config(merged, name, strict=True)
        if new_token is not None:
            remember_secret(new_token)
        public = spec.public_config()
        removed = sorted(set(record["config"]) - set(public))
        changed = [item["key"] for item in config_diff(record["config"], public)]
        try:
            with self.runner.idle(name):
                engine.configure(spec, new_token, removed)
                # A new token is one the deployed stack did not run with, whatever the configs say.
                self.store.set_config(name, public, summarize(spec),
                                      token_replaced=True if new_token is not None else None)
                self._stale_listing()
        except Busy as busy:
            raise busy_conflict(name, busy, "change it when it has ended") from None
        self.audit(actor, "change", name, "succeeded", ", ".join(changed) or "no change")
        return self.get(name)

    def discard(self, name: str, actor: str) -> dict[str, Any]:
        """Put the stack's config back to the deployed settings (offline: the planned ones): the
        engine first, then the store, refused while a job runs; no cloud action. Nothing is half
        done: if the engine or the store refuses, the stack gets the config it had.

        The HF token is the exception Discard cannot undo: raypd never keeps a token, so one
        replaced or removed since the deploy stays as it is now, and stays listed as pending."""
        record = self.record(name)
        engine = self.engine_of(name, record)
        try:
            with self.runner.idle(name):
                record = self.record(name)  # as it is now that nothing can change it
                deployed = self.store.deployed(name)
                if deployed is None:
                    raise Conflict(
                        f"{name} was never deployed: there are no deployed settings to go back to "
                        "(change its settings, or tear it down)", field="deployed")
                target = discard_target(deployed["config"], record["config"])
                kept = left_after_discard(deployed["config"], record["config"], deployed["tokenReplaced"])
                if not config_diff(target, record["config"]):
                    raise Conflict(f"nothing to discard: {kept}" if kept else (
                        f"nothing to discard: {name}'s settings are the deployed ones"), field="pending")
                spec, problem = self._validated(target, name)
                if spec is None:
                    raise Conflict(f"the deployed settings of {name} no longer validate ({problem}); "
                                   "change the settings instead", field="deployed")
                self._write_back(engine, record, spec, actor)
                self._stale_listing()
        except Busy as busy:
            raise busy_conflict(name, busy, "discard when it has ended") from None
        put_back = ", ".join(item["key"] for item in config_diff(record["config"], spec.public_config()))
        self.audit(actor, "discard", name, "succeeded",
                   f"back to the {DEPLOYED_LABEL[deployed_kind(record['engine'])]} settings: {put_back}"
                   + (f"; {kept}" if kept else ""))
        return self.get(name)

    def _write_back(self, engine: Any, record: Mapping[str, Any], spec: DeploymentSpec, actor: str) -> None:
        """Discard's writes: the stack's config through its engine (the token left as the stack has
        it, keys the deployed config lacks removed), then the store. Either failing puts the stack
        back to the config the store still holds."""
        name = record["name"]
        public = spec.public_config()
        removed = sorted(set(record["config"]) - set(public))
        try:
            engine.configure(spec, None, removed)
            self.store.set_config(name, public, summarize(spec),
                                  token_replaced=False if HF_TOKEN_KEY not in public else None)
        except WRITE_BACK_ERRORS as exc:
            self._restore_stack(engine, record, public)
            if isinstance(exc, EngineError):  # (a store that refuses writes cannot take an audit row either)
                self.audit(actor, "discard", name, "failed", exc.message)
            raise

    def _restore_stack(self, engine: Any, record: Mapping[str, Any], written: Mapping[str, Any]) -> None:
        """Best effort: the stack's config as the store holds it (a token Discard removed cannot
        come back: the store never had it, and the log says so)."""
        name = record["name"]
        current, problem = self.spec_of(record)
        if current is None:
            logger.error("discard of %s failed and the stack's config could not be put back: %s", name, problem)
            return
        try:
            engine.configure(current, None, sorted(set(written) - set(record["config"])))
        except EngineError as exc:
            logger.error("discard of %s failed, and so did putting the stack's config back (%s): "
                         "save the settings again with Change settings", name, exc.message)
            return
        if HF_TOKEN_KEY in record["config"] and HF_TOKEN_KEY not in written:
            logger.error("discard of %s failed after the HF token was removed from the stack: "
                         "set it again with Change settings", name)

    def complete_deployed_records(self) -> int:
        """Fill in what an older raypd did not record about deployed settings (at start, once
        per record): a record for deployments it deployed before it kept them (their config
        could not change then, so it is what was deployed), the summaries the list shows, and
        an offline plan it kept in a file under one server's RAYPD_HOME. Returns how many."""
        offline = self.engines.get("offline")
        completed = 0
        for row in self.store.incomplete_deployed():
            deployed = row["deployed"]
            if deployed is None and row["status"] not in STANDING:
                continue  # never deployed: nothing to record
            config = row["config"] if deployed is None else deployed["config"]
            summary = None
            if deployed is None or not deployed["summary"]:
                spec, _problem = self._validated(config, row["name"])
                summary = summarize(spec) if spec is not None else None
            plan = None
            if row["engine"] == "offline" and offline is not None and (deployed is None or not deployed["plan"]):
                plan = offline.legacy_plan(row["name"])
            if deployed is not None and summary is None and plan is None:
                continue
            self.store.fill_in_deployed(row["name"], config=config if deployed is None else None,
                                        summary=summary, plan=plan, at=row["lastOperationAt"])
            if plan is not None and offline is not None:
                offline.forget_legacy_plan(row["name"])
            completed += 1
        if completed:
            self._stale_listing()
            logger.info("completed the deployed-settings records of %d deployment(s) an older raypd wrote",
                        completed)
        return completed

    def complete_stack_files(self, workspaces_dir: Path) -> int:
        """Move the stack settings files an older raypd kept under this server's RAYPD_HOME into the
        store (at start), so every server can run the deployment's jobs. An offline deployment's
        file is a function of its config, so one without a file anywhere gets it rebuilt; a real
        one whose file is on another server is logged (start that server once to move it)."""
        moved = 0
        for row in self.store.stacks_without_file():
            name, engine = row["name"], self.engines.get(row["engine"])
            text = legacy_stack_file(workspaces_dir / name, name)
            if text is not None:
                self.store.save_stack_file(name, text)
                (workspaces_dir / name / stack_file_name(name)).unlink(missing_ok=True)
                moved += 1
            elif row["engine"] == "offline" and engine is not None:
                spec, problem = self._validated(row["config"], name)
                if spec is None:
                    logger.warning("no settings file for %s, and its config does not validate: %s", name, problem)
                    continue
                engine.create(spec, None)
                moved += 1
            else:
                logger.warning("the Pulumi settings file of %s is not in the store: an older raypd kept it "
                               "under the RAYPD_HOME of the server that created it; start that server once "
                               "with this raypd to move it", name)
        if moved:
            logger.info("moved the stack settings files of %d deployment(s) into the store", moved)
        return moved

    def start(self, name: str, operation: str, actor: str, force: bool = False,
              confirm: Optional[str] = None) -> str:
        """Queue one operation as a job. `preview` and `up` run the preflight first; a failed
        preflight stops `up` before any cloud action unless `force`; a real `up` ends with verify."""
        if operation not in OPERATIONS and operation not in CHECK_OPERATIONS:
            raise NotFound(f"unknown operation {operation}")
        record = self.record(name)
        engine = self.engine_of(name, record)
        if operation == "clear-pending":
            if not engine.real:
                raise Conflict(f"{name} is an offline plan: nothing was created, nothing is pending",
                               field="operation")
            if confirm != name:
                raise SpecError.single("confirm", (
                    f"type the deployment name ({name}) to confirm that you checked the pending "
                    "resources in the AWS console: clearing drops them from the state"))
        known = record["resources"]
        # What an up that succeeds will have deployed: the config it started from.
        deploys = (record["config"], record["summary"]) if operation == "up" else None
        spec, problem = self.spec_of(record)
        # What runs now (the settings of the last successful up), for the preflight's quota counts
        # and its update-headroom peak; None for a stack that was never deployed.
        deployed = self.deployed_spec(name) if record["status"] == Standing.DEPLOYED else None
        last = self.store.deployed(name) if operation == "preview" and not engine.real else None
        deployed_plan = last["plan"] if last is not None else None

        def work(ctx: JobContext) -> OperationResult:
            if operation == "preflight":
                self._preflight(ctx, name, spec, deployed, problem, counted=True)
                return OperationResult()
            if operation == "verify":
                self._verify(ctx, name, engine, counted=True)
                return OperationResult()
            if operation in ("preview", "up") and not ctx.cancelled:
                report = self._preflight(ctx, name, spec, deployed, problem, counted=False)
                if operation == "up" and not report.ok:
                    if not force:
                        self._blocked_jobs.add(ctx.job_id)
                        raise PreflightBlocked(report)
                    ctx.emit({"kind": "diagnostic", "severity": "warning", "message": (
                        "launching despite a failed preflight (force): "
                        + ", ".join(check.id for check in report.failed))})
            if operation == "up" and engine.real and spec is not None and not ctx.cancelled:
                self._plan_progress(ctx, name, spec)
            try:
                result = engine.run(name, operation, ctx, known_resources=known, deployed_plan=deployed_plan)
            except PendingOperations as pending:
                ctx.findings["pendingOperations"] = pending.operations  # the page offers to clear them
                raise
            if operation == "preview":
                self._describe_change(name, result, spec, record["outputs"])
            if operation == "up" and engine.real and not ctx.cancelled:
                self._verify(ctx, name, engine, counted=False)
            return result

        return self.submit(name, operation, engine, actor, work,
                           " (force)" if force and operation == "up" else "", deploys=deploys)

    def submit(self, name: str, operation: str, engine: Any, actor: str,
               work: Callable[[JobContext], OperationResult], note: str = "",
               deploys: Optional[tuple[dict[str, Any], dict[str, Any]]] = None) -> str:
        """Queue `work` as the deployment's one job: the deployment's status follows it, the list
        is refreshed, the audit log says who asked. `deploys`: an up's (config, summary) at its
        start, recorded as deployed if it succeeds."""

        def finish(job_id: str, status: str, result: Optional[OperationResult]) -> None:
            self._finish(job_id, name, operation, engine, status, result, deploys)

        try:
            job_id = self.runner.submit(
                name, operation, engine.name, actor, RUNNING_STATUS[operation], work, finish,
            )
        except Busy as busy:
            raise busy_conflict(name, busy, "wait for it or cancel it") from None
        self._stale_listing()
        self.audit(actor, f"{operation} requested", name, "accepted", f"job {job_id}{note}")
        return job_id

    def engine_of(self, name: str, record: Mapping[str, Any]) -> Any:
        """The engine a deployment belongs to; EngineUnavailable when this server lacks it."""
        engine = self.engines.get(record["engine"])
        if engine is None:
            raise EngineUnavailable(
                f"{name} was created with the {record['engine']} engine, which is not available "
                "here (is the Pulumi CLI installed?)"
            )
        return engine

    def _describe_change(self, name: str, result: OperationResult, spec: Optional[DeploymentSpec],
                         outputs: Optional[Mapping[str, Any]]) -> None:
        """Add to a preview what its steps mean and, for a deployed stack, what the change does to
        serving and which strategies there are (components.changes): the same for both engines."""
        assessment = self.assessment(name, spec, outputs)
        if assessment is not None:
            result.summary["assessment"] = assessment
        steps = result.summary.get("steps")
        if steps is not None:
            result.summary["consequences"] = consequences(steps, assessment)

    def deployed_spec(self, name: str) -> Optional[DeploymentSpec]:
        """The settings of the last successful up, validated (None: never deployed, or they no
        longer validate)."""
        deployed = self.store.deployed_config(name)
        if deployed is None:
            return None
        try:
            return DeploymentSpec.from_config(deployed, name)
        except SpecError:
            return None

    def assessment(self, name: str, spec: Optional[DeploymentSpec],
                   outputs: Optional[Mapping[str, Any]]) -> Optional[dict[str, Any]]:
        """Deployed settings -> these settings, judged by components.changes (None: nothing is
        deployed, or the deployed settings no longer validate)."""
        deployed = self.deployed_spec(name)
        if deployed is None or spec is None:
            return None
        zone = (outputs or {}).get("availabilityZone")
        return assess(plan_deployment(deployed), plan_deployment(spec),
                      zone if isinstance(zone, str) else None).as_dict()

    def _plan_progress(self, ctx: JobContext, name: str, spec: DeploymentSpec) -> None:
        """Give a real update its total and ETA before the first resource (webui/progress.py)."""
        offline = self.engines.get("offline")
        if offline is None:
            return
        try:
            plan = offline.plan_of(spec, ctx)
        except EngineError as exc:
            ctx.emit({"kind": "diagnostic", "severity": "info",
                      "message": f"no ETA for this update: the offline plan failed ({exc.message})"})
            return
        planned = [r for r in plan["resources"] if isinstance(r, dict)]
        preview = next((job for job in self.store.jobs_for(name, limit=20)
                        if job["operation"] == "preview" and job["status"] == "succeeded"), None)
        changes = ((preview or {}).get("summary") or {}).get("changes")
        progress = ProgressPlan(
            planned, durations_for(planned, self.store.resource_durations("pulumi", "up")),
            planned_total(planned, changes),
        )
        ctx.emit(progress.opening_record())
        ctx.decorate(progress.decorate)

    def _record_report(self, ctx: JobContext, name: str, report: Report, counted: bool) -> Report:
        """Stream the checks, keep the report with the job, and as the deployment's last of its kind."""
        for event in check_events(report, counted):
            ctx.emit(event)
        document = report.as_dict()
        ctx.findings.setdefault("reports", {})[report.kind] = document
        self.store.save_check(name, document, ctx.job_id)
        return report

    def _preflight(
        self, ctx: JobContext, name: str, spec: Optional[DeploymentSpec],
        deployed: Optional[DeploymentSpec], problem: Optional[str], counted: bool,
    ) -> Report:
        ctx.emit({"kind": "status", "status": RUNNING_STATUS["preflight"],
                  "message": "preflight: checking AWS and the model fit"})
        if spec is None:
            report = Report.of("preflight", [Check.failed(
                "instance-types", "Configuration", problem or "the configuration does not validate",
                "create the deployment again with a configuration this raypd accepts")])
        else:
            zone = (self.store.get_deployment(name) or {}).get("outputs") or {}
            deployed_zone = zone.get("availabilityZone") if deployed is not None else None
            report = self.checker.preflight(
                spec, deployed, deployed_zone if isinstance(deployed_zone, str) else None)
        return self._record_report(ctx, name, report, counted)

    def _verify(self, ctx: JobContext, name: str, engine: Any, counted: bool) -> Report:
        ctx.emit({"kind": "status", "status": RUNNING_STATUS["verify"], "message": "verify: checking what really runs"})
        self.checker.forget(name)
        return self._record_report(ctx, name, self.checker.verify(engine, name), counted)

    def checks(self, name: str) -> dict[str, Any]:
        """The last report of each kind (None where that kind never ran), with its job and time."""
        self.record(name)
        stored = self.store.last_checks(name)
        answer: dict[str, Any] = {}
        for kind in CHECK_OPERATIONS:
            item = stored.get(kind)
            answer[kind] = None if item is None else LastReport.model_validate(
                {**item["report"], "job": item["job"], "at": iso_time(item["time"])})
        return dump(ChecksView(**answer))

    def pending(self, name: str) -> dict[str, Any]:
        """Operations a crashed update left pending in the state, read now (real engine)."""
        record = self.record(name)
        engine = self.engines.get(record["engine"])
        if engine is None or not engine.real:
            return dump(PendingView(operations=[], reason=f"{OFFLINE_NOTICE}: nothing can be pending"))
        return dump(PendingView(operations=engine.pending_operations(name)))

    def live_status(self, name: str) -> dict[str, Any]:
        record = self.record(name)
        engine = self.engines.get(record["engine"])
        if engine is None:
            status = {"available": False, "reason": f"the {record['engine']} engine is not available here"}
        else:
            try:
                status = self.checker.status(engine, name, deployed=record["status"] == Standing.DEPLOYED)
            except EngineError as exc:
                status = {"available": False, "reason": exc.message}
        return dump(LiveStatus.model_validate(status))

    def _finish(
        self, job_id: str, name: str, operation: str, engine: Any, status: str,
        result: Optional[OperationResult],
        deploys: Optional[tuple[dict[str, Any], dict[str, Any]]] = None,
    ) -> None:
        """Move the deployment to where the operation left it (called on the job's thread)."""
        job = self.store.get_job(job_id) or {}
        previous = job.get("previousStatus") or Standing.CREATED.value
        self.checker.forget(name)
        self._stale_listing()
        blocked = job_id in self._blocked_jobs
        self._blocked_jobs.discard(job_id)
        settled = settle(operation, status, previous, real=engine.real, blocked=blocked,
                         has_result=result is not None)
        if settled.removed:
            engine.remove(name)
            self.store.delete_deployment(name)
            return
        if not settled.records or result is None:
            self.store.update_deployment(name, status=settled.status)
            return
        fields: dict[str, Any] = {"status": settled.status}
        if self._records_what_exists(name, operation, engine):
            if result.outputs is not None:
                fields["outputs"] = result.outputs
            if result.resources is not None:
                fields["resources"] = result.resources
        if operation == "up" and deploys is not None:
            config, summary = deploys
            self.store.record_deployed(name, fields, config, summary, plan=result.plan, job=job_id)
        else:
            self.store.update_deployment(name, **fields)

    def _records_what_exists(self, name: str, operation: str, engine: Any) -> bool:
        """Whether an operation's outputs and resources describe what exists. An up's and a real
        refresh's do. A real preview changes nothing; an offline preview or refresh plans the stack's
        current settings, pending changes included, so they stand in only while nothing was planned."""
        if operation == "up" or (operation != "preview" and engine.real):
            return True
        return not engine.real and self.store.deployed(name) is None

    def cancel(self, job_id: str, actor: str) -> dict[str, Any]:
        job = self.job(job_id)
        engine = self.engines.get(job["engine"])

        def release() -> None:
            if engine is not None:
                engine.release(job["deployment"])

        record = self.store.get_deployment(job["deployment"])
        if job["status"] == "interrupted" and record is not None and record["lastJob"] == job_id:
            self.store.update_deployment(
                job["deployment"], status=job.get("previousStatus") or Standing.CREATED.value,
            )
        result = self.runner.cancel(job_id, actor, release)
        self._stale_listing()
        self.audit(actor, "cancel requested", job["deployment"], result["status"], f"job {job_id}")
        return result

    def audit(self, actor: str, action: str, target: str, result: str, detail: Optional[str]) -> None:
        self.store.add_audit(actor, action, target, result, detail)
        audit_logger.info("actor=%s action=%r target=%s result=%s%s", actor, action, target, result,
                          f" detail={detail!r}" if detail else "")


def public_job(job: Mapping[str, Any]) -> dict[str, Any]:
    """A job as Contract 4 shows it (plus when, who and a hint where there is one)."""
    return dump(job_view(job))


def job_view(job: Mapping[str, Any]) -> JobView:
    """The `JobView` model of a stored job: keys that do not apply are left unset, not null."""
    answer: dict[str, Any] = {
        "id": job["id"],
        "deployment": job["deployment"],
        "operation": job["operation"],
        "engine": job["engine"],
        "status": job["status"],
        "progress": dict(job["progress"]),
        "error": job["error"],
        "createdAt": iso_time(job["createdAt"]),
        "startedAt": iso_time(job["startedAt"]),
        "finishedAt": iso_time(job["finishedAt"]),
        "actor": job["actor"],
    }
    if job.get("hint"):
        answer["hint"] = job["hint"]
    summary = dict(job.get("summary") or {})
    reports = summary.pop("reports", None) or {}
    if summary:
        answer["summary"] = summary
    if reports:
        answer["reports"] = reports  # every Contract 5 report the job made (preflight, verify)
    if job["operation"] in CHECK_OPERATIONS and job["operation"] in reports:
        answer["result"] = reports[job["operation"]]
    if job["engine"] == "offline":
        answer["notice"] = OFFLINE_NOTICE
    return JobView.model_validate(answer)


def iso_time(timestamp: Optional[float]) -> Optional[str]:
    if timestamp is None:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(timestamp))


__all__ = [
    "Conflict", "PreflightBlocked", "DeploymentService", "EngineNotFound", "NotFound", "connect_info", "public_job",
]
