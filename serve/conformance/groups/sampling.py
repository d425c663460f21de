"""sampling: `temperature: 0` answers the same text twice, a `seed` repeats a sampled answer, `n: 2`
gives two choices.

Through PD, prefill samples one token that is thrown away and decode samples every token the
client sees (vllm#33289: decode recomputes the last prompt token), so determinism is decode's.
`n > 1` is not supported by vLLM's PD connector (vLLM PR #38900, open when this was written):
what the endpoint does with it is the point of the test. A clean 400 is `unsupported`; one choice
where two were asked for is a silent wrong answer (`fail`). It runs with the risky features, last.
"""

from __future__ import annotations

from typing import Sequence

from serve.conformance.client import Session
from serve.conformance.exchange import Exchange, choices, count, shorten, text, usage
from serve.conformance.features import (
    Context,
    Feature,
    Judge,
    Outcome,
    by_label,
    failed,
    not_answered,
    passed,
)
from serve.conformance.groups.basics import request

GROUP = "sampling"
LONG = 24
SEED = 1234


def probe_temperature0(session: Session, ctx: Context) -> list[Exchange]:
    return [session.chat(label, **request("chat", max_tokens=LONG)) for label in ("first", "second")]


def probe_seed(session: Session, ctx: Context) -> list[Exchange]:
    return [session.chat(label, **request("chat", max_tokens=LONG, temperature=1.0, seed=SEED))
            for label in ("first", "second")]


def _judge_same(what: str) -> Judge:
    def judge(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
        first, second = by_label(exchanges, "first"), by_label(exchanges, "second")
        for ex, which in ((first, "first"), (second, "second")):
            broken = not_answered(ex, f"{what} ({which})")
            if broken is not None:
                return broken
        assert first is not None and second is not None
        one, two = text(first) or "", text(second) or ""
        if one != two:
            at = next((i for i, (a, b) in enumerate(zip(one, two, strict=False)) if a != b), min(len(one), len(two)))
            return failed(f"{what}: two answers differ from character {at}: "
                          f"{shorten(one[max(0, at - 20):at + 20])!r} vs {shorten(two[max(0, at - 20):at + 20])!r}")
        return passed(f"{what}: the same {len(one)} characters twice: {shorten(one, 60)!r}")
    return judge


def probe_n2(session: Session, ctx: Context) -> list[Exchange]:
    return [session.chat("n=2", **request("chat", n=2, temperature=1.0, seed=SEED))]


def judge_n2(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
    ex = by_label(exchanges, "n=2")
    broken = not_answered(ex, "n: 2")
    if broken is not None or ex is None:
        return broken or failed("no answer")
    found = choices(ex)
    indexes = sorted(int(c["index"]) for c in found if isinstance(c.get("index"), int))
    if indexes != [0, 1]:
        return failed(f"n: 2 answered 200 with {len(found)} choice(s) (indexes {indexes}): a silent wrong "
                      "answer; send two requests instead")
    completion = count((usage(ex) or {}).get("completion_tokens"))
    max_tokens = int(ex.request.get("max_tokens") or 0)
    if completion != 2 * max_tokens:
        return failed(f"n: 2 gave two choices but completion_tokens {completion}, not 2 x {max_tokens}")
    return passed(f"n: 2 gave two choices, {completion} completion tokens")


FEATURES = [
    Feature("sampling.temperature0", GROUP, "temperature 0: the same text twice", probe_temperature0,
            _judge_same("temperature 0")),
    Feature("sampling.seed", GROUP, "seed: the same sampled text twice", probe_seed,
            _judge_same(f"temperature 1, seed {SEED}")),
    Feature("sampling.n2", GROUP, "n: 2 gives two choices", probe_n2, judge_n2, risky=True),
]
