"""A full disk at start is not a damaged store (issue 29 §3): it was reported as one, with "move it
aside ... listed again from a new store", and following that advice throws away every stack's
settings (its secrets' encryption salt). Now the start says the disk is full and to free space,
and keeps the move-aside advice for a file that really is damaged.

SQLite's own "database or disk is full" (SQLITE_FULL) comes from the real driver: each connection
is held to the pages the file has (`PRAGMA max_page_count`), as a full disk would hold it."""

from __future__ import annotations

import errno
from typing import Any

import pytest
from sqlalchemy import event

from tests.unit.cli_support import run_main
from tests.web.support import TOKEN
from webui import __main__ as webui_main
from webui import db
from webui.store import Store, StoreError

ADVICE_FOR_DAMAGE = ("move it aside", "mv ", ".broken")


@pytest.fixture
def no_room(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every SQLite file the store opens can grow no further than it is (an empty one: not at all)."""
    make_engine = db.make_engine

    def full(url: Any, pool_size: int = 8) -> Any:
        engine = make_engine(url, pool_size=pool_size)

        @event.listens_for(engine, "connect")
        def _full(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            pages = cursor.execute("PRAGMA page_count").fetchone()[0]
            cursor.execute(f"PRAGMA max_page_count={max(pages, 1)}")
            cursor.close()

        return engine

    monkeypatch.setattr(db, "make_engine", full)


def test_a_store_on_a_full_disk_says_so_and_to_keep_the_file(tmp_path, no_room):
    with pytest.raises(StoreError) as failure:
        Store(tmp_path / "raypd.db")
    message = str(failure.value)
    assert "the disk is full" in message and "database or disk is full" in message
    assert "Free space" in message and "keep it as it is" in message
    assert not any(advice in message for advice in ADVICE_FOR_DAMAGE), message


def test_the_web_app_started_on_a_full_disk_says_so(tmp_path, monkeypatch, no_room):
    monkeypatch.setattr(webui_main, "_configure_logging", lambda: None)  # (pytest's handlers stay)
    for name, value in {"RAYPD_HOME": str(tmp_path / "home"), "RAYPD_ENGINE": "offline", "RAYPD_TOKEN": TOKEN}.items():
        monkeypatch.setenv(name, value)
    result = run_main(webui_main.main, "--port", "1")
    assert result.returncode == 2
    assert "the disk is full" in result.stderr and "Traceback" not in result.stderr
    assert not any(advice in result.stderr for advice in ADVICE_FOR_DAMAGE), result.stderr


def test_a_home_that_cannot_be_written_for_lack_of_space_says_so(tmp_path, monkeypatch):
    def no_space(settings: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(settings.default_passphrase_file))

    monkeypatch.setattr(webui_main, "_configure_logging", lambda: None)
    monkeypatch.setattr(webui_main, "prepare_home", no_space)
    for name, value in {"RAYPD_HOME": str(tmp_path / "home"), "RAYPD_ENGINE": "offline", "RAYPD_TOKEN": TOKEN}.items():
        monkeypatch.setenv(name, value)
    result = run_main(webui_main.main, "--port", "1")
    assert result.returncode == 2
    assert result.stderr.startswith("error: the disk is full (") and "free space and start again" in result.stderr


def test_a_damaged_store_still_gets_the_move_aside_advice_and_keeps_the_settings_recoverable(tmp_path):
    broken = tmp_path / "raypd.db"
    broken.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError) as failure:
        Store(broken)
    message = str(failure.value)
    assert "move it aside" in message and "disk is full" not in message
    assert "keep the .broken file" in message and ".recover" in message
