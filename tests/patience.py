"""How long a test waits for something that is bound to happen, and the one loop that waits for it.

`make test` must pass on a busy 2-core CI machine. There the offline plan subprocess that takes
1.5 s on an idle machine takes 7 s and more (so a web job's engine starts that late), a fake pod's
Python start-up takes seconds, and a thread can wait a second for the CPU. A wait on a condition
ends as soon as the condition holds, so a long deadline costs nothing when things work: it only
bounds how long a broken test hangs before it fails. So every wait for an event uses PATIENCE_S,
and no test sleeps a fixed time and then asserts.

A test that checks something ends *quickly* (a cancel, a fatal error) compares against what the
slow path would take: make that path take longer than PATIENCE_S, and bound the fast one by it.
"""

from __future__ import annotations

import time
from typing import Callable, TypeVar

PATIENCE_S = 60.0
# A web job (an offline plan of the whole stack in a subprocess, an `up` ending with verify) or a
# page whose request runs a plan: CI's 2-core machine, sharing its cores with real engines, took
# minutes for one. Waits for such work use this; waits for anything else keep PATIENCE_S.
JOB_PATIENCE_S = 6 * PATIENCE_S

T = TypeVar("T")


def until(condition: Callable[[], T], what: str = "the condition", timeout: float = PATIENCE_S,
          every: float = 0.02) -> T:
    """Poll `condition` until it returns something true, and return that; fail naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)
