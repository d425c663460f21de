"""logprobs: chat `logprobs`/`top_logprobs` (streamed and not), completions `logprobs`, `echo`,
`echo` with logprobs, and vLLM's `prompt_logprobs`.

"Counts right, first token included": one logprob entry per completion token, each with the asked
number of alternatives. Through PD the first output token is sampled by decode (vllm#33289), so a
missing first entry would be the split's. `echo` and `prompt_logprobs` need the prompt's logprobs,
which a decoder that received the prompt's KV cache from prefill never computed: vllm#50792 reports
they crash the decoder. They are `risky`: run after everything else, and `server.alive` checks the
endpoint still answers afterwards. Shapes: vllm/entrypoints/openai/chat_completion/protocol.py
(`ChatCompletionLogProbs`), completion/protocol.py (`CompletionLogProbs`, `prompt_logprobs` on
each choice; `echo` turns prompt logprobs on).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from serve.conformance.client import Session
from serve.conformance.exchange import Exchange, choices, count, shorten, text, usage
from serve.conformance.features import (
    Context,
    Feature,
    Outcome,
    Probe,
    by_label,
    differs,
    failed,
    not_answered,
    passed,
)
from serve.conformance.groups.basics import PROMPT, request

GROUP = "logprobs"
TOP = 3


def _chat_entries(ex: Exchange) -> list[Mapping[str, Any]]:
    """Chat logprobs.content entries, across chunks when streamed."""
    if ex.stream:
        blocks = [c.get("logprobs") for chunk in ex.chunks for c in (chunk.get("choices") or [])
                  if isinstance(c, Mapping)]
    else:
        blocks = [c.get("logprobs") for c in choices(ex)[:1]]
    entries: list[Mapping[str, Any]] = []
    for block in blocks:
        content = block.get("content") if isinstance(block, Mapping) else None
        entries.extend(e for e in (content or []) if isinstance(e, Mapping))
    return entries


def probe_chat(stream: bool) -> Probe:
    def probe(session: Session, ctx: Context) -> list[Exchange]:
        extra: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
        return [session.chat("logprobs", **request("chat", logprobs=True, top_logprobs=TOP, **extra))]
    return probe


def judge_chat(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
    ex = by_label(exchanges, "logprobs")
    broken = not_answered(ex, f"logprobs: true, top_logprobs: {TOP}")
    if broken is not None or ex is None:
        return broken or failed("no answer")
    entries = _chat_entries(ex)
    completion = count((usage(ex) or {}).get("completion_tokens"))
    if not entries:
        return failed("logprobs were asked for, none came back")
    if completion is not None and len(entries) != completion:
        first = "the first token's is missing: " if len(entries) == completion - 1 else ""
        return failed(f"{first}{len(entries)} logprob entries for {completion} completion tokens")
    short = [i for i, e in enumerate(entries) if len(e.get("top_logprobs") or []) != TOP]
    if short:
        return failed(f"entry {short[0]} has {len(entries[short[0]].get('top_logprobs') or [])} "
                      f"top_logprobs, not {TOP}")
    answer, first = text(ex) or "", str(entries[0].get("token", ""))
    if first and not answer.startswith(first):
        return failed(f"the first entry's token {first!r} is not where the text starts ({shorten(answer, 40)!r})")
    return passed(f"{len(entries)} entries for {completion} tokens, {TOP} alternatives each, the first "
                  f"token {first!r} included")


def _completion_logprobs(ex: Exchange) -> Mapping[str, Any]:
    found = choices(ex)
    block = found[0].get("logprobs") if found else None
    return block if isinstance(block, Mapping) else {}


def probe_completions(session: Session, ctx: Context) -> list[Exchange]:
    return [session.completion("logprobs", **request("completions", logprobs=TOP))]


def judge_completions(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
    ex = by_label(exchanges, "logprobs")
    broken = not_answered(ex, f"completions logprobs: {TOP}")
    if broken is not None or ex is None:
        return broken or failed("no answer")
    block = _completion_logprobs(ex)
    tokens, top = block.get("tokens") or [], block.get("top_logprobs") or []
    completion = count((usage(ex) or {}).get("completion_tokens"))
    if not tokens:
        return failed("logprobs were asked for, none came back")
    if len(tokens) != completion or len(top) != len(tokens):
        return failed(f"{len(tokens)} tokens and {len(top)} top_logprobs for {completion} completion tokens")
    if any(not isinstance(t, Mapping) or len(t) < min(TOP, 1) for t in top):
        return failed("a token without its top_logprobs")
    if "".join(str(t) for t in tokens) != (text(ex) or ""):
        return failed(f"the tokens do not spell the text: {shorten(''.join(map(str, tokens)), 40)!r}")
    return passed(f"{len(tokens)} tokens with logprobs, spelling the text")


def probe_echo(with_logprobs: bool) -> Probe:
    def probe(session: Session, ctx: Context) -> list[Exchange]:
        extra: dict[str, Any] = {"logprobs": 1} if with_logprobs else {}
        return [session.completion("echo", **request("completions", echo=True, **extra))]
    return probe


def judge_echo(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
    ex = by_label(exchanges, "echo")
    with_logprobs = bool(ex is not None and ex.request.get("logprobs"))
    broken = not_answered(ex, "echo: true" + (", logprobs: 1" if with_logprobs else ""))
    if broken is not None or ex is None:
        return broken or failed("no answer")
    answer = text(ex) or ""
    if not answer.startswith(PROMPT) or len(answer) <= len(PROMPT):
        return failed(f"echo: the text does not start with the prompt and go on: {shorten(answer, 80)!r}")
    if not with_logprobs:
        return passed("the text is the prompt followed by the answer")
    u = usage(ex) or {}
    prompt, completion = count(u.get("prompt_tokens")), count(u.get("completion_tokens"))
    tokens = _completion_logprobs(ex).get("token_logprobs") or []
    if prompt is None or completion is None or len(tokens) != prompt + completion:
        return failed(f"{len(tokens)} token logprobs for {prompt} prompt + {completion} completion tokens")
    return passed(f"prompt and answer with logprobs: {len(tokens)} entries")


def probe_prompt_logprobs(session: Session, ctx: Context) -> list[Exchange]:
    params = request("completions")
    params["extra_body"] = {**params["extra_body"], "prompt_logprobs": 1}
    return [session.completion("prompt_logprobs", **params)]


def judge_prompt_logprobs(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
    ex = by_label(exchanges, "prompt_logprobs")
    broken = not_answered(ex, "prompt_logprobs: 1")
    if broken is not None or ex is None:
        return broken or failed("no answer")
    found = choices(ex)
    entries: Optional[list[Any]] = found[0].get("prompt_logprobs") if found else None
    prompt = count((usage(ex) or {}).get("prompt_tokens"))
    if not isinstance(entries, list):
        return failed("prompt_logprobs asked for, the answer has none (silently dropped)")
    if len(entries) != prompt:
        return failed(f"{len(entries)} prompt_logprobs entries for {prompt} prompt tokens")
    impossible = [i for i, e in enumerate(entries) if isinstance(e, Mapping) and any(
        not isinstance(v, Mapping) or not isinstance(v.get("logprob"), (int, float)) or not v["logprob"] <= 0
        for v in e.values())]
    if impossible:
        return failed(f"prompt token {impossible[0]}'s logprob is not a log-probability (<= 0): "
                      f"{shorten(entries[impossible[0]], 80)}")
    return passed(f"{len(entries)} prompt_logprobs entries, one per prompt token")


TOLERANCE = 0.01  # the same weights in float32 on the same kind of CPU: equal up to summation order


def _prompt_values(ex: Exchange) -> Optional[list[Any]]:
    """A prompt's logprobs as comparable values: (token id, logprob) per position, None first."""
    found = choices(ex)
    if not found:
        return None
    if ex.label == "prompt_logprobs":
        entries = found[0].get("prompt_logprobs")
        if not isinstance(entries, list):
            return None
        values: list[Any] = []
        for entry in entries:
            if not isinstance(entry, Mapping) or not entry:
                values.append(None)
                continue
            token, info = sorted(entry.items())[0]
            values.append((token, info.get("logprob") if isinstance(info, Mapping) else info))
        return values
    block = _completion_logprobs(ex)
    prompt = count((usage(ex) or {}).get("prompt_tokens")) or 0
    tokens, logprobs_ = block.get("tokens") or [], block.get("token_logprobs") or []
    return [(t, lp) for t, lp in zip(tokens[:prompt], logprobs_[:prompt], strict=False)]


