"""serve.conformance's judges on recorded exchanges: no server, only what came back.

The answers are vLLM 0.32's shapes (vllm/entrypoints/openai/*/protocol.py); tests/fixtures/conformance/
holds exchanges recorded from the real PD pair and plain vLLM (tests/real), judged here again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from serve.conformance.exchange import Exchange
from serve.conformance.features import Context, Verdict, not_answered, passed
from serve.conformance.groups import basics, limits, logprobs, reference, sampling
from serve.conformance.outdir import redact
from serve.conformance.run import UnknownFeature, combine, select

CTX = Context("tiny", max_model_len=1024)
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "conformance"


def chat(label: str, content: str = "a b c", *, status: int = 200, usage: Any = None, n: int = 1,
         logprobs: Any = None, body: Any = None, **request: Any) -> Exchange:
    if body is None:
        body = {"object": "chat.completion", "choices": [
            {"index": i, "message": {"role": "assistant", "content": content}, "logprobs": logprobs,
             "finish_reason": "length"} for i in range(n)],
            "usage": usage or {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}}
    return Exchange(label, "chat", {"max_tokens": 3, **request}, status, body=body)


def stream(label: str, pieces: list[str], usage: Any = None, usage_last: bool = True) -> Exchange:
    chunks: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}
                                    for p in pieces]
    chunks[-1]["choices"][0]["finish_reason"] = "length"
    if usage is not None:
        tail = {"choices": [], "usage": usage}
        chunks = chunks + [tail] if usage_last else [tail] + chunks
    return Exchange(label, "chat", {}, 200, chunks=tuple(chunks), stream=True)


def refused(label: str, status: int, message: str = "no", error_object: bool = True) -> Exchange:
    body = {"error": {"message": message, "type": "BadRequestError", "param": None, "code": status}} \
        if error_object else message
    return Exchange(label, "chat", {}, status, body=body)


def test_a_clean_refusal_is_unsupported_and_anything_else_fails() -> None:
    assert not_answered(refused("x", 400), "n") .verdict == Verdict.UNSUPPORTED  # type: ignore[union-attr]
    assert not_answered(refused("x", 400, error_object=False), "n").verdict == Verdict.FAIL  # type: ignore[union-attr]
    assert not_answered(refused("x", 500), "n").verdict == Verdict.FAIL  # type: ignore[union-attr]
    assert not_answered(Exchange("x", "chat", {}, None, error="refused"), "n").verdict == Verdict.FAIL  # type: ignore[union-attr]
    assert not_answered(chat("x"), "n") is None


def test_usage_missing_from_the_stream_or_not_last_fails() -> None:
    good = {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
    plain = chat("plain")
    assert basics.judge_stream_usage([plain, stream("stream with include_usage", ["a", " b", " c"], good)],
                                     CTX).verdict == Verdict.PASS
    missing = basics.judge_stream_usage([plain, stream("stream with include_usage", ["a", " b", " c"])], CTX)
    assert missing.verdict == Verdict.FAIL and "no usage chunk" in missing.evidence
    first = basics.judge_stream_usage([plain, stream("stream with include_usage", ["a", " b", " c"], good,
                                                     usage_last=False)], CTX)
    assert first.verdict == Verdict.FAIL and "last chunk" in first.evidence


def test_usage_must_agree_with_the_text() -> None:
    too_many = stream("stream with include_usage", ["a", " b", " c", " d"],
                      {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13})
    assert "4 text chunks" in basics.judge_stream_usage([chat("plain"), too_many], CTX).evidence
    other_prompt = stream("stream with include_usage", ["a"], {"prompt_tokens": 9, "completion_tokens": 1,
                                                               "total_tokens": 10})
    assert "prompt_tokens 9 streamed but 10" in basics.judge_stream_usage([chat("plain"), other_prompt], CTX).evidence
    bad_total = chat("answer", usage={"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 12})
    assert basics.usage_problem(bad_total, 12) == "usage does not add up: prompt 10 + completion 3 != total 12"


def test_a_stop_string_the_server_ignored_fails() -> None:
    baseline = chat("baseline", "alpha beta gamma delta")
    stop, before = basics.pick_stop("alpha beta gamma delta") or ("", "")
    assert before and stop and "alpha beta gamma delta".startswith(before + stop)
    honoured = chat("with stop", before, body=None)
    honoured.body["choices"][0]["finish_reason"] = "stop"
    assert basics.judge_stop([baseline, honoured], CTX).verdict == Verdict.PASS
    ignored = chat("with stop", "alpha beta gamma delta")
    assert basics.judge_stop([baseline, ignored], CTX).verdict == Verdict.FAIL


def test_n2_one_choice_is_a_silent_wrong_answer_and_a_400_is_unsupported() -> None:
    one = sampling.judge_n2([chat("n=2", max_tokens=3)], CTX)
    assert one.verdict == Verdict.FAIL and "silent" in one.evidence
    two = chat("n=2", n=2, usage={"prompt_tokens": 10, "completion_tokens": 6, "total_tokens": 16})
    assert sampling.judge_n2([two], CTX).verdict == Verdict.PASS
    assert sampling.judge_n2([refused("n=2", 400, "n>1 is not supported")], CTX).verdict == Verdict.UNSUPPORTED


def test_cached_tokens_on_a_fresh_prompt_is_reported_with_the_upstream_issue() -> None:
    usage = {"prompt_tokens": 20, "completion_tokens": 3, "total_tokens": 23,
             "prompt_tokens_details": {"cached_tokens": 19}}
    outcome = basics.judge_cached([chat("fresh prompt", usage=usage), chat("same again", usage=usage)], CTX)
    assert outcome.verdict == Verdict.FAIL and "19 of 20" in outcome.evidence and "vllm#43370" in outcome.evidence
    usage["prompt_tokens_details"] = {"cached_tokens": 0}
    assert basics.judge_cached([chat("fresh prompt", usage=usage)], CTX).verdict == Verdict.PASS
    assert basics.judge_cached([chat("fresh prompt")], CTX).verdict == Verdict.SKIP


def _entry(token: str) -> dict[str, Any]:
    return {"token": token, "logprob": -1.0, "top_logprobs": [{"token": token, "logprob": -1.0}] * 3}


def test_logprobs_without_the_first_token_fail() -> None:
    whole = {"content": [_entry("a"), _entry(" b"), _entry(" c")]}
    assert logprobs.judge_chat([chat("logprobs", "a b c", logprobs=whole)], CTX).verdict == Verdict.PASS
    first_missing = {"content": [_entry(" b"), _entry(" c")]}
    outcome = logprobs.judge_chat([chat("logprobs", "a b c", logprobs=first_missing)], CTX)
    assert outcome.verdict == Verdict.FAIL and "first token" in outcome.evidence


def test_a_too_long_prompt_needs_an_openai_400() -> None:
    sizing = [chat(f"sizing {r}", usage={"prompt_tokens": 10 + r, "completion_tokens": 1, "total_tokens": 11 + r})
              for r in limits.SAMPLES]
    assert limits.judge_over([*sizing, refused("over", 400, "maximum context length")], CTX).verdict == Verdict.PASS
    assert limits.judge_over([*sizing, refused("over", 500, "EngineCore")], CTX).verdict == Verdict.FAIL
    assert limits.judge_over([*sizing, refused("over", 413)], CTX).verdict == Verdict.DIFFERS
    assert limits.judge_over([*sizing, chat("over")], CTX).verdict == Verdict.FAIL
    assert limits.judge_over([], Context("tiny")).verdict == Verdict.SKIP
    assert limits.repeats_for(110, [(8, 18), (24, 34)]) == 100


def test_the_first_divergence_is_found_and_shown() -> None:
    assert reference.first_divergence(["a", "b", "c"], ["a", "b", "c"]) is None
    assert reference.first_divergence(["a", "b", "x"], ["a", "b", "c"]) == 2
    assert reference.first_divergence(["a", "b"], ["a", "b", "c"]) == 2
    ours = chat("chat", logprobs={"content": [_entry("a"), _entry(" b"), _entry(" x")]})
    theirs = chat("chat", logprobs={"content": [_entry("a"), _entry(" b"), _entry(" c")]})
    outcome = reference.compare([ours], [theirs])
    assert outcome is not None and outcome.verdict == Verdict.DIFFERS
    assert outcome.data["first_divergence"] == 2 and "' x'" not in outcome.data["theirs"]


def test_a_feature_that_passes_but_answers_otherwise_than_the_reference_differs() -> None:
    feature = next(f for f in select(["chat.create"]))
    ours = [chat("answer", usage={"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14})]
    theirs = [chat("answer")]
    outcome = combine(feature, passed("ok"), passed("ok"), ours, theirs)
    assert outcome.verdict == Verdict.DIFFERS and "prompt_tokens 11, the reference's 10" in outcome.evidence
    tokens = next(f for f in select(["reference.tokens_t0"]))
    assert combine(tokens, passed("ok"), None, ours, None).verdict == Verdict.SKIP


def test_risky_features_run_last_and_alive_after_them() -> None:
    order = [f.id for f in select(None)]
    risky = [f.id for f in select(None) if f.risky]
    assert order[-1] == "server.alive" and order[-1 - len(risky):-1] == risky
    assert {"completions.echo", "completions.prompt_logprobs", "sampling.n2"} <= set(risky)
    with pytest.raises(UnknownFeature, match="'nope'"):
        select(["nope"])


def test_a_key_is_redacted_also_where_json_escaped_it() -> None:
    key = 'rpd_ab"cd\\ef1234'
    text = json.dumps({"message": f"bad key {key}"}) + f" raw {key}"
    assert key not in redact(text, [key]) and json.dumps(key)[1:-1] not in redact(text, [key])
    assert redact("EMPTY means nothing", ["EMPTY"]) == "EMPTY means nothing"


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.stem)
def test_recorded_real_exchanges_are_judged_as_they_were(path: Path) -> None:
    """Exchanges recorded by tests/real (the PD pair, plain vLLM, Ray Serve LLM) keep their verdicts."""
    from serve.conformance.groups import FEATURES  # the registry, only for this lookup

    recorded = json.loads(path.read_text())
    feature = next(f for f in FEATURES if f.id == recorded["feature"])
    exchanges = [Exchange.from_json(e) for e in recorded["exchanges"]]
    outcome = feature.judge(exchanges, Context("tiny", max_model_len=recorded.get("maxModelLen", 1024)))
    assert outcome.verdict.value == recorded["ownVerdict"], outcome.evidence


def _prompt_logprobs(values: list[tuple[int, float]]) -> Exchange:
    entries = [None] + [{str(t): {"logprob": v, "rank": 1, "decoded_token": "x"}} for t, v in values]
    return Exchange("prompt_logprobs", "completions", {}, 200, body={
        "choices": [{"index": 0, "text": "a", "prompt_logprobs": entries}],
        "usage": {"prompt_tokens": len(entries), "completion_tokens": 1, "total_tokens": len(entries) + 1}})


def test_prompt_logprobs_the_decoder_made_up_differ_from_the_reference() -> None:
    """vllm#50792: a decoder that got the prompt's KV never computed its logits."""
    ref = _prompt_logprobs([(5, -1.0), (6, -2.0)])
    assert logprobs.compare_prompt([_prompt_logprobs([(5, -1.0), (6, -2.004)])], [ref]) is None
    made_up = logprobs.compare_prompt([_prompt_logprobs([(5, -1.0), (6, -7.5)])], [ref])
    assert made_up is not None and made_up.verdict == Verdict.DIFFERS and made_up.data["first_divergence"] == 2
    positive = logprobs.judge_prompt_logprobs([_prompt_logprobs([(5, -1.0), (6, 3.0e9)])], CTX)
    assert positive.verdict == Verdict.FAIL and "prompt token 2" in positive.evidence


