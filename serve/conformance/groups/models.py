"""models: `GET /v1/models` lists the served id, `GET /v1/models/{id}` retrieves it, and the card
says its context length: `max_model_len` (a vLLM field on `ModelCard`, vllm/entrypoints/openai/
models/protocol.py) or, from Ray Serve LLM 2.60's ingress, `metadata.max_request_context_length`.
Ray Serve LLM routes these to its ingress, not through the prefill/decode split (ray.llm
`serving_patterns/prefill_decode/pd_server.py`)."""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from serve.conformance.client import Session
from serve.conformance.exchange import Exchange, count, shorten
from serve.conformance.features import (
    Context,
    Feature,
    Outcome,
    by_label,
    failed,
    not_answered,
    passed,
    skipped,
)

GROUP = "models"


def probe_list(session: Session, ctx: Context) -> list[Exchange]:
    return [session.list_models("list")]


def probe_retrieve(session: Session, ctx: Context) -> list[Exchange]:
    return [session.retrieve_model("retrieve", ctx.model)]


def card(ex: Optional[Exchange], model: str) -> Optional[Mapping[str, Any]]:
    """The model's card in a models list answer, or None."""
    if ex is None or not isinstance(ex.body, Mapping) or not isinstance(ex.body.get("data"), list):
        return None
    for item in ex.body["data"]:
        if isinstance(item, Mapping) and item.get("id") == model:
            return item
    return None


def listed_ids(ex: Exchange) -> list[str]:
    data = ex.body.get("data") if isinstance(ex.body, Mapping) else None
    return [str(m.get("id")) for m in data if isinstance(m, Mapping)] if isinstance(data, list) else []


def max_model_len(ex: Optional[Exchange], model: str) -> Optional[int]:
    """vLLM's `max_model_len` on the card, or Ray Serve LLM's `metadata.max_request_context_length`
    (ray.llm _internal/serve/core/configs/openai_api_models.py: its cards carry no max_model_len)."""
    found = card(ex, model) or {}
    metadata = found.get("metadata")
    length = count(found.get("max_model_len"))
    if length is None and isinstance(metadata, Mapping):
        length = count(metadata.get("max_request_context_length"))
    return length if length is not None and length > 0 else None


def judge_list(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
    ex = by_label(exchanges, "list")
    broken = not_answered(ex, "GET /v1/models")
    if broken is not None or ex is None:
        return broken or failed("no answer")
    if card(ex, ctx.model) is None:
        return failed(f"GET /v1/models lists {shorten(listed_ids(ex)) or 'nothing'}, not {ctx.model!r}")
    return passed(f"GET /v1/models lists {ctx.model!r} ({len(listed_ids(ex))} model(s))")


def judge_retrieve(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
    ex = by_label(exchanges, "retrieve")
    broken = not_answered(ex, f"GET /v1/models/{ctx.model}")
    if broken is not None or ex is None:
        return broken or failed("no answer")
    got = ex.body.get("id") if isinstance(ex.body, Mapping) else None
    if got != ctx.model:
        return failed(f"GET /v1/models/{ctx.model} answered the id {got!r}")
    return passed(f"GET /v1/models/{ctx.model} answered its card")


def judge_max_model_len(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
    ex = by_label(exchanges, "list")
    if ex is None or not ex.answered or card(ex, ctx.model) is None:
        return skipped("no model card to read (see models.list)")
    length = max_model_len(ex, ctx.model)
    if length is None:
        return skipped(f"the card of {ctx.model!r} gives no max_model_len nor metadata.max_request_context_length "
                       "(an OpenAI server need not): "
                       "the limits features that need it skip too")
    return passed(f"max_model_len {length}", max_model_len=length)


FEATURES = [
    Feature("models.list", GROUP, "GET /v1/models lists the served model id", probe_list, judge_list),
    Feature("models.retrieve", GROUP, "GET /v1/models/{id} retrieves it", probe_retrieve, judge_retrieve),
    Feature("models.max_model_len", GROUP, "the model card gives max_model_len", probe_list, judge_max_model_len),
]
