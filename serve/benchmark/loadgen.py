"""Sending the workload and timing each streamed answer: open-loop Poisson arrivals or fixed concurrency.

Open loop (`rate`): send times are drawn up front (exponential gaps from a seeded RNG) and each
request is sent at its time whether or not earlier ones have answered, as real users would; a
closed loop would slow down with the server and hide queueing. Given send times (`offsets`: a
rate schedule's or a trace's, serve.benchmark.schedule and .trace) are an open loop too. Fixed
`concurrency` keeps N requests in flight, for a saturation point. `max_in_flight` caps an open
loop's requests in flight, so a server that stops answering cannot make the client open sockets
without end: a request due while the cap is reached waits for a slot (as vLLM's benchmark
`--max-concurrency` does), is sent late (`sent_s - scheduled_s`) and says `held_by_cap: true`.
All stop by themselves: after `requests` requests or `duration_s` seconds of sending, whichever
comes first; each request has its own timeout, so the whole run is bounded by duration + timeout.

Times are time.perf_counter() seconds from the run start; token counts come from the server's
usage chunk (`stream_options.include_usage`), checked by serve.benchmark.usage: an answer whose
counts cannot be right is a failed request (error_kind "usage"), not a number. Every request sent
yields one record, failed or not: nothing is dropped.

Connections are kept for reuse, as real clients keep them, but only for POOL_IDLE_S: a server
closes an idle keep-alive connection after its own timeout (uvicorn's default and vLLM's
VLLM_HTTP_TIMEOUT_KEEP_ALIVE are 5 s), and a request written onto one it has just closed fails
("Server disconnected"; POSTs are not retried). An answer is read to its end after `data: [DONE]`
(the chunked body's last chunk), so its connection can be reused; what happens to the
connection after [DONE] cannot fail a complete answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import ssl
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping, Optional, Sequence

import aiohttp

from serve.benchmark.replicas import ReplicaRecorder
from serve.benchmark.usage import UsageProblem, checked_usage
from serve.benchmark.workload import RequestSpec

log = logging.getLogger(__name__)
APIS = ("chat", "completions")
_ERROR_TEXT_LIMIT = 300
_YIELD_EVERY_LINES = 8
_SPIN_S = 0.002  # the last 2 ms before a scheduled send are spent yielding, not sleeping
_MAX_SPINS = 1_000_000  # a bound on the yielding loop (2 ms is far fewer iterations)
POOL_IDLE_S = 2.0  # under the 5 s keep-alive of uvicorn and vLLM, with room for a late event loop
_DRAIN_S = 5.0  # how long the rest of a body after [DONE] may take before the connection is dropped
OnRecord = Callable[[Mapping[str, Any]], None]


@dataclass(frozen=True)
class LoadConfig:
    """How to send: the endpoint, the API, and either a Poisson `rate` or a fixed `concurrency`."""

    endpoint: str
    model: str
    api: str = "chat"
    rate: Optional[float] = None
    concurrency: Optional[int] = None
    duration_s: Optional[float] = None
    timeout_s: float = 60.0
    # How long a new connection may take (within timeout_s): a server that accepts nothing fails fast.
    connect_timeout_s: float = 10.0
    seed: int = 0
    ignore_eos: bool = False
    max_in_flight: Optional[int] = None  # open loop only: None is no cap
    # serve.resilience's hook: more request fields (a sampling `seed`), and each record keeps its
    # answer's `text` and `finish_reason`, to be compared with a golden answer. Off for benchmarks.
    extra_body: Optional[Mapping[str, Any]] = None
    keep_text: bool = False
    # serve.resilience's hook too: an open loop stops sending once this says so (it has seen the
    # deployment recover); the requests in flight still finish and are recorded.
    stop: Optional[Callable[[], bool]] = None
    # Through the Kubernetes API server's service proxy: its TLS and a fresh Authorization per request.
    headers: Optional[Callable[[], Mapping[str, str]]] = None
    ssl_context: Optional[ssl.SSLContext] = None


def request_url(endpoint: str, api: str) -> str:
    """The endpoint may be the server root or its /v1 base; both are accepted."""
    base = endpoint.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    return base + ("/chat/completions" if api == "chat" else "/completions")


def request_body(config: LoadConfig, spec: RequestSpec) -> dict[str, Any]:
    body: dict[str, Any] = {"model": config.model, "max_tokens": spec.max_tokens, "stream": True,
                            "stream_options": {"include_usage": True}, "temperature": 0.0}
    if config.api == "chat":
        body["messages"] = [{"role": "user", "content": spec.prompt}]
    else:
        body["prompt"] = spec.prompt
    if config.ignore_eos:  # vLLM's extension: exactly max_tokens, so output length is the workload's
        body["ignore_eos"] = True
    body.update(config.extra_body or {})
    return body


def poisson_arrivals(rate: float, count: int, seed: int) -> list[float]:
    """Send offsets in seconds: cumulative exponential gaps with mean 1/rate, the first at 0."""
    rng = random.Random(seed)
    offsets, now = [], 0.0
    for _ in range(count):
        offsets.append(now)
        now += rng.expovariate(rate)
    return offsets


def _finish_reason(chunk: dict[str, Any]) -> Optional[str]:
    choices = chunk.get("choices") or []
    reason = choices[0].get("finish_reason") if choices and isinstance(choices[0], dict) else None
    return reason if isinstance(reason, str) else None


def _content(chunk: dict[str, Any]) -> str:
    choices = chunk.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return ""
    delta = choices[0].get("delta")
    text = delta.get("content") if isinstance(delta, dict) else choices[0].get("text")
    return text if isinstance(text, str) else ""


@dataclass
class _Stream:
    """What an answer's stream showed so far; kept outside the reading, so a timeout keeps it too."""

    chunks: int = 0
    last: Optional[float] = None  # when the last chunk with content came
    usage: Any = None  # the last non-null usage the server sent, unchecked until the answer is complete
    done_at: Optional[float] = None  # when [DONE] came: the answer ends there, not when its connection is settled
    text: Optional[list[str]] = None  # the answer's content pieces, when LoadConfig.keep_text


