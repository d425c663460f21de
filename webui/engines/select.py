"""Choose the engine from RAYPD_ENGINE and what is installed, and say why (for the banner).

auto: the Automation API when a Pulumi CLI is found, else offline, with a banner that names the
reason and says nothing is created in the cloud. pulumi: the CLI is required (startup fails with a
clear message otherwise). offline: always available.

The offline engine is always registered too: deployments remember the engine they were created
with, and an offline plan stays an offline plan after a CLI gets installed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from webui.engines.offline import OfflineEngine
from webui.engines.pulumi_cli import CliDiscovery, find_pulumi_cli
from webui.engines.pulumi_engine import PulumiEngine
from webui.settings import Settings, SettingsError, team_mode_problems

INSTALL_HINT = (
    "install it with `curl -fsSL https://get.pulumi.com | sh` or "
    "`python -c 'from pulumi.automation import PulumiCommand; PulumiCommand.install()'` (docs/webui.md)"
)


@dataclass
class EngineSet:
    default: Any  # the engine new deployments use
    engines: dict[str, Any] = field(default_factory=dict)
    banner: Optional[str] = None  # shown on every page when set
    reason: Optional[str] = None  # why the default is what it is

    def get(self, name: str) -> Optional[Any]:
        return self.engines.get(name)

    def describe(self) -> dict[str, Any]:
        return {
            "default": self.default.name,
            "available": sorted(self.engines),
            "banner": self.banner,
            "reason": self.reason,
        }


def select_engines(
    settings: Settings, discover: Callable[[], CliDiscovery] = find_pulumi_cli,
) -> EngineSet:
    offline = OfflineEngine(settings)
    if settings.engine == "offline":
        return EngineSet(
            offline, {"offline": offline},
            banner=(
                "RAYPD_ENGINE=offline: deployments are planned under Pulumi's mock runtime; "
                "nothing is created in AWS."
            ),
            reason="RAYPD_ENGINE=offline",
        )
    found = discover()
    if found.found:
        problems = team_mode_problems(settings)
        if problems:
            raise SettingsError("; and ".join(problems))
        real = PulumiEngine(settings, found.command)
        return EngineSet(real, {"pulumi": real, "offline": offline}, banner=None,
                         reason=f"Pulumi CLI at {found.where}")
    if settings.engine == "pulumi":
        raise SettingsError(f"RAYPD_ENGINE=pulumi but {found.reason}; {INSTALL_HINT}")
    return EngineSet(
        offline, {"offline": offline},
        banner=(
            f"{found.reason}: using the offline engine, which plans deployments but creates "
            f"nothing in AWS. To deploy for real, {INSTALL_HINT}."
        ),
        reason=found.reason,
    )
