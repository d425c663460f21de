"""Capture one real vLLM engine's metric families that raypd's dashboard reads and the pair
capture was cut without: `PYTHONPATH=. .venv/bin/python -m tests.real.capture_engine_metrics`.

tests/fixtures/real/pair/ keeps the families verify and the benchmark read; the observability
dashboard also reads queue time, prefill time, time per output token, preemptions and the prefix
cache. This starts one engine of the same harness (tests/real/pd_pair.start_engine: the tiny model,
NixlConnector with UCX, as the pair's), writes its `/metrics` after start and after 4 chats sharing
a long prompt prefix (so the prefix cache hits), cut to the vLLM families named in
components/render/metric_names.py, under tests/fixtures/real/engine/. About a minute, under the machine's
real-engine lock.
"""

from __future__ import annotations

import sys

import requests

from components.render import metric_names as m
from tests.real.capture import ARTIFACTS, Writer, chat, cut_metrics
from tests.real.locate import real_vllm, skip_reason
from tests.real.machine_lock import machine_lock
from tests.real.pd_pair import start_engine
from tests.real.processes import stopping, wait_until

# vLLM's own names of every engine family metric_names lists (`ray_vllm_x` -> `vllm:x`).
FAMILIES = tuple(sorted({
    "vllm:" + value[len(m.RAY_VLLM_PREFIX):].removesuffix("_total")
    for value in vars(m).values()
    if isinstance(value, str) and value.startswith(m.RAY_VLLM_PREFIX) and value != m.RAY_VLLM_PREFIX}))
class _Writer(Writer):
    """capture.py's writer, naming this script in each file's `# captured` line."""

    def label(self, what: str) -> str:
        return super().label(what).replace("tests/real/capture.py", "tests/real/capture_engine_metrics.py")


PREFIX = "You are a careful assistant for the raypd observability capture. " * 6


def main() -> int:
    why_not = skip_reason()
    if why_not is not None:
        print(why_not, file=sys.stderr)
        return 2
    real = real_vllm()
    out = _Writer("engine", real)
    with machine_lock("capture engine metrics"), stopping([]) as procs:
        engine = start_engine(real, "engine", ARTIFACTS / "engine", cpu=0)
        procs.append(engine.process)
        wait_until("the engine", engine.ready, deadline_s=900, watch=[engine.process])
        out.text("metrics-idle.txt", "one engine's /metrics after start, before any request",
                 cut_metrics(requests.get(engine.metrics_url, timeout=30).text, FAMILIES))
        answers = [chat(engine.url, f"{PREFIX} question {i}", max_tokens=8, stream=bool(i % 2))
                   for i in range(4)]
        assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
        out.text("metrics-after-chats.txt",
                 "the same engine's /metrics after 4 chats (2 streamed) sharing a long prompt prefix",
                 cut_metrics(requests.get(engine.metrics_url, timeout=30).text, FAMILIES))
    out.finish()
    print(f"wrote {out.dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
