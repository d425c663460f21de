"""Automation API engine: the project's own `__main__.py`, driven through `LocalWorkspace`.

Each stack gets a work dir RAYPD_HOME/workspaces/<stack>/ holding a generated Pulumi.yaml whose
`main:` is the absolute project directory, so the CLI runs exactly the program `pulumi up` runs,
with the project's virtualenv, while the stack settings file (with its encrypted secrets) lives
under RAYPD_HOME and never in the checkout. No temp work dirs are made (LocalWorkspace without
`work_dir` leaks one per call).

Config is written from the validated spec: every Contract 1 key, structured values as JSON text
(Pulumi hands object config to programs as JSON strings anyway, and `DeploymentSpec.from_config`
reads both), `raypd:hfToken` as a secret. Results never ask for plaintext secrets
(`show_secrets=False`), and outputs are masked by `OutputValue.secret`.

Needs the Pulumi CLI; `find_pulumi_cli` says whether there is one and, if not, why.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from pulumi import automation as auto

from components.spec import HF_TOKEN_KEY, DeploymentSpec
from webui.engines.base import (
    EngineConflict,
    EngineError,
    EngineNotFound,
    JobContext,
    OperationCancelled,
    OperationFailed,
    OperationResult,
)
from webui.engines.events import EventTranslator, expected_total_from
from webui.redact import MASK, redact
from webui.settings import Settings, pulumi_env

logger = logging.getLogger(__name__)

PROJECT_NAME = "raypd"
MAX_ERROR_CHARS = 2000
CLI_NOT_FOUND = "Pulumi CLI not found on PATH"


# ---- CLI discovery ----

@dataclass(frozen=True)
class CliDiscovery:
    command: Optional[Any]  # a PulumiCommand when found
    where: Optional[str]
    reason: Optional[str]  # why there is no usable CLI

    @property
    def found(self) -> bool:
        return self.command is not None


def _candidate_roots(home: Path) -> list[Path]:
    """Where the official installers put the CLI: get.pulumi.com, then PulumiCommand.install()."""
    from pulumi._version import version as sdk_version  # what install() would fetch

    return [home / ".pulumi", home / ".pulumi" / "versions" / str(sdk_version)]


def find_pulumi_cli(
    which: Callable[[str], Optional[str]] = shutil.which,
    home: Optional[Path] = None,
    make_command: Callable[..., Any] = auto.PulumiCommand,
) -> CliDiscovery:
    """Find a usable Pulumi CLI without ever raising: PATH first, then the installers' homes."""
    attempts: list[tuple[Optional[Path], str]] = []
    on_path = which("pulumi")
    if on_path:
        attempts.append((None, on_path))
    for root in _candidate_roots(home or Path.home()):
        binary = root / "bin" / "pulumi"
        if binary.is_file():
            attempts.append((root, str(binary)))
    if not attempts:
        return CliDiscovery(None, None, CLI_NOT_FOUND)
    problems = []
    for root, where in attempts:
        try:
            command = make_command(root=str(root)) if root else make_command()
            return CliDiscovery(command, where, None)
        except (OSError, subprocess.SubprocessError, auto.InvalidVersionError) as exc:
            problems.append(f"{where}: {redact(str(exc)).strip() or type(exc).__name__}")
    return CliDiscovery(None, None, "Pulumi CLI found but not usable (" + "; ".join(problems) + ")")


# ---- config, outputs and errors (pure) ----

def config_map(spec: DeploymentSpec, hf_token: Optional[str]) -> dict[str, auto.ConfigValue]:
    """Contract 1 keys of the spec as Pulumi config values; the HF token as a secret."""
    values: dict[str, auto.ConfigValue] = {}
    for key, value in spec.public_config().items():
        if key == HF_TOKEN_KEY:
            continue  # public_config only says "[secret]"; the real value comes from hf_token
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        values[key] = auto.ConfigValue(value=text, secret=False)
    if hf_token:
        values[HF_TOKEN_KEY] = auto.ConfigValue(value=hf_token, secret=True)
    return values


def write_config(stack: Any, spec: DeploymentSpec, hf_token: Optional[str]) -> None:
    """Replace the stack's config with the spec's (path=False: keys are whole `ns:key` names)."""
    stack.set_all_config(config_map(spec, hf_token), path=False)


