"""disconnect: a client that walks away mid-stream; the server must stop generating for it.

The evidence is the engines' own Prometheus counters, read before and after: vLLM's
`vllm:num_requests_running` falls back to what it was, and `vllm:generation_tokens_total` rose by
fewer tokens than the request asked for (ignore_eos: an engine that ignores the hang-up generates
all of them). Under Ray Serve the same series are `ray_vllm_*` on Ray's metrics export port. The
endpoint's own `/metrics` is read (vLLM serves it on its API port); an endpoint without one (Ray
Serve's HTTP proxy, a gateway) is a `skip` saying where to look, unless the program calling
`run_features` names the page (`metrics_url`). Ray exports every ~10 s, hence the wait.
"""

from __future__ import annotations

import time
from typing import Mapping, Optional, Sequence

from prometheus_client.parser import text_string_to_metric_families

from serve.conformance.client import Session
from serve.conformance.exchange import Exchange, content_chunks
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
from serve.conformance.groups.basics import request

GROUP = "disconnect"
RUNNING = ("vllm:num_requests_running", "ray_vllm_num_requests_running")
GENERATED = ("vllm:generation_tokens_total", "ray_vllm_generation_tokens_total")
ASKED = 768
READ_CHUNKS = 2
WAIT_S = 45.0
POLL_S = 1.0


def totals(page: str) -> dict[str, float]:
    """The running requests and generated tokens on a Prometheus page, summed over engines."""
    found: dict[str, float] = {}
    try:
        for family in text_string_to_metric_families(page):
            for sample in family.samples:
                for kind, names in (("running", RUNNING), ("generated", GENERATED)):
                    if sample.name in names:
                        found[kind] = found.get(kind, 0.0) + sample.value
    except ValueError:
        return {}
    return found


def _reading(session: Session, ctx: Context, label: str) -> Exchange:
    ex = session.metrics(label, ctx.metrics_url)
    page = ex.body if isinstance(ex.body, str) else ""
    # keep only the two sums: a metrics page is ~100 KB, the evidence is two numbers
    return Exchange(ex.label, ex.route, ex.request, ex.status, body=totals(page) if ex.status == 200 else None,
                    error=ex.error, seconds=ex.seconds)


def probe(session: Session, ctx: Context) -> list[Exchange]:
    before = _reading(session, ctx, "before")
    if before.status != 200:
        return [before]
    asked = min(ASKED, (ctx.max_model_len or 2 * ASKED) // 2)
    walked = session.walk_away("walk away", "chat", READ_CHUNKS, **request("chat", max_tokens=asked))
    readings = [before, walked]
    deadline = time.monotonic() + WAIT_S
    while True:  # bounded by WAIT_S: ends when the engine is idle again and its counters moved
        after = _reading(session, ctx, f"after {len(readings) - 1}")
        readings.append(after)
        done = _settled(before.body, after.body)
        if done or time.monotonic() + POLL_S > deadline:
            return readings
        time.sleep(POLL_S)


def running_of(reading: Optional[Mapping[str, float]]) -> Optional[float]:
    """The running requests a reading shows; 0 when the page has the engines' token counter but no
    running gauge: Ray's export drops a gauge once the engine is idle (CI's runs on Ray 2.60 read
    `generated` alone after the client left, and before the request when the engine had been idle
    since an earlier test), so its absence beside the counter is an idle engine, before or after.
    None when the page has neither (not a vLLM page, or engines that never served: Ray exports an
    engine's series only after its first request; the judge reads that as 0 when the page AFTER the
    request has them, and as a page it cannot read when neither has)."""
    if not reading:
        return None
    if "running" in reading:
        return reading["running"]
    return 0.0 if "generated" in reading else None


def _settled(before: Optional[Mapping[str, float]], after: Optional[Mapping[str, float]]) -> bool:
    running_after = running_of(after)
    if running_after is None or after is None:
        return False
    running_before = running_of(before) or 0.0  # nothing before: engines that had not served yet
    return running_after <= running_before and after.get("generated", 0) > (before or {}).get("generated", 0)


def judge(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
    before = by_label(exchanges, "before")
    after = exchanges[-1]
    b = before.body if before is not None and isinstance(before.body, Mapping) else {}
    a = after.body if isinstance(after.body, Mapping) else {}
    if before is None or before.status != 200 or (running_of(b) is None and running_of(a) is None):
        where = ctx.metrics_url or "the endpoint's /metrics"
        why = (before.error or f"HTTP {before.status}") if before is not None else "not read"
        return skipped(f"no vllm:num_requests_running at {where} ({why}): whether the engine stops for a "
                       "client that left cannot be seen from here; watch the engines' num_requests_running")
    walked = by_label(exchanges, "walk away")
    broken = not_answered(walked, "the stream") if walked is None or walked.status != 200 else None
    if broken is not None or walked is None:
        return broken or failed("no stream")
    asked = int(walked.request.get("max_tokens") or 0)
    got = content_chunks(walked)
    # an engine that never served exports nothing under Ray (tests/fixtures/real/ray/metrics-export-idle.txt)
    running_after, running_before = running_of(a), running_of(b) or 0.0
    if running_after is None:
        return failed(f"the metrics could not be read after the client left ({after.error or after.status})")
    generated = a.get("generated", 0) - b.get("generated", 0)
    waited = sum(ex.seconds for ex in exchanges[2:]) + POLL_S * (len(exchanges) - 3)
    if running_after > running_before:
        return failed(f"read {got} chunk(s) of {asked} and closed; {running_after:g} request(s) still running "
                      f"~{waited:.0f} s later (before: {running_before:g}): the engine goes on for nobody")
    if generated >= asked:
        return failed(f"read {got} chunk(s) of {asked} and closed, but the engines generated {generated:g} "
                      "tokens: the whole answer, for a client that left")
    idle = "" if "running" in a else " (Ray's export dropped the idle engine's running gauge)"
    return passed(f"read {got} chunk(s) of {asked} and closed; the engines stopped after {generated:g} "
                  f"token(s) and went back to {running_after:g} running{idle}")


FEATURES = [Feature("disconnect.stops_generation", GROUP, "a client that leaves mid-stream: the server stops "
                    "generating", probe, judge)]
