"""The Pulumi CLI on this machine: finding a usable one (on PATH, then where the official
installers put it; never raises: `CliDiscovery.reason` says why there is none, and the app falls
back to the offline engine), and removing the bookkeeping it leaves in PULUMI_HOME per work dir."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from pulumi import automation as auto

from webui.redact import redact

logger = logging.getLogger(__name__)

CLI_NOT_FOUND = "Pulumi CLI not found on PATH"


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
    for cli_root, where in attempts:
        try:
            command = make_command(root=str(cli_root)) if cli_root else make_command()
            return CliDiscovery(command, where, None)
        except (OSError, subprocess.SubprocessError, auto.InvalidVersionError) as exc:
            problems.append(f"{where}: {redact(str(exc)).strip() or type(exc).__name__}")
    return CliDiscovery(None, None, "Pulumi CLI found but not usable (" + "; ".join(problems) + ")")


# ---- what the CLI leaves behind ----

def pulumi_home(env: Mapping[str, str]) -> Path:
    """PULUMI_HOME, else ~/.pulumi (sdk/go/common/workspace/paths.go GetPulumiHomeDir)."""
    return Path(env.get("PULUMI_HOME") or Path.home() / ".pulumi")


def workspace_bookkeeping_file(work_dir: Path, project: str, env: Mapping[str, str]) -> Path:
    """The file `pulumi stack select` and `stack init` write to remember a project's current stack:
    PULUMI_HOME/workspaces/<project>-<sha1 of the Pulumi.yaml path>-workspace.json
    (sdk/go/common/workspace/workspace.go settingsPath; the path is the one the CLI's getcwd sees,
    symlinks resolved). Keyed by the work dir, and raypd makes a new work dir per call."""
    project_file = os.path.join(os.path.realpath(work_dir), "Pulumi.yaml")
    digest = hashlib.sha1(project_file.encode(), usedforsecurity=False).hexdigest()
    return pulumi_home(env) / "workspaces" / f"{project}-{digest}-workspace.json"


def forget_workspace(work_dir: Path, project: str, env: Mapping[str, str]) -> None:
    """Remove the CLI's bookkeeping file for a work dir that is going away: nothing will ever read
    it again, and one per engine call would pile up in PULUMI_HOME for as long as the server runs."""
    path = workspace_bookkeeping_file(work_dir, project, env)
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:  # not worth failing a job that has done its work
        logger.warning("could not remove the Pulumi CLI's workspace file %s: %s", path, exc.strerror)
