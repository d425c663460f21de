"""tools: a named `tool_choice` (the answer is a call of that function, its arguments valid against
its parameters) and `tool_choice: auto`.

vLLM answers a named tool choice with guided decoding of the function's parameters, whatever the
chat template does with `tools`; `auto` needs the server started with `--enable-auto-tool-choice`
and a `--tool-call-parser` that fits the model's chat template, and vLLM refuses it with a 400
saying so otherwise (vllm/entrypoints/openai/chat_completion/serving.py). That refusal is about
the model and how its server was started, not about the OpenAI surface or PD, so it is a `skip`
with vLLM's reason, not `unsupported`.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

import jsonschema

from serve.conformance.client import Session
from serve.conformance.exchange import Exchange, choices, error_object, shorten
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

GROUP = "tools"
PARAMETERS = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
              "required": ["city"], "additionalProperties": False}
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "the weather in a city",
                                         "parameters": PARAMETERS}}
CHOICES: dict[str, Any] = {"named": {"type": "function", "function": {"name": "get_weather"}}, "auto": "auto"}
PROMPT = "What is the weather in Paris?"
# vLLM's words when the server was not started for tool parsing (chat_completion/serving.py).
NOT_CONFIGURED = ("enable-auto-tool-choice", "tool-call-parser", "tool_call_parser", "chat template")


def probe(kind: str) -> Probe:
    def send(session: Session, ctx: Context) -> list[Exchange]:
        params = request("chat", PROMPT, max_tokens=64, tools=[TOOL], tool_choice=CHOICES[kind])
        params["extra_body"] = {}
        return [session.chat(kind, **params)]
    return send


def _calls(ex: Exchange) -> list[Mapping[str, Any]]:
    found = choices(ex)
    message = found[0].get("message") if found else None
    calls = message.get("tool_calls") if isinstance(message, Mapping) else None
    return [c for c in calls if isinstance(c, Mapping)] if isinstance(calls, list) else []


def _call_problem(call: Mapping[str, Any]) -> str:
    function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
    assert isinstance(function, Mapping)
    if function.get("name") != "get_weather":
        return f"a call of {function.get('name')!r}, not get_weather"
    try:
        jsonschema.validate(json.loads(str(function.get("arguments"))), PARAMETERS)
    except ValueError:
        return f"arguments are not JSON: {shorten(function.get('arguments'), 60)!r}"
    except jsonschema.ValidationError as exc:
        return f"arguments do not match the parameters: {exc.message}"
    return ""


def judge(kind: str) -> Judge:
    def verdict(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
        ex = by_label(exchanges, kind)
        error = error_object(ex) if ex is not None and ex.status == 400 else None
        if error is not None and any(word in str(error.get("message")) for word in NOT_CONFIGURED):
            return skipped(f"tool_choice {kind}: the server is not set up for this model's tool calls: "
                           f"{shorten(error.get('message'), 160)}")
        broken = not_answered(ex, f"tool_choice {kind}")
        if broken is not None or ex is None:
            return broken or failed("no answer")
        calls = _calls(ex)
        if kind == "auto" and not calls:
            return passed("tool_choice auto: answered without a call (allowed: the model chooses)")
        if not calls:
            return failed("tool_choice named get_weather: the answer has no tool call")
        problem = _call_problem(calls[0])
        if problem:
            return failed(f"tool_choice {kind}: {problem}")
        arguments = (calls[0].get("function") or {}).get("arguments")
        return passed(f"tool_choice {kind}: get_weather({shorten(arguments, 60)})")
    return verdict


FEATURES = [
    Feature("tools.named", GROUP, "tools with a named tool_choice: a valid call of that function",
            probe("named"), judge("named")),
    Feature("tools.auto", GROUP, "tools with tool_choice auto", probe("auto"), judge("auto")),
]
