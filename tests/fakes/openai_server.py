"""A small but real OpenAI-compatible HTTP server on 127.0.0.1, for verify and benchmark tests.

Speaks the vLLM / Ray Serve LLM dialect of the OpenAI API: `GET /v1/models`,
`POST /v1/chat/completions` with and without `stream` (Server-Sent Events: `data: {chunk}` lines,
`data: [DONE]` at the end, a usage chunk with `stream_options.include_usage`), `usage` in
non-streamed answers, OpenAI error bodies (`{"error": {...}}`) for bad requests and unknown models.
The answer is deterministic: the words of `reply`, one token per word, cut at `max_tokens`.

    with OpenAIServer("qwen3.5-9b") as server:
        server.base_url        # http://127.0.0.1:PORT/v1
        server.requests        # [(method, path, parsed JSON body or None), ...]

For the benchmark tests the streamed answer can be timed and shaped (all keyword-only, off by
default so the verify tests see the same server as before): `ttft_s` before the first content
chunk, `itl_s` between content chunks, `output_tokens` (answer exactly min(output_tokens,
max_tokens) tokens), `failure_rate` (that share of requests, drawn from a seeded RNG, get a 500),
`hang_s` (sleep that long before answering, to provoke client timeouts). `POST /v1/completions`
(the legacy text API: `prompt`, chunks with `choices[0].text`) is served too.

`usage` (a function of the true usage object) replaces what the streamed usage chunk carries, for
the benchmark's checks of the counts: a server or a proxy in front of it that miscounts. The true
object has OpenAI's shape, `{"prompt_tokens", "completion_tokens", "total_tokens"}` integers (vLLM:
`UsageInfo` in vllm/entrypoints/openai/protocol.py); whatever the function returns is written with
Python's json.dumps defaults, as a Python server writes it: float("nan") goes out as `NaN`, 1e400
as `Infinity`, a missing key stays missing, None is vLLM's `"usage": null`.

Connections, for the benchmark client's keep-alive handling: `end_delay_s` waits that long between
`data: [DONE]` and the chunked body's last chunk (a proxy relaying the end late; longer than the
client waits is a body that never ends), `server.connections` counts the TCP connections accepted.
`idle_close_s` plays a server's keep-alive timeout at the moment it bites a client: uvicorn (vLLM,
5 s: VLLM_HTTP_TIMEOUT_KEEP_ALIVE in vllm/envs.py) closes a connection idle that long, and a
client that writes a request onto it before it has read the close gets no answer ("Server
disconnected"). Here the connection stays open until the next request comes, and a request that
comes after `idle_close_s` of idleness is dropped unanswered (counted in `server.dropped`), so the
race a loaded machine loses now and then happens every time.

`server.streams` records what the server really did for each streamed answer (a `StreamTiming`:
when the request was read, when each content chunk and the [DONE] line were written, on
time.perf_counter, the clock the benchmark client uses in the same process). A sleep on a busy
machine oversleeps by milliseconds, so a test judges the client's measurement against these
times, never against the nominal `ttft_s` / `itl_s`.
"""

from __future__ import annotations

import json
import random
import select
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Optional

from tests.fakes import LoopbackServer
from tests.fakes.http_answers import send_json

DEFAULT_REPLY = "ready . The prefill and decode engines answered together"
MAX_REQUEST_BYTES = 1024 * 1024


def models_document(model_id: str) -> dict[str, Any]:
    return {"object": "list", "data": [{
        "id": model_id, "object": "model", "created": 1764590000, "owned_by": "ray",
        "root": model_id, "parent": None, "max_model_len": 4096,
    }]}


def error_document(message: str, kind: str, code: int) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _prompt_tokens(messages: Any) -> int:
    if not isinstance(messages, list):
        return 0
    return sum(len(str(m.get("content", "")).split()) + 4 for m in messages if isinstance(m, dict))


def completion_tokens(reply: str, max_tokens: Optional[int]) -> tuple[list[str], str]:
    words = reply.split()
    if max_tokens is not None and max_tokens < len(words):
        return words[:max_tokens], "length"
    return words, "stop"


def chat_completion_document(model_id: str, request: dict[str, Any], reply: str = DEFAULT_REPLY
                             ) -> dict[str, Any]:
    tokens, finish = completion_tokens(reply, request.get("max_tokens"))
    prompt = _prompt_tokens(request.get("messages"))
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model_id,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": " ".join(tokens), "tool_calls": []},
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": None,
        }],
        "usage": {"prompt_tokens": prompt, "completion_tokens": len(tokens),
                  "total_tokens": prompt + len(tokens)},
    }


