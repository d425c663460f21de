"""reference: at temperature 0 the endpoint's answer is the reference's, token by token.

The reference is the same weights served another way (plain vLLM, or a colocated deployment), so
at temperature 0 the first N tokens must be equal: vLLM's own PD test asserts the same of a PD pair
against its prefill engine (vllm tests/v1/kv_connector/nixl_integration/test_edge_cases.py). A KV
cache that arrived wrong (issue 31: a reused or freed block) changes the text of a 200 answer, and
this is where that shows. The tokens are read from `logprobs` (one entry per token, with its text);
where an endpoint gives no logprobs the texts are compared character by character instead.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from serve.conformance.client import Session
from serve.conformance.exchange import Exchange, choices, shorten, text
from serve.conformance.features import (
    Context,
    Feature,
    Outcome,
    by_label,
    differs,
    failed,
    not_answered,
    passed,
)
from serve.conformance.groups.basics import request

GROUP = "reference"
TOKENS = 32
AROUND = 3  # tokens shown either side of the first divergence
PROMPTS = {"chat": "The decode engine reads the cache that prefill wrote and goes on",
           "completions": "Prefill writes the cache, and then the decode engine"}


def probe(session: Session, ctx: Context) -> list[Exchange]:
    chat = session.chat("chat", **request("chat", PROMPTS["chat"], max_tokens=TOKENS, logprobs=True))
    plain = session.completion("completions", **request("completions", PROMPTS["completions"],
                                                         max_tokens=TOKENS, logprobs=0))
    return [chat, plain]


def judge(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
    for ex in exchanges:
        broken = not_answered(ex, f"temperature 0 {ex.label}")
        if broken is not None:
            return broken
    return passed(f"{len(exchanges)} temperature-0 answers of {TOKENS} tokens recorded")


def tokens(ex: Exchange) -> Optional[list[str]]:
    """The answer's tokens (their text) from its logprobs, or None when it has none."""
    found = choices(ex)
    block = found[0].get("logprobs") if found else None
    if not isinstance(block, Mapping):
        return None
    if isinstance(block.get("content"), list):
        return [str(e.get("token", "")) for e in block["content"] if isinstance(e, Mapping)]
    if isinstance(block.get("tokens"), list):
        return [str(t) for t in block["tokens"]]
    return None


def first_divergence(ours: Sequence[Any], theirs: Sequence[Any]) -> Optional[int]:
    """Index of the first unequal item, or len of the shorter when one is a prefix of the other."""
    for index, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        if a != b:
            return index
    return None if len(ours) == len(theirs) else min(len(ours), len(theirs))


def _around(items: Sequence[str], at: int) -> str:
    return shorten("".join(items[max(0, at - AROUND):at + AROUND + 1]), 80)


def compare_one(ours: Exchange, theirs: Exchange) -> Outcome:
    mine, ref = tokens(ours), tokens(theirs)
    unit = "token"
    if mine is None or ref is None:
        mine, ref, unit = list(text(ours) or ""), list(text(theirs) or ""), "character"
    at = first_divergence(mine, ref)
    if at is None:
        return passed(f"{ours.label}: the first {len(mine)} {unit}s equal the reference's", equal=len(mine))
    return differs(f"{ours.label}: {unit} {at} is the first that differs: ...{_around(mine, at)!r}... here, "
                   f"...{_around(ref, at)!r}... on the reference ({at} {unit}s equal before it)",
                   first_divergence=at, unit=unit, ours=_around(mine, at), theirs=_around(ref, at))


def compare(ours: Sequence[Exchange], theirs: Sequence[Exchange]) -> Optional[Outcome]:
    outcomes = []
    for ex in ours:
        other = by_label(theirs, ex.label)
        if other is None or not ex.answered or not other.answered:
            return failed(f"{ex.label}: no temperature-0 answer on "
                          f"{'the reference' if ex.answered else 'the endpoint'} to compare")
        outcomes.append(compare_one(ex, other))
    worst = next((o for o in outcomes if o.verdict.value != "pass"), None)
    if worst is not None:
        return worst
    return passed("; ".join(o.evidence for o in outcomes),
                  equal={ex.label: o.data.get("equal") for ex, o in zip(ours, outcomes, strict=False)})


FEATURES = [Feature("reference.tokens_t0", GROUP, f"temperature 0: the first {TOKENS} tokens equal the "
                    "reference's (chat and completions)", probe, judge, compare, needs_reference=True)]
