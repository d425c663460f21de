"""One set of real engines per machine at a time.

Several agents and several `make test` runs share one 2-core / 24 GB machine; a vLLM pair takes
~5 GB and Ray Serve LLM ~10 GB, so two sets at once could run the machine out of memory (and each
would slow the other past its deadlines). Whoever starts real engines first holds an exclusive
`flock` on a machine-wide file; the others wait for it with a generous deadline. The lock belongs
to an open file descriptor, so it is released when the holder exits, however it exits.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from pathlib import Path
from typing import Iterator

log = logging.getLogger(__name__)
LOCK_PATH = Path(os.environ.get("RAYPD_REAL_VLLM_LOCK", "/tmp/raypd-real-vllm.lock"))
WAIT_S = float(os.environ.get("RAYPD_REAL_VLLM_LOCK_WAIT_S", "3600"))


class LockTimeout(RuntimeError):
    """Another run held the machine's real-engine lock for longer than we may wait."""


@contextlib.contextmanager
def machine_lock(what: str, path: Path = LOCK_PATH, wait_s: float = WAIT_S) -> Iterator[float]:
    """Hold the lock while the block runs; yields how long it waited for it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        start = time.monotonic()
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - start > wait_s:
                    raise LockTimeout(f"{what}: {path} is held by another run of real engines "
                                      f"(waited {wait_s:.0f} s)") from None
                time.sleep(2.0)
        waited = time.monotonic() - start
        if waited > 1:
            log.info("%s: waited %.0f s for %s", what, waited, path)
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {what}\n".encode())
        try:
            yield waited
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