def _new_record(spec: RequestSpec, scheduled_s: float) -> dict[str, Any]:
    return {
        "index": spec.index, "scheduled_s": scheduled_s, "sent_s": None, "end_s": None,
        "ttft_ms": None, "itl_ms": [], "e2e_ms": None, "prompt_tokens": None, "completion_tokens": None,
        "input_tokens_requested": spec.input_tokens, "max_tokens": spec.max_tokens,
        "status": None, "ok": False, "error_kind": None, "error": None,
    }


async def send_one(session: aiohttp.ClientSession, url: str, config: LoadConfig, spec: RequestSpec,
                   t0: float, scheduled_s: float) -> dict[str, Any]:
    """One request, timed chunk by chunk; errors become the record's error_kind, never an exception."""
    record = _new_record(spec, scheduled_s)
    body = request_body(config, spec)
    try:  # before the clock starts: minting a token is not the endpoint's latency
        headers = dict(config.headers()) if config.headers is not None else None
    except Exception as exc:  # noqa: BLE001 - e.g. an EKS token that cannot be minted: a failed request
        now_s = time.perf_counter() - t0
        record.update(sent_s=now_s, end_s=now_s, e2e_ms=0.0, error_kind="connect",
                      error=f"no credentials for the request: {exc}"[:_ERROR_TEXT_LIMIT])
        return record
    sent = time.perf_counter()
    record["sent_s"] = sent - t0
    stream = _Stream(text=[] if config.keep_text else None)
    if config.keep_text:
        record.update(text=None, finish_reason=None)
    try:
        async with asyncio.timeout(config.timeout_s):
            async with session.post(url, json=body, headers=headers) as response:
                record["status"] = response.status
                if response.status >= 400:
                    text = await response.text()
                    record["error_kind"] = "http"
                    record["error"] = f"HTTP {response.status}: {text[:_ERROR_TEXT_LIMIT]}"
                    return record
                await _read_stream(response, sent, stream, record)
                if stream.done_at is not None:
                    await _drain(response)
    except aiohttp.ConnectionTimeoutError as exc:  # before TimeoutError: it is one, but nothing was sent
        record["error_kind"], record["error"] = "connect", f"connect timed out: {exc}"[:_ERROR_TEXT_LIMIT]
    except TimeoutError:
        if stream.done_at is None:  # the run's timeout may end a slow body after [DONE]: the answer was complete
            record["error_kind"], record["error"] = "timeout", f"no complete answer within {config.timeout_s:g} s"
    except aiohttp.ClientConnectorError as exc:
        record["error_kind"], record["error"] = "connect", str(exc)[:_ERROR_TEXT_LIMIT]
    except aiohttp.ClientError as exc:
        record["error_kind"], record["error"] = "transport", f"{type(exc).__name__}: {exc}"[:_ERROR_TEXT_LIMIT]
    except ValueError as exc:
        record["error_kind"], record["error"] = "stream", f"malformed chunk: {exc}"[:_ERROR_TEXT_LIMIT]
    finally:
        end = stream.done_at if stream.done_at is not None else time.perf_counter()
        record["end_s"] = end - t0
        record["e2e_ms"] = (end - sent) * 1000
    if record["error_kind"] is None:
        _judge_answer(record, stream, spec)
    return record


