"""Which failures mean "the job store is unavailable for now", and how to say so (503 + Retry-After).

A PostgreSQL server that is down or unreachable, or a disk that is full, is nobody's bug: nothing is
wrong with the request, and the same request works again once the database is back or space is
freed, without restarting raypd (the engine's pool pings connections before use, so dead ones are
dropped, and SQLite opens no long-lived state that a full disk could spoil). Such errors answer
503 with `Retry-After` and a sentence that says what is wrong, never 500 and never a traceback.
Everything else a database can raise (a constraint, a bad statement) is a bug and stays a 500.
"""

from __future__ import annotations

import sqlite3
from typing import Optional

from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from webui.db import error_text, is_disk_full
from webui.redact import redact

try:  # psycopg is what team mode needs; an embedded-only install may lack it
    import psycopg
    _PSYCOPG_TRANSIENT: tuple[type[BaseException], ...] = (psycopg.OperationalError, psycopg.InterfaceError)
except ImportError:  # pragma: no cover - requirements.txt pins it
    _PSYCOPG_TRANSIENT = ()

# How long a client should wait before asking again: long enough not to hammer a database that is
# starting up, short enough that a user retrying by hand does not notice.
RETRY_AFTER_SECONDS = 5
# sqlite3.OperationalError messages (sqlite3.c's sqlite3ErrStr) that pass once the disk or the
# lock holder does: full, locked or busy, a file that cannot be opened or read for now.
_SQLITE_TRANSIENT_WORDS = ("disk is full", "database is locked", "database table is locked",
                           "unable to open database file", "disk i/o error", "readonly database")


def _is_transient(exc: BaseException) -> bool:
    """The database could not be reached, or could not take the write, right now."""
    if isinstance(exc, PoolTimeout) or (isinstance(exc, DBAPIError) and exc.connection_invalidated):
        return True
    inner = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    if isinstance(inner, _PSYCOPG_TRANSIENT):  # psycopg: connection lost or refused, server shutting down
        return True
    if isinstance(inner, sqlite3.OperationalError):
        # SQLite raises OperationalError for mistakes too ("no such table"): only these pass.
        words = str(inner).lower()
        return any(word in words for word in _SQLITE_TRANSIENT_WORDS)
    return is_disk_full(exc)


def unavailable_reason(exc: BaseException) -> Optional[str]:
    """A readable reason when `exc` means the store is unavailable for now, else None (a bug: 500).

    The driver's own words are kept (they say "connection refused" or "database or disk is full"),
    with secrets masked; no SQL, no traceback.
    """
    if not _is_transient(exc):
        return None
    detail = redact(error_text(exc))
    if is_disk_full(exc):
        return (f"the server's disk is full, so nothing can be saved ({detail}). Free some space: "
                f"raypd carries on by itself, no restart needed; try again in a few seconds")
    return (f"the job store (database) is not reachable right now ({detail}). raypd reconnects by "
            f"itself once it is back, no restart needed; try again in a few seconds")
