"""One resilience run: golden answers, a steady load, the fault injected under it, the evidence.

The steady load is serve.benchmark.loadgen's open-loop Poisson load at `rate`; the fault is
injected `fault_at_s` into it, from a thread so the load keeps its schedule; the load keeps going
until the requests finished so far show the deployment recovered (serve/resilience/judge.py
`recovery`, settled for `settle_s`), at most `duration_s` (loadgen's `stop` hook). The
deployment's readiness is sampled beside it (for the wedge); the decode's KV counters are read
before the load and after it. What a fault is and what a deployment is are two small interfaces
(`Fault`, `Target`): serve/resilience/faults.py implements both through the Kubernetes API, and a
test implements them for a local engine pair. `Fault.restore` is always called, however the run
ends (the CLI also turns SIGTERM into that path): it uncordons a node.

A caller that must be able to stop the run (the web app's cancel) passes `cancelled`: it is
polled every CANCEL_POLL_S; once it says so, no fault is injected any more, the load's requests in
flight are abandoned (the load stops at once, not at the end of its timeouts) and `measure` raises
RunCancelled; `Fault.restore` is still the caller's to call. `on_phase` hears the run's phases
(golden, load, fault injected, recovering) as they begin, in words.

Clocks: the load generator's records are on its own clock (seconds from its start); the fault time
is taken on the same perf_counter, from the moment just before the load started, so it is early by
at most the time the load generator takes to open its client session (well under a millisecond).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from typing import Any, Callable, Mapping, Optional, Protocol

from serve.benchmark.loadgen import run_load
from serve.kv_evidence import KvReading
from serve.resilience import judge
from serve.resilience.golden import ASKED, Workload, record_golden
from serve.resilience.report import Measured, Settings

log = logging.getLogger(__name__)
READY_EVERY_S = 2.0
CANCEL_POLL_S = 0.2
# Requests that must have ended before the fault: without them there is no pre-fault rate to recover
# to (judge.recovery), and the run would measure nothing. On a slow deployment (a CI machine at load
# 20 took over 30 s per request) the fault waits for them past `fault_at_s`.
BASELINE_REQUESTS = 3
OnPhase = Callable[[str, str], None]


class Target(Protocol):
    """The deployment under test: its readiness, and its decode's KV counters."""

    def describe(self) -> str: ...

    def ready(self) -> Optional[bool]:
        """Are all of the deployment's engines Ready now? None when that cannot be read."""

    def kv_reading(self) -> Optional[KvReading]:
        """The decode's KV counters now, None when they cannot be read."""


class Fault(Protocol):
    name: str

    def choose(self) -> str:
        """Pick what to hit (checked against the deployment) and say what, before any load."""

    def inject(self) -> str:
        """Do it; say what was done. Raises FaultRefused when it may not."""

    def restore(self) -> None:
        """Undo what must not stay (a cordon); safe to call twice, or when nothing was done."""


class FaultRefused(Exception):
    """The fault cannot or may not be injected (RBAC, nothing matching the deployment): exit 2."""


class RunCancelled(Exception):
    """The caller's `cancelled` said stop: the load was abandoned, nothing is reported."""


def _never() -> bool:
    return False


def _quiet(phase: str, words: str) -> None:
    pass


Samples = list[tuple[float, Optional[bool]]]


def _recovered(finished: list[Mapping[str, Any]], golden: list[Optional[str]], hit: dict[str, Any],
               settle_s: float) -> bool:
    """Stop sending? Once the fault is in and the requests finished so far show recovery."""
    if "what" not in hit:
        return False
    return judge.recovery(judge.judged(finished, golden), hit["at"], settle_s).recovered


