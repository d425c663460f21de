"""What to send: one RequestSpec per request, from synthetic prompts, presets or a JSONL file.

There is no tokenizer here on purpose (the client must not need the model's files): a synthetic
prompt of N "tokens" is N words drawn from a small vocabulary, which most BPE tokenizers turn into
roughly N to 1.3N tokens. The real counts come back in the server's usage chunk and are the ones
the summary uses.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

DISTRIBUTIONS = ("fixed", "uniform", "normal")
# chat: a conversational turn; rag: a long retrieved context; agentic: a long shared system prefix
# (tools, instructions) followed by a short, different tail per request, to exercise prefix caching.
PRESETS: dict[str, dict[str, int]] = {
    "chat": {"input_tokens": 1024, "output_tokens": 256, "shared_prefix_tokens": 0},
    "rag": {"input_tokens": 8192, "output_tokens": 256, "shared_prefix_tokens": 0},
    "agentic": {"input_tokens": 4096, "output_tokens": 128, "shared_prefix_tokens": 3584},
}
_VOCABULARY = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but have an "
    "they you were her she there been one all we their has would when if so no more out up into do any "
    "about than only other new some could time these two may then first also after over such where most"
).split()
MAX_PROMPT_FILE_BYTES = 64 * 1024 * 1024
MAX_PROMPT_WORDS = 50_000_000  # prompts are built up front: requests x input tokens must fit in memory


class WorkloadError(ValueError):
    """A workload that cannot be built (bad prompt file, impossible sizes): exit 2 in the CLI."""


@dataclass(frozen=True)
class RequestSpec:
    """One request to send: the prompt text, its approximate token length and max_tokens."""

    index: int
    prompt: str
    input_tokens: int
    max_tokens: int


def draw_length(rng: random.Random, mean: int, dist: str) -> int:
    """A length around `mean`: fixed; uniform on [mean/2, 3mean/2]; normal with sd mean/4. At least 1."""
    if dist == "fixed":
        return max(1, mean)
    if dist == "uniform":
        return max(1, round(rng.uniform(mean * 0.5, mean * 1.5)))
    if dist == "normal":
        return max(1, round(rng.gauss(mean, mean / 4)))
    raise WorkloadError(f"unknown distribution {dist!r} (one of {', '.join(DISTRIBUTIONS)})")


def synthetic_words(rng: random.Random, count: int) -> str:
    return " ".join(rng.choice(_VOCABULARY) for _ in range(count))


def synthetic_workload(count: int, input_tokens: int, output_tokens: int, *, seed: int = 0,
                       input_dist: str = "fixed", output_dist: str = "fixed",
                       shared_prefix_tokens: int = 0) -> list[RequestSpec]:
    """`count` requests with seeded random words; the first `shared_prefix_tokens` words are common."""
    rng = random.Random(seed)
    prefix = synthetic_words(random.Random(seed ^ 0x5EED), shared_prefix_tokens) if shared_prefix_tokens else ""
    specs = []
    for index in range(count):
        length = draw_length(rng, input_tokens, input_dist)
        tail = synthetic_words(rng, max(1, length - shared_prefix_tokens))
        prompt = f"{prefix} {tail}" if prefix else tail
        specs.append(RequestSpec(index, prompt, len(prompt.split()), draw_length(rng, output_tokens, output_dist)))
    return specs


def file_workload(path: Path, count: int, output_tokens: int, *, seed: int = 0,
                  output_dist: str = "fixed") -> list[RequestSpec]:
    """Requests from a JSONL file of {"prompt": str, "max_tokens"?: int}, cycled to reach `count`.

    Read by components.config.safe_documents, as every file a raypd CLI reads: a regular file of at
    most MAX_PROMPT_FILE_BYTES (a FIFO hung, /dev/zero ran out of memory), each line JSON nested at
    most MAX_DEPTH deep (deeper ended in a RecursionError traceback)."""
    try:
        # Imported here: this module is one of job.RUN_FILES, and a pod running `run` has no raypd
        # checkout (nor a prompts file to read).
        from components.config.safe_documents import DocumentError, FileRefused, load_json, read_text_file
    except ImportError:
        raise WorkloadError("--prompts needs the raypd checkout (components/); in a pod, use synthetic "
                            "prompts (--input-tokens)") from None
    shown = f"{path}" if str(path).isprintable() else ascii(str(path))
    try:
        lines = read_text_file(path, MAX_PROMPT_FILE_BYTES).splitlines()
    except FileRefused as exc:
        raise WorkloadError(f"--prompts: {exc.about(shown)}") from None
    entries: list[tuple[str, Optional[int]]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = load_json(line, max_bytes=MAX_PROMPT_FILE_BYTES)
        except DocumentError as exc:
            raise WorkloadError(f"--prompts: line {number} {exc.problem}") from None
        if not isinstance(item, dict) or not isinstance(item.get("prompt"), str):
            raise WorkloadError(f"--prompts: line {number} has no string 'prompt'")
        max_tokens = item.get("max_tokens")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise WorkloadError(f"--prompts: line {number} has an invalid 'max_tokens'")
        entries.append((item["prompt"], max_tokens))
    if not entries:
        raise WorkloadError(f"--prompts: {path} has no prompts")
    rng = random.Random(seed)
    specs = []
    for index in range(count):
        prompt, max_tokens = entries[index % len(entries)]
        specs.append(RequestSpec(index, prompt, len(prompt.split()),
                                 max_tokens or draw_length(rng, output_tokens, output_dist)))
    return specs
