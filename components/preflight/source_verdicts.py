"""What the two halves of the `model-source` check share (components.preflight.model_source asks
the Hugging Face Hub, components.preflight.s3_source asks S3): the check's id and title, the files
vLLM reads first, and how a verdict, a server's words and the machine preflight runs on are written.
"""

from __future__ import annotations

import socket
from typing import Optional

from components.config.checks import Check
from components.config.spec import SECRET_PLACEHOLDER

CHECK_ID = "model-source"
TITLE = "the model source exists and the pods can read it"
SOURCE_KEY = "raypd:model.source"
# vLLM reads a Hugging Face-format config.json first; a Mistral-format checkpoint has params.json.
CONFIG_FILE = "config.json"
MISTRAL_CONFIG_FILE = "params.json"


def passed(evidence: str) -> Check:
    return Check.passed(CHECK_ID, TITLE, evidence)


def failed(detail: str, remedy: str) -> Check:
    return Check.failed(CHECK_ID, TITLE, detail, remedy)


def warned(detail: str, remedy: str = "") -> Check:
    return Check.warned(CHECK_ID, TITLE, detail, remedy)


def one_line(text: str, secret: Optional[str], limit: int = 200) -> str:
    """A server's words as one short line, with the token blotted out should a server echo it."""
    if secret:
        text = text.replace(secret, SECRET_PLACEHOLDER)
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def this_machine() -> str:
    """This host's name, to say where the Hub or S3 was asked from (in the web app: its server, not
    the browser that shows the report)."""
    name = " ".join(socket.gethostname().split())[:64]
    return f"host {name}" if name else "this host"
