"""The client layer: every feature under test is sent through the official `openai` Python client,
as users' programs send it, and recorded as an `Exchange` for the judges.

Only this module imports `openai`. The client is built with `max_retries=0` (a retried 500 would hide
the first answer) and a bounded timeout. vLLM's own request fields (`ignore_eos`, `prompt_logprobs`)
go in `extra_body`, the client's way to send fields OpenAI's API lacks; the recorded request shows
them merged, as the server received them.

The one request that is not a feature under test, `GET /metrics` (vLLM's Prometheus page, the
evidence that a disconnected stream stopped generating), is plain urllib: it is evidence, not API.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from typing import Any, Mapping, Optional

import httpx2
import openai

from serve.conformance.exchange import Exchange

DEFAULT_TIMEOUT_S = 120.0
CLIENT_VERSION = openai.__version__
MAX_METRICS_BYTES = 4 * 1024 * 1024
METRICS_TIMEOUT_S = 10.0
MAX_ERROR_CHARS = 4096


def _dump(model: Any) -> Any:
    """The answer object as the JSON it came from (fields the server left out stay out)."""
    dump = getattr(model, "model_dump", None)
    return dump(mode="json", exclude_unset=True) if callable(dump) else model


class Session:
    """One OpenAI-compatible server, one model id, one API key; each call returns an Exchange."""

    def __init__(self, base_url: str, model: str, api_key: Optional[str] = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, transport: Optional[httpx2.BaseTransport] = None):
        """`transport` carries the client's HTTP another way than a socket to `base_url` (verify's
        api-parity: through the Kubernetes API server's service proxy); the client is unchanged."""
        root = base_url.rstrip("/")
        self.root = root[: -len("/v1")] if root.endswith("/v1") else root
        self.model = model
        http_client = openai.DefaultHttpxClient(transport=transport) if transport is not None else None
        # openai insists on a key; vLLM without --api-key ignores whatever is sent.
        self.client = openai.OpenAI(base_url=self.root + "/v1", api_key=api_key or "EMPTY",
                                    max_retries=0, timeout=timeout_s, http_client=http_client)

    def close(self) -> None:
        self.client.close()

    def _params(self, params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """(what the client is called with, what the server receives: extra_body merged)."""
        call = {"model": self.model, **params}
        sent = {k: v for k, v in call.items() if k != "extra_body"}
        sent.update(call.get("extra_body") or {})
        return call, sent

    def chat(self, label: str, **params: Any) -> Exchange:
        return self._create("chat", label, self.client.chat.completions, params)

    def completion(self, label: str, **params: Any) -> Exchange:
        return self._create("completions", label, self.client.completions, params)

    def _create(self, route: str, label: str, api: Any, params: Mapping[str, Any],
                keep_chunks: Optional[int] = None) -> Exchange:
        call, sent = self._params(params)
        stream = bool(call.get("stream"))
        started = time.monotonic()
        chunks: list[Any] = []
        try:
            if not stream:
                raw = api.with_raw_response.create(**call)
                raw.parse()  # the client must accept the answer as its own types
                return Exchange(label, route, sent, raw.status_code, body=raw.http_response.json(),
                                seconds=time.monotonic() - started)
            answer = api.create(**call)
            try:
                for chunk in answer:
                    chunks.append(_dump(chunk))
                    if keep_chunks is not None and _texts(chunks) >= keep_chunks:
                        break  # the client walks away: closing the stream closes the connection
            finally:
                answer.close()
            return Exchange(label, route, sent, 200, chunks=tuple(chunks), stream=True,
                            seconds=time.monotonic() - started,
                            notes={"closed_after_chunks": len(chunks)} if keep_chunks is not None else {})
        except openai.APIStatusError as exc:
            return Exchange(label, route, sent, exc.status_code, body=_error_body(exc), stream=stream,
                            seconds=time.monotonic() - started)
        except openai.APIResponseValidationError as exc:
            return Exchange(label, route, sent, exc.status_code, body=exc.body, stream=stream,
                            error=f"the openai client refused the answer: {exc.message}",
                            seconds=time.monotonic() - started)
        except openai.APIConnectionError as exc:  # includes APITimeoutError
            status = 200 if chunks else None  # the stream had begun: a cut, not a refusal
            return Exchange(label, route, sent, status, chunks=tuple(chunks), stream=stream,
                            error=_connection_error(exc), seconds=time.monotonic() - started)
        except openai.APIError as exc:  # an error event inside a 200 stream
            return Exchange(label, route, sent, 200, body={"error": exc.body}, chunks=tuple(chunks), stream=stream,
                            error=f"error event in the stream: {exc.message}",
                            seconds=time.monotonic() - started)

    def walk_away(self, label: str, route: str, after_text_chunks: int, **params: Any) -> Exchange:
        """A streamed request the client stops reading after that many text chunks, closing it."""
        api = self.client.chat.completions if route == "chat" else self.client.completions
        return self._create(route, label, api, {**params, "stream": True}, keep_chunks=after_text_chunks)

    def list_models(self, label: str) -> Exchange:
        started = time.monotonic()
        try:
            raw = self.client.models.with_raw_response.list()
            raw.parse()
            return Exchange(label, "models.list", {}, raw.status_code, body=raw.http_response.json(),
                            seconds=time.monotonic() - started)
        except openai.APIStatusError as exc:
            return Exchange(label, "models.list", {}, exc.status_code, body=_error_body(exc))
        except openai.APIError as exc:
            return Exchange(label, "models.list", {}, None, error=f"{type(exc).__name__}: {exc}")

    def retrieve_model(self, label: str, model: str) -> Exchange:
        started = time.monotonic()
        request = {"model": model}
        try:
            raw = self.client.models.with_raw_response.retrieve(model)
            raw.parse()
            return Exchange(label, "models.retrieve", request, raw.status_code, body=raw.http_response.json(),
                            seconds=time.monotonic() - started)
        except openai.APIStatusError as exc:
            return Exchange(label, "models.retrieve", request, exc.status_code, body=_error_body(exc))
        except openai.APIError as exc:
            return Exchange(label, "models.retrieve", request, None, error=f"{type(exc).__name__}: {exc}")

    def metrics(self, label: str, url: Optional[str] = None) -> Exchange:
        """GET a Prometheus page: `url`, or <root>/metrics (vLLM serves its own there; Ray Serve
        does not). The API key goes only to the endpoint's own root, never to another URL."""
        target = url or self.root + "/metrics"
        headers = {"Accept": "text/plain"}
        if target.startswith(self.root + "/") and self.client.api_key != "EMPTY":
            headers["Authorization"] = f"Bearer {self.client.api_key}"
        started = time.monotonic()
        try:
            with urllib.request.urlopen(urllib.request.Request(target, headers=headers),
                                        timeout=METRICS_TIMEOUT_S) as response:
                body = response.read(MAX_METRICS_BYTES).decode("utf-8", "replace")
                return Exchange(label, "metrics", {"url": target}, response.status, body=body,
                                seconds=time.monotonic() - started)
        except urllib.error.HTTPError as exc:
            return Exchange(label, "metrics", {"url": target}, exc.code)
        except (urllib.error.URLError, OSError) as exc:
            return Exchange(label, "metrics", {"url": target}, None, error=f"{type(exc).__name__}: {exc}")


def _error_body(exc: openai.APIStatusError) -> Any:
    """The error answer as the server sent it (the client's `exc.body` is only its inner "error")."""
    try:
        return exc.response.json()
    except ValueError:
        return exc.response.text[:MAX_ERROR_CHARS]


def _connection_error(exc: openai.APIConnectionError) -> str:
    """The client's words ("Connection error.") and the transport's cause, which says what broke
    (refused, reset, the proxy's own error): the client's words alone are no evidence."""
    cause = exc.__cause__
    return f"{type(exc).__name__}: {exc}" + (f" ({type(cause).__name__}: {cause})" if cause is not None else "")


def _texts(chunks: list[Any]) -> int:
    count = 0
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if (delta.get("content") if isinstance(delta, dict) else None) or choice.get("text"):
                count += 1
    return count
