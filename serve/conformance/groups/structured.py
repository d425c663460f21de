"""structured output: `response_format` `json_object` and `json_schema` (the answer parses, and
matches the schema). vLLM turns both into guided decoding (its structured-outputs backend, xgrammar
by default); the prefill copy carries `response_format` too (ray.llm pd_server.py copies the
request), but only decode's tokens reach the client. Whether guided decoding runs at all on a CPU
build is one of the things this finds out: an engine without a backend answers 400 (unsupported).

The schema is tiny and closed, and vLLM's `structured_outputs.disable_any_whitespace` is set (a vLLM
field, in `extra_body`; vllm/sampling_params.py `StructuredOutputsParams`), so a random model under
the grammar still finishes within the token budget; an answer cut at `max_tokens` (finish_reason
length) is not evidence against the server and is reported as `skip`, with the text.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

import jsonschema

from serve.conformance.client import Session
from serve.conformance.exchange import Exchange, finish_reason, shorten, text
from serve.conformance.features import (
    Context,
    Feature,
    Judge,
    Outcome,
    Probe,
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
        # no ignore_eos: the grammar ends the answer; and no free whitespace, which a random model
        # otherwise emits until max_tokens (seen on vLLM 0.32: '{"ok"' then 59 newlines)
        params["extra_body"] = {"structured_outputs": {"disable_any_whitespace": True}}
        return [session.chat(kind, **params)]
    return send


def judge(kind: str) -> Judge:
    def verdict(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
        ex = by_label(exchanges, kind)
        broken = not_answered(ex, f"response_format {kind}")
        if broken is not None or ex is None:
            return broken or failed("no answer")
        answer = text(ex) or ""
        try:
            document = json.loads(answer)
        except ValueError:
            if finish_reason(ex) == "length":
                return skipped(f"the answer was cut at max_tokens {BUDGET} before the JSON closed: "
                               f"{shorten(answer, 80)!r}")
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
    return verdict


FEATURES = [
    Feature("structured.json_object", GROUP, "response_format json_object: the answer is a JSON object",
            probe("json_object"), judge("json_object")),
    Feature("structured.json_schema", GROUP, "response_format json_schema: the answer matches the schema",
            probe("json_schema"), judge("json_schema")),
]
