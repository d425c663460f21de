"""Processes the real tests start: each in its own process group, output to a file, always stopped.

The engines are heavy (two vLLM engines ~5 GB, Ray Serve LLM ~10 GB) and NIXL's UCX progress
thread busy-polls about half a core per idle engine, so nothing may outlive the fixture that
started it: `ManagedProcess.stop` signals the whole group (vLLM's API server forks an engine-core
process; `ray start --block` forks gcs_server, raylet, dashboard...), waits, then SIGKILLs it.
Readiness is polled with generous deadlines (a cold start takes minutes on a busy 2-core machine),
never guessed with a fixed sleep.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Mapping, Optional, Sequence

import requests

TAIL_LINES = 60


def free_port() -> int:
    """A TCP port free on loopback right now (the OS picks it; no fixed ports in these tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_port_blocks(blocks: int, size: int, attempts: int = 50) -> list[int]:
    """The first ports of `blocks` disjoint runs of `size` consecutive ports all free on loopback now."""
    bases: list[int] = []
    for _ in range(attempts):
        base = free_port()
        wanted = range(base, base + size)
        if base + size > 65535 or any(abs(base - other) < size for other in bases):
            continue
        socks = []
        try:
            for port in wanted:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                socks.append(sock)
                sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for sock in socks:
                sock.close()
        bases.append(base)
        if len(bases) == blocks:
            return bases
    raise RuntimeError(f"no {blocks} runs of {size} free ports on 127.0.0.1 after {attempts} attempts")


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports (held open together while chosen, so they cannot repeat)."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            socks.append(sock)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for sock in socks:
            sock.close()


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM it when the test process dies, even by SIGKILL, so no
    engine outlives a killed pytest (its own session keeps it out of the terminal's Ctrl-C)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last lines of an output file, for a failing test's message."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(cannot read {path}: {exc})"
    return "\n".join(text.splitlines()[-lines:])


class StartError(RuntimeError):
    """A real process did not come up: the message carries what it printed."""


@dataclass
class ManagedProcess:
    """One started command: its process group, and the file its stdout and stderr go to."""

    name: str
    argv: Sequence[str]
    log_path: Path
    popen: subprocess.Popen[bytes] = field(repr=False)

    @classmethod
    def start(cls, name: str, argv: Sequence[str], log_path: Path, *,
              env: Optional[Mapping[str, str]] = None, cwd: Optional[Path] = None) -> "ManagedProcess":
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as out:
            popen = subprocess.Popen(
                list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None, cwd=cwd,
                start_new_session=True,  # its own process group: stop() reaches every child
                preexec_fn=_die_with_parent,
            )
        return cls(name, argv, log_path, popen)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def describe(self) -> str:
        state = "running" if self.running() else f"exited with {self.popen.returncode}"
        return f"{self.name} (pid {self.pid}, {state}); last lines of {self.log_path}:\n{tail(self.log_path)}"

    def stop(self, grace_s: float = 30.0) -> None:
        """SIGTERM to the group, up to `grace_s` to finish, then SIGKILL to whatever is left."""
        pgid = self.pid  # start_new_session: the group id is the leader's pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and _group_alive(pgid):
            if self.popen.poll() is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.popen.wait(timeout=0.5)
            else:
                time.sleep(0.5)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=10)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_until(what: str, ready: Callable[[], bool], *, deadline_s: float,
               watch: Sequence[ManagedProcess] = (), interval_s: float = 2.0) -> float:
    """Poll `ready` until it is true; fail early when a watched process died. Returns seconds waited."""
    start = time.monotonic()
    while True:
        for proc in watch:
            if not proc.running():
                raise StartError(f"{what}: {proc.name} died before it was ready.\n{proc.describe()}")
        if ready():
            return time.monotonic() - start
        if time.monotonic() - start > deadline_s:
            details = "\n".join(proc.describe() for proc in watch)
            raise StartError(f"{what}: not ready after {deadline_s:.0f} s.\n{details}")
        time.sleep(interval_s)


def http_ok(url: str, timeout_s: float = 5.0) -> bool:
    """True when GET url answers 200 (a refused or slow connection is simply not ready yet)."""
    try:
        return requests.get(url, timeout=timeout_s).status_code == 200
    except requests.RequestException:
        return False


@contextlib.contextmanager
def stopping(procs: list[ManagedProcess]) -> Iterator[list[ManagedProcess]]:
    """Stop every process appended to `procs`, newest first, however the block ends (Ctrl-C too)."""
    try:
        yield procs
    finally:
        for proc in reversed(procs):
            proc.stop()