def chat_completion_chunks(model_id: str, request: dict[str, Any], reply: str = DEFAULT_REPLY
                           ) -> list[dict[str, Any]]:
    """The `chat.completion.chunk` objects of a streamed answer, in order (without [DONE])."""
    tokens, finish = completion_tokens(reply, request.get("max_tokens"))
    ident, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())

    def chunk(delta: dict[str, Any], finish_reason: Optional[str] = None) -> dict[str, Any]:
        return {"id": ident, "object": "chat.completion.chunk", "created": created,
                "model": model_id, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                                "finish_reason": finish_reason}]}

    chunks = [chunk({"role": "assistant", "content": ""})]
    for index, token in enumerate(tokens):
        chunks.append(chunk({"content": token if index == 0 else " " + token}))
    chunks.append(chunk({}, finish))
    options = request.get("stream_options") or {}
    if isinstance(options, dict) and options.get("include_usage"):
        prompt = _prompt_tokens(request.get("messages"))
        chunks.append({"id": ident, "object": "chat.completion.chunk", "created": created,
                       "model": model_id, "choices": [],
                       "usage": {"prompt_tokens": prompt, "completion_tokens": len(tokens),
                                 "total_tokens": prompt + len(tokens)}})
    return chunks


def text_completion_chunks(model_id: str, request: dict[str, Any], reply: str = DEFAULT_REPLY
                           ) -> list[dict[str, Any]]:
    """The `text_completion` chunks of a streamed `/v1/completions` answer (without [DONE])."""
    tokens, finish = completion_tokens(reply, request.get("max_tokens"))
    ident, created = f"cmpl-{uuid.uuid4().hex}", int(time.time())

    def chunk(text: str, finish_reason: Optional[str] = None) -> dict[str, Any]:
        return {"id": ident, "object": "text_completion", "created": created, "model": model_id,
                "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}]}

    chunks = [chunk(token if index == 0 else " " + token) for index, token in enumerate(tokens)]
    chunks.append(chunk("", finish))
    options = request.get("stream_options") or {}
    if isinstance(options, dict) and options.get("include_usage"):
        prompt = len(str(request.get("prompt", "")).split())
        chunks.append({"id": ident, "object": "text_completion", "created": created, "model": model_id,
                       "choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": len(tokens),
                                                "total_tokens": prompt + len(tokens)}})
    return chunks


def _is_content_chunk(chunk: dict[str, Any]) -> bool:
    choices = chunk.get("choices") or []
    if not choices:
        return False
    delta = choices[0].get("delta")
    text = delta.get("content") if isinstance(delta, dict) else choices[0].get("text")
    return bool(text)


def validate_chat_request(model_id: str, request: Any) -> Optional[tuple[int, dict[str, Any]]]:
    """An OpenAI error (status, body) for a request vLLM would refuse, else None."""
    if not isinstance(request, dict):
        return 400, error_document("request body must be a JSON object", "BadRequestError", 400)
    if request.get("model") != model_id:
        return 404, error_document(f"The model `{request.get('model')}` does not exist.",
                                   "NotFoundError", 404)
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        return 400, error_document("messages must be a non-empty list", "BadRequestError", 400)
    max_tokens = request.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        return 400, error_document("max_tokens must be at least 1", "BadRequestError", 400)
    return None


