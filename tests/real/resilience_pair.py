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

import concurrent.futures
import contextlib
import dataclasses
import json
import os
import queue
import signal
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Optional

import requests

from serve.kv_evidence import KvReading, expired_only, kv_series, parse_vllm_samples
from tests.real.pd_pair import PdPair, engine_env
from tests.real.processes import ManagedProcess, free_port, http_ok, wait_until


class PairTarget:
    def __init__(self, pair: PdPair):
        self.pair = pair

    def describe(self) -> str:
        return f"the vLLM pair behind {self.pair.proxy_url}"

    def ready(self) -> Optional[bool]:
        return self.pair.prefill.ready() and self.pair.decode.ready()

    def kv_reading(self) -> Optional[KvReading]:
        """Decode's page and log as verify reads an engine, and prefill's expired leases (the
        producer counts them), as serve/resilience/faults.py reads them in a cluster."""
        try:
            page = requests.get(self.pair.decode.metrics_url, timeout=60).text
        except requests.RequestException:
            page = None
        reading = KvReading.of_engine("decode", page, self.pair.decode.output())
        try:
            prefill = requests.get(self.pair.prefill.metrics_url, timeout=60).text
        except requests.RequestException:
            return reading
        leases = kv_series(expired_only(parse_vllm_samples(prefill)))
        return dataclasses.replace(reading, pages={**reading.pages, "prefill leases": leases})


class _Spawner:
    """Starts processes from one thread that lives as long as the test process. The engines are
    started with PR_SET_PDEATHSIG (tests/real/processes.py), which fires when the THREAD that forked
    them ends: started from the fault's short-lived worker thread, the replacement prefill got
    SIGTERM the moment the load ended (seen in a run)."""

    def __init__(self) -> None:
        self._work: "queue.Queue[tuple[Callable[[], Any], concurrent.futures.Future[Any]]]" = queue.Queue()
        threading.Thread(target=self._serve, daemon=True, name="resilience-spawner").start()

    def _serve(self) -> None:
        while True:
            job, result = self._work.get()
            try:
                result.set_result(job())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                result.set_exception(exc)

    def run(self, job: Callable[[], Any]) -> Any:
        result: "concurrent.futures.Future[Any]" = concurrent.futures.Future()
        self._work.put((job, result))
        return result.result(timeout=120)


_SPAWNER: Optional[_Spawner] = None


def spawner() -> _Spawner:
    global _SPAWNER
    if _SPAWNER is None:
        _SPAWNER = _Spawner()
    return _SPAWNER


class PrefillKill:
    """SIGKILL the prefill engine, then start its replacement (same ports, new engine id)."""

    name = "prefill-process"

    def __init__(self, pair: PdPair, processes: list[ManagedProcess]):
        self.pair, self.processes, self.restarts = pair, processes, 0
        self.spawner = spawner()

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
        env = engine_env(self.pair.prefill.side_channel_port, cpu=0)
        new = self.spawner.run(lambda: ManagedProcess.start("prefill", argv, old.log_path, env=env))
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
    """`corrupting_proxy.py` in its own process (a relay in the test's process would share its
    GIL with the load generator and delay both), on 127.0.0.1; `corrupted()` asks it what it changed."""

    def __init__(self, upstream: str, log_path: Path, every: int = 20, skip_first: int = 0):
        self.port = free_port()
        self.process = ManagedProcess.start(
            "corrupting-proxy", [sys.executable, str(Path(__file__).with_name("corrupting_proxy.py")),
                                 "--upstream", upstream, "--port", str(self.port), "--every", str(every),
                                 "--skip-first", str(skip_first)], log_path)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def corrupted(self) -> list[str]:
        """The prompts of the answers it changed and delivered whole."""
        return list(requests.get(self.url + "/corrupted", timeout=30).json())

    def __enter__(self) -> "CorruptingProxy":
        wait_until("the corrupting proxy", lambda: http_ok(self.url + "/corrupted"), deadline_s=120,
                   watch=[self.process], interval_s=0.5)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.process.stop()


class HoldingProxy:
    """pd_proxy.py with `--hold-control` in its own process, in front of the pair's two engines:
    `hold(seconds, requests)` makes the next `requests` decode legs wait `seconds` after their
    prefill answered, as a decode queue that slow would (no heartbeat renews a lease for a request
    decode has not seen); `held()` lists the kv_transfer_params of the legs it held."""

    def __init__(self, pair: PdPair, log_path: Path):
        self.port = free_port()
        self.process = ManagedProcess.start(
            "holding-proxy", [sys.executable, str(Path(__file__).with_name("pd_proxy.py")), "--prefill",
                              pair.prefill.url, "--decode", pair.decode.url, "--port", str(self.port),
                              "--hold-control"], log_path)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def hold(self, seconds: float, requests_: int) -> None:
        answer = requests.post(self.url + "/_hold", json={"seconds": seconds, "requests": requests_}, timeout=30)
        answer.raise_for_status()

    def held(self) -> list[dict[str, Any]]:
        return list(requests.get(self.url + "/_hold", timeout=30).json()["held"])

    def __enter__(self) -> "HoldingProxy":
        wait_until("the holding proxy", lambda: http_ok(self.url + "/_hold"), deadline_s=120,
                   watch=[self.process], interval_s=0.5)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.process.stop()


class HeldDecode:
    """The fault: the next `requests` decode legs held `seconds` (longer than prefill's NIXL lease)."""

    name = "decode-held-past-the-lease"

    def __init__(self, proxy: HoldingProxy, seconds: float, requests_: int):
        self.proxy, self.seconds, self.requests = proxy, seconds, requests_

    def choose(self) -> str:
        return f"the next {self.requests} decode legs behind {self.proxy.url}"

    def inject(self) -> str:
        self.proxy.hold(self.seconds, self.requests)
        return f"the next {self.requests} decode legs held {self.seconds:g} s after their prefill answered"

    def restore(self) -> None:
        self.proxy.hold(0.0, 0)
