"""A small prefill/decode proxy for two plain `vllm serve` engines (vLLM's toy-proxy protocol).

`python pd_proxy.py --prefill URL --decode URL --port N` (aiohttp, from the project's venv). Ray
Serve LLM's PD app does this inside its ingress; two bare engines need something in front, so
this is written from the protocol (NixlConnector in pull mode), not from vLLM's example code:

1. the client's request goes to prefill with `max_tokens: 1`, `stream: false`, no
   `stream_options`, and `kv_transfer_params: {"do_remote_decode": true, ...}`: prefill computes
   the prompt's KV cache, keeps its blocks and answers with the `kv_transfer_params` that tell a
   decoder where they are (engine id, block ids, host, side-channel port);
2. the original request goes to decode with those `kv_transfer_params`: decode pulls the blocks
   over NIXL and generates, and its answer (streamed or not) is relayed as it comes.

A prefill that fails is relayed as is (its status and body), so a client sees the real error.

Two connection rules an HTTP proxy in front of vLLM must keep (both were seen failing requests):
- no upstream connection is reused: vLLM's uvicorn closes an idle keep-alive connection after
  VLLM_HTTP_TIMEOUT_KEEP_ALIVE (5 s, vllm/envs.py), and a request written onto a pooled
  connection it has just closed fails with "Server disconnected" (aiohttp retries only idempotent
  methods, and these are POSTs). A shorter client idle time only narrows that race on a loaded
  machine; a fresh loopback connection per leg costs well under a millisecond and removes it;
- a client that hangs up mid-relay (or right after `data: [DONE]`, before the last chunk of
  the chunked body) ends that relay quietly: nothing is left to tell it.
Every other failure of a request is logged with its path, how long it ran and its traceback.

`--hold-control` adds `POST /_hold {"seconds": S, "requests": N}` and `GET /_hold`: the next N
requests wait S seconds between their prefill's answer and their decode leg, as a decode queue
that slow would hold them (the lease test: tests/real/pair/test_resilience_on_real_pair.py);
`GET /_hold` says how many were held, with their prefill's kv_transfer_params.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import logging
import time
from typing import Any, Awaitable, Callable

import aiohttp
from aiohttp import web

log = logging.getLogger("pd_proxy")
PREFILL_PARAMS = {
    "do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
    "remote_block_ids": None, "remote_host": None, "remote_port": None,
}
_HOP_HEADERS = {"content-length", "transfer-encoding", "connection", "content-encoding"}


def prefill_request(body: dict[str, Any]) -> dict[str, Any]:
    """The request prefill gets: one token, no streaming, asking to keep the KV for a remote decode."""
    request = copy.deepcopy(body)
    request["max_tokens"] = 1
    if "max_completion_tokens" in request:
        request["max_completion_tokens"] = 1
    request["stream"] = False
    request.pop("stream_options", None)
    request["kv_transfer_params"] = dict(PREFILL_PARAMS)
    return request


def decode_request(body: dict[str, Any], kv_transfer_params: Any) -> dict[str, Any]:
    request = dict(body)
    request["kv_transfer_params"] = kv_transfer_params
    return request


async def _relay(request: web.Request, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
    response = web.StreamResponse(status=upstream.status)
    for name, value in upstream.headers.items():
        if name.lower() not in _HOP_HEADERS:
            response.headers[name] = value
    await response.prepare(request)
    try:
        async for chunk in upstream.content.iter_any():
            await response.write(chunk)
        await response.write_eof()
    except ConnectionResetError:  # aiohttp's ClientConnectionResetError is one: the client left
        log.info("the client closed the connection before the relay of %s ended", request.path)
    return response


@web.middleware
async def log_failures(request: web.Request,
                       handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
    """aiohttp answers a handler's exception with 500 (504 for a TimeoutError) and logs no cause."""
    start = time.monotonic()
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except BaseException:
        log.exception("%s %s failed after %.3f s", request.method, request.path, time.monotonic() - start)
        raise


async def completions(request: web.Request) -> web.StreamResponse:
    session: aiohttp.ClientSession = request.app["session"]
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        return web.json_response({"error": {"message": "the body is not JSON"}}, status=400)
    if not isinstance(body, dict):
        return web.json_response({"error": {"message": "the body is not a JSON object"}}, status=400)
    path = request.path
    async with session.post(request.app["prefill"] + path, json=prefill_request(body)) as prefill:
        if prefill.status != 200:
            log.warning("prefill answered %s", prefill.status)
            return await _relay(request, prefill)
        answer = await prefill.json()
    params = answer.get("kv_transfer_params")
    if not isinstance(params, dict):
        return web.json_response(
            {"error": {"message": f"prefill answered without kv_transfer_params: {json.dumps(answer)[:300]}"}},
            status=502)
    hold = request.app.get("hold")
    if hold is not None and hold["requests"] > 0:
        hold["requests"] -= 1
        hold["held"].append(params)
        log.info("holding a decode leg %.1f s (prefill's request %s)", hold["seconds"], params.get("remote_request_id"))
        await asyncio.sleep(hold["seconds"])
    async with session.post(request.app["decode"] + path, json=decode_request(body, params)) as decode:
        return await _relay(request, decode)


async def passthrough_get(request: web.Request) -> web.StreamResponse:
    session: aiohttp.ClientSession = request.app["session"]
    async with session.get(request.app["decode"] + request.path) as decode:
        return await _relay(request, decode)


async def _session(app: web.Application) -> Any:
    connector = aiohttp.TCPConnector(force_close=True)  # see the module's docstring
    app["session"] = aiohttp.ClientSession(connector=connector,
                                           timeout=aiohttp.ClientTimeout(total=None, sock_connect=10))
    yield
    await app["session"].close()


async def set_hold(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    hold = request.app["hold"]
    hold["seconds"], hold["requests"] = float(body["seconds"]), int(body["requests"])
    return web.json_response({"held": hold["held"]})


async def get_hold(request: web.Request) -> web.StreamResponse:
    return web.json_response({"held": request.app["hold"]["held"], "waiting": request.app["hold"]["requests"]})


def make_app(prefill: str, decode: str, hold_control: bool = False) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[log_failures])
    app["prefill"], app["decode"] = prefill.rstrip("/"), decode.rstrip("/")
    if hold_control:
        app["hold"] = {"seconds": 0.0, "requests": 0, "held": []}
        app.router.add_post("/_hold", set_hold)
        app.router.add_get("/_hold", get_hold)
    app.cleanup_ctx.append(_session)
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/v1/models", passthrough_get)
    app.router.add_get("/health", passthrough_get)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefill", required=True)
    parser.add_argument("--decode", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--hold-control", action="store_true", help="add POST/GET /_hold (the module's docstring)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s pd_proxy %(levelname)s %(message)s")
    web.run_app(make_app(args.prefill, args.decode, args.hold_control), host=args.host, port=args.port, print=None)


if __name__ == "__main__":
    main()