@dataclass
class StreamTiming:
    """One streamed answer as the server sent it (time.perf_counter seconds).

    `received_s` is taken once the whole request body has been read, `content_s[i]` just before
    content chunk i is written, `done_s` just before `data: [DONE]` is: so a client's send time is
    before `received_s` and its arrival times are after the server's, on any machine.
    """

    path: str
    request: dict[str, Any]
    received_s: float
    content_s: list[float] = field(default_factory=list)
    done_s: Optional[float] = None


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY, as uvicorn (Ray Serve, vLLM) sets it: with Nagle a small chunk written after the
    # headers waits for the client's delayed ACK (up to 40 ms), which no real endpoint adds to TTFT.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def setup(self) -> None:
        super().setup()
        self.answered_s: Optional[float] = None
        with self.server.owner._lock:
            self.server.owner.connections += 1

    def handle_one_request(self) -> None:
        owner = self.server.owner
        if owner.idle_close_s is not None and self.answered_s is not None:
            select.select([self.connection], [], [])  # the next request, or the client's close
            if not self.connection.recv(1, socket.MSG_PEEK):
                self.close_connection = True  # the client closed its idle connection: nothing dropped
                return
            if time.perf_counter() - self.answered_s > owner.idle_close_s:
                with owner._lock:
                    owner.dropped += 1
                self.close_connection = True  # unread, so the close resets: no answer, as after a real one
                return
        super().handle_one_request()
        self.answered_s = time.perf_counter()

    def _send_json(self, status: int, document: Any) -> None:
        send_json(self, status, document)

    def do_GET(self) -> None:
        self.server.owner.requests.append(("GET", self.path, None))
        if self.path.split("?", 1)[0] == "/v1/models":
            self._send_json(200, models_document(self.server.owner.model_id))
        else:
            self._send_json(404, error_document(f"no route {self.path}", "NotFoundError", 404))

    def do_POST(self) -> None:
        owner = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_REQUEST_BYTES:
            self._send_json(413, error_document("request too large", "BadRequestError", 413))
            return
        raw = self.rfile.read(length)
        received_s = time.perf_counter()
        try:
            request = json.loads(raw.decode("utf-8")) if raw else None
        except (ValueError, UnicodeDecodeError):
            request = None
        owner.requests.append(("POST", self.path, request))
        route = self.path.split("?", 1)[0]
        if route not in ("/v1/chat/completions", "/v1/completions"):
            self._send_json(404, error_document(f"no route {self.path}", "NotFoundError", 404))
            return
        if route == "/v1/completions":
            error = validate_completion_request(owner.model_id, request)
        else:
            error = validate_chat_request(owner.model_id, request)
        if error is not None:
            self._send_json(*error)
            return
        assert isinstance(request, dict)
        if owner.hang_s:
            time.sleep(owner.hang_s)
        if owner.should_fail():
            self._send_json(500, error_document("injected failure", "InternalServerError", 500))
            return
        if owner.on_chat is not None and route == "/v1/chat/completions":
            owner.on_chat(request)
        reply = owner.reply_for(request)
        if not request.get("stream"):
            self._send_json(200, chat_completion_document(owner.model_id, request, reply))
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        make_chunks = text_completion_chunks if route == "/v1/completions" else chat_completion_chunks
        timing = StreamTiming(route, request, received_s)
        owner.streams.append(timing)
        first = True
        for chunk in make_chunks(owner.model_id, request, reply):
            if owner.usage is not None and "usage" in chunk:
                chunk["usage"] = owner.usage(chunk["usage"])
            data = f"data: {json.dumps(chunk)}\n\n".encode("utf-8")
            if _is_content_chunk(chunk):
                delay = owner.ttft_s if first else owner.itl_s
                if delay:
                    time.sleep(delay)
                first = False
                timing.content_s.append(time.perf_counter())
            self._write_chunk(data)
        timing.done_s = time.perf_counter()
        self._write_chunk(b"data: [DONE]\n\n")
        if owner.end_delay_s:
            time.sleep(owner.end_delay_s)
        self._write_chunk(b"")

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode("ascii") + data + b"\r\n")
        self.wfile.flush()


def validate_completion_request(model_id: str, request: Any) -> Optional[tuple[int, dict[str, Any]]]:
    """Like validate_chat_request, for `/v1/completions` (a `prompt` string instead of messages)."""
    if not isinstance(request, dict):
        return 400, error_document("request body must be a JSON object", "BadRequestError", 400)
    if request.get("model") != model_id:
        return 404, error_document(f"The model `{request.get('model')}` does not exist.",
                                   "NotFoundError", 404)
    if not isinstance(request.get("prompt"), str):
        return 400, error_document("prompt must be a string", "BadRequestError", 400)
    return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the benchmark tests open many connections at once

    def __init__(self, owner: "OpenAIServer"):
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client closing its keep-alive connection (or giving up on a timeout) is normal here."""
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


class OpenAIServer(LoopbackServer):
    """Context manager: start on a free 127.0.0.1 port, stop on exit."""

    def __init__(self, model_id: str, *, reply: str = DEFAULT_REPLY,
                 on_chat: Optional[Callable[[dict[str, Any]], None]] = None,
                 ttft_s: float = 0.0, itl_s: float = 0.0, output_tokens: Optional[int] = None,
                 failure_rate: float = 0.0, hang_s: float = 0.0, seed: int = 0,
                 usage: Optional[Callable[[dict[str, int]], Any]] = None,
                 end_delay_s: float = 0.0, idle_close_s: Optional[float] = None):
        self.model_id = model_id
        self.reply = reply
        self.on_chat = on_chat
        self.ttft_s = ttft_s
        self.itl_s = itl_s
        self.output_tokens = output_tokens
        self.failure_rate = failure_rate
        self.hang_s = hang_s
        self.usage = usage
        self.end_delay_s = end_delay_s
        self.idle_close_s = idle_close_s
        self.connections = 0
        self.dropped = 0
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self.requests: list[tuple[str, str, Any]] = []
        self.streams: list[StreamTiming] = []
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def should_fail(self) -> bool:
        """Draw from the seeded RNG under a lock: handler threads share it."""
        if self.failure_rate <= 0:
            return False
        with self._lock:
            return self._rng.random() < self.failure_rate

    def reply_for(self, request: dict[str, Any]) -> str:
        """With `output_tokens`, an answer of that many words (max_tokens still cuts it)."""
        if self.output_tokens is None:
            return self.reply
        return " ".join(f"t{i}" for i in range(self.output_tokens))

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        return self.url + "/v1"
