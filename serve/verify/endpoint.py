"""Verify checks of the OpenAI endpoint from inside: `endpoint-models` and `endpoint-chat`, over
the Serve Service through the Kubernetes API's proxy (or an --endpoint URL). The chat request is
also the one whose KV cache kv-transfer follows (serve/verify/kv_transfer.py).

`Endpoint` is that OpenAI server: a URL the user gave, or the Serve Service through the API proxy.
Its `transport` carries another HTTP client's requests the same way (api-parity's `openai` client,
serve/verify/api_parity.py): a socket to the URL, or each request through the API server's service
proxy with verify's own credentials.
"""

from __future__ import annotations

import json
import re
import secrets
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional
from urllib.parse import parse_qsl

import httpx2

from components.config import defaults
from components.config.checks import Check
from components.render.endpoint_names import API_KEY_HEADER
from components.render.serve_config import KV_LOAD_FAILURE_POLICY
from serve.evidence import Evidence, VerifyInputError, name_list, shorten
from serve.kube import KubeError
from serve.verify.report import TITLES

CHAT_PROMPT = "Reply with the single word: ready"


@dataclass
class Endpoint:
    """GET/POST on the OpenAI server: a URL given by the user, or the Serve Service via the proxy."""

    describe: str
    call: Callable[[str, str, Optional[bytes], float], tuple[int, bytes]]
    # for an HTTP client's own requests: its base URL, and a new transport that reaches it
    base_url: str = ""
    transport: Callable[[], httpx2.BaseTransport] = httpx2.HTTPTransport
    api_key: Optional[str] = None  # what `call` sends (an --endpoint behind the gateway's keys)

    def get(self, path: str, timeout: float) -> tuple[int, bytes]:
        return self.call("GET", path, None, timeout)

    def post_json(self, path: str, body: Mapping[str, Any], timeout: float) -> tuple[int, bytes]:
        return self.call("POST", path, json.dumps(body).encode("utf-8"), timeout)


