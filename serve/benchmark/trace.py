"""Replaying a team's own traffic: a JSONL trace, one request per line, sent at its recorded time.

The format (docs/benchmark.md "Trace replay", Contract 6): each non-blank line a JSON object

    {"at_s": 12.5, "input_tokens": 812, "output_tokens": 96}

- `at_s` (required): when to send it, seconds from the run start (a number >= 0). Lines may come
  in any order; they are sent in time order (a stable sort: equal times keep their file order).
- `output_tokens` (required): the request's max_tokens, an integer >= 1 (with --ignore-eos the
  answer's exact length).
- `input_tokens` (required unless `prompt` is given): the prompt length, synthetic words as for
  --input-tokens (about one token each: the client has no tokenizer).
- `prompt` (optional): the exact prompt text to send instead of synthetic words.
- `id` (optional): the team's own label for the request, a string, copied into its record as
  `trace_id`.
Any other key is an error: a typo (`input_token`) must not silently become a default.

Reading the file goes through components.config.safe_documents like every file a raypd CLI
reads; the parsing below is pure and names the line and the field of a bad line.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

from serve.benchmark.workload import (
    MAX_PROMPT_FILE_BYTES,
    MAX_PROMPT_WORDS,
    RequestSpec,
    WorkloadError,
    synthetic_words,
)

MAX_TRACE_REQUESTS = 100_000
MAX_AT_S = 7 * 86_400.0
MAX_TOKENS = 1_000_000
FIELDS = ("at_s", "input_tokens", "output_tokens", "prompt", "id")


class TraceError(WorkloadError):
    """A trace line that cannot be replayed: the message names the line and the field (exit 2)."""


@dataclass(frozen=True)
class TraceRequest:
    at_s: float
    output_tokens: int
    input_tokens: Optional[int] = None
    prompt: Optional[str] = None
    trace_id: Optional[str] = None


def _count(item: dict[str, Any], key: str, where: str) -> Optional[int]:
    value = item.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKENS:
        raise TraceError(f"{where} {key} must be an integer from 1 to {MAX_TOKENS}, got {value!r}")
    return value


def parse_line(item: Any, number: int, name: str = "--trace") -> TraceRequest:
    """One decoded line (already JSON) -> a TraceRequest, or a TraceError naming line and field."""
    where = f"{name} line {number}:"
    if not isinstance(item, dict):
        raise TraceError(f"{where} must be a JSON object like {{\"at_s\": 0.5, \"input_tokens\": 512, "
                         "\"output_tokens\": 128}")
    unknown = sorted(str(key) for key in item if key not in FIELDS)
    if unknown:
        raise TraceError(f"{where} unknown field {unknown[0]!r} (the fields are {', '.join(FIELDS)})")
    at = item.get("at_s")
    if isinstance(at, bool) or not isinstance(at, (int, float)) or not math.isfinite(at) or not 0 <= at <= MAX_AT_S:
        raise TraceError(f"{where} at_s must be a number of seconds from 0 to {MAX_AT_S:g}, got {at!r}")
    output_tokens = _count(item, "output_tokens", where)
    if output_tokens is None:
        raise TraceError(f"{where} output_tokens is required")
    input_tokens = _count(item, "input_tokens", where)
    prompt = item.get("prompt")
    if prompt is not None and (not isinstance(prompt, str) or not prompt.strip()):
        raise TraceError(f"{where} prompt must be a non-empty string")
    if prompt is None and input_tokens is None:
        raise TraceError(f"{where} input_tokens is required (or a prompt)")
    trace_id = item.get("id")
    if trace_id is not None and not isinstance(trace_id, str):
        raise TraceError(f"{where} id must be a string, got {trace_id!r}")
    return TraceRequest(float(at), output_tokens, input_tokens, prompt, trace_id)


def _no_constant(word: str) -> Any:
    raise ValueError(f"{word} is not a number JSON allows")


def parse_lines(lines: Sequence[str], name: str = "--trace") -> list[TraceRequest]:
    """The trace's requests in send order; JSON is decoded with `json` (the file was bounded already)."""
    requests: list[TraceRequest] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line, parse_constant=_no_constant)
        except (ValueError, RecursionError) as exc:
            raise TraceError(f"{name} line {number}: not JSON ({str(exc)[:120]})") from None
        requests.append(parse_line(item, number, name))
        if len(requests) > MAX_TRACE_REQUESTS:
            raise TraceError(f"{name} has more than {MAX_TRACE_REQUESTS} requests")
    if not requests:
        raise TraceError(f"{name} has no requests")
    return sorted(requests, key=lambda r: r.at_s)


def read_trace(path: Path) -> list[TraceRequest]:
    """The file through raypd's safe reader (a regular file, bounded), then parse_lines."""
    try:
        # Imported here: this module is one of job.RUN_FILES, and a pod has no raypd checkout.
        from components.config.safe_documents import FileRefused, read_text_file
    except ImportError:
        raise TraceError("--trace needs the raypd checkout (components/)") from None
    shown = f"{path}" if str(path).isprintable() else ascii(str(path))
    try:
        text = read_text_file(path, MAX_PROMPT_FILE_BYTES)
    except FileRefused as exc:
        raise TraceError(f"--trace: {exc.about(shown)}") from None
    return parse_lines(text.splitlines(), f"--trace {shown}")


def trace_workload(requests: Sequence[TraceRequest], seed: int = 0) -> tuple[list[float], list[RequestSpec]]:
    """(send offsets, specs) of a parsed trace; synthetic prompts are seeded words, as elsewhere."""
    words = sum(r.input_tokens or 0 for r in requests if r.prompt is None)
    if words > MAX_PROMPT_WORDS:
        raise TraceError(f"--trace asks for {words} synthetic prompt words, more than {MAX_PROMPT_WORDS}")
    rng = random.Random(seed)
    specs = []
    for index, request in enumerate(requests):
        prompt = request.prompt if request.prompt is not None else synthetic_words(rng, request.input_tokens or 1)
        specs.append(RequestSpec(index, prompt, len(prompt.split()), request.output_tokens))
    return [r.at_s for r in requests], specs
