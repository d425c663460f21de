"""What is deployed and what is pending: pure functions of two Contract 1 configs (dicts in, dicts out).

"Save and preview" writes new settings to the stack at once, but nothing runs them until an `up`
does. The store keeps the config of the last successful up (`deployed`) beside the stack's current
one, and these rules say what differs, what "Discard" can put back, and how the HF token fits in.

The token is the one setting raypd cannot compare or restore: the store holds only the "[secret]"
placeholder, never the value. So a replaced token is known only from a flag the store sets when a
new token is written after a deploy, and Discard cannot bring back a token that was replaced or
removed since: it keeps what the stack has now and says so. A token added since the deploy (the
deploy had none) is simply removed again.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal, Mapping, Optional

from components.config.spec import HF_TOKEN_KEY, SECRET_PLACEHOLDER
from webui.resource_steps import config_diff
from webui.status import Standing

SettingsKind = Literal["deployed", "planned", "pending"]

# What the deployed settings are called: a real up deploys; an offline up only plans.
DEPLOYED_LABEL = {"deployment": Standing.DEPLOYED.value, "plan": Standing.PLANNED.value}

TOKEN_REPLACED = (
    "a new HF token was written to the stack since the last Deploy; Discard keeps it: raypd never "
    "stores a token, so the deployed one cannot be brought back"
)
TOKEN_REMOVED = (
    "the HF token was removed from the stack since the last Deploy; Discard cannot bring it back "
    "(raypd never stores a token): set it again with Change settings"
)
TOKEN_ADDED = "an HF token was added since the last Deploy; Discard removes it from the stack"


def deployed_kind(engine: str) -> str:
    """"plan" for the offline engine (its up plans, nothing runs), else "deployment"."""
    return "plan" if engine == "offline" else "deployment"


def settings_kind(engine: str, deployed: bool) -> SettingsKind:
    """Whose settings a deployment's row shows: what runs, what was planned, or (never deployed)
    the stack's own, which are all pending."""
    if not deployed:
        return "pending"
    return "planned" if deployed_kind(engine) == "plan" else "deployed"


def token_replaced(deployed: Mapping[str, Any], current: Mapping[str, Any], flagged: bool) -> bool:
    """The stack's token is not the deployed one although both configs say "[secret]"."""
    return flagged and HF_TOKEN_KEY in deployed and HF_TOKEN_KEY in current


def pending_changes(deployed: Mapping[str, Any], current: Mapping[str, Any],
                    flagged: bool) -> list[dict[str, Any]]:
    """Per setting, deployed -> now ({key, old, new}, plus `note` for the token); [] when the stack
    runs what it says."""
    changes = config_diff(deployed, current)
    for change in changes:
        if change["key"] == HF_TOKEN_KEY:
            change["note"] = TOKEN_REMOVED if change["new"] is None else TOKEN_ADDED
    if token_replaced(deployed, current, flagged):
        changes.append({"key": HF_TOKEN_KEY, "old": SECRET_PLACEHOLDER, "new": SECRET_PLACEHOLDER,
                        "note": TOKEN_REPLACED})
        changes.sort(key=lambda change: change["key"])
    return changes


def discard_target(deployed: Mapping[str, Any], current: Mapping[str, Any]) -> dict[str, Any]:
    """The config Discard writes back: the deployed one, except that a token removed since cannot
    be restored (the spec must not claim a token the stack does not have)."""
    target = dict(deployed)
    if HF_TOKEN_KEY in deployed and HF_TOKEN_KEY not in current:
        target.pop(HF_TOKEN_KEY)
    return target


def left_after_discard(deployed: Mapping[str, Any], current: Mapping[str, Any],
                       flagged: bool) -> Optional[str]:
    """What Discard cannot undo (the token replaced or removed since the deploy), or None."""
    if token_replaced(deployed, current, flagged):
        return TOKEN_REPLACED
    if HF_TOKEN_KEY in deployed and HF_TOKEN_KEY not in current:
        return TOKEN_REMOVED
    return None


# ---- which settings a check report was made for (issue 29 §2: reports that no longer apply) ----

# The key of a stored check report that names the settings it was made for (never in an answer).
REPORT_SETTINGS_KEY = "settings"
STALE_PREFLIGHT = ("made for other settings: the stack's settings were changed or discarded since; "
                   "run the preflight again")
STALE_VERIFY = "made for other settings: what runs was deployed since; verify again"


def settings_digest(config: Optional[Mapping[str, Any]]) -> Optional[str]:
    """A short fingerprint of a Contract 1 config (None for none): equal settings, equal digest."""
    if config is None:
        return None
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:16]


def report_staleness(kind: str, made_for: Optional[str], current: Optional[str]) -> Optional[str]:
    """Why a stored report no longer applies, or None. A preflight is made for the stack's settings,
    a verify for what runs (the deployed ones): a report for other settings tells of a stack that
    is not there any more. A report stored without its settings (an older raypd) is taken as is."""
    if made_for is None or made_for == current:
        return None
    return STALE_PREFLIGHT if kind == "preflight" else STALE_VERIFY
