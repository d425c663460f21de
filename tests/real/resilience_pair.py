"""serve.resilience against the real vLLM pair: a test-side `Target` and `Fault` (serve/resilience/run.py).

The tool's own injector works through the Kubernetes API; the pair is two local processes, so the
fault here is the same act done to a process: SIGKILL the prefill engine's process group (as the
kubelet's kill of a deleted pod ends), then start it again as a replacement pod would come, on
the same ports but with a new NIXL engine id (a new pod is a new engine). Readiness is both
engines' /health; the KV counters are decode's /metrics and log, read by serve/kv_evidence.py as
verify reads an engine (`KvReading.of_engine`).

`CorruptingProxy` sits in front of the pair's proxy and changes the text of every `every`-th
streamed answer after the first `skip_first` requests (one character of its first content chunk;
status, chunks and usage untouched): the silent failure the report must count exactly.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
from typing import Any, Optional

import aiohttp
import requests
from aiohttp import web

from serve.kv_evidence import KvReading
from tests.real.pd_pair import PdPair, engine_env
from tests.real.processes import ManagedProcess, free_port


class PairTarget:
    def __init__(self, pair: PdPair):
        self.pair = pair

    def describe(self) -> str:
        return f"the vLLM pair behind {self.pair.proxy_url}"

    def ready(self) -> Optional[bool]:
        return self.pair.prefill.ready() and self.pair.decode.ready()

    def kv_reading(self) -> Optional[KvReading]:
        try:
            page = requests.get(self.pair.decode.metrics_url, timeout=60).text
        except requests.RequestException:
            page = None
        return KvReading.of_engine("decode", page, self.pair.decode.output())


class PrefillKill:
    """SIGKILL the prefill engine, then start its replacement (same ports, new engine id)."""

    name = "prefill-process"

    def __init__(self, pair: PdPair, processes: list[ManagedProcess]):
        self.pair, self.processes, self.restarts = pair, processes, 0

    def choose(self) -> str:
        return f"prefill engine pid {self.pair.prefill.process.pid}"

    def inject(self) -> str:
        old = self.pair.prefill.process
        with contextlib.suppress(ProcessLookupError):
            os.killpg(old.pid, signal.SIGKILL)
        old.popen.wait(timeout=60)
        self.restarts += 1
        argv = list(old.argv)
        at = argv.index("--kv-transfer-config") + 1
        config = json.loads(argv[at])
        config["engine_id"] = f"prefill-restart-{self.restarts}"
        argv[at] = json.dumps(config)
        new = ManagedProcess.start("prefill", argv, old.log_path,
                                   env=engine_env(self.pair.prefill.side_channel_port, cpu=0))
        self.processes.append(new)  # the pair fixture stops it with the others
        self.pair.prefill.process = new
        return f"SIGKILL to prefill pid {old.pid}'s group; replacement pid {new.pid} started"

    def restore(self) -> None:
        pass


class NoFault:
    """No fault at all: a load judged against its golden answers (the corrupting proxy's test)."""

    name = "none"

    def choose(self) -> str:
        return "nothing"

    def inject(self) -> str:
        return "nothing done"

    def restore(self) -> None:
        pass


class CorruptingProxy:
    """An HTTP relay on 127.0.0.1 that corrupts every `every`-th answer after `skip_first`."""

    def __init__(self, upstream: str, every: int = 20, skip_first: int = 0):
        self.upstream, self.every, self.skip_first = upstream.rstrip("/"), every, skip_first
        self.seen = 0
        self.corrupted: list[str] = []  # the prompts of the answers changed and delivered whole
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: Optional[web.AppRunner] = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _relay(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.seen += 1
        corrupt = self.seen > self.skip_first and (self.seen - self.skip_first) % self.every == 0
        async with aiohttp.ClientSession() as session, \
                session.post(self.upstream + request.path, json=body) as upstream:
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
            self.corrupted.append(str(body["messages"][0]["content"]))
        return response

    def __enter__(self) -> "CorruptingProxy":
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._relay)
        self._runner = web.AppRunner(app)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        return self

    async def _start(self) -> None:
        assert self._runner is not None
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()

    def __exit__(self, *exc: Any) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
