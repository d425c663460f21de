"""limits and errors: a prompt near `max_model_len` is answered, one over it is refused with an
OpenAI-shaped 400 (not a 500), an unknown model is a 404, an invalid parameter a 400 with OpenAI's
error object.

vLLM refuses a prompt longer than the context with a 400 ("maximum context length ...",
vllm/entrypoints/openai/engine/serving.py's input validation); through PD the prefill leg sees it
first, and what the client gets is what the ingress makes of prefill's refusal. The long prompts are
sized from two short ones: the token count of a repeated word grows linearly with the repeats, and
the answers' `prompt_tokens` say where the prompts really landed (the judge reads them, not the plan).
"""

from __future__ import annotations

from typing import Optional, Sequence

from serve.conformance.client import Session
from serve.conformance.exchange import Exchange, count, error_object, said, usage
from serve.conformance.features import (
    Context,
    Feature,
    Judge,
    Outcome,
    Probe,
    by_label,
    differs,
    failed,
    not_answered,
    passed,
    skipped,
)
from serve.conformance.groups.basics import request

GROUP = "limits"
WORD = "decode "
SAMPLES = (8, 24)
ANSWER = 4
NEAR_MARGIN = 8  # tokens left free beside the answer: a template's tokens can shift the count a little
OVER_BY = 16
UNKNOWN_MODEL = "raypd-conformance-no-such-model"


def _prompt_of(ex: Optional[Exchange]) -> Optional[int]:
    return count((usage(ex) or {}).get("prompt_tokens")) if ex is not None and ex.answered else None


def repeats_for(tokens: int, samples: Sequence[tuple[int, int]]) -> Optional[int]:
    """How many repeats of WORD make a prompt of `tokens` tokens, from (repeats, prompt_tokens) samples."""
    (r1, t1), (r2, t2) = samples
    if r2 == r1 or t2 <= t1:
        return None
    per = (t2 - t1) / (r2 - r1)
    fixed = t1 - per * r1
    return max(1, int((tokens - fixed) / per))


def _calibrate(session: Session) -> tuple[list[Exchange], list[tuple[int, int]]]:
    exchanges, samples = [], []
    for repeats in SAMPLES:
        ex = session.chat(f"sizing {repeats}", **request("chat", WORD * repeats, max_tokens=1))
        exchanges.append(ex)
        tokens = _prompt_of(ex)
        if tokens is not None:
            samples.append((repeats, tokens))
    return exchanges, samples


def _probe_sized(label: str) -> Probe:
    """Two short prompts to size the words, then the `near` or `over` prompt. Each feature sizes
    its own (two 1-token answers): verify's api-parity asks only for `over`, and must not pay for
    a prompt of max_model_len tokens (a long prefill on a real model) it does not judge."""
    def probe(session: Session, ctx: Context) -> list[Exchange]:
        if ctx.max_model_len is None:
            return []
        exchanges, samples = _calibrate(session)
        if len(samples) != len(SAMPLES):
            return exchanges
        tokens = ctx.max_model_len - ANSWER - NEAR_MARGIN if label == "near" else ctx.max_model_len + OVER_BY
        repeats = repeats_for(tokens, samples)
        if repeats is not None:
            exchanges.append(session.chat(label, **request("chat", WORD * repeats, max_tokens=ANSWER)))
        return exchanges
    return probe


def _sizing_problem(exchanges: Sequence[Exchange], ctx: Context, label: str) -> Optional[Outcome]:
    if ctx.max_model_len is None:
        return skipped("the model card gives no max_model_len: nothing to size the prompt against")
    for repeats in SAMPLES:
        broken = not_answered(by_label(exchanges, f"sizing {repeats}"), f"a {repeats}-word prompt")
        if broken is not None:
            return failed(f"could not size the prompt: {broken.evidence}")
    if by_label(exchanges, label) is None:
        return failed("could not size the prompt: the prompt tokens do not grow with its words")
    return None


def judge_near(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
    problem = _sizing_problem(exchanges, ctx, "near")
    if problem is not None or ctx.max_model_len is None:
        return problem or skipped("no max_model_len")
    ex = by_label(exchanges, "near")
    broken = not_answered(ex, "a prompt near max_model_len")
    if broken is not None:
        return broken
    tokens = _prompt_of(ex) or 0
    if not ctx.max_model_len - 64 <= tokens <= ctx.max_model_len - ANSWER:
        return skipped(f"the prompt landed at {tokens} tokens, not near max_model_len {ctx.max_model_len} "
                       "(its size could not be planned): answered, but not the case to test")
    return passed(f"a {tokens}-token prompt (max_model_len {ctx.max_model_len}) answered {ANSWER} tokens")


def judge_over(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
    problem = _sizing_problem(exchanges, ctx, "over")
    if problem is not None or ctx.max_model_len is None:
        return problem or skipped("no max_model_len")
    ex = by_label(exchanges, "over")
    assert ex is not None
    if ex.status == 400 and error_object(ex) is not None:
        return passed(f"a prompt over max_model_len {ctx.max_model_len}: {said(ex)}")
    if ex.answered:
        return failed(f"a prompt of about {ctx.max_model_len + OVER_BY} tokens (max_model_len "
                      f"{ctx.max_model_len}) was answered 200 with prompt_tokens {_prompt_of(ex)}: cut silently?")
    if ex.status is not None and 400 <= ex.status < 500 and error_object(ex) is not None:
        return differs(f"refused, but with {said(ex)} where vLLM answers 400")
    return failed(f"a prompt over max_model_len: {said(ex)}; expected an OpenAI 400")


def probe_unknown_model(session: Session, ctx: Context) -> list[Exchange]:
    return [session.chat("unknown model", **request("chat", model=UNKNOWN_MODEL, max_tokens=2))]


def probe_invalid(session: Session, ctx: Context) -> list[Exchange]:
    return [session.chat("temperature -1", **request("chat", temperature=-1.0, max_tokens=2))]


def _judge_refusal(label: str, expected: int, what: str) -> Judge:
    def judge(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
        ex = by_label(exchanges, label)
        if ex is None:
            return failed("the request was never sent")
        error = error_object(ex)
        if ex.status == expected and error is not None:
            return passed(f"{what}: {said(ex)}")
        if ex.status == 200:
            return failed(f"{what}: answered 200, not refused")
        if ex.status is not None and 400 <= ex.status < 500 and error is not None:
            return differs(f"{what}: {said(ex)}; OpenAI and vLLM answer {expected}")
        if ex.status is not None and 400 <= ex.status < 500:
            return failed(f"{what}: {said(ex)}, without OpenAI's error object")
        return failed(f"{what}: {said(ex)}; expected {expected} with OpenAI's error object")
    return judge


FEATURES = [
    Feature("limits.near_max_model_len", GROUP, "a prompt near max_model_len is answered", _probe_sized("near"),
            judge_near),
    Feature("limits.over_max_model_len", GROUP, "a prompt over max_model_len: an OpenAI 400, not a 500",
            _probe_sized("over"), judge_over),
    Feature("errors.unknown_model", GROUP, "an unknown model: 404 with OpenAI's error object",
            probe_unknown_model, _judge_refusal("unknown model", 404, f"model {UNKNOWN_MODEL!r}")),
    Feature("errors.invalid_parameter", GROUP, "an invalid parameter: 400 with OpenAI's error object",
            probe_invalid, _judge_refusal("temperature -1", 400, "temperature: -1")),
]
