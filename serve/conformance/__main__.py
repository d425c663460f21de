"""`python -m serve.conformance (--endpoint URL | --outputs FILE|-) [--reference URL] [--api-key-env VAR]
--model ID [--json] [--out DIR]` (issue 32 section 1; the report is Contract 7).

Every feature of the OpenAI surface, through the official `openai` client, judged with evidence;
with --reference the same requests to the same weights served another way. Prints a table (or with
--json the report), and with --out writes both plus the raw exchanges of every feature that did not
pass, API keys redacted. Exit 0 when nothing failed or differed, 1 when something did, 2 on invalid
input (one line on stderr naming the flag, no traceback).

The API key: $VAR with --api-key-env VAR; else $RAYPD_API_KEY when set; else, with --outputs, the
outputs' apiKey (`--show-secrets`). It is sent to the endpoint only, never to the reference.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Mapping, NoReturn, Optional, Sequence
from urllib.parse import urlsplit

from serve.conformance.client import Session
from serve.conformance.outdir import redact, write_out
from serve.conformance.run import run_features
from serve.evidence import VerifyInputError, read_outputs
from serve.verify.external import API_KEY_ENV, EndpointTarget, api_key_from

EXIT_INVALID = 2
MAX_URL_CHARS = 2048
MAX_MODEL_CHARS = 256
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_MODEL_ID = re.compile(r"^[\x21-\x7e]+$")  # printable ASCII without spaces: how vLLM's served names look


class UsageError(Exception):
    """Invalid input: one line on stderr, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _shown(value: str, limit: int = 60) -> str:
    text = ascii(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _url(flag: str, value: str) -> str:
    parts = urlsplit(value) if len(value) <= MAX_URL_CHARS and value.isprintable() and " " not in value else None
    try:
        port_ok = parts is not None and (parts.port or 0) >= 0
    except ValueError:
        port_ok = False
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise UsageError(f"{flag} must be an http(s) URL such as http://127.0.0.1:8000, got {_shown(value)}")
    if parts.username or parts.password:
        raise UsageError(f"{flag}: give credentials with --api-key-env, not in the URL")
    if parts.query or parts.fragment:
        raise UsageError(f"{flag} must be the server's root or /v1 base URL, without ?query or #fragment")
    return value.rstrip("/")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m serve.conformance",
                     description="The OpenAI surface of an endpoint, feature by feature, with evidence.")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--endpoint", help="the OpenAI server's root or /v1 URL")
    target.add_argument("--outputs", help="a raypd stack's outputs JSON (or -): its endpoint.url, apiKey, modelId")
    parser.add_argument("--reference", help="the same weights served another way (plain vLLM, colocated)")
    parser.add_argument("--api-key-env", help=f"the environment variable holding the API key (default {API_KEY_ENV})")
    parser.add_argument("--model", help="the served model id (default with --outputs: its modelId)")
    parser.add_argument("--json", action="store_true", help="print the versioned report (Contract 7)")
    parser.add_argument("--out", type=Path, help="write report.json, report.txt and the non-pass exchanges here")
    return parser


def _key(var: Optional[str], environ: Mapping[str, str]) -> Optional[str]:
    if var is not None and not _ENV_NAME.match(var):
        raise UsageError(f"--api-key-env must be an environment variable name (letters, digits, _), got {_shown(var)}")
    name = var or API_KEY_ENV
    value = environ.get(name)
    if var is not None and not value:
        raise UsageError(f"--api-key-env {name}: the variable is not set or empty")
    if value is None:
        return None
    key = value.strip()
    if not key or any(not 0x21 <= ord(char) <= 0x7E for char in key):
        raise UsageError(f"--api-key-env {name}: does not hold one API key (empty, spaces, control characters or "
                         "non-ASCII)")
    return key


def _target(args: argparse.Namespace, environ: Mapping[str, str]) -> tuple[str, str, Optional[str]]:
    """(endpoint URL, model id, API key) from the flags or the stack outputs."""
    key = _key(args.api_key_env, environ)
    if args.outputs is None:
        endpoint, model = _url("--endpoint", args.endpoint), args.model
    else:
        try:
            outputs = read_outputs(args.outputs)
        except VerifyInputError as exc:
            raise UsageError(f"--outputs: {exc}") from None
        target = EndpointTarget.from_outputs(outputs)
        if target is None:
            raise UsageError("--outputs: no endpoint.url in them (a stack from before raypd exposed its endpoint)")
        if target.scope == "cluster":
            raise UsageError("--outputs: the endpoint has scope cluster (no address outside it): port-forward the "
                             "Serve Service and give --endpoint http://127.0.0.1:PORT")
        endpoint, key = _url("--outputs endpoint.url", target.url), api_key_from(outputs, key)
        model = args.model or (outputs.get("modelId") if isinstance(outputs.get("modelId"), str) else None)
    if not model:
        raise UsageError("--model is required (with --outputs it defaults to the outputs' modelId)")
    if len(model) > MAX_MODEL_CHARS or not _MODEL_ID.match(model):
        raise UsageError(f"--model must be a model id (printable, no spaces, at most {MAX_MODEL_CHARS} "
                         f"characters), got {_shown(model)}")
    return endpoint, model, key


def _out(path: Optional[Path]) -> Optional[Path]:
    if path is None:
        return None
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out: {_shown(str(path))} exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".conformance-write-test"
        probe.write_text("", encoding="utf-8")
        probe.unlink()
    except OSError as exc:
        raise UsageError(f"--out: cannot write to {_shown(str(path))}: {exc.strerror or type(exc).__name__}") from None
    return path


def main(argv: Optional[Sequence[str]] = None, environ: Optional[Mapping[str, str]] = None) -> int:
    environ = os.environ if environ is None else environ
    try:
        args = _parser().parse_args(argv)
        endpoint, model, key = _target(args, environ)
        reference_url = _url("--reference", args.reference) if args.reference else None
        out = _out(args.out)
    except UsageError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return EXIT_INVALID
    session = Session(endpoint, model, key)
    reference = Session(reference_url, model) if reference_url else None
    try:
        report = run_features(session, reference=reference,
                              on_result=lambda r: print(f"  {r.id}: {r.verdict.value}", file=sys.stderr, flush=True))
    finally:
        session.close()
        if reference is not None:
            reference.close()
    secrets = [key] if key else []
    text = json.dumps(report.to_json(), indent=2) + "\n" if args.json else report.table()
    sys.stdout.write(redact(text, secrets))
    if out is not None:
        write_out(report, out, secrets)
        print(f"conformance: report and exchanges in {out}", file=sys.stderr)
    return report.exit_code


if __name__ == "__main__":
    sys.exit(main())