def direct_endpoint(url: str, api_key: Optional[str] = None) -> Endpoint:
    """The --endpoint URL; with `api_key` (serve/verify/external.py `key_for_endpoint`) every
    request carries it, and an answer that quotes it is read with the key blanked out."""
    base = url.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    if not re.match(r"^https?://[^/\s]+", base):
        raise VerifyInputError(f"--endpoint must be an http(s) URL, got {url!r}")

    def call(method: str, path: str, body: Optional[bytes], timeout: float) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            headers[API_KEY_HEADER] = f"Bearer {api_key}"
        request = urllib.request.Request(base + path, data=body, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, _blank(response.read(4 * 1024 * 1024), api_key)
        except urllib.error.HTTPError as exc:
            return exc.code, _blank(exc.read(64 * 1024), api_key)
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise KubeError(f"cannot reach the endpoint {base}: {reason}") from None

    return Endpoint(describe=base, call=call, base_url=base, api_key=api_key)


def _blank(body: bytes, api_key: Optional[str]) -> bytes:
    return body.replace(api_key.encode(), b"<api key>") if api_key else body


def proxied_endpoint(ev: Evidence) -> Endpoint:
    plan = ev.plan

    def call(method: str, path: str, body: Optional[bytes], timeout: float) -> tuple[int, bytes]:
        response = ev.live_client().service_proxy(plan.namespace, plan.serve_service, defaults.SERVE_PORT,
                                                  path, method=method, body=body, timeout=timeout)
        return response.status, response.body

    return Endpoint(describe=(f"service {plan.namespace}/{plan.serve_service}:{defaults.SERVE_PORT} "
                              "through the Kubernetes API proxy"), call=call,
                    base_url=f"http://{plan.serve_service}.{plan.namespace}.svc:{defaults.SERVE_PORT}",
                    transport=lambda: ServiceProxyTransport(ev))


class ServiceProxyTransport(httpx2.BaseTransport):
    """An httpx transport that sends each request to the Serve Service through the API server's
    service proxy, with verify's Kubernetes credentials. Only the body's type travels with it: the
    client's own Authorization header would replace verify's credentials for the API server, which
    drops it after authenticating anyway (serve/verify/external.py). The answer is read whole
    (KubeClient's bounded read): a streamed answer arrives as its complete event stream."""

    def __init__(self, ev: Evidence):
        self.ev = ev

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        plan = self.ev.plan
        timeout = (request.extensions.get("timeout") or {}).get("read")
        headers = {k: request.headers[k] for k in ("Content-Type", "Accept") if k in request.headers}
        query = parse_qsl(request.url.query.decode("ascii", "replace")) if request.url.query else None
        try:
            answer = self.ev.live_client().service_proxy(
                plan.namespace, plan.serve_service, defaults.SERVE_PORT, request.url.path, method=request.method,
                query=query, body=request.read() or None, headers=headers, timeout=timeout)
        except KubeError as exc:
            raise httpx2.ConnectError(str(exc), request=request) from None
        kept = {k: v for k, v in answer.headers.items() if k == "content-type"}
        return httpx2.Response(answer.status, headers=kept, content=answer.body, request=request)


def check_endpoint_models(endpoint: Optional[Endpoint], ev: Evidence, timeout: float) -> Check:
    cid, title = "endpoint-models", TITLES["endpoint-models"]
    if endpoint is None:
        return Check.skipped(cid, title, "no endpoint: the Kubernetes API is not reachable")
    try:
        status, body = endpoint.get("/v1/models", timeout)
    except KubeError as exc:
        return Check.failed(cid, title, str(exc), "check the Serve Service and the Ray head pod")
    if status != 200:
        return Check.failed(cid, title, f"GET /v1/models on {endpoint.describe} answered HTTP "
                            f"{status}: {shorten(body.decode('utf-8', 'replace'), 200)}",
                            "the Serve application may not be RUNNING yet (see serve-app-running)")
    try:
        ids = [str(m.get("id")) for m in json.loads(body.decode("utf-8")).get("data") or []
               if isinstance(m, Mapping)]
    except (ValueError, AttributeError, UnicodeDecodeError):
        return Check.failed(cid, title, f"GET /v1/models on {endpoint.describe} is not an OpenAI "
                            "model list", "is --endpoint the OpenAI server of this stack?")
    if ev.plan.model_id not in ids:
        return Check.failed(cid, title, f"GET /v1/models on {endpoint.describe} lists "
                            f"{name_list(ids) or 'no models'}, not {ev.plan.model_id}",
                            "is --endpoint the OpenAI server of this stack?")
    return Check.passed(cid, title, f"GET /v1/models on {endpoint.describe} lists {ev.plan.model_id}")


@dataclass(frozen=True)
class ChatOutcome:
    """What the test chat request got: an HTTP status and body, or no answer at all (`error`)."""

    status: Optional[int]
    body: bytes = b""
    error: str = ""


def send_chat(endpoint: Optional[Endpoint], ev: Evidence, timeout: float) -> ChatOutcome:
    """One short chat completion. The prompt carries a fresh nonce, so neither engine's prefix
    cache can serve it and the decode has to get its KV cache from prefill (or recompute it)."""
    if endpoint is None:
        return ChatOutcome(None, error="no endpoint: the Kubernetes API is not reachable")
    body = {"model": ev.plan.model_id,
            "messages": [{"role": "user", "content": f"{CHAT_PROMPT} (check {secrets.token_hex(4)})"}],
            "max_tokens": 8, "temperature": 0, "stream": False}
    try:
        status, answer = endpoint.post_json("/v1/chat/completions", body, timeout)
    except KubeError as exc:
        return ChatOutcome(None, error=str(exc))
    except Exception as exc:  # noqa: BLE001 - reported by endpoint-chat, like _guarded does
        scrub = ev.client.scrub if ev.client is not None else (lambda text: text)
        return ChatOutcome(None, error=f"could not be sent: {shorten(scrub(f'{type(exc).__name__}: {exc}'), 200)}")
    return ChatOutcome(status, answer)


def check_endpoint_chat(outcome: ChatOutcome, endpoint: Optional[Endpoint]) -> Check:
    cid, title = "endpoint-chat", TITLES["endpoint-chat"]
    if outcome.status is None:
        if endpoint is None:
            return Check.skipped(cid, title, outcome.error)
        return Check.failed(cid, title, outcome.error, "check the Serve Service and the engines' logs")
    text = shorten(outcome.body.decode("utf-8", "replace"), 200)
    if outcome.status >= 500:
        return Check.failed(
            cid, title, f"POST /v1/chat/completions answered HTTP {outcome.status}: {text}. raypd's "
            f"engines run with kv_load_failure_policy: {KV_LOAD_FAILURE_POLICY}, so a request whose KV "
            "cache decode could not load from prefill answers 500 instead of being recomputed "
            "(kv-transfer says whether NIXL transfers failed)",
            "read the decode replica's log for 'KV load failure' and the NIXL handshake; otherwise "
            "the OpenAiIngress and engine replicas' logs in the Ray dashboard")
    if outcome.status != 200:
        return Check.failed(cid, title, f"POST /v1/chat/completions answered HTTP {outcome.status}: "
                            f"{text}", "read the OpenAiIngress and engine replicas' logs in the Ray "
                            "dashboard")
    try:
        document = json.loads(outcome.body.decode("utf-8"))
        choice = document["choices"][0]
        content = (choice.get("message") or {}).get("content")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, UnicodeDecodeError):
        return Check.failed(cid, title, "POST /v1/chat/completions answered 200 without a choice",
                            "read the OpenAiIngress replica's log")
    usage = document.get("usage") or {}
    tokens = usage.get("completion_tokens") if isinstance(usage, Mapping) else None
    where = endpoint.describe if endpoint is not None else "the endpoint"
    return Check.passed(cid, title, f"POST /v1/chat/completions on {where}: 200, "
                        f"finish_reason={choice.get('finish_reason')}, "
                        f"{tokens if tokens is not None else '?'} token(s): {shorten(str(content), 80)!r}")
