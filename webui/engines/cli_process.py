"""Pulumi CLI calls with a handle on the process, so a job can be cancelled the way Ctrl-C cancels.

The Automation API keeps no handle on the CLI it starts (`PulumiCommand.run` waits inside a
`with Popen(...)`), and `pulumi cancel` on the file backend only deletes the lock while the CLI
goes on creating resources. The CLI's own graceful cancel is SIGINT: it stops starting new steps,
lets the ones in flight finish, writes its checkpoint and exits non-zero ("update canceled").

`CliSession` is what one job hands to its `LocalWorkspace` as `pulumi_command`. Its `run` does what
the SDK's `PulumiCommand.run` does (`--non-interactive` first, the workspace's environment on top
of ours plus PULUMI_AUTOMATION_API, the CLI's own directory first on PATH, stdout/stderr streamed
line by line to the callbacks, `create_command_error` on a non-zero exit) and also keeps the
running `Popen`, so that:

* `interrupt()` sends SIGINT once (the graceful cancel) to a running operation (up, preview,
  refresh, destroy). After it, no operation starts: `run` raises OperationCancelled instead, so a
  cancel that comes before the operation's CLI started means nothing ran. Short bookkeeping calls
  (stack select, stack output, history, export, stack rm) are neither refused nor signalled: after
  an operation that finished anyway, its outputs are still read and a destroyed stack removed.
* `terminate()` sends a second SIGINT: the CLI's own "terminate immediately" (what pressing ^C twice
  does). In-flight steps are abandoned and stay as pending operations in the state. Only the app's
  shutdown does this, after a grace period; a user's cancel never escalates.
* `kill()` is SIGKILL, the last resort of a bounded shutdown, logged with the stack's name.

The CLI runs in its own session (process group): Ctrl-C in the terminal that runs the web app
reaches the app only, which then cancels each CLI once. Without that, the terminal's SIGINT would
reach the CLIs as well and the app's own SIGINT would be their second one (terminate).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from pulumi.automation._cmd import CommandResult, OnOutput
from pulumi.automation.errors import create_command_error

from webui.engines.base import OperationCancelled

logger = logging.getLogger(__name__)

PID_FILE = "cli.pid"
# Subcommands that change (or plan) the stack: the ones a cancel stops and refuses to start.
OPERATION_COMMANDS = frozenset({"up", "update", "preview", "refresh", "destroy", "import", "watch"})


def subcommand(args: list[str]) -> str:
    """The first word of a CLI call that is not a flag (`up`, `stack`, ...)."""
    return next((arg for arg in args if not arg.startswith("-")), "")


class CliSession:
    """One job's Pulumi CLI calls, one at a time, each interruptible while it runs."""

    def __init__(self, base: Any, label: str, pid_dir: Optional[Path] = None):
        # `base` is a PulumiCommand (found and version-checked once at start-up): its binary and
        # version are all a session needs; LocalWorkspace reads `version` to pick the event channel.
        self.command: str = base.command
        self.version = base.version
        self.label = label
        self._pid_dir = pid_dir
        self._lock = threading.Lock()
        self._process: Optional[subprocess.Popen[str]] = None
        self._process_is_operation = False
        self._idle = threading.Event()
        self._idle.set()
        self._interrupts = 0
        self._cancelled = False
        # The signal that ended the last operation's CLI (negative exit code), if one did: such a
        # CLI left its lock, and maybe pending operations, behind.
        self.died_by_signal: Optional[int] = None

    # ---- what the SDK calls ----

    def run(
        self,
        args: list[str],
        cwd: str,
        additional_env: Mapping[str, str],
        on_output: Optional[OnOutput] = None,
        on_error: Optional[OnOutput] = None,
    ) -> CommandResult:
        """Run one CLI command like `PulumiCommand.run`, keeping the process for `interrupt`."""
        separator = args.index("--") if "--" in args else len(args)
        if "--non-interactive" not in args[:separator]:
            args.insert(0, "--non-interactive")  # fail instead of prompting (and hanging)
        env = {**os.environ, **additional_env, "PULUMI_AUTOMATION_API": "true"}
        if os.path.isabs(self.command):  # plugins bundled beside the binary come first
            env["PATH"] = os.pathsep.join([os.path.dirname(self.command), env.get("PATH", "")])
        is_operation = subcommand(args) in OPERATION_COMMANDS
        with self._lock:
            if self._cancelled and is_operation:
                raise OperationCancelled()
            process = subprocess.Popen(
                [self.command, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd,
                env=env, encoding="utf-8", start_new_session=True,
            )
            self._process = process
            self._process_is_operation = is_operation
            self._idle.clear()
        self._write_pid(process.pid)
        try:
            stdout_chunks: list[str] = []
            stderr_chunks: list[str] = []
            readers = [
                threading.Thread(target=_consume, args=(process.stdout, on_output, stdout_chunks),
                                 name="raypd-pulumi-stdout", daemon=True),
                threading.Thread(target=_consume, args=(process.stderr, on_error, stderr_chunks),
                                 name="raypd-pulumi-stderr", daemon=True),
            ]
            for reader in readers:
                reader.start()
            for reader in readers:
                reader.join()
            code = process.wait()
            if is_operation and code < 0:
                self.died_by_signal = -code
        finally:
            with self._lock:
                self._process = None
                self._idle.set()
            self._clear_pid(process.pid)
        result = CommandResult(stdout="\n".join(stdout_chunks), stderr="\n".join(stderr_chunks), code=code)
        if code != 0:
            raise create_command_error(result)
        return result

    # ---- what the engine calls ----

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    @property
    def running(self) -> bool:
        return not self._idle.is_set()

    def interrupt(self) -> bool:
        """Cancel: no further CLI starts; SIGINT the running one (once). True if a signal went out."""
        with self._lock:
            self._cancelled = True
            if self._process is None or not self._process_is_operation or self._interrupts:
                return False
            self._interrupts = 1
            return self._signal(signal.SIGINT, "SIGINT (cancel: in-flight steps finish)")

    def terminate(self) -> bool:
        """The second SIGINT: the CLI abandons in-flight steps (they stay as pending operations)."""
        with self._lock:
            self._cancelled = True
            if self._process is None or not self._process_is_operation or self._interrupts >= 2:
                return False
            self._interrupts = 2
            return self._signal(signal.SIGINT, "second SIGINT (terminate: in-flight steps are abandoned)")

    def kill(self) -> bool:
        with self._lock:
            self._cancelled = True
            if self._process is None:
                return False
            return self._signal(signal.SIGKILL, "SIGKILL (the CLI did not exit)")

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no CLI of this session runs; False if one still does after `timeout`."""
        return self._idle.wait(timeout)

    # ---- helpers ----

    def _signal(self, signum: int, what: str) -> bool:
        assert self._process is not None
        try:
            self._process.send_signal(signum)
        except ProcessLookupError:
            return False
        log = logger.error if signum == signal.SIGKILL else logger.info
        log("pulumi %s (pid %d): sent %s", self.label, self._process.pid, what)
        return True

    def _write_pid(self, pid: int) -> None:
        if self._pid_dir is None:
            return
        try:
            (self._pid_dir / PID_FILE).write_text(str(pid), encoding="utf-8")
        except OSError:
            logger.warning("could not record the CLI pid for %s", self.label)

    def _clear_pid(self, pid: int) -> None:
        if self._pid_dir is None:
            return
        path = self._pid_dir / PID_FILE
        try:
            if path.read_text(encoding="utf-8").strip() == str(pid):
                path.unlink()
        except OSError:
            pass


def _consume(stream: Any, callback: Optional[Callable[[str], Any]], chunks: list[str]) -> None:
    for line in iter(stream.readline, ""):
        stripped = line.rstrip()
        if callback:
            callback(stripped)
        chunks.append(stripped)
    stream.close()


def cli_alive(pid_dir: Path) -> Optional[int]:
    """The pid of a Pulumi CLI a session started for this work dir and that still runs, if any.

    Covers a CLI that outlived the app (it runs in its own session): releasing the lock under it
    with `pulumi cancel` would let a second update run beside it.
    """
    try:
        pid = int((pid_dir / PID_FILE).read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return pid
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return pid  # no /proc (macOS): trust the pid file
    return pid if b"pulumi" in cmdline else None
