"""Finding a usable Pulumi CLI: on PATH, then where the official installers put it. Never raises:
`CliDiscovery.reason` says why there is none, and the app falls back to the offline engine."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from pulumi import automation as auto

from webui.redact import redact

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
