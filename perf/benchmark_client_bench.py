"""How fast can serve.benchmark's open-loop client send on this machine and still keep its schedule?

    python perf/benchmark_client_bench.py [--seconds 4]

Starts the local fake OpenAI server (tests/fakes/openai_server.py) in a subprocess, streaming 64
tokens per request with no injected delay, and runs the open-loop Poisson client at rising rates
until its p95 timing error passes 1 ms. For each rate it prints the client's own timing error,
actual minus scheduled send time (p50, p95, p99, max), and whether every request completed. The
numbers reported are the highest rates whose p99 (strict) and p95 timing errors stay under 1 ms
with no failed request: above them, the client's measurements of a server include the client's
own lateness. Server and client share the machine's 2 cores, and the p99 of this machine sits
near 1 ms at any rate (the server process's threads take the client's core now and then), so
the p99 number is noisy from run to run; the p95 one is stable. Nothing is asserted. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # a script: make the project importable from anywhere

from serve.benchmark.loadgen import LoadConfig, run_load  # noqa: E402
from serve.benchmark.summary import percentile  # noqa: E402
from serve.benchmark.workload import synthetic_workload  # noqa: E402

MODEL = "bench-model"
TOKENS = 64
LIMIT_MS = 1.0
RATES = (50, 100, 200, 300, 400, 500, 600, 700, 800, 1000, 1200, 1600)
SERVER = (
    "import sys, time\n"
    "from tests.fakes.openai_server import OpenAIServer\n"
    f"with OpenAIServer({MODEL!r}, output_tokens={TOKENS}) as server:\n"
    "    print(server.url, flush=True)\n"
    "    sys.stdin.read()\n"
)


def measure(url: str, rate: float, seconds: float) -> dict[str, Any]:
    count = max(200, int(rate * seconds))
    config = LoadConfig(url, MODEL, rate=rate, timeout_s=30.0, seed=1)
    records = asyncio.run(run_load(config, synthetic_workload(count, 32, TOKENS)))
    lateness = [(r["sent_s"] - r["scheduled_s"]) * 1000 for r in records]
    return {"rate": rate, "requests": len(records), "failed": sum(not r["ok"] for r in records),
            "p50_ms": percentile(lateness, 50), "p95_ms": percentile(lateness, 95),
            "p99_ms": percentile(lateness, 99), "max_ms": max(lateness)}


def good(result: dict[str, Any], key: str) -> bool:
    return bool(result["failed"] == 0 and result[key] < LIMIT_MS)


def report(result: dict[str, Any]) -> None:
    print(f"rate {result['rate']:7.0f}/s  requests {result['requests']:6d}  failed {result['failed']:4d}  send error "
          f"p50 {result['p50_ms']:.3f}  p95 {result['p95_ms']:.3f}  p99 {result['p99_ms']:.3f}  "
          f"max {result['max_ms']:.3f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=4.0, help="sending time per rate (at least 200 requests)")
    args = parser.parse_args()
    server = subprocess.Popen([sys.executable, "-c", SERVER], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        measure(url, 50.0, 1.0)  # warm-up: imports, first connections
        results = []
        for rate in RATES:  # stop once even the p95 is over: the client has fallen behind for good
            results.append(measure(url, rate, args.seconds))
            report(results[-1])
            if not good(results[-1], "p95_ms"):
                break
        for key in ("p99_ms", "p95_ms"):
            best = max((r["rate"] for r in results if good(r, key)), default=0.0)
            print(f"highest open-loop rate with {key[:3]} send error < {LIMIT_MS:g} ms, {TOKENS} streamed tokens per "
                  f"request: {best:.0f} requests/s ({best * TOKENS:.0f} output tokens/s)")
    finally:
        if server.stdin is not None:
            server.stdin.close()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


if __name__ == "__main__":
    main()