def test_structured_output_cut_by_whitespace_is_retried_and_said_plainly() -> None:
    from serve.conformance.groups import structured

    judge = structured.judge("json_schema")
    cut = chat("json_schema", '{"ok"\n\n\n\n')
    tight_ok = chat("json_schema without whitespace", '{"ok":true}')
    tight_ok.body["choices"][0]["finish_reason"] = "stop"
    assert judge([cut, tight_ok], CTX).verdict == Verdict.PASS
    refused_tight = refused("json_schema without whitespace", 400, "none are specified")
    outcome = judge([cut, refused_tight], CTX)
    assert outcome.verdict == Verdict.SKIP
    assert "cut at max_tokens" in outcome.evidence and "HTTP 400" in outcome.evidence
    wrong = chat("json_schema", '{"ok": 3}')
    wrong.body["choices"][0]["finish_reason"] = "stop"
    assert judge([wrong], CTX).verdict == Verdict.FAIL
    assert judge([refused("json_schema", 400, "no backend")], CTX).verdict == Verdict.UNSUPPORTED


def test_only_a_failure_beside_a_passing_reference_is_the_serving_paths() -> None:
    from serve.conformance.features import failed, skipped
    from serve.conformance.report import FeatureResult

    assert FeatureResult("x", "g", "t", failed("broken"), passed("ok")).pd_only
    assert not FeatureResult("x", "g", "t", skipped("no /metrics here"), passed("ok")).pd_only
    assert not FeatureResult("x", "g", "t", failed("broken"), failed("broken too")).pd_only
