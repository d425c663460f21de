"""Offline engine: the project's program under Pulumi's mock runtime, via the offline plan CLI.

`python -m components.plan --config <file> --stack NAME --json` (Contract 2) runs in a subprocess:
a crash or hang cannot take the web app down, and cancel is a kill. Its resources, in program
order, become the same per-resource progress records the Automation API engine emits.

Nothing is created in AWS, and the HF token is never written anywhere: the stack's settings file
(kept in the store, as the real engine's is: any server sharing the store plans any deployment)
marks it as a present-but-secret placeholder, which is all the plan needs (it renders the
Kubernetes Secret reference, not the value). Each plan reads that file from a fresh work dir.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Optional

import yaml

from components.config.spec import HF_TOKEN_KEY, DeploymentSpec
from webui.change import change_counts, plan_diff
from webui.engines.base import (
    OFFLINE_NOTICE,
    JobContext,
    OperationCancelled,
    OperationFailed,
    OperationResult,
    resource_record,
)
from webui.engines.workdir import StackFiles, UsesStackFiles, stack_file_name, stack_work_dir
from webui.redact import redact, redact_value
from webui.settings import Settings

logger = logging.getLogger(__name__)

OFFLINE_SECRET = {"secure": "offline-placeholder"}
# Where raypd before store version 4 kept the plan of the last successful `up`, beside the stack
# file. That plan now lives in the store (a second server sharing it must see it too); a file left
# by an older raypd is moved there once, at start (webui/deployments/upgrades.py).
LEGACY_PLAN_FILE = "last-plan.json"
# All a plan subprocess gets from this process's environment: what Python needs to start and
# find the project. Nothing else (the access token, the Pulumi passphrase, cloud credentials,
# HF_TOKEN) has any business there, and a list of what to withhold would miss the next one.
_PLAN_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "TZ", "PYTHONPATH",
             "VIRTUAL_ENV", "SYSTEMROOT")
# (Pulumi step op, what the finished record says) per operation; {label} is "type name".
_OP_WORDING = {
    "preview": ("create", "would create {label}"),
    "up": ("create", "planned {label}"),
    "refresh": ("read", "{label}: nothing to read back offline"),
    "destroy": ("delete", "removed {label} from the plan"),
}


def stack_file_document(spec: DeploymentSpec) -> dict[str, Any]:
    """The Pulumi.<stack>.yaml the offline plan reads: public config, token as a placeholder."""
    config = dict(spec.public_config())
    if HF_TOKEN_KEY in config:
        config[HF_TOKEN_KEY] = dict(OFFLINE_SECRET)
    return {"config": config}


def _clean_stderr(stderr: str) -> str:
    """Readable lines of a failed plan: its `raypd:x.y: why` lines, or the last line of a crash."""
    lines = [line.strip() for line in redact(stderr).splitlines() if line.strip()]
    if not lines:
        return ""
    if any(line.startswith("Traceback") for line in lines):
        return lines[-1]
    return "\n".join(lines[-20:])


class OfflineEngine(UsesStackFiles):
    name = "offline"
    real = False

    def __init__(self, settings: Settings, stack_files: Optional[StackFiles] = None):
        self.settings = settings
        self._stack_files = stack_files

    def create(self, spec: DeploymentSpec, hf_token: Optional[str]) -> None:
        # hf_token is deliberately dropped: the plan only needs to know one is set.
        del hf_token
        self.stack_files.save_stack_file(
            spec.stack,
            "# Written by the raypd web app (offline engine); the HF token is never stored here.\n"
            + yaml.safe_dump(stack_file_document(spec), sort_keys=False),
        )

    def configure(self, spec: DeploymentSpec, hf_token: Optional[str], removed: list[str]) -> None:
        """A changed config: the stack file is written anew (nothing else holds config offline)."""
        del removed
        self.create(spec, hf_token)

    def remove(self, stack: str) -> None:
        self.stack_files.delete_stack_file(stack)
        shutil.rmtree(self.settings.workspace_dir(stack), ignore_errors=True)  # an older raypd's

    def release(self, stack: str) -> None:
        """Nothing holds a lock offline."""

    def live_outputs(self, stack: str) -> None:
        """Nothing runs offline: there is no cluster to read."""
        return None

    def pending_operations(self, stack: str) -> list[dict[str, Any]]:
        """Nothing is ever half-created offline."""
        return []

    # ---- running the plan ----

    def plan_of(self, spec: DeploymentSpec, ctx: JobContext) -> dict[str, Any]:
        """The offline plan (Contract 2) of any spec, e.g. a real deployment's: what it will create
        and in which order, for the real engine's progress total and ETA. Written to a work dir of
        its own, never over a stack's settings."""
        self.settings.work_root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"{spec.stack}.plan.", dir=self.settings.work_root) as work_dir:
            path = Path(work_dir) / stack_file_name(spec.stack)
            path.write_text(yaml.safe_dump(stack_file_document(spec), sort_keys=False), encoding="utf-8")
            return self._run_plan(path, spec.stack, ctx)

    def _plan(self, stack: str, ctx: JobContext) -> dict[str, Any]:
        with stack_work_dir(self.settings.work_root, stack, self.stack_files, keep_changes=False) as work_dir:
            path = work_dir / stack_file_name(stack)
            if not path.exists():
                raise OperationFailed(f"the store holds no settings file for {stack}; save its settings "
                                      "again (Change settings) or recreate the deployment")
            return self._run_plan(path, stack, ctx)

    def _run_plan(self, path: Path, stack: str, ctx: JobContext) -> dict[str, Any]:
        env = {k: v for k, v in os.environ.items() if k in _PLAN_ENV}
        command = [
            str(self.settings.python), "-m", "components.plan",
            "--config", str(path), "--stack", stack, "--json",
        ]
        process = subprocess.Popen(
            command, cwd=self.settings.project_dir, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )

        def kill() -> None:
            # Its own session: the kill reaches anything the plan started, and nothing else.
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        ctx.on_cancel(kill)
        try:
            stdout, stderr = process.communicate(timeout=self.settings.plan_timeout_seconds)
        except subprocess.TimeoutExpired:
            kill()
            process.communicate()
            raise OperationFailed(
                f"the offline plan took longer than {self.settings.plan_timeout_seconds:.0f} s and was stopped"
            ) from None
        if ctx.cancelled:
            raise OperationCancelled()
        if process.returncode != 0:
            logger.warning("offline plan for %s exited %s: %s", stack, process.returncode, redact(stderr))
            detail = _clean_stderr(stderr)
            if process.returncode == 2:
                raise OperationFailed(f"invalid configuration:\n{detail}" if detail else "invalid configuration")
            raise OperationFailed(
                f"the offline plan failed (exit {process.returncode})" + (f": {detail}" if detail else "")
            )
        try:
            plan = json.loads(stdout)
        except json.JSONDecodeError:
            raise OperationFailed("the offline plan printed something that is not JSON") from None
        if not isinstance(plan, dict) or not isinstance(plan.get("resources"), list):
            raise OperationFailed("the offline plan's answer has no resource list")
        return plan

    def run(
        self, stack: str, operation: str, ctx: JobContext,
        known_resources: Optional[list[dict[str, Any]]] = None,
        deployed_plan: Optional[dict[str, Any]] = None,
    ) -> OperationResult:
        """Plan the stack file (not for destroy). A preview given the plan of the last successful
        up (`deployed_plan`, from the store) says what an update would change; an up hands its plan
        back in the result for the store to keep."""
        op, finished = _OP_WORDING[operation]
        ctx.emit({"kind": "diagnostic", "severity": "info", "message": (
            f"{OFFLINE_NOTICE}. Running the program under Pulumi's mock runtime "
            "(no CLI, no cloud calls, no credentials)."
        )})
        if operation == "destroy":
            # Nothing exists in AWS: forget what the last plan listed, without planning again
            # (so even a config that no longer validates can be torn down).
            resources = list(known_resources or [])
            plan: dict[str, Any] = {}
        else:
            plan = self._plan(stack, ctx)
            resources = [
                {"type": str(r.get("type", "")), "name": str(r.get("name", "")),
                 "dependsOn": [str(d) for d in r.get("dependsOn") or []]}
                for r in plan["resources"] if isinstance(r, dict)
            ]
        for note in plan.get("notes") or []:
            ctx.emit({"kind": "diagnostic", "severity": "info", "message": f"note: {note}"})
        for warning in plan.get("warnings") or []:
            ctx.emit({"kind": "diagnostic", "severity": "warning", "message": str(warning)})
        ordered = list(reversed(resources)) if operation == "destroy" else resources
        last = deployed_plan if operation == "preview" and isinstance(deployed_plan, dict) else None
        # The store keeps plans redacted (webui.store): compare the new plan in that same form, or
        # prose that reads like a credential ("first token: prefill ...", in a dashboard's
        # description) is masked in one and not the other, and shows as a change forever.
        steps = plan_diff(last, redact_value(plan)) if last is not None else None
        step_ops = {step["name"]: step["op"] for step in steps or []}
        total = len(ordered)
        for done, resource in enumerate(ordered, start=1):
            if ctx.cancelled:
                raise OperationCancelled()
            label = f"{resource['type']} {resource['name']}"
            step_op = step_ops.get(resource["name"], op)
            wording = (finished if step_op == op else "{label}: no change" if step_op == "same"
                       else f"would {step_op} {{label}}")
            ctx.emit(resource_record("started", step_op, resource["type"], resource["name"], done - 1, total,
                                     f"{step_op} {label}"))
            ctx.emit(resource_record("finished", step_op, resource["type"], resource["name"], done, total,
                                     wording.format(label=label)))
        changes = change_counts(steps) if steps is not None else {op: total}
        summary: dict[str, Any] = {"changes": changes}
        if steps is not None:
            # A change to a planned deployment: what the update would do (the service says what
            # that means, from the same table as for the real engine's steps: webui.change).
            summary["steps"] = [step for step in steps if step["op"] != "same"]
        parts = ", ".join(f"{count} {name}" for name, count in sorted(changes.items()))
        ctx.emit({"kind": "summary", "changes": changes, "message": f"{parts}; {OFFLINE_NOTICE}"})
        if operation == "destroy":
            return OperationResult(outputs=None, resources=[], summary=summary)
        outputs = plan.get("outputs") if isinstance(plan.get("outputs"), dict) else {}
        return OperationResult(outputs=outputs, resources=resources, summary=summary,
                               plan=plan if operation == "up" else None)

    # ---- a plan file an older raypd kept (now the store keeps it) ----

    def _legacy_plan_path(self, stack: str) -> Path:
        return self.settings.workspace_dir(stack) / LEGACY_PLAN_FILE

    def legacy_plan(self, stack: str) -> Optional[dict[str, Any]]:
        """The last deployed plan as raypd before store version 4 kept it, or None."""
        try:
            plan = json.loads(self._legacy_plan_path(stack).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return plan if isinstance(plan, dict) else None

    def forget_legacy_plan(self, stack: str) -> None:
        self._legacy_plan_path(stack).unlink(missing_ok=True)
