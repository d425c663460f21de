"""`python -m serve.benchmark run` (Contract 6) against the real pair: its numbers against vLLM's own.

What each side measures: the benchmark times, at the client, from sending a request to the proxy
until the first content chunk (TTFT) and the last (e2e), and reads token counts from the usage
chunk. Behind the proxy the request first runs to completion on prefill (one token), then goes
to decode, which pulls the KV and generates. vLLM's histograms time each engine's part from the
moment its API server received the request. So, per request and so in the mean:
- the client's TTFT is at least prefill's e2e plus decode's TTFT (the two legs are sequential);
  what it adds on top (the proxy's two HTTP hops, the API servers' chat templating and
  tokenization before vLLM's clock starts, and the scheduling delays of a busy 2-core box) is no
  accuracy fact to assert: it grew from ~0.3 s to over 3 s per request with other work on the
  machine. It is printed, as a measurement; a TTFT the client took too late is caught by the next
  point instead, which holds under any load;
- the time from first to last token is at least decode's own (the hop adds about the same delay to
  both ends, and relaying each chunk more on a loaded machine), so a client that stamped its first
  token late or its last early shows a generation time shorter than decode's;
- token counts are exact: the usage chunk is decode's count, and prefill made one token each.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.real import prom
from tests.real.pd_pair import PdPair
from tests.real.processes import wait_until

REQUESTS = 20
OUTPUT_TOKENS = 16


def _delta(after: str, before: str, name: str, **labels: str) -> float:
    return prom.value(after, name, **labels) - prom.value(before, name, **labels)


def test_benchmark_counts_and_latencies_agree_with_vllms_counters(real_pd_pair: PdPair, tmp_path: Path) -> None:
    pair = real_pd_pair
    decode_before = prom.scrape(pair.decode.metrics_url)
    prefill_before = prom.scrape(pair.prefill.metrics_url)
    out = tmp_path / "run"
    result = subprocess.run(
        [sys.executable, "-m", "serve.benchmark", "run", "--endpoint", pair.proxy_url, "--model", pair.model_id,
         "--rate", "4", "--requests", str(REQUESTS), "--input-tokens", "64", "--output-tokens", str(OUTPUT_TOKENS),
         "--ignore-eos", "--timeout", "120", "--out", str(out), "--json"],
        capture_output=True, text=True, timeout=600, cwd=Path(__file__).resolve().parents[3],
    )
    assert result.returncode == 0, f"benchmark exited {result.returncode}: {result.stderr[-2000:]}\n{pair.describe()}"
    summary = json.loads((out / "summary.json").read_text())
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines() if line.strip()]
    assert summary["requests"] == {"sent": REQUESTS, "completed": REQUESTS, "failed": 0}, summary

    def decode_done() -> bool:
        text = prom.scrape(pair.decode.metrics_url)
        return _delta(text, decode_before, "vllm:time_to_first_token_seconds_count") >= REQUESTS

    wait_until("decode's metrics to count every request", decode_done, deadline_s=300, interval_s=0.5)
    decode = prom.scrape(pair.decode.metrics_url)
    prefill = prom.scrape(pair.prefill.metrics_url)
    message = pair.describe()

    # token counts: exact
    completion = sum(r["completion_tokens"] for r in records)
    prompt = sum(r["prompt_tokens"] for r in records)
    assert completion == REQUESTS * OUTPUT_TOKENS
    assert _delta(decode, decode_before, "vllm:generation_tokens_total") == completion, message
    assert _delta(decode, decode_before, "vllm:prompt_tokens_total") == prompt, message
    assert _delta(prefill, prefill_before, "vllm:prompt_tokens_total") == prompt, message
    assert _delta(prefill, prefill_before, "vllm:generation_tokens_total") == REQUESTS, message  # max_tokens 1
    assert _delta(decode, decode_before, "vllm:prompt_tokens_by_source_total", source="external_kv_transfer") == prompt
    assert _delta(decode, decode_before, "vllm:nixl_xfer_time_seconds_count") == REQUESTS, message
    assert _delta(decode, decode_before, "vllm:request_success_total") == REQUESTS, message

    # TTFT: the client's covers prefill's whole request and decode's first token, plus the hops
    client_ttft_s = sum(r["ttft_ms"] for r in records) / 1000 / REQUESTS
    decode_ttft_s = _delta(decode, decode_before, "vllm:time_to_first_token_seconds_sum") / REQUESTS
    prefill_e2e_s = _delta(prefill, prefill_before, "vllm:e2e_request_latency_seconds_sum") / REQUESTS
    servers_s = prefill_e2e_s + decode_ttft_s
    detail = f"client TTFT {client_ttft_s:.4f} s, prefill e2e {prefill_e2e_s:.4f} s + decode TTFT {decode_ttft_s:.4f} s"
    assert decode_ttft_s > 0 and prefill_e2e_s > 0, detail
    assert client_ttft_s >= 0.95 * servers_s, detail
    print(f"measured: {detail}; the hops and API-server work add {client_ttft_s - servers_s:.3f} s per request")
    assert summary["ttft_ms"]["mean"] is not None and abs(summary["ttft_ms"]["mean"] / 1000 - client_ttft_s) < 1e-6

    # first to last token: decode's own generation time, the hop's delay cancels out
    client_generation_s = sum(r["e2e_ms"] - r["ttft_ms"] for r in records) / 1000
    decode_generation_s = (_delta(decode, decode_before, "vllm:e2e_request_latency_seconds_sum")
                           - _delta(decode, decode_before, "vllm:time_to_first_token_seconds_sum"))
    detail = f"first-to-last token: client {client_generation_s:.3f} s, decode {decode_generation_s:.3f} s"
    assert decode_generation_s > 0, detail
    # The client cannot see the last token before decode made it, nor the first after it: a client
    # that stamped its first token late (or its last early) falls short of decode's own time. What
    # relaying each chunk adds on top grows with the machine's load (7 s over 16 s measured with two
    # CPU hogs running): printed, not bounded.
    assert client_generation_s >= 0.9 * decode_generation_s - 0.05 * REQUESTS, detail
    assert all(r["ttft_ms"] <= r["e2e_ms"] for r in records)
    print(f"measured: {detail}")