def _close(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    (ta, la), (tb, lb) = a, b
    if ta != tb:
        return False
    if isinstance(la, (int, float)) and isinstance(lb, (int, float)):
        return abs(la - lb) <= TOLERANCE
    return la == lb


def compare_prompt(ours: Sequence[Exchange], theirs: Sequence[Exchange]) -> Optional[Outcome]:
    """differs when the prompt's logprobs are not the reference's: a decoder that received the
    prompt's KV cache never computed its logits (vllm#50792), so values it returns are made up."""
    for ex in ours:
        other = by_label(theirs, ex.label)
        if other is None or not other.answered:
            continue
        mine, ref = _prompt_values(ex), _prompt_values(other)
        if mine is None or ref is None:
            continue
        at = next((i for i, (a, b) in enumerate(zip(mine, ref, strict=False)) if not _close(a, b)), None)
        if at is not None or len(mine) != len(ref):
            at = at if at is not None else min(len(mine), len(ref))
            return differs(f"the prompt's logprobs differ from the reference's at prompt token {at}: "
                           f"{shorten(mine[at] if at < len(mine) else None, 60)} here, "
                           f"{shorten(ref[at] if at < len(ref) else None, 60)} on the reference: values "
                           "the decoder did not compute (vllm#50792)", first_divergence=at)
    return None


FEATURES = [
    Feature("chat.logprobs", GROUP, f"chat logprobs with top_logprobs {TOP}: one entry per token, the "
            "first included", probe_chat(False), judge_chat),
    Feature("chat.logprobs_stream", GROUP, "chat logprobs streamed: one entry per token across the chunks",
            probe_chat(True), judge_chat),
    Feature("completions.logprobs", GROUP, f"completions logprobs {TOP}: one entry per token",
            probe_completions, judge_completions),
    Feature("completions.echo", GROUP, "completions echo: the prompt, then the answer", probe_echo(False),
            judge_echo, risky=True),
    Feature("completions.echo_logprobs", GROUP, "completions echo with logprobs: prompt and answer tokens "
            "(the prompt's equal to the reference's)", probe_echo(True), judge_echo, compare_prompt, risky=True),
    Feature("completions.prompt_logprobs", GROUP, "vLLM prompt_logprobs: one entry per prompt token (equal to "
            "the reference's)", probe_prompt_logprobs, judge_prompt_logprobs, compare_prompt, risky=True),
]
