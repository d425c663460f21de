"""chat and completions: an answer, streamed and not; the usage chunk; max_tokens; stop.

These are the two routes Ray Serve LLM sends through the prefill/decode split: decode sends prefill a
copy with `max_tokens = max_completion_tokens = 1`, `stream: false` and `stream_options` cleared
(ray.llm `serving_patterns/prefill_decode/pd_server.py`), then answers the client itself, so every
field the client set must still shape decode's answer. Requests carry vLLM's `ignore_eos` (in
`extra_body`), so a random or chatty model still yields exactly `max_tokens` and the counts are exact.

Usage is judged against the text: `total = prompt + completion`; with `finish_reason: length` the
completion is exactly `max_tokens`; a stream's text chunks are at most its completion tokens (vLLM
skips a token whose text is empty, e.g. half of a multi-byte character); the streamed prompt count
equals the non-streamed one for the same messages, and with a reference, the reference's.
"""

from __future__ import annotations

import secrets
from typing import Any, Mapping, Optional, Sequence

from serve.conformance.client import Session
from serve.conformance.exchange import (
    Exchange,
    content_chunks,
    count,
    finish_reason,
    shorten,
    text,
    usage,
    usage_chunk_last,
)
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

PROMPT = "Prefill reads the prompt and decode writes the answer, one token at a time"
MAX_TOKENS = 12
SHORT = 5
EXACT = {"ignore_eos": True}
STOP_SEED = 4321


def request(route: str, prompt: str = PROMPT, **params: Any) -> dict[str, Any]:
    """The route's request for `prompt` at temperature 0, exactly max_tokens long (ignore_eos)."""
    body: dict[str, Any] = {"temperature": 0, "max_tokens": MAX_TOKENS, "extra_body": dict(EXACT), **params}
    if route == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


def send(session: Session, route: str, label: str, **params: Any) -> Exchange:
    return (session.chat if route == "chat" else session.completion)(label, **params)


def asked(ex: Exchange) -> Optional[int]:
    """The max_tokens (or max_completion_tokens) the request asked for, as the judge reads it."""
    return count(ex.request.get("max_tokens")) or count(ex.request.get("max_completion_tokens"))


def usage_problem(ex: Exchange, max_tokens: Optional[int]) -> Optional[str]:
    """What is wrong with an answer's usage against its own text, or None."""
    found = usage(ex)
    if found is None:
        return "no usage in the answer"
    prompt, completion, total = (count(found.get(k)) for k in ("prompt_tokens", "completion_tokens", "total_tokens"))
    if prompt is None or completion is None or total is None:
        return f"usage is not three integer counts: {shorten(dict(found))}"
    if prompt < 1 or total != prompt + completion:
        return f"usage does not add up: prompt {prompt} + completion {completion} != total {total}"
    if max_tokens is not None and completion > max_tokens:
        return f"completion_tokens {completion} is more than max_tokens {max_tokens}"
    if max_tokens is not None and finish_reason(ex) == "length" and completion != max_tokens:
        return f"finish_reason length but completion_tokens {completion}, not max_tokens {max_tokens}"
    if ex.stream and content_chunks(ex) > completion:
        return f"{content_chunks(ex)} text chunks streamed but completion_tokens says {completion}"
    return None


def _answer_problem(ex: Exchange) -> Optional[str]:
    if text(ex) is None:
        return "no text in the answer"
    if finish_reason(ex) not in ("length", "stop"):
        return f"finish_reason {finish_reason(ex)!r}, not length or stop"
    return None