async def _read_stream(response: aiohttp.ClientResponse, sent: float, stream: _Stream,
                       record: dict[str, Any]) -> None:
    """Read the SSE answer, timing each chunk at its arrival, up to [DONE]; an error chunk ends it
    as the record's error, a line that is no JSON raises ValueError."""
    lines = 0
    async for raw in response.content:
        now = time.perf_counter()  # the chunk's arrival, before anything else runs
        lines += 1
        if lines % _YIELD_EVERY_LINES == 0:
            await asyncio.sleep(0)  # a burst of buffered chunks must not hold up scheduled sends
        line = raw.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            stream.done_at = now
            return
        chunk = json.loads(data)
        if isinstance(chunk, dict) and "error" in chunk:
            record["error_kind"], record["error"] = "stream", str(chunk["error"])[:_ERROR_TEXT_LIMIT]
            return
        if isinstance(chunk, dict) and chunk.get("usage") is not None:  # null on the others
            stream.usage = chunk["usage"]
        if stream.text is not None and isinstance(chunk, dict):
            stream.text.append(_content(chunk))
            record["text"] = "".join(stream.text)
            record["finish_reason"] = _finish_reason(chunk) or record["finish_reason"]
        if _content(chunk):
            if stream.last is None:
                record["ttft_ms"] = (now - sent) * 1000
            else:
                record["itl_ms"].append((now - stream.last) * 1000)
            stream.last = now
            stream.chunks += 1


