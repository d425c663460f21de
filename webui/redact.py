"""Keep secrets out of everything the app shows or stores.

The HF token is never handed to the store, the event log or a template on purpose; this is the
second line of defence for text that comes from elsewhere (Pulumi diagnostics, CLI stderr, error
messages): Hugging Face tokens (`hf_...`), kubeconfig credentials and bearer tokens are masked
wherever they appear, so a provider echoing a value back cannot leak it into SQLite or a page.
"""

from __future__ import annotations

import logging
import re
from typing import Any

MASK = "[secret]"

_PATTERNS = (
    re.compile(r"\bhf_[A-Za-z0-9]{8,}"),  # Hugging Face user/org tokens
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?i)((?:token|client-key-data|client-certificate-data|password|passphrase)\s*[:=]\s*)"
               r"[\"']?[^\s\"',}]{6,}"),
)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|<\{%[a-z]+%\}>")


def redact(text: str) -> str:
    """Mask anything that looks like a credential; strip terminal colour codes."""
    text = _ANSI.sub("", text)
    for pattern in _PATTERNS:
        if pattern.groups:
            text = pattern.sub(lambda m: m.group(1) + MASK, text)
        else:
            text = pattern.sub(MASK, text)
    return text


def redact_value(value: Any) -> Any:
    """`redact` applied to every string inside a JSON-like value."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: redact_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(item) for item in value]
    return value


class RedactingFilter(logging.Filter):
    """A logging filter that masks credentials in every record that passes through a handler."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record must not break logging
            return True
        record.msg = redact(message)
        record.args = None
        return True
