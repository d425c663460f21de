"""raypd's load generator (serve.benchmark.loadgen) held at a fixed concurrency until the test says stop.

A scaling test cannot know in advance how long a new CPU engine takes to start under load (~150 s
measured here, more on a busy machine), so the load runs until what the test waits for happened,
not for a fixed duration: `run_load`'s concurrency workers draw requests from an endless workload
that ends when the test sets the stop event; requests already sent run to their end, so every
record is a complete answer or a failure, never one cut short by the test.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any, Iterator, Optional, Sequence, overload

from serve.benchmark.loadgen import LoadConfig, run_load
from serve.benchmark.replicas import ReplicaRecorder
from serve.benchmark.workload import RequestSpec, synthetic_workload

POOL = 32  # distinct prompts, cycled
MOST_REQUESTS = 1_000_000  # a bound run_load reads through len(); the stop event ends the run long before
REQUEST_TIMEOUT_S = 600.0


class UntilStopped(Sequence[RequestSpec]):
    """Requests from a small pool of prompts, each with its own index, until `stop` is set."""

    def __init__(self, pool: list[RequestSpec], stop: threading.Event) -> None:
        self._pool = pool
        self._stop = stop

    def __len__(self) -> int:
        return MOST_REQUESTS

    @overload
    def __getitem__(self, index: int) -> RequestSpec: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[RequestSpec]: ...

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        return dataclasses.replace(self._pool[index % len(self._pool)], index=index)

    def __iter__(self) -> Iterator[RequestSpec]:
        index = 0
        while not self._stop.is_set() and index < MOST_REQUESTS:
            yield self[index]
            index += 1


class BackgroundLoad:
    """A load running in its own thread and event loop; `finish` stops sending and waits for the rest."""

    def __init__(self, config: LoadConfig, specs: Sequence[RequestSpec], stop: threading.Event,
                 replicas: Optional[ReplicaRecorder] = None) -> None:
        self.stop = stop
        self.replicas = replicas
        self.records: list[dict[str, Any]] = []
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(name="scaling-load", daemon=True, target=self._send, args=(config, specs))
        self._thread.start()

    def _send(self, config: LoadConfig, specs: Sequence[RequestSpec]) -> None:
        try:
            self.records.extend(asyncio.run(run_load(config, specs, replicas=self.replicas)))
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread by finish()
            self.errors.append(exc)

    def finish(self, timeout_s: float = REQUEST_TIMEOUT_S + 60) -> list[dict[str, Any]]:
        self.stop.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise AssertionError(f"the load did not end {timeout_s:.0f} s after it was told to stop")
        if self.errors:
            raise AssertionError(f"the load generator failed: {self.errors[0]!r}")
        return self.records


def start_load(endpoint: str, model: str, *, concurrency: int, input_words: int, output_tokens: int,
               replicas: Optional[ReplicaRecorder] = None) -> BackgroundLoad:
    """Chat requests of `input_words` words and exactly `output_tokens` tokens (ignore_eos), streamed,
    `concurrency` at a time, until `finish`; `replicas` records Serve's counts over the run, as
    `serve.benchmark run --dashboard` does."""
    # A connect may wait as long as a request: while a second CPU engine loads, the 2-core machine
    # starved Ray's proxy and the default 10 s connect timeout failed 4 of 716 requests (a CI run).
    config = LoadConfig(endpoint=endpoint, model=model, concurrency=concurrency, timeout_s=REQUEST_TIMEOUT_S,
                        connect_timeout_s=REQUEST_TIMEOUT_S, ignore_eos=True)
    stop = threading.Event()
    return BackgroundLoad(config, UntilStopped(synthetic_workload(POOL, input_words, output_tokens, seed=30), stop),
                          stop, replicas)


def answered(record: dict[str, Any]) -> bool:
    """HTTP 200 and the stream ran to [DONE]. An answer whose few tokens all decoded to no text is
    still an answer: the random tiny model does that (about 1 in 9 one-token answers, measured on
    this machine), so answers are judged by status, not by text."""
    return record.get("status") == 200 and (record["ok"] or record.get("error") == "no tokens in the answer")
