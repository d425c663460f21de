"""Searching for a secret wherever it could land: as it is, or base64-encoded as a Kubernetes
Secret's data holds it (a value copied from a Secret into a record would not show as itself)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest


def spellings(secret: str) -> tuple[str, str]:
    return secret, base64.b64encode(secret.encode("utf-8")).decode("ascii")


def holds(text: str, secret: str) -> bool:
    return any(spelling in text for spelling in spellings(secret))


def file_holds(path: Path, secret: str) -> bool:
    data = path.read_bytes()
    return any(spelling.encode("utf-8") in data for spelling in spellings(secret))


def logged(caplog: pytest.LogCaptureFixture) -> str:
    """Every log record as a handler would see it: message, arguments, traceback."""
    return caplog.text + "".join(f"{r.getMessage()}{r.args!r}{r.exc_text or ''}" for r in caplog.records)