async def _under_load(config: Any, specs: list[Any], fault: Fault, fault_at_s: float, target: Target,
                      ready_every_s: float, golden: list[Optional[str]], settle_s: float,
                      cancelled: Callable[[], bool] = _never, on_phase: OnPhase = _quiet
                      ) -> tuple[list[dict[str, Any]], float, str, Samples]:
    samples: Samples = []
    done = asyncio.Event()
    hit: dict[str, Any] = {}
    finished: list[Mapping[str, Any]] = []
    config = replace(config, stop=lambda: _recovered(finished, golden, hit, settle_s))
    start = time.perf_counter()

    async def inject() -> None:
        await asyncio.sleep(max(0.0, start + fault_at_s - time.perf_counter()))
        if len(finished) < BASELINE_REQUESTS:
            on_phase("load", f"{len(finished)} request(s) ended so far: the fault waits for {BASELINE_REQUESTS} "
                             "(a pre-fault rate to recover to)")
        while len(finished) < BASELINE_REQUESTS and not cancelled():
            if load.done():
                raise FaultRefused(f"only {len(finished)} request(s) ended in the whole load, fewer than the "
                                   f"{BASELINE_REQUESTS} a pre-fault rate needs: nothing was injected (is the "
                                   "deployment answering? a longer --duration gives it more time)")
            await asyncio.sleep(CANCEL_POLL_S)
        if cancelled():
            return  # the watcher ends the run: no fault after a cancel
        hit["at"] = time.perf_counter() - start
        hit["what"] = await asyncio.to_thread(fault.inject)
        on_phase("fault injected", f"{hit['what']} at {hit['at']:.1f} s into the load")
        on_phase("recovering", f"the load goes on until the answers have been good again for {settle_s:g} s")

    async def watch() -> None:
        while not cancelled():
            await asyncio.sleep(CANCEL_POLL_S)

    async def sample_ready() -> None:
        while not done.is_set():
            at = time.perf_counter() - start
            samples.append((at, await asyncio.to_thread(target.ready)))
            try:
                await asyncio.wait_for(done.wait(), ready_every_s)
            except TimeoutError:
                pass

    load = asyncio.create_task(run_load(config, specs, on_record=finished.append))
    injector = asyncio.create_task(inject())
    sampler = asyncio.create_task(sample_ready())
    watcher = asyncio.create_task(watch())
    try:
        while not (load.done() and injector.done()):
            await asyncio.wait({t for t in (load, injector, watcher) if not t.done()},
                               return_when=asyncio.FIRST_COMPLETED)
            if watcher.done():  # cancelled (watch returns only then): abandon the requests in flight
                raise RunCancelled()
            if injector.done() and injector.exception() is not None:
                load.cancel()  # the fault was refused: the run measures nothing, stop sending
                raise injector.exception()  # type: ignore[misc]
            if load.done() and load.exception() is not None:
                break  # awaited below: its error is the run's
        records = await load
        await injector  # a load shorter than fault_at_s ends before the fault: that is refused up front
        if cancelled():  # a cancel in the last poll interval
            raise RunCancelled()
    finally:
        done.set()
        for task in (load, injector, watcher):
            if not task.done():
                task.cancel()
        await asyncio.gather(load, injector, watcher, return_exceptions=True)
        await sampler
    return records, float(hit["at"]), str(hit["what"]), samples


def measure(endpoint: str, model: str, fault: Fault, target: Target, settings: Settings,
            workload: Optional[Workload] = None, *, ready_every_s: float = READY_EVERY_S,
            connection: Optional[dict[str, Any]] = None, cancelled: Callable[[], bool] = _never,
            on_phase: OnPhase = _quiet) -> Measured:
    """Golden answers, then the load with the fault; `fault.restore()` is the caller's to call
    (in a finally) so that an interrupt anywhere still reaches it. Raises RunCancelled once
    `cancelled()` says so (checked between the steps and every CANCEL_POLL_S under the load)."""
    if not 0 < settings.fault_at_s < settings.duration_s:
        raise ValueError("the fault must come during the load (0 < fault_at_s < duration_s)")
    connection = dict(connection or {})
    workload = workload or Workload()
    chosen = fault.choose()
    on_phase("golden", f"target: {chosen}; recording the golden answers ({workload.prompts} prompts, "
                       f"each asked {ASKED} times)")
    golden = record_golden(workload, endpoint, model, settings.timeout_s, **connection)
    kv_before = target.kv_reading()
    config = workload.config(endpoint, model, rate=settings.rate, duration_s=settings.duration_s,
                             timeout_s=settings.timeout_s, **connection)
    specs = workload.load_specs(settings.rate, settings.duration_s)
    if cancelled():
        raise RunCancelled()
    on_phase("load", f"steady load at {settings.rate:g} req/s; the {fault.name} fault comes "
                     f"{settings.fault_at_s:g} s in")
    records, fault_s, injected, ready = asyncio.run(
        _under_load(config, specs, fault, settings.fault_at_s, target, ready_every_s, golden.answers,
                    settings.settle_s, cancelled, on_phase))
    kv_after = target.kv_reading()
    return Measured(fault.name, chosen, injected, fault_s, golden, records, ready, kv_before, kv_after)
