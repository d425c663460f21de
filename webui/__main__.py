"""`python -m webui [--host H] [--port P]`: serve the web app (127.0.0.1:8080 by default).

Served by waitress (webui/server.py), a production WSGI server, not Werkzeug's development server.

Prints the URL and the access token at start. One server per RAYPD_HOME (a lock file says so):
two servers would each think the other's running jobs were interrupted.
"""

from __future__ import annotations

import argparse
import fcntl
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Optional, Sequence

from webui.app import close_app, create_app
from webui.db import is_disk_full
from webui.redact import RedactingFilter
from webui.server import make_server
from webui.settings import DEFAULT_HOST, DEFAULT_PORT, Settings, SettingsError, prepare_home
from webui.store import StoreError

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m webui",
        description="raypd web app: launch, inspect and tear down PD deployments.",
        epilog="Environment: RAYPD_HOME, RAYPD_ENGINE=auto|pulumi|offline, RAYPD_TOKEN, "
               "PULUMI_BACKEND_URL, PULUMI_CONFIG_PASSPHRASE[_FILE], RAYPD_DATABASE_URL, "
               "RAYPD_TRUSTED_PROXIES. See docs/webui.md.",
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    return parser


def _configure_logging() -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RedactingFilter())
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    # Alembic narrates every migration with its whole docstring; webui.db says in one line what changed.
    logging.getLogger("alembic").setLevel(logging.WARNING)


def _lock_home(home: Path) -> Optional[int]:
    fd = os.open(home / "server.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def _start_problem(exc: BaseException) -> str:
    """What stopped the start, as one line: a full disk says so (RAYPD_HOME is then as it was:
    nothing to move or delete), whatever file the system refused to write first."""
    if isinstance(exc, OSError) and is_disk_full(exc):
        where = f" ({exc.filename})" if exc.filename else ""
        return f"the disk is full{where}: free space and start again ({exc.strerror or exc})"
    return str(exc)


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM ends the server like Ctrl-C: jobs stop, the database closes


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    if not 0 < args.port < 65536:
        print(f"error: --port {args.port} is not a TCP port", file=sys.stderr)
        return 2
    _configure_logging()
    try:
        settings = Settings.from_env()
        prepare_home(settings)
        locked = _lock_home(settings.home)
    except (SettingsError, OSError) as exc:
        print(f"error: {_start_problem(exc)}", file=sys.stderr)
        return 2
    if locked is None:
        print(f"error: another raypd web app is already using {settings.home}", file=sys.stderr)
        return 2
    try:
        app = create_app(settings)
    except (SettingsError, StoreError, OSError) as exc:
        print(f"error: {_start_problem(exc)}", file=sys.stderr)
        return 2
    try:
        server = make_server(app, args.host, args.port, settings.trusted_proxies)
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        close_app(app)
        return 2
    host = f"[{args.host}]" if ":" in args.host else args.host
    state = app.extensions["raypd"]
    print(f"raypd web app on http://{host}:{server.effective_port}/", flush=True)
    if settings.token_generated:
        print(f"Access token: {settings.token}", flush=True)
    else:
        print("Access token: the value of RAYPD_TOKEN", flush=True)
    print(f"Engine: {state.engines.default.name} ({state.engines.reason}); state in {settings.home}; "
          f"job store {state.store.location}",
          flush=True)
    if state.engines.banner:
        print(state.engines.banner, flush=True)
    if settings.trusted_proxies:
        print("Trusted proxies (X-Forwarded-For believed from): "
              + ", ".join(str(network) for network in settings.trusted_proxies), flush=True)
    if args.host not in LOOPBACK:
        print(f"warning: listening on {args.host}, not loopback: anyone who can reach this port "
              "and knows the token can deploy; put TLS in front of it", flush=True)
    signal.signal(signal.SIGTERM, _stop)
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
        close_app(app)
    return 0


if __name__ == "__main__":
    sys.exit(main())
