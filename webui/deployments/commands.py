"""The deployment commands (create, change, discard, start, submit, cancel) and the `Deployments`
facade the app attaches: the views call only it, one call per request.

The rules live once: which engine a deployment belongs to, which statuses an operation moves it
through, what the audit log says, and that the HF token goes to the engine's `create` and nowhere
else (not the store, not the summary). Reads are `DeploymentReads`' (reads.py), job bodies the
workflow's (workflow.py), response shapes views.py's.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Mapping, Optional

from components.config.errors import FieldError, SpecError
from components.config.spec import (
    HF_TOKEN_KEY,
    NAMESPACE,
    REGION_KEY,
    SECRET_PLACEHOLDER,
    DeploymentSpec,
    validate_stack_name,
)
from webui.checking import Checker
from webui.deployments.errors import Conflict, NotFound, busy_conflict
from webui.deployments.reads import DeploymentReads, validated
from webui.deployments.workflow import Work, Workflow
from webui.engines.base import OPERATIONS, Engine, EngineError, EngineUnavailable, OperationResult
from webui.engines.select import EngineSet
from webui.jobs import Busy, Finish, JobRunner
from webui.merge_patch import merge_patch
from webui.pending_changes import DEPLOYED_LABEL, deployed_kind, discard_target, left_after_discard
from webui.resource_steps import config_diff
from webui.status import CHECK_OPERATIONS, RUNNING_STATUS, Standing
from webui.store import NameTaken, Store
from webui.store.records import DeploymentRecord, JobRecord
from webui.summary import summarize

logger = logging.getLogger(__name__)
audit_logger = logging.getLogger("raypd.audit")
# What an up that succeeds records as deployed: the (config, summary) it ran with.
Deploys = tuple[dict[str, Any], dict[str, Any]]
# Makes a job's body (and an up's Deploys) from the deployment's record as its job's start reads it.
Prepare = Callable[[Optional[DeploymentRecord]], tuple[Work, Optional[Deploys]]]


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


class Deployments(DeploymentReads):
    def __init__(self, store: Store, runner: JobRunner, engines: EngineSet,
                 checker: Optional[Checker] = None):
        super().__init__(store, runner, engines, checker)
        self.workflow = Workflow(self)
        self._create_lock = threading.Lock()

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
        return spec, token

    def create(self, name: Any, config: Mapping[str, Any], actor: str) -> dict[str, Any]:
        spec, token = self.validate(name, config)
        engine: Engine = self.engines.default
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
                self.stale_listing()
        self.audit(actor, "create", spec.stack, "succeeded", None)
        return self.get(spec.stack)

    def change(self, name: str, patch: Mapping[str, Any], actor: str) -> dict[str, Any]:
        """Apply Contract 1 keys to the deployment's config as a JSON Merge Patch (webui.merge_patch:
        an object merges into the current one, `None` resets a key to its default) and write it to
        the stack: validated first, refused while a job runs, no cloud action."""
        record = self.record(name)
        engine: Optional[Engine] = self.engines.get(record["engine"])
        if engine is None:
            raise EngineUnavailable(f"the {record['engine']} engine of {name} is not available here")
        check_config_keys(patch)
        # The token is not merged: the stored config holds only "[secret]" for it (handled below).
        merged = merge_patch(record["config"], {k: v for k, v in patch.items() if k != HF_TOKEN_KEY})
        if HF_TOKEN_KEY in patch and patch[HF_TOKEN_KEY] is None:
            merged.pop(HF_TOKEN_KEY, None)
        new_token = patch.get(HF_TOKEN_KEY)
        if new_token is not None and (not isinstance(new_token, str) or not new_token.strip()):
            raise SpecError.single(HF_TOKEN_KEY, "must be the new token, or null to remove it")
        if new_token == SECRET_PLACEHOLDER:
            new_token = None  # "[secret]" as shown: keep the token the stack has
        if new_token is not None:
            merged[HF_TOKEN_KEY] = new_token  # judged by the spec's one token rule, as on create
        spec = DeploymentSpec.from_config(merged, name, strict=True)
        public = spec.public_config()
        removed = sorted(set(record["config"]) - set(public))
        changed = [item["key"] for item in config_diff(record["config"], public)]
        try:
            with self.runner.idle(name):
                # The engine's settings file is written with the config, in one transaction the store
                # refuses once a job started, on any server (Store.set_config): nothing half done.
                with self.store.staged_stack_file(name) as staged:
                    engine.configure(spec, new_token, removed)
                # A new token is one the deployed stack did not run with, whatever the configs say.
                self.store.set_config(name, public, summarize(spec),
                                      token_replaced=True if new_token is not None else None,
                                      stack_file=staged.text)
                self.stale_listing()
        except Busy as busy:
            raise busy_conflict(name, busy, "change it when it has ended") from None
        self.audit(actor, "change", name, "succeeded", ", ".join(changed) or "no change")
        return self.get(name)

    def discard(self, name: str, actor: str) -> dict[str, Any]:
        """Put the stack's config back to the deployed settings (offline: the planned ones), its
        settings file and the store's config in one write, refused while a job runs; no cloud
        action. Nothing is half done: if the engine or the store refuses, nothing changed.

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
                spec, problem = validated(target, name)
                if spec is None:
                    raise Conflict(f"the deployed settings of {name} no longer validate ({problem}); "
                                   "change the settings instead", field="deployed")
                self._write_back(engine, record, spec, actor)
                self.stale_listing()
        except Busy as busy:
            raise busy_conflict(name, busy, "discard when it has ended") from None
        put_back = ", ".join(item["key"] for item in config_diff(record["config"], spec.public_config()))
        self.audit(actor, "discard", name, "succeeded",
                   f"back to the {DEPLOYED_LABEL[deployed_kind(record['engine'])]} settings: {put_back}"
                   + (f"; {kept}" if kept else ""))
        return self.get(name)

    def _write_back(self, engine: Engine, record: Mapping[str, Any], spec: DeploymentSpec, actor: str) -> None:
        """Discard's writes: the stack's settings file as its engine writes it (the token left as the
        stack has it, keys the deployed config lacks removed) and the store's config, in one
        transaction (Store.set_config, as for a change): if the engine or the store refuses, both
        stay as they were, so nothing needs putting back."""
        name = record["name"]
        public = spec.public_config()
        removed = sorted(set(record["config"]) - set(public))
        try:
            with self.store.staged_stack_file(name) as staged:
                engine.configure(spec, None, removed)
        except EngineError as exc:
            self.audit(actor, "discard", name, "failed", exc.message)
            raise
        self.store.set_config(name, public, summarize(spec),
                              token_replaced=False if HF_TOKEN_KEY not in public else None,
                              stack_file=staged.text)

    def start(self, name: str, operation: str, actor: str, force: bool = False,
              confirm: Optional[str] = None) -> str:
        """Queue one operation as a job, its body the workflow's (Workflow.work)."""
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

        def prepare(current: Optional[DeploymentRecord]) -> tuple[Work, Optional[Deploys]]:
            # The record as the transaction that inserts the job reads it (JobRunner.submit_prepared):
            # a change on any server lands before it or is refused, so this config is the one the
            # engine runs with, and the one an up that succeeds records as deployed.
            if current is None:
                raise NotFound(f"no deployment named {name}")
            deploys = (current["config"], current["summary"]) if operation == "up" else None
            return self.workflow.work(name, operation, current, engine, force), deploys

        return self.submit(name, operation, engine, actor, prepare=prepare,
                           note=" (force)" if force and operation == "up" else "")

    def submit(self, name: str, operation: str, engine: Engine, actor: str, work: Optional[Work] = None,
               note: str = "", prepare: Optional[Prepare] = None) -> str:
        """Queue `work` as the deployment's one job: the deployment's status follows it, the list
        is refreshed, the audit log says who asked. `prepare` instead of `work`: it makes the job's
        body from the record as the job's start reads it, with an up's (config, summary) to record
        as deployed if it succeeds."""

        def made(record: Optional[DeploymentRecord]) -> tuple[Work, Finish]:
            if prepare is not None:
                body, deploys = prepare(record)
            elif work is not None:
                body, deploys = work, None
            else:
                raise TypeError("submit needs work or prepare")

            def finish(job_id: str, status: str, result: Optional[OperationResult]) -> None:
                self.workflow.finish(job_id, name, operation, engine, status, result, deploys)

            return body, finish

        try:
            job_id = self.runner.submit_prepared(name, operation, engine.name, actor, RUNNING_STATUS[operation], made)
        except Busy as busy:
            raise busy_conflict(name, busy, "wait for it or cancel it") from None
        self.stale_listing()
        self.audit(actor, f"{operation} requested", name, "accepted", f"job {job_id}{note}")
        return job_id

    def cancel(self, job_id: str, actor: str) -> JobRecord:
        job = self.job(job_id)
        engine: Optional[Engine] = self.engines.get(job["engine"])

        def release() -> None:
            if engine is not None:
                engine.release(job["deployment"])

        record = self.store.get_deployment(job["deployment"])
        if job["status"] == "interrupted" and record is not None and record["lastJob"] == job_id:
            self.store.update_deployment(
                job["deployment"], status=job.get("previousStatus") or Standing.CREATED.value,
            )
        result = self.runner.cancel(job_id, actor, release)
        self.stale_listing()
        self.audit(actor, "cancel requested", job["deployment"], result["status"], f"job {job_id}")
        return result

    def audit(self, actor: str, action: str, target: str, result: str, detail: Optional[str]) -> None:
        self.store.add_audit(actor, action, target, result, detail)
        audit_logger.info("actor=%s action=%r target=%s result=%s%s", actor, action, target, result,
                          f" detail={detail!r}" if detail else "")
