"""The Pulumi CLIs one engine runs, and how they are stopped.

Cancel: each job runs its CLI calls through a `CliSession` (cli_process.py) that keeps the process,
so a cancel sends SIGINT (the CLI's graceful cancel) and the job, which is the deployment's lock,
ends only after the CLI exited. `CliSessions` holds the sessions running now, so the engine can
tell whether a CLI of its own still runs on a stack (before it drops a lock: `live`) and the app's
shutdown can stop them all within a bound (`stop_all`). A CLI call nobody waits for (`pulumi
cancel` after an interruption) runs `in_background`.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from pathlib import Path
from typing import Any, Callable

from pulumi import automation as auto

from webui.engines.base import EngineError
from webui.engines.cli_process import CliSession
from webui.redact import redact

logger = logging.getLogger(__name__)


class CliSessions:
    """The sessions of the jobs running now; `pid_dir(stack)` is where a session notes its CLI's pid
    (so a restarted server sees a CLI that outlived the last one)."""

    def __init__(self, pid_dir: Callable[[str], Path]):
        self._pid_dir = pid_dir
        self._lock = threading.Lock()
        self._sessions: set[CliSession] = set()

    def open(self, command: Any, stack: str) -> CliSession:
        """A session for one job on `stack`, running `command` (a PulumiCommand)."""
        pid_dir = self._pid_dir(stack)
        pid_dir.mkdir(parents=True, exist_ok=True)
        session = CliSession(command, label=stack, pid_dir=pid_dir)
        with self._lock:
            self._sessions.add(session)
        return session

    def close(self, session: CliSession) -> None:
        with self._lock:
            self._sessions.discard(session)

    def live(self, stack: str) -> bool:
        """A CLI of ours runs on `stack` now."""
        with self._lock:
            return any(s.label == stack and s.running for s in self._sessions)

    def stop_all(self, grace: float, terminate_grace: float) -> list[str]:
        """SIGINT every CLI and wait, bounded.

        Each CLI gets `grace` seconds to finish its in-flight steps and exit. One still running then
        gets a second SIGINT (the CLI's terminate: in-flight steps stay as pending operations, which
        the next up/destroy reports), and after `terminate_grace` more seconds SIGKILL, logged as an
        error. Returns the stacks whose CLI needed more than `grace`.
        """
        with self._lock:
            sessions = list(self._sessions)
        running = [session.label for session in sessions if session.running]
        if running:
            logger.warning("stopping: waiting up to %.0f s for the Pulumi CLI of %s to finish its "
                           "in-flight steps (cancelled)", grace, ", ".join(running))
        for session in sessions:
            session.interrupt()
        deadline = time.monotonic() + grace
        for session in sessions:
            session.wait_idle(max(0.0, deadline - time.monotonic()))
        overdue = [session for session in sessions if session.running]
        for session in overdue:
            logger.warning("pulumi %s: still running %.0f s after the cancel; terminating it "
                           "(its in-flight steps stay as pending operations)", session.label, grace)
            session.terminate()
        deadline = time.monotonic() + terminate_grace
        for session in overdue:
            if not session.wait_idle(max(0.0, deadline - time.monotonic())):
                session.kill()
                session.wait_idle(5.0)
        return [session.label for session in overdue]


def in_background(call: Callable[[], Any], what: str) -> threading.Thread:
    """Run a CLI call off the request thread; log (never raise) how it went."""

    def run() -> None:
        try:
            call()
        except (EngineError, auto.CommandError) as exc:
            logger.info("%s: %s", what, redact(getattr(exc, "message", None) or str(exc)))
        except Exception:  # noqa: BLE001 - a background thread has nobody to raise to
            logger.exception("%s failed", what)

    thread = threading.Thread(target=run, name="raypd-pulumi-cancel", daemon=True)
    thread.start()
    return thread


def signal_name(signum: int) -> str:
    """SIGKILL, SIGTERM, ...: what killed a CLI."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
