"""The token counts an endpoint reports for one streamed answer, checked before anything is computed from them.

The benchmark's token rates and cost per token are the endpoint's own `usage` numbers divided by
our clock, so a server (or a proxy in front of it) that miscounts would make them up: a negative
`prompt_tokens` gave negative input tokens/s, a `1e400` an `Infinity` in summary.json. The OpenAI
usage object is `{"prompt_tokens": int, "completion_tokens": int, "total_tokens": int}` (vLLM:
`UsageInfo` in vllm/entrypoints/openai/protocol.py), so a count is accepted only when it is a
non-negative integer that the answer we saw could have:

- `completion_tokens` is at least the content chunks streamed (each carries at least one new
  token; a chunk may carry several, a token may carry no text) and at most the `max_tokens` sent
  (the server stops there);
- `prompt_tokens` is at most one token per byte of the prompt plus TEMPLATE_TOKENS for the chat
  template and special tokens (a byte-level tokenizer never makes more than one token per byte).

Anything else makes the request a failure (error_kind "usage") with the reason, never a number.
Standard library only: this file runs in the serving image (it is one of job.RUN_FILES).
"""

from __future__ import annotations

from typing import Any, Mapping

TEMPLATE_TOKENS = 65_536  # a generous bound on what a chat template and special tokens add to a prompt
_SHOWN = 40


class UsageProblem(ValueError):
    """The usage the endpoint reported cannot be right: the message says which count and why."""


def _shown(value: Any) -> str:
    """The value as the server sent it, escaped to one short printable line."""
    text = ascii(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


def _count(usage: Mapping[str, Any], key: str, most: int) -> int:
    if key not in usage:
        raise UsageProblem(f"the endpoint's usage lacks {key}")
    value = usage[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageProblem(f"the endpoint reported {key} {_shown(value)}, not an integer")
    if value < 0:
        raise UsageProblem(f"the endpoint reported {key} {_shown(value)}, a negative count")
    if value > most:
        raise UsageProblem(f"the endpoint reported {key} {_shown(value)}, more than the {most} possible")
    return value


def checked_usage(usage: Any, *, streamed_chunks: int, max_tokens: int, prompt: str) -> tuple[int, int]:
    """(prompt_tokens, completion_tokens) from the endpoint's usage object; UsageProblem when implausible."""
    if not isinstance(usage, Mapping):
        raise UsageProblem(f"the endpoint's usage is {_shown(usage)}, not an object")
    prompt_tokens = _count(usage, "prompt_tokens", len(prompt.encode("utf-8", "surrogatepass")) + TEMPLATE_TOKENS)
    completion_tokens = _count(usage, "completion_tokens", max_tokens)
    if completion_tokens < streamed_chunks:
        raise UsageProblem(f"the endpoint reported completion_tokens {completion_tokens}, fewer than the "
                           f"{streamed_chunks} content chunks it streamed")
    return prompt_tokens, completion_tokens