def _judge_answer(record: dict[str, Any], stream: _Stream, spec: RequestSpec) -> None:
    """An answer that arrived without a transport error: complete, with tokens, and a usage that
    adds up (or, from a server that sends none, its chunks counted)."""
    if stream.done_at is None:
        record["error_kind"], record["error"] = "stream", "stream ended without data: [DONE]"
    elif stream.chunks == 0:
        record["error_kind"], record["error"] = "stream", "no tokens in the answer"
    elif stream.usage is None:  # a server without include_usage support: count chunks, and say so
        record.update(ok=True, completion_tokens=stream.chunks, usage_source="chunks")
    else:
        try:
            prompt_tokens, completion_tokens = checked_usage(stream.usage, streamed_chunks=stream.chunks,
                                                             max_tokens=spec.max_tokens, prompt=spec.prompt)
        except UsageProblem as exc:
            record["error_kind"], record["error"] = "usage", str(exc)[:_ERROR_TEXT_LIMIT]
        else:
            record.update(ok=True, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


async def _drain(response: aiohttp.ClientResponse) -> None:
    """Read the body's end after [DONE]; a server that never ends it only loses the connection."""
    try:
        async with asyncio.timeout(_DRAIN_S):
            await response.read()
    except (aiohttp.ClientError, TimeoutError) as exc:  # the answer was complete: its connection is dropped
        log.debug("the body after [DONE] did not end cleanly: %s", exc)


async def _reported(sending: Awaitable[dict[str, Any]], on_record: Optional[OnRecord]) -> dict[str, Any]:
    record = await sending
    if on_record is not None:
        on_record(record)
    return record


async def _sleep_until(at: float) -> None:
    """Sleep to `at` (perf_counter) within a fraction of a millisecond.

    asyncio.sleep alone wakes up to ~1 ms late (epoll's timeout is in whole milliseconds, rounded
    up), which would skew an open-loop schedule; so sleep to just before `at`, then yield to the
    loop (other requests' chunks are still read) until it is time.
    """
    delay = at - time.perf_counter() - _SPIN_S
    if delay > 0:
        await asyncio.sleep(delay)
    for _ in range(_MAX_SPINS):
        if time.perf_counter() >= at:
            return
        await asyncio.sleep(0)


async def _open_loop(session: aiohttp.ClientSession, url: str, config: LoadConfig, specs: Sequence[RequestSpec],
                     offsets: Sequence[float], t0: float, deadline: Optional[float],
                     on_record: Optional[OnRecord]) -> list[dict[str, Any]]:
    """Each spec sent at t0 + its offset (waiting for a slot under max_in_flight)."""
    slots = asyncio.Semaphore(config.max_in_flight) if config.max_in_flight else None

    async def send(spec: RequestSpec, offset: float, held: bool) -> dict[str, Any]:
        try:
            record = await _reported(send_one(session, url, config, spec, t0, offset), on_record)
        finally:
            if slots is not None:
                slots.release()
        if slots is not None:
            record["held_by_cap"] = held
        return record

    tasks = []
    for spec, offset in zip(specs, offsets, strict=True):
        at = t0 + offset
        if (deadline is not None and at > deadline) or (config.stop is not None and config.stop()):
            break
        await _sleep_until(at)
        held = False
        if slots is not None:
            held = slots.locked()
            await slots.acquire()
        tasks.append(asyncio.create_task(send(spec, offset, held)))
    return list(await asyncio.gather(*tasks))


async def run_load(config: LoadConfig, specs: Sequence[RequestSpec],
                   on_record: Optional[OnRecord] = None, *, offsets: Optional[Sequence[float]] = None,
                   replicas: Optional[ReplicaRecorder] = None) -> list[dict[str, Any]]:
    """Send `specs` as `config` says, or at `offsets` (s from the start, one per spec); one record
    per request actually sent, in index order.

    `on_record` sees each record as its request finishes (progress reporting); it runs on the
    event loop, so it must be quick. `replicas` samples Serve's replica counts on the run's clock
    from the start until the last answer (its `samples` hold them afterwards)."""
    if sum(x is not None for x in (config.rate, config.concurrency, offsets)) != 1:
        raise ValueError("exactly one of rate, concurrency and offsets")
    url = request_url(config.endpoint, config.api)
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=POOL_IDLE_S,
                                     ssl=config.ssl_context if config.ssl_context is not None else True)
    records: list[dict[str, Any]] = []
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=min(config.timeout_s, config.connect_timeout_s))
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        t0 = time.perf_counter()
        stop_sampling = asyncio.Event()
        sampling = asyncio.create_task(replicas.run(t0, stop_sampling)) if replicas is not None else None
        deadline = t0 + config.duration_s if config.duration_s is not None else None
        try:
            if config.concurrency is None:
                if offsets is None:
                    assert config.rate is not None
                    offsets = poisson_arrivals(config.rate, len(specs), config.seed)
                records = await _open_loop(session, url, config, specs, offsets, t0, deadline, on_record)
            else:
                queue = iter(specs)

                async def worker() -> None:
                    for spec in queue:  # a shared iterator: each spec goes to exactly one worker
                        now = time.perf_counter()
                        if deadline is not None and now > deadline:
                            return
                        records.append(await _reported(send_one(session, url, config, spec, t0, now - t0),
                                                       on_record))

                await asyncio.gather(*(worker() for _ in range(min(config.concurrency, len(specs)))))
        finally:
            if sampling is not None:
                stop_sampling.set()
                await sampling
    records.sort(key=lambda r: r["index"])
    log.info("sent %d requests, %d failed", len(records), sum(not r["ok"] for r in records))
    return records