def masked_outputs(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """Stack outputs with every secret replaced by "[secret]" (the kubeconfig, for one)."""
    masked: dict[str, Any] = {}
    for key, output in outputs.items():
        secret = bool(getattr(output, "secret", False))
        masked[key] = MASK if secret else getattr(output, "value", output)
    return masked


_SECTIONS = re.compile(r"\n\s*(code|stdout|stderr):\s?")


def clean_command_error(exc: BaseException) -> str:
    """A CommandError's text (code, whole stdout, whole stderr) cut down to what a person needs."""
    text = redact(str(exc))
    parts: dict[str, str] = {}
    pieces = _SECTIONS.split("\n" + text)
    for label, body in zip(pieces[1::2], pieces[2::2], strict=True):
        parts[label] = body
    lines: list[str] = []
    for source in (parts.get("stderr", ""), parts.get("stdout", "")):
        for line in source.splitlines():
            stripped = line.strip()
            if re.match(r"^(error|raypd:|aws:)", stripped) or " error: " in stripped:
                if stripped not in lines:
                    lines.append(stripped)
    if not lines:
        tail = [line.strip() for line in parts.get("stderr", "").splitlines() if line.strip()]
        lines = tail[-10:]
    if not lines:
        lines = [f"pulumi exited with code {parts.get('code', '?').strip()}"]
    message = "\n".join(lines)
    return message if len(message) <= MAX_ERROR_CHARS else message[: MAX_ERROR_CHARS - 1] + "…"


def map_command_error(exc: BaseException, stack: str) -> EngineError:
    """Automation API errors -> engine errors with the HTTP status the API answers."""
    if isinstance(exc, auto.ConcurrentUpdateError):
        return EngineConflict(
            f"stack {stack} is locked by another update; wait for it to finish, or cancel it"
        )
    if isinstance(exc, auto.StackNotFoundError):
        return EngineNotFound(f"the Pulumi backend has no stack named {stack}")
    if isinstance(exc, auto.StackAlreadyExistsError):
        return EngineConflict(f"the Pulumi backend already has a stack named {stack}")
    if isinstance(exc, auto.CommandError):
        return OperationFailed(clean_command_error(exc))
    return OperationFailed(redact(str(exc)) or type(exc).__name__)


def _update_summary(summary: Any) -> dict[str, Any]:
    """The parts of an UpdateSummary worth keeping (never its `config`, which holds secrets)."""
    if summary is None:
        return {}
    return {
        "kind": getattr(summary, "kind", None),
        "result": getattr(summary, "result", None),
        "version": getattr(summary, "version", None),
        "changes": dict(getattr(summary, "resource_changes", None) or {}),
    }


def _in_background(call: Callable[[], Any], what: str) -> threading.Thread:
    """Run a CLI call off the request thread; log (never raise) how it went."""

    def run() -> None:
        try:
            call()
        except (EngineError, auto.CommandError) as exc:
            logger.info("%s: %s", what, redact(getattr(exc, "message", None) or str(exc)))
        except Exception:  # noqa: BLE001 - a background thread has nobody to raise to
            logger.exception("%s failed", what)

    thread = threading.Thread(target=run, name="raypd-pulumi-cancel", daemon=True)
    thread.start()
    return thread


# ---- the engine ----

class PulumiEngine:
    name = "pulumi"
    real = True
    notice = None

    def __init__(self, settings: Settings, command: Any):
        self.settings = settings
        self.command = command

    def project_settings(self) -> auto.ProjectSettings:
        options = {"toolchain": "pip"}
        if self.settings.virtualenv is not None:
            options["virtualenv"] = str(self.settings.virtualenv)
        return auto.ProjectSettings(
            name=PROJECT_NAME,
            runtime=auto.ProjectRuntimeInfo(name="python", options=options),
            main=str(self.settings.project_dir),
            description="raypd (generated by the web app; the program is main:)",
        )

    def workspace(self, stack: str) -> auto.LocalWorkspace:
        work_dir = self.settings.workspace_dir(stack)
        work_dir.mkdir(parents=True, exist_ok=True)
        return auto.LocalWorkspace(
            work_dir=str(work_dir),
            project_settings=self.project_settings(),
            env_vars=pulumi_env(self.settings),
            pulumi_command=self.command,
        )

    def _select(self, stack: str) -> auto.Stack:
        try:
            return auto.Stack.select(stack, self.workspace(stack))
        except auto.CommandError as exc:
            raise map_command_error(exc, stack) from None

    def create(self, spec: DeploymentSpec, hf_token: Optional[str]) -> None:
        workspace = self.workspace(spec.stack)
        try:
            stack = auto.Stack.create(spec.stack, workspace)
        except auto.CommandError as exc:
            raise map_command_error(exc, spec.stack) from None
        try:
            write_config(stack, spec, hf_token)
        except auto.CommandError as exc:
            # Half a stack (no config) would block the name: take back what this call made.
            try:
                workspace.remove_stack(spec.stack)
            except auto.CommandError:
                logger.warning("could not remove the half-created stack %s", spec.stack)
            self.remove(spec.stack)
            raise map_command_error(exc, spec.stack) from None

    def run(
        self, stack: str, operation: str, ctx: JobContext,
        known_resources: Optional[list[dict[str, Any]]] = None,
    ) -> OperationResult:
        selected = self._select(stack)
        translator = EventTranslator(ctx.emit, expected_total_from(known_resources))
        # No handle on the CLI process: `pulumi cancel` is the only way to stop an update. It is
        # a CLI call of its own, so it runs beside the request that asked for it.
        ctx.on_cancel(lambda: _in_background(selected.cancel, f"pulumi cancel {stack}"))
        try:
            if operation == "preview":
                preview = selected.preview(on_event=translator, color="never")
                result = OperationResult(summary={"changes": dict(preview.change_summary or {})})
            elif operation == "up":
                up = selected.up(on_event=translator, color="never", show_secrets=False)
                result = OperationResult(
                    outputs=masked_outputs(up.outputs), resources=translator.resources(),
                    summary=_update_summary(up.summary),
                )
            elif operation == "refresh":
                refresh = selected.refresh(on_event=translator, color="never", show_secrets=False)
                result = OperationResult(
                    outputs=masked_outputs(selected.outputs()), resources=translator.resources(),
                    summary=_update_summary(refresh.summary),
                )
            elif operation == "destroy":
                destroy = selected.destroy(on_event=translator, color="never", show_secrets=False)
                selected.workspace.remove_stack(stack)
                result = OperationResult(outputs=None, resources=[], summary=_update_summary(destroy.summary))
            else:
                raise OperationFailed(f"unknown operation {operation}")
        except auto.CommandError as exc:
            if ctx.cancelled:
                raise OperationCancelled() from None
            raise map_command_error(exc, stack) from None
        # Finished although a cancel was asked for (with the file backend `pulumi cancel` only drops
        # the lock): the update happened, so its outputs and resources are recorded, and a destroy
        # that removed the stack must remove the deployment too. The job runner notes the late cancel.
        return result

    def live_outputs(self, stack: str) -> dict[str, Any]:
        """The stack outputs WITH secrets (the kubeconfig verify needs), for the caller to use
        at once and drop: never stored, never returned by the API (`stack output --show-secrets`)."""
        selected = self._select(stack)
        try:
            outputs = selected.outputs()
        except auto.CommandError as exc:
            raise map_command_error(exc, stack) from None
        return {key: getattr(output, "value", output) for key, output in outputs.items()}

    def history(self, stack: str, limit: int = 20) -> list[dict[str, Any]]:
        """Pulumi's own update history (kind, result, times, changes), secrets never shown."""
        selected = self._select(stack)
        try:
            entries = selected.history(page_size=limit, show_secrets=False)
        except auto.CommandError as exc:
            raise map_command_error(exc, stack) from None
        return [
            {
                **_update_summary(entry),
                "startTime": entry.start_time.isoformat() if entry.start_time else None,
                "endTime": entry.end_time.isoformat() if entry.end_time else None,
            }
            for entry in entries
        ]

    def remove(self, stack: str) -> None:
        shutil.rmtree(self.settings.workspace_dir(stack), ignore_errors=True)

    def release(self, stack: str) -> None:
        """`pulumi cancel` after an interruption, to drop a lock the dead update left behind."""
        _in_background(lambda: self._select(stack).cancel(), f"pulumi cancel {stack}")
