"""The bodies of a deployment's jobs, run by the job runner on its threads: the preflight before a
launch, a real update's planned progress, the verify after it, what a preview means, and where the
finished job leaves the deployment (`finish`, by webui.status.settle's table)."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from components.changes.assess import assess
from components.config.checks import Check, Report
from components.config.spec import DeploymentSpec
from components.plan.topology import plan_deployment
from webui.deployments.errors import PreflightBlocked
from webui.deployments.reads import DeploymentReads
from webui.engines.base import Engine, EngineError, JobContext, OperationResult, PendingOperations
from webui.pending_changes import REPORT_SETTINGS_KEY, settings_digest
from webui.progress import ProgressPlan, durations_for, planned_total
from webui.resource_steps import consequences
from webui.status import RUNNING_STATUS, Standing, settle

Work = Callable[[JobContext], OperationResult]


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


class Workflow:
    def __init__(self, reads: DeploymentReads):
        self.reads = reads
        self.store = reads.store
        self.engines = reads.engines
        self.checker = reads.checker
        self._blocked_jobs: set[str] = set()  # launches a preflight stopped: nothing changed

    def work(self, name: str, operation: str, record: Mapping[str, Any], engine: Engine,
             force: bool) -> Work:
        """The job body of one operation. `preview` and `up` run the preflight first; a failed
        preflight stops `up` before any cloud action unless `force`; a real `up` ends with verify."""
        known = record["resources"]
        spec, problem = self.reads.spec_of(record)
        # What runs now (the settings of the last successful up), for the preflight's quota counts
        # and its update-headroom peak; None for a stack that was never deployed.
        deployed = self.reads.deployed_spec(name) if record["status"] == Standing.DEPLOYED else None
        last = self.store.deployed(name) if operation == "preview" and not engine.real else None
        deployed_plan = last["plan"] if last is not None else None

        # The settings the preflight checks: the stack's, as this job found them.
        settings = record["config"]

        def work(ctx: JobContext) -> OperationResult:
            if operation == "preflight":
                self._preflight(ctx, name, spec, deployed, problem, settings, counted=True)
                return OperationResult()
            if operation == "verify":
                self._verify(ctx, name, engine, self.store.deployed_config(name), counted=True)
                return OperationResult()
            if operation in ("preview", "up") and not ctx.cancelled:
                report = self._preflight(ctx, name, spec, deployed, problem, settings, counted=False)
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
                self._verify(ctx, name, engine, settings, counted=False)  # what this up deployed
            return result

        return work

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

    def assessment(self, name: str, spec: Optional[DeploymentSpec],
                   outputs: Optional[Mapping[str, Any]]) -> Optional[dict[str, Any]]:
        """Deployed settings -> these settings, judged by components.changes (None: nothing is
        deployed, or the deployed settings no longer validate)."""
        deployed = self.reads.deployed_spec(name)
        if deployed is None or spec is None:
            return None
        zone = (outputs or {}).get("availabilityZone")
        return assess(plan_deployment(deployed), plan_deployment(spec),
                      zone if isinstance(zone, str) else None, deployed_outputs=outputs).as_dict()

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
        changes = ((preview["summary"] if preview is not None else None) or {}).get("changes")
        progress = ProgressPlan(
            planned, durations_for(planned, self.store.resource_durations("pulumi", "up")),
            planned_total(planned, changes),
        )
        ctx.emit(progress.opening_record())
        ctx.decorate(progress.decorate)

    def _record_report(self, ctx: JobContext, name: str, report: Report, counted: bool,
                       made_for: Optional[Mapping[str, Any]]) -> Report:
        """Stream the checks, keep the report with the job, and as the deployment's last of its
        kind, with the settings it was made for (`made_for`), so a report for settings changed or
        discarded since is shown as stale (webui.pending_changes.report_staleness)."""
        for event in check_events(report, counted):
            ctx.emit(event)
        document = report.as_dict()
        ctx.findings.setdefault("reports", {})[report.kind] = document
        self.store.save_check(name, {**document, REPORT_SETTINGS_KEY: settings_digest(made_for)}, ctx.job_id)
        return report

    def _preflight(
        self, ctx: JobContext, name: str, spec: Optional[DeploymentSpec],
        deployed: Optional[DeploymentSpec], problem: Optional[str],
        settings: Mapping[str, Any], counted: bool,
    ) -> Report:
        ctx.emit({"kind": "status", "status": RUNNING_STATUS["preflight"],
                  "message": "preflight: checking AWS and the model fit"})
        if spec is None:
            report = Report.of("preflight", [Check.failed(
                "instance-types", "Configuration", problem or "the configuration does not validate",
                "create the deployment again with a configuration this raypd accepts")])
        else:
            stored = self.store.get_deployment(name)
            zone = (stored["outputs"] if stored is not None else None) or {}
            deployed_zone = zone.get("availabilityZone") if deployed is not None else None
            report = self.checker.preflight(
                spec, deployed, deployed_zone if isinstance(deployed_zone, str) else None)
        return self._record_report(ctx, name, report, counted, settings)

    def _verify(self, ctx: JobContext, name: str, engine: Engine,
                runs: Optional[Mapping[str, Any]], counted: bool) -> Report:
        """Check what runs; `runs`: its settings (the deployed ones)."""
        ctx.emit({"kind": "status", "status": RUNNING_STATUS["verify"], "message": "verify: checking what really runs"})
        self.checker.forget(name)
        return self._record_report(ctx, name, self.checker.verify(engine, name), counted, runs)

    def finish(
        self, job_id: str, name: str, operation: str, engine: Engine, status: str,
        result: Optional[OperationResult],
        deploys: Optional[tuple[dict[str, Any], dict[str, Any]]] = None,
    ) -> None:
        """Move the deployment to where the operation left it (called on the job's thread)."""
        job = self.store.get_job(job_id)
        previous = (job["previousStatus"] if job is not None else None) or Standing.CREATED.value
        self.checker.forget(name)
        self.reads.stale_listing()
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

    def _records_what_exists(self, name: str, operation: str, engine: Engine) -> bool:
        """Whether an operation's outputs and resources describe what exists. An up's and a real
        refresh's do. A real preview changes nothing; an offline preview or refresh plans the stack's
        current settings, pending changes included, so they stand in only while nothing was planned."""
        if operation == "up" or (operation != "preview" and engine.real):
            return True
        return not engine.real and self.store.deployed(name) is None
