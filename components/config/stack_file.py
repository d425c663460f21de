"""Read a Pulumi stack settings file (Pulumi.<stack>.yaml) without the Pulumi CLI.

Used by the offline plan and `serve.render`. Values stored as ``{secure: <ciphertext>}`` were
encrypted by a secrets provider these tools do not have: they are kept as present-but-secret
placeholders, never decrypted and never printed. The file is read by components.config.safe_documents
(a regular file only, no YAML aliases, bounded size, nesting and numbers), so a hostile file is one
`--config` line.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from components.config.errors import SpecError
from components.config.rules import ascii_pattern, validate_stack_name
from components.config.safe_documents import DocumentError, FileRefused, load_yaml, read_text_file, shown_name
from components.config.spec import SECRET_PLACEHOLDER

DEFAULT_STACK = "dev"
# A stack file is a few KiB; more is not one (and is read no further).
MAX_STACK_FILE_BYTES = 1024 * 1024
_STACK_FILE = ascii_pattern(r"^Pulumi\.(?P<stack>[^.]+)\.ya?ml$")


def stack_name_from_path(path: Path) -> str | None:
    match = _STACK_FILE.match(path.name)
    return match.group("stack") if match else None


def _replace_secure(value: Any, secret_keys: set[str], key: str) -> Any:
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            secret_keys.add(key)
            return SECRET_PLACEHOLDER
        return {k: _replace_secure(v, secret_keys, f"{key}.{k}") for k, v in value.items()}
    return value


def load_stack_file(path: str | Path) -> tuple[dict[str, Any], set[str]]:
    """Return (config keys -> values, the keys whose values are secret)."""
    file = Path(path)
    shown = shown_name(file)
    try:
        document = load_yaml(read_text_file(file, MAX_STACK_FILE_BYTES), max_bytes=MAX_STACK_FILE_BYTES) or {}
    except FileRefused as exc:
        raise SpecError.single("--config", f"no such file: {shown}" if exc.missing else exc.about(shown)) from None
    except DocumentError as exc:
        raise SpecError.single("--config", f"{shown} {exc}") from None
    if not isinstance(document, dict):
        raise SpecError.single("--config", f"{shown} must be a mapping with a 'config:' section")
    config = document.get("config") or {}
    if not isinstance(config, dict):
        raise SpecError.single("config", f"'config:' in {shown} must be a mapping of keys")
    secret_keys: set[str] = set()
    values = {str(k): _replace_secure(v, secret_keys, str(k)) for k, v in config.items()}
    return values, secret_keys


def read_stack(path: str | Path, stack: str | None = None) -> tuple[str, dict[str, Any], set[str]]:
    """(stack name, config, secret keys) for the CLIs: the name is `stack`, else the file's
    `Pulumi.<stack>.yaml` name, else "dev", and is validated like any stack name."""
    file = Path(path)
    name = validate_stack_name(stack if stack is not None else (stack_name_from_path(file) or DEFAULT_STACK))
    config, secret_keys = load_stack_file(file)
    return name, config, secret_keys


def add_stack_arguments(parser: argparse.ArgumentParser) -> None:
    """--config and --stack, spelled the same in every raypd CLI that reads a stack file."""
    parser.add_argument("--config", required=True, help="stack settings file, e.g. Pulumi.dev.yaml")
    parser.add_argument(
        "--stack", help=f"stack name (default: taken from Pulumi.<stack>.yaml, else '{DEFAULT_STACK}')"
    )
