"""Keep secrets out of everything the app shows or stores.

The HF token is never handed to the store, the event log or a template on purpose; this is the
second line of defence for text that comes from elsewhere (Pulumi diagnostics, CLI stderr, error
messages): Hugging Face tokens (`hf_...`), kubeconfig credentials and bearer tokens are masked
wherever they appear, so a provider echoing a value back cannot leak it into SQLite or a page.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any, Optional

from components.config.stack_file import SECRET_PLACEHOLDER

MASK = SECRET_PLACEHOLDER  # what the spec and stack files show for a secret, so one word everywhere

_PATTERNS = (
    re.compile(r"\bhf_[A-Za-z0-9]{8,}"),  # Hugging Face user/org tokens
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?i)((?:token|client-key-data|client-certificate-data|password|passphrase)\s*[:=]\s*)"
               r"[\"']?[^\s\"',}]{6,}"),
)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|<\{%[a-z]+%\}>")


# Secret values this process has been handed (HF tokens typed in, a passphrase from the
# environment): masked wherever they appear, even when they do not look like a credential (an HF
# token without its `hf_` prefix). Process-wide on purpose, like the logging it protects.
_KNOWN_SECRETS: set[str] = set()
_KNOWN_LOCK = threading.Lock()
MIN_KNOWN_SECRET = 8  # shorter values would mask ordinary words


def remember_secret(value: Optional[str]) -> None:
    """Mask this exact value from now on (values shorter than MIN_KNOWN_SECRET are ignored)."""
    if value and len(value) >= MIN_KNOWN_SECRET:
        with _KNOWN_LOCK:
            _KNOWN_SECRETS.add(value)


def forget_secrets() -> None:
    """Drop every remembered secret: the set is process-wide, and a process that builds one app
    after another (the test suite) must not let one app's secrets shape another's answers."""
    with _KNOWN_LOCK:
        _KNOWN_SECRETS.clear()


def redact(text: str) -> str:
    """Mask anything that looks like a credential; strip terminal colour codes."""
    text = _ANSI.sub("", text)
    with _KNOWN_LOCK:
        known = sorted(_KNOWN_SECRETS, key=len, reverse=True)
    for value in known:
        if value in text:
            text = text.replace(value, MASK)
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
    """A logging filter that masks credentials in every record that passes through a handler.

    The traceback of `logger.exception` is masked too: an exception's message (a CommandError
    carries the CLI's whole stderr) is as likely to echo a credential as the log message is.
    """

    _formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record must not break logging
            return True
        record.msg = redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = self._formatter.formatException(record.exc_info)
        if record.exc_text:
            # Formatters print exc_text when it is set; drop exc_info so none formats it afresh.
            record.exc_text = redact(record.exc_text)
            record.exc_info = None
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True
