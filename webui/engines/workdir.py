"""A fresh work dir per engine call, holding the stack's settings file from the shared store.

The settings file (`Pulumi.<stack>.yaml`) is the only thing a stack's work dir holds that matters:
the Pulumi CLI reads the stack's config and its secrets provider state from it, and a DIY backend
(s3://, file://) keeps no config. Without the file the CLI runs with no config, and its secrets
provider falls back to the one in the state only for destroy or when
PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER is set; otherwise it makes a new salt and writes a new
file (pkg/cmd/pulumi/stack/secrets.go SecretsManagerLoader; env.FallbackToStateSecretsManager).
Kept under one server's RAYPD_HOME the file tied each deployment to that server; kept in the store
(`StackFiles`), any server sharing the store can run any job.

So every call gets a new directory under RAYPD_HOME/work/, the stored file written into it, and
the file read back afterwards: what the CLI changed (config set-all, the salt of a new stack)
goes back to the store only when the call succeeded, so a failed or refused call loses nothing.
The directory is removed at the end either way.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional, Protocol


class StackFiles(Protocol):
    """Where stack settings files live (webui.store.Store in the app)."""

    def stack_file(self, stack: str) -> Optional[str]:
        """The file's text as last saved, or None."""

    def save_stack_file(self, stack: str, text: str) -> None:
        """Keep `text` as the stack's file (replacing what was there)."""

    def delete_stack_file(self, stack: str) -> None:
        """Forget the stack's file (after the stack was removed)."""


class UsesStackFiles:
    """An engine keeping its stacks' settings files in a `StackFiles` (the app attaches its store)."""

    _stack_files: Optional[StackFiles] = None

    def attach(self, stack_files: StackFiles) -> None:
        self._stack_files = stack_files

    @property
    def stack_files(self) -> StackFiles:
        if self._stack_files is None:
            raise RuntimeError(f"{type(self).__name__} has no store for stack files (attach one)")
        return self._stack_files


def stack_file_name(stack: str) -> str:
    return f"Pulumi.{stack}.yaml"


@contextmanager
def stack_work_dir(root: Path, stack: str, files: StackFiles, *, start_empty: bool = False,
                   keep_changes: bool = True) -> Iterator[Path]:
    """A new directory holding the stack's stored settings file (none when `start_empty`: a stack
    being created). On a normal exit a file the call wrote or changed is saved to `files`."""
    root.mkdir(parents=True, exist_ok=True)
    work_dir = Path(tempfile.mkdtemp(prefix=f"{stack}.", dir=root))  # 0700
    path = work_dir / stack_file_name(stack)
    try:
        stored = None if start_empty else files.stack_file(stack)
        if stored is not None:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(stored)
        yield work_dir
        if keep_changes and path.exists():
            written = path.read_text(encoding="utf-8")
            if written != stored:
                files.save_stack_file(stack, written)
    finally:
        shutil.rmtree(work_dir, ignore_errors=True)


# No engine call lasts a day (an EKS `up` takes well under an hour): a work dir older than this was
# left by a server that was killed mid-call, and nothing will ever come back for it.
STALE_WORK_DIR_SECONDS = 24 * 3600


def sweep_stale_work_dirs(root: Path, max_age_seconds: float = STALE_WORK_DIR_SECONDS,
                          now: Optional[float] = None) -> int:
    """Remove the work dirs a killed server left under `root` (their settings files hold sealed
    secrets, and they pile up); younger ones may belong to a call still running. Returns how many."""
    cutoff = (time.time() if now is None else now) - max_age_seconds
    removed = 0
    try:
        children = list(root.iterdir())
    except OSError:
        return 0
    for child in children:
        try:
            if child.is_dir() and not child.is_symlink() and child.stat().st_mtime < cutoff:
                shutil.rmtree(child)
                removed += 1
        except OSError:
            continue  # another server's sweep, or a file we may not touch: not worth failing a start
    return removed


def legacy_stack_file(workspace_dir: Path, stack: str) -> Optional[str]:
    """The settings file raypd before store version 5 kept under RAYPD_HOME/workspaces/<stack>/."""
    try:
        return (workspace_dir / stack_file_name(stack)).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
