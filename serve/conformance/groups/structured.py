"""structured output: `response_format` `json_object` and `json_schema` (the answer parses, and
matches the schema). vLLM turns both into guided decoding (its structured-outputs backend, xgrammar
by default); the prefill copy carries `response_format` too (ray.llm pd_server.py copies the
request), but only decode's tokens reach the client. Whether guided decoding runs at all on a CPU
build is one of the things this finds out: an engine without a backend answers 400 (unsupported).

The request is what a client sends: `response_format` alone. The schema is tiny and closed, but a
random model under the grammar may still write whitespace until `max_tokens`; then the request is
sent again with vLLM's `structured_outputs.disable_any_whitespace` (a vLLM field, in `extra_body`;
vllm/sampling_params.py `StructuredOutputsParams`). An answer cut at `max_tokens` (finish_reason
length) both times is not evidence against the server: `skip`, with the texts and what each said.
"""

from __future__ import annotations

import json
from typing import Any, Optional, Sequence

import jsonschema

from serve.conformance.client import Session
from serve.conformance.exchange import Exchange, finish_reason, said, shorten, text
from serve.conformance.features import (
    Context,
    Feature,
    Judge,
    Outcome,
    Probe,
    Verdict,
    by_label,
    failed,
    not_answered,
    passed,
    skipped,
)
from serve.conformance.groups.basics import request

GROUP = "structured"
BUDGET = 64
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
          "additionalProperties": False}
FORMATS: dict[str, dict[str, Any]] = {
    "json_object": {"type": "json_object"},
    "json_schema": {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True}},
}
PROMPT = 'Answer in JSON: {"ok": true} or {"ok": false}. Is the cache on decode?'


def probe(kind: str) -> Probe:
    def send(session: Session, ctx: Context) -> list[Exchange]:
        params = request("chat", PROMPT, max_tokens=BUDGET, response_format=FORMATS[kind])
        params["extra_body"] = {}  # no ignore_eos: the grammar ends the answer
        plain = session.chat(kind, **params)
        if not (plain.answered and finish_reason(plain) == "length" and _parsed(plain) is None):
            return [plain]
        # cut at max_tokens: a random model under the grammar can write whitespace forever (seen on
        # vLLM 0.32: '{"ok"' then 59 newlines); vLLM's own field forbids it, for a second try
        params["extra_body"] = {"structured_outputs": {"disable_any_whitespace": True}}
        return [plain, session.chat(f"{kind} without whitespace", **params)]
    return send


def _parsed(ex: Exchange) -> Any:
    try:
        return json.loads(text(ex) or "")
    except ValueError:
        return None


def _verdict(kind: str, ex: Exchange) -> Optional[Outcome]:
    """The verdict on one answer, or None when it was cut at max_tokens before the JSON closed."""
    answer = text(ex) or ""
    document = _parsed(ex)
    if document is None:
        if finish_reason(ex) == "length":
            return None
        return failed(f"response_format {kind}: the answer is not JSON: {shorten(answer, 80)!r}")
    if kind == "json_object" and not isinstance(document, dict):
        return failed(f"json_object: the answer is JSON but not an object: {shorten(answer, 80)!r}")
    if kind == "json_schema":
        try:
            jsonschema.validate(document, SCHEMA)
        except jsonschema.ValidationError as exc:
            return failed(f"json_schema: {shorten(answer, 60)!r} does not match the schema: {exc.message}")
    return passed(f"response_format {kind}: {shorten(answer, 60)!r} parses"
                  + (" and matches the schema" if kind == "json_schema" else ""))


def judge(kind: str) -> Judge:
    def verdict(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
        plain, tight = by_label(exchanges, kind), by_label(exchanges, f"{kind} without whitespace")
        broken = not_answered(plain, f"response_format {kind}")
        if broken is not None or plain is None:
            return broken or failed("no answer")
        outcome = _verdict(kind, plain)
        if outcome is not None:
            return outcome
        cut = (f"the answer was cut at max_tokens {BUDGET} before the JSON closed: "
               f"{shorten(text(plain), 60)!r} (guided decoding ran: the text follows the grammar)")
        if tight is None:
            return skipped(cut)
        if not tight.answered:
            return skipped(f"{cut}; with vLLM's structured_outputs.disable_any_whitespace: {said(tight)}")
        second = _verdict(kind, tight)
        if second is None:
            return skipped(f"{cut}; with disable_any_whitespace cut too: {shorten(text(tight), 60)!r}")
        if second.verdict == Verdict.PASS:
            return passed(f"{second.evidence} (with vLLM's disable_any_whitespace; without it {cut})")
        return second
    return verdict


FEATURES = [
    Feature("structured.json_object", GROUP, "response_format json_object: the answer is a JSON object",
            probe("json_object"), judge("json_object")),
    Feature("structured.json_schema", GROUP, "response_format json_schema: the answer matches the schema",
            probe("json_schema"), judge("json_schema")),
]
