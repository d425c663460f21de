"""A relay that corrupts every N-th streamed chat answer: the silent failure serve.resilience must count.

`python corrupting_proxy.py --upstream URL --port N --every 20 --skip-first K`: POST
/v1/chat/completions is relayed to URL; request number K + 20, K + 40, ... gets one character of
its first content chunk changed (status, chunk count and usage untouched, so only a comparison
with a golden answer can see it). GET /corrupted lists the prompts of the changed answers that
were delivered whole.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import aiohttp
from aiohttp import web


async def relay(request: web.Request) -> web.StreamResponse:
    app = request.app
    body = await request.json()
    app["seen"] += 1
    corrupt = app["seen"] > app["skip"] and (app["seen"] - app["skip"]) % app["every"] == 0
    async with app["session"].post(app["upstream"] + request.path, json=body) as upstream:
        response = web.StreamResponse(status=upstream.status)
        response.content_type = upstream.content_type
        await response.prepare(request)
        changed = False
        async for line in upstream.content:
            if corrupt and not changed and line.startswith(b"data: {"):
                chunk = json.loads(line[6:])
                delta = (chunk.get("choices") or [{}])[0].get("delta") or {}
                if delta.get("content"):
                    mark = "!" if delta["content"].startswith("~") else "~"
                    delta["content"] = mark + delta["content"][1:]  # same length, one character off
                    line, changed = f"data: {json.dumps(chunk)}\n".encode(), True
            await response.write(line)
        await response.write_eof()
    if changed:
        app["corrupted"].append(str(body["messages"][0]["content"]))
    return response


async def corrupted(request: web.Request) -> web.Response:
    return web.json_response(request.app["corrupted"])


async def _session(app: web.Application) -> Any:
    app["session"] = aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True),
                                           timeout=aiohttp.ClientTimeout(total=None, sock_connect=120))
    yield
    await app["session"].close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--every", type=int, default=20)
    parser.add_argument("--skip-first", type=int, default=0)
    args = parser.parse_args()
    app = web.Application()
    app.update(upstream=args.upstream.rstrip("/"), every=args.every, skip=args.skip_first, seen=0, corrupted=[])
    app.cleanup_ctx.append(_session)
    app.router.add_post("/v1/chat/completions", relay)
    app.router.add_get("/corrupted", corrupted)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
