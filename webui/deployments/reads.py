"""Reads for the views: deployments as the API and the pages show them (`DeploymentReads`, the
base of the `Deployments` facade), and jobs and their progress events (`Reads`), so that no view
holds the store itself (issue 16 §4; tests/unit/test_webui_layout.py keeps it so).

A view asks for "this deployment's job" rather than a row by id: a job id from a URL that belongs to
another deployment is treated as no job, here, once, instead of in every view.
"""

from __future__ import annotations

import threading
import time
from typing import Any, List, Mapping, Optional, cast

from components.config.errors import SpecError
from components.config.spec import DeploymentSpec, validate_stack_name
from components.plan.topology import DeploymentPlan, plan_deployment
from webui.api_models import LiveStatus, PendingView, dump
from webui.checking import Checker
from webui.deployments import views
from webui.deployments.errors import NotFound
from webui.engines.base import OFFLINE_NOTICE, Engine, EngineError, EngineUnavailable
from webui.engines.select import EngineSet
from webui.jobs import JobRunner
from webui.pending_changes import settings_digest
from webui.status import Standing
from webui.store import ACTIVE_STATUSES, FINAL_STATUSES, STORE_ERRORS, Store
from webui.store.records import DeploymentRecord, JobRecord

# What views compare job statuses with, and the store's failures the event stream rides out: the
# store's own, handed on so no view imports the store.
__all__ = ["ACTIVE_STATUSES", "FINAL_STATUSES", "STORE_ERRORS", "DeploymentReads", "Reads", "validated"]

LIST_TTL_SECONDS = 1.0


def validated(config: Mapping[str, Any], name: str) -> tuple[Optional[DeploymentSpec], Optional[str]]:
    """A stored config validated again: (spec, None), or (None, why not)."""
    try:
        return DeploymentSpec.from_config(config, name), None
    except SpecError as exc:
        return None, str(exc)


class Reads:
    def __init__(self, store: Store):
        self._store = store

    def job(self, job_id: str) -> Optional[JobRecord]:
        return self._store.get_job(job_id) if job_id else None

    def job_of(self, deployment: str, job_id: Optional[str]) -> Optional[JobRecord]:
        """The job with this id if it is one of `deployment`'s, else None."""
        job = self.job(job_id or "")
        return job if job is not None and job["deployment"] == deployment else None

    def exists(self, deployment: str) -> bool:
        return self._store.get_deployment(deployment) is not None

    def events_after(self, job_id: str, after: int = 0, limit: int = 500) -> list[dict[str, Any]]:
        return self._store.events_after(job_id, after, limit=limit)

    def latest_events(self, job_id: str, limit: int = 500) -> list[dict[str, Any]]:
        return self._store.latest_events(job_id, limit=limit)


class DeploymentReads:
    """Deployments and their jobs as the API and the pages show them (SQLite only, except the
    live status and pending operations, which ask the engine now)."""

    def __init__(self, store: Store, runner: JobRunner, engines: EngineSet,
                 checker: Optional[Checker] = None):
        self.store = store
        self.runner = runner
        self.engines = engines
        self.checker = checker or Checker()
        self._listing: Optional[tuple[float, list[dict[str, Any]]]] = None
        self._listing_lock = threading.Lock()

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

    def stale_listing(self) -> None:
        with self._listing_lock:
            self._listing = None

    def _list_rows(self) -> List[dict[str, Any]]:  # `list` here would name the method above
        return [views.list_row(row) for row in self.store.list_deployments()]

    def record(self, name: str) -> DeploymentRecord:
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
        return self.get_with_plan(name, jobs)[0]

    def get_with_plan(self, name: str, jobs: int = 10) -> tuple[dict[str, Any], Optional[DeploymentPlan]]:
        """`get`, plus the plan of what the page draws (None when it no longer validates): the
        deployed settings' when something is deployed (or planned), else the stack's own.

        One read, one validation and one plan per page: the page must not look the record up or
        plan it again (the connect commands and the deployed summary use the same plan).
        """
        record = self.record(name)
        spec, problem = self.spec_of(record)
        warnings = list(record["summary"].get("warnings", []))
        if problem:
            warnings.append(problem)
        deployed = self.store.deployed(name)
        shown = spec
        if deployed is not None:
            shown, deployed_problem = validated(deployed["config"], name)
            if deployed_problem:
                warnings.append(f"the deployed settings no longer validate: {deployed_problem}")
        plan = plan_deployment(shown) if shown is not None else None
        deployed_settings = views.deployed_view(record["engine"], deployed, plan) if deployed is not None else None
        detail = views.deployment_view(
            record, warnings=warnings, deployed=deployed_settings,
            pending=views.pending_view(record, deployed, deployed_settings), plan=plan,
            jobs=[self.as_known(job) for job in self.store.jobs_for(name, limit=jobs)],
        )
        return detail, plan

    def job(self, job_id: str) -> JobRecord:
        job = self.store.get_job(job_id)
        if job is None:
            raise NotFound(f"no job with id {job_id}")
        return self.as_known(job)

    def as_known(self, job: JobRecord) -> JobRecord:
        """The job as this process knows it: an end the store could not take yet (a full disk)
        is answered from memory, so nobody waits on a "running" job that has stopped."""
        ended = self.runner.ended(job["id"])
        if ended is None or job["status"] not in ACTIVE_STATUSES:
            return job
        return cast(JobRecord, {**job, **ended})

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

    def serving(self, record: Mapping[str, Any]) -> bool:
        """Deployed, or deployed before the job running on it now (a verify, a benchmark): what the
        Benchmark, Resilience and Conformance tabs need before they send requests to the endpoint."""
        if record["status"] == Standing.DEPLOYED.value:
            return True
        active = self.store.active_job(record["name"])
        job = self.store.get_job(active) if active else None
        return job is not None and job.get("previousStatus") == Standing.DEPLOYED.value

    def engine_of(self, name: str, record: Mapping[str, Any]) -> Engine:
        """The engine a deployment belongs to; EngineUnavailable when this server lacks it."""
        engine: Optional[Engine] = self.engines.get(record["engine"])
        if engine is None:
            raise EngineUnavailable(
                f"{name} was created with the {record['engine']} engine, which is not available "
                "here (is the Pulumi CLI installed?)"
            )
        return engine

    def checks(self, name: str) -> dict[str, Any]:
        """The last report of each kind (None where that kind never ran), with its job and time."""
        record = self.record(name)
        current = {"preflight": settings_digest(record["config"]),
                   "verify": settings_digest(self.store.deployed_config(name))}
        return views.checks_view(self.store.last_checks(name), current)

    def pending(self, name: str) -> dict[str, Any]:
        """Operations a crashed update left pending in the state, read now (real engine)."""
        record = self.record(name)
        engine: Optional[Engine] = self.engines.get(record["engine"])
        if engine is None or not engine.real:
            return dump(PendingView(operations=[], reason=f"{OFFLINE_NOTICE}: nothing can be pending"))
        return dump(PendingView(operations=engine.pending_operations(name)))

    def live_status(self, name: str) -> dict[str, Any]:
        record = self.record(name)
        engine: Optional[Engine] = self.engines.get(record["engine"])
        if engine is None:
            status = {"available": False, "reason": f"the {record['engine']} engine is not available here"}
        else:
            try:
                status = self.checker.status(engine, name, deployed=record["status"] == Standing.DEPLOYED)
            except EngineError as exc:
                status = {"available": False, "reason": exc.message}
        return dump(LiveStatus.model_validate(status))
