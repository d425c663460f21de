"""Keep secrets out of everything the app shows or stores.

The HF token is never handed to the store, the event log or a template on purpose; this is the
second line of defence for text that comes from elsewhere (Pulumi diagnostics, CLI stderr, error
messages, plans and reports). A secret is known by WHERE it is, never by remembering its value:

- by its field: a value under a key that holds a credential (`raypd:hfToken`, `apiKey`,
  `kubeconfig`, `password`, `passphrase`, ...) in a JSON-like value, or written after such a name in
  text (`hfToken=...`, `"password": "..."`, `Bearer ...`, `--secret raypd:hfToken=...`, a URL's
  `user:password@`);
- by its format: Hugging Face tokens (`hf_...`) and raypd's own API keys (`rpd_...`, serve/api_keys.py)
  wherever they appear.

Matching remembered values instead (issue 29 §3) masked ordinary data: an HF token `us-east-2`
turned every other deployment's region into "[secret]" and its subnets into
`network-private-[secret]a`, in the store every server shares, and the set of values grew for the
life of the process. Nothing here keeps state, so redaction is the same in every process and costs
no memory however many secrets pass through.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from components.config.stack_file import SECRET_PLACEHOLDER
from serve.api_keys import KEY_PREFIX

MASK = SECRET_PLACEHOLDER  # what the spec and stack files show for a secret, so one word everywhere

# Credentials known by their format alone, wherever they appear.
_FORMATS = (
    re.compile(r"\bhf_[A-Za-z0-9]{8,}"),  # Hugging Face user/org tokens
    re.compile(rf"\b{re.escape(KEY_PREFIX)}[A-Za-z0-9_-]{{16,}}"),  # raypd API keys (new_key_value)
)
# The names of fields that hold a credential, as they are written in text: `raypd:hfToken`, `HF_TOKEN`
# and `token` all end in "token"; kubeconfig's `client-key-data`; AWS's `aws_secret_access_key`.
_FIELD_NAME = (r"(?:token|api[-_]?key|client-key-data|client-certificate-data|password|passphrase"
               r"|secret[-_]?access[-_]?key)")
# Credentials known by the field they are written in: `name: value`, `name=value`, JSON's
# `"name": "value"`, an HTTP `Bearer value`, a URL's `scheme://user:password@`.
_FIELDS = (
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(rf"(?i)({_FIELD_NAME}\s*[:=]\s*[\"']?)[^\s\"',}}]{{6,}}"),
    re.compile(rf"(?i)({_FIELD_NAME}[\"']\s*:\s*[\"'])[^\s\"']{{6,}}"),  # JSON (a quoted value only)
    re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://[^\s:/@]*:)[^\s/@]+(?=@)"),
)
# Keys of a JSON-like value whose value is a credential, whole. Compared after the config namespace
# and without case or punctuation (`raypd:hfToken`, `hf_token` and `HF-TOKEN` are `hftoken`): the
# spec's token, the stack outputs' kubeconfig and API key, kubeconfig credentials, and any key that
# ends in password or passphrase (KubeRay's GCS `redisPassword`, a database's). Exact names
# otherwise: `hasHfToken` or `output_tokens_per_s` are not secrets.
SECRET_KEYS = frozenset({
    "hftoken", "huggingfacehubtoken", "apikey", "kubeconfig", "token", "accesstoken", "clientkeydata",
    "clientcertificatedata", "awssecretaccesskey", "authorization",
})
SECRET_KEY_ENDINGS = ("password", "passphrase")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|<\{%[a-z]+%\}>")


def redact(text: str) -> str:
    """Mask every credential `text` holds in a known format or field; strip terminal colour codes."""
    text = _ANSI.sub("", text)
    for pattern in _FORMATS:
        text = pattern.sub(MASK, text)
    for pattern in _FIELDS:
        text = pattern.sub(lambda m: m.group(1) + MASK, text)
    return text


def is_secret_key(key: Any) -> bool:
    """Whether a JSON-like value's key names a credential (see SECRET_KEYS)."""
    if not isinstance(key, str):
        return False
    name = re.sub(r"[^a-z0-9]", "", key.rpartition(":")[2].lower())
    return name in SECRET_KEYS or name.endswith(SECRET_KEY_ENDINGS)


def redact_value(value: Any) -> Any:
    """`redact` applied to every string inside a JSON-like value, and every value under a key that
    holds a credential masked whole (an empty or absent one stays as it is: "none set" is no secret)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: MASK if is_secret_key(key) and item not in (None, "", MASK) else redact_value(item)
                for key, item in value.items()}
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