def judge_answer(label: str, what: str) -> Judge:
    def judge(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
        ex = by_label(exchanges, label)
        broken = not_answered(ex, what)
        if broken is not None or ex is None:
            return broken or failed("no answer")
        problem = _answer_problem(ex) or (None if ex.stream else usage_problem(ex, asked(ex)))
        if problem:
            return failed(f"{what}: {problem}")
        found = usage(ex) or {}
        return passed(f"{what}: {finish_reason(ex)}, {found.get('completion_tokens', '?')} token(s): "
                      f"{shorten(text(ex), 60)!r}", prompt_tokens=found.get("prompt_tokens"))
    return judge


def judge_stream_usage(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
    plain, streamed = by_label(exchanges, "plain"), by_label(exchanges, "stream with include_usage")
    broken = not_answered(streamed, "streamed with stream_options.include_usage")
    if broken is not None or streamed is None:
        return broken or failed("no answer")
    if usage(streamed) is None:
        return failed(f"no usage chunk in {len(streamed.chunks)} streamed chunk(s) although "
                      "stream_options.include_usage was set")
    if not usage_chunk_last(streamed):
        return failed("the usage came, but not as the last chunk with empty choices (OpenAI's shape)")
    problem = usage_problem(streamed, asked(streamed))
    if problem:
        return failed(f"streamed usage: {problem}")
    streamed_prompt = count((usage(streamed) or {}).get("prompt_tokens"))
    plain_prompt = count((usage(plain) or {}).get("prompt_tokens")) if plain is not None and plain.answered else None
    if plain_prompt is not None and plain_prompt != streamed_prompt:
        return failed(f"prompt_tokens {streamed_prompt} streamed but {plain_prompt} for the same request "
                      "not streamed")
    found = usage(streamed) or {}
    return passed(f"final usage chunk: prompt {found.get('prompt_tokens')}, completion "
                  f"{found.get('completion_tokens')} ({content_chunks(streamed)} text chunks)",
                  prompt_tokens=streamed_prompt)


def compare_prompt_tokens(ours: Sequence[Exchange], theirs: Sequence[Exchange]) -> Optional[Outcome]:
    """differs when the same request's prompt_tokens are not the reference's."""
    for ex in ours:
        other = by_label(theirs, ex.label)
        if other is None or not ex.answered or not other.answered:
            continue
        mine, ref = (count((usage(e) or {}).get("prompt_tokens")) for e in (ex, other))
        if mine is not None and ref is not None and mine != ref:
            return differs(f"{ex.label}: prompt_tokens {mine}, the reference's {ref}")
    return None


def _probe_answer(route: str, stream: bool) -> Probe:
    label = "stream" if stream else "answer"

    def probe(session: Session, ctx: Context) -> list[Exchange]:
        return [send(session, route, label, **request(route, stream=stream))]
    return probe


def _probe_stream_usage(route: str) -> Probe:
    def probe(session: Session, ctx: Context) -> list[Exchange]:
        return [send(session, route, "plain", **request(route)),
                send(session, route, "stream with include_usage",
                     **request(route, stream=True, stream_options={"include_usage": True}))]
    return probe


def _probe_limit(route: str, field: str) -> Probe:
    def probe(session: Session, ctx: Context) -> list[Exchange]:
        params = request(route)
        del params["max_tokens"]
        return [send(session, route, field, **params, **{field: SHORT})]
    return probe


def _judge_limit(field: str) -> Judge:
    def judge(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
        ex = by_label(exchanges, field)
        broken = not_answered(ex, f"{field}: {SHORT}")
        if broken is not None or ex is None:
            return broken or failed("no answer")
        completion = count((usage(ex) or {}).get("completion_tokens"))
        if completion != SHORT or finish_reason(ex) != "length":
            return failed(f"{field}: {SHORT} (with ignore_eos) answered {completion} token(s), "
                          f"finish_reason {finish_reason(ex)!r}")
        return passed(f"{field}: {SHORT} gave exactly {SHORT} tokens, finish_reason length")
    return judge


def pick_stop(baseline: str) -> Optional[tuple[str, str]]:
    """A stop string from the middle of an answer, and the text expected before it: the answer
    up to the stop's first occurrence (a stop must not be at the very start). Only printable ASCII
    without spaces: a random model's text has replacement characters and runs of one letter."""
    for start in range(max(1, len(baseline) // 3), len(baseline) - 2):
        stop = baseline[start:start + 3]
        where = baseline.find(stop)
        if all(0x21 <= ord(c) <= 0x7E for c in stop) and where > 0 and baseline[:where].strip():
            return stop, baseline[:where]
    return None


def _probe_stop(route: str) -> Probe:
    def probe(session: Session, ctx: Context) -> list[Exchange]:
        # seeded sampling, not temperature 0: a tiny random model's greedy answer is one letter repeated
        sampled: dict[str, Any] = {"max_tokens": 24, "temperature": 1.0, "seed": STOP_SEED}
        baseline = send(session, route, "baseline", **request(route, **sampled))
        found = pick_stop(text(baseline) or "") if baseline.answered else None
        if found is None:
            return [baseline]
        return [baseline, send(session, route, "with stop", **request(route, **sampled, stop=[found[0]]))]
    return probe


def judge_stop(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
    baseline, stopped = by_label(exchanges, "baseline"), by_label(exchanges, "with stop")
    broken = not_answered(baseline, "the answer without stop")
    if broken is not None or baseline is None:
        return broken or failed("no answer")
    found = pick_stop(text(baseline) or "")
    if found is None or stopped is None:
        return skipped(f"no stop string to test in the answer {shorten(text(baseline), 60)!r}")
    stop, expected = found
    broken = not_answered(stopped, f"stop {stop!r}")
    if broken is not None:
        return broken
    got = text(stopped) or ""
    if stop in got:
        return failed(f"stop {stop!r} ignored: the answer goes on past it: {shorten(got, 80)!r}")
    if got != expected:
        return failed(f"stop {stop!r}: expected the text before it, {shorten(expected, 60)!r}, got "
                      f"{shorten(got, 60)!r} (finish_reason {finish_reason(stopped)!r})")
    if finish_reason(stopped) != "stop":
        return failed(f"stop {stop!r}: the text ends before it but finish_reason is {finish_reason(stopped)!r}")
    return passed(f"stop {stop!r}: the answer ends just before it, finish_reason stop")


def probe_cached(session: Session, ctx: Context) -> list[Exchange]:
    fresh = f"{PROMPT} ({secrets.token_hex(6)})"  # a prompt no cache has seen
    return [session.chat(label, **request("chat", fresh)) for label in ("fresh prompt", "same again")]


def _cached(ex: Optional[Exchange]) -> tuple[Optional[int], Optional[int]]:
    found = usage(ex) if ex is not None else None
    details = (found or {}).get("prompt_tokens_details")
    cached = count(details.get("cached_tokens")) if isinstance(details, Mapping) else None
    return count((found or {}).get("prompt_tokens")), cached


def judge_cached(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
    first = by_label(exchanges, "fresh prompt")
    broken = not_answered(first, "a fresh prompt")
    if broken is not None or first is None:
        return broken or failed("no answer")
    prompt, cached = _cached(first)
    if cached is None:
        return skipped("usage has no prompt_tokens_details.cached_tokens (vLLM reports it with "
                       "--enable-prompt-tokens-details)")
    if cached > 0:
        return failed(f"a prompt never sent before reports {cached} of {prompt} prompt tokens cached: the KV "
                      "received from prefill counted as a cache hit (vllm#43370)", cached=cached, prompt=prompt)
    again_prompt, again = _cached(by_label(exchanges, "same again"))
    return passed(f"a fresh prompt reports 0 of {prompt} cached; the same prompt again {again} of {again_prompt}",
                  cached=again, prompt=again_prompt)


def _features(route: str, name: str) -> list[Feature]:
    what = "POST /v1/chat/completions" if route == "chat" else "POST /v1/completions"
    return [
        Feature(f"{name}.create", name, f"{what}, not streamed: text, finish_reason, usage adds up",
                _probe_answer(route, False), judge_answer("answer", what), compare_prompt_tokens),
        Feature(f"{name}.stream", name, f"{what} streamed: text chunks then finish_reason",
                _probe_answer(route, True), judge_answer("stream", f"{what} streamed")),
        Feature(f"{name}.stream_usage", name, "stream_options.include_usage: a final usage chunk that "
                "matches the text", _probe_stream_usage(route), judge_stream_usage, compare_prompt_tokens),
        Feature(f"{name}.max_tokens", name, "max_tokens bounds the answer exactly",
                _probe_limit(route, "max_tokens"), _judge_limit("max_tokens")),
        Feature(f"{name}.stop", name, "stop: the text ends before the stop string",
                _probe_stop(route), judge_stop),
    ]


FEATURES = [
    *_features("chat", "chat"),
    Feature("chat.max_completion_tokens", "chat", "max_completion_tokens bounds the answer exactly",
            _probe_limit("chat", "max_completion_tokens"), _judge_limit("max_completion_tokens")),
    Feature("chat.cached_tokens", "chat", "usage.prompt_tokens_details.cached_tokens: 0 for a prompt never "
            "seen before", probe_cached, judge_cached),
    *_features("completions", "completions"),
]
