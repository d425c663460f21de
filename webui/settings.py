"""Web app settings, read once from the environment (Contract 4) and passed to `create_app`.

Everything the app writes lives under one directory, RAYPD_HOME (default ~/.raypd):

    state/                 Pulumi file backend (file://...), unless PULUMI_BACKEND_URL says otherwise
    passphrase             secrets-provider passphrase, 0600, made once (unless PULUMI_CONFIG_PASSPHRASE[_FILE])
    raypd.db               SQLite (WAL): deployments, jobs, progress events, audit log
                           (unless RAYPD_DATABASE_URL puts them in PostgreSQL: team mode)
    work/<stack>.<random>/ a Pulumi work dir made for one engine call and removed after it (or at
                           a start, a day old: left by a killed server)
    cli/<stack>/           the pid of a Pulumi CLI this server runs (to know, after a restart,
                           whether one outlived it; meaningful on this host only)

Each stack's settings file (Pulumi.<stack>.yaml: config and encrypted secrets) lives in the store,
not here (webui/engines/workdir.py): nothing under one server's RAYPD_HOME is needed by another,
and the web app never writes into the project checkout. (raypd before store version 5 kept it in
workspaces/<stack>/; it is moved into the store at start.)
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Mapping, Optional, Union

from webui.db import DatabaseUrlError, parse_url

IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]

ENGINE_CHOICES = ("auto", "pulumi", "offline")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
# Forms and the JSON API carry a stack configuration: a few KB. Anything far bigger is a mistake
# or an attack, and is refused before it is read.
DEFAULT_MAX_BODY_BYTES = 64 * 1024
PASSPHRASE_FILE = "passphrase"
DB_FILE = "raypd.db"
STATE_DIR = "state"
WORKSPACES_DIR = "workspaces"  # before store version 5 (legacy)
WORK_DIR = "work"
CLI_DIR = "cli"
PROJECT_DIR = Path(__file__).resolve().parent.parent


class SettingsError(ValueError):
    """A setting that cannot work; `python -m webui` prints it and exits 2."""


@dataclass(frozen=True)
class Settings:
    home: Path
    engine: str = "auto"
    token: str = ""
    token_generated: bool = False
    backend_url: Optional[str] = None  # None: the file backend under home/state
    passphrase: Optional[str] = field(default=None, repr=False)  # from PULUMI_CONFIG_PASSPHRASE
    passphrase_file: Optional[Path] = None  # from PULUMI_CONFIG_PASSPHRASE_FILE
    project_dir: Path = PROJECT_DIR
    python: Path = Path(sys.executable)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    workers: int = 2
    plan_timeout_seconds: float = 180.0
    # How often the SSE stream looks for new events in SQLite.
    sse_poll_seconds: float = 0.25
    # RAYPD_DATABASE_URL (postgresql://...): the store is shared by every server using it (team
    # mode). None: SQLite under home. Its password is a secret: repr and messages never show it.
    database_url: Optional[str] = field(default=None, repr=False)
    # RAYPD_TRUSTED_PROXIES: the load balancers / reverse proxies whose X-Forwarded-For is believed
    # (webui/security.py, TrustedProxies). Empty: the header is believed from no one.
    trusted_proxies: tuple[IPNetwork, ...] = ()
    # RAYPD_SECRETS_PROVIDER (awskms://..., azurekeyvault://..., gcpkms://..., hashivault://...):
    # new stacks encrypt their secrets with it instead of the passphrase (`pulumi stack init
    # --secrets-provider`); the stack file then names it, so every server uses it.
    secrets_provider: Optional[str] = None

    @property
    def team_mode(self) -> bool:
        """Several servers share one store (RAYPD_DATABASE_URL)."""
        return self.database_url is not None

    # ---- derived paths ----

    @property
    def db_path(self) -> Path:
        return self.home / DB_FILE

    @property
    def store_location(self) -> "str | Path":
        """What `Store(...)` opens: the team database URL, or the SQLite file under home."""
        return self.database_url or self.db_path

    @property
    def state_dir(self) -> Path:
        return self.home / STATE_DIR

    @property
    def workspaces_dir(self) -> Path:
        return self.home / WORKSPACES_DIR

    @property
    def default_passphrase_file(self) -> Path:
        return self.home / PASSPHRASE_FILE

    @property
    def effective_backend_url(self) -> str:
        return self.backend_url or self.state_dir.as_uri()

    @property
    def virtualenv(self) -> Optional[Path]:
        """The venv the Pulumi language host should use: the one running this app.

        None outside a venv: pointing `virtualenv` at /usr would make the language host look for
        /usr/bin/python (often absent); without it the host uses the python on PATH.
        """
        return Path(sys.prefix) if sys.prefix != sys.base_prefix else None

    def workspace_dir(self, stack: str) -> Path:
        """Where raypd before store version 5 kept the stack's settings (read once, to move them)."""
        return self.workspaces_dir / stack

    @property
    def work_root(self) -> Path:
        return self.home / WORK_DIR

    def cli_dir(self, stack: str) -> Path:
        return self.home / CLI_DIR / stack

    def with_overrides(self, **changes: object) -> "Settings":
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None, **overrides: object) -> "Settings":
        env = os.environ if environ is None else environ
        home = Path(env.get("RAYPD_HOME") or Path.home() / ".raypd").expanduser()
        engine = (env.get("RAYPD_ENGINE") or "auto").strip().lower()
        if engine not in ENGINE_CHOICES:
            raise SettingsError(
                f"RAYPD_ENGINE={engine!r} is not one of {', '.join(ENGINE_CHOICES)}"
            )
        token = env.get("RAYPD_TOKEN") or ""
        generated = False
        if not token:
            token = secrets.token_urlsafe(24)
            generated = True
        elif len(token) < 16:
            raise SettingsError("RAYPD_TOKEN must be at least 16 characters (it guards the whole app)")
        passphrase_file = env.get("PULUMI_CONFIG_PASSPHRASE_FILE")
        database_url = _database_url(env.get("RAYPD_DATABASE_URL") or "")
        settings = cls(
            home=home.resolve(),
            engine=engine,
            token=token,
            token_generated=generated,
            backend_url=env.get("PULUMI_BACKEND_URL") or None,
            passphrase=env.get("PULUMI_CONFIG_PASSPHRASE") or None,
            passphrase_file=Path(passphrase_file).expanduser() if passphrase_file else None,
            database_url=database_url,
            trusted_proxies=parse_trusted_proxies(env.get("RAYPD_TRUSTED_PROXIES") or ""),
            secrets_provider=_secrets_provider(env.get("RAYPD_SECRETS_PROVIDER") or ""),
        )
        return settings.with_overrides(**overrides) if overrides else settings


def _database_url(value: str) -> Optional[str]:
    """RAYPD_DATABASE_URL, checked now so a typo stops the server with a message (no password in
    it); its password is registered as a secret before anything could echo it."""
    value = value.strip()
    if not value:
        return None
    try:
        url = parse_url(value)  # remembers the password as a secret
    except DatabaseUrlError as exc:
        raise SettingsError(str(exc)) from None
    if url.get_backend_name() != "postgresql":
        raise SettingsError("RAYPD_DATABASE_URL must be a postgresql:// URL (SQLite is the default "
                            "without it, under RAYPD_HOME)")
    if not url.database:
        raise SettingsError("RAYPD_DATABASE_URL names no database (postgresql://user:password@host:port/DATABASE)")
    return value


SECRETS_PROVIDER_SCHEMES = ("awskms", "azurekeyvault", "gcpkms", "hashivault")


def _secrets_provider(value: str) -> Optional[str]:
    """RAYPD_SECRETS_PROVIDER: a cloud secrets provider URL Pulumi knows (`passphrase` is the default
    and needs no setting)."""
    value = value.strip()
    if not value or value == "passphrase":
        return None
    scheme = value.split("://", 1)[0] if "://" in value else ""
    if scheme not in SECRETS_PROVIDER_SCHEMES or not value.isprintable() or len(value) > 1024:
        shown = value[:64] if value.isprintable() else repr(value[:64])
        raise SettingsError(
            f"RAYPD_SECRETS_PROVIDER={shown} is not a secrets provider URL Pulumi knows "
            f"({', '.join(s + '://...' for s in SECRETS_PROVIDER_SCHEMES)}, e.g. "
            "awskms://alias/raypd?region=us-west-2), nor 'passphrase'"
        )
    return value


def team_mode_problems(settings: Settings) -> list[str]:
    """What stops servers sharing a store from running the real engine together: the state and the
    secrets' key must be shared like the store is. Each problem says which setting to add."""
    if not settings.team_mode:
        return []
    problems = []
    backend = settings.backend_url or ""
    if not backend or backend.startswith("file:"):
        where = f"PULUMI_BACKEND_URL={backend}" if backend else f"the file backend under {settings.state_dir}"
        problems.append(
            f"team mode (RAYPD_DATABASE_URL) needs a Pulumi backend every server shares, not {where}: "
            "two servers cannot share file:// state. Set PULUMI_BACKEND_URL=s3://<bucket>/<prefix> "
            "(the same on every server; docs/webui.md, team mode)"
        )
    if settings.secrets_provider is None and settings.passphrase is None and settings.passphrase_file is None:
        problems.append(
            "team mode (RAYPD_DATABASE_URL) needs a secrets key every server shares, not a passphrase "
            f"made for this server alone ({settings.default_passphrase_file}). Set "
            "PULUMI_CONFIG_PASSPHRASE_FILE (the same passphrase on every server) or "
            "RAYPD_SECRETS_PROVIDER=awskms://alias/<key>?region=<region>"
        )
    return problems


def parse_trusted_proxies(value: str) -> tuple[IPNetwork, ...]:
    """RAYPD_TRUSTED_PROXIES: addresses or CIDRs, separated by commas or spaces.

    Refused with a message naming the setting: a host name (the peer is known by its address only),
    a CIDR with host bits set ("10.0.0.5/8": a typo for /32 or for 10.0.0.0/8?), and a network that
    holds every address (then the header would be believed from anyone, clients included).
    """
    networks: list[IPNetwork] = []
    for entry in value.replace(",", " ").split():
        shown = entry if entry.isprintable() and len(entry) <= 64 else repr(entry[:64])
        try:
            network = ipaddress.ip_network(entry, strict=True)
        except ValueError as exc:
            reason = "has host bits set" if "host bits set" in str(exc) else "is not an IP address or CIDR"
            raise SettingsError(
                f"RAYPD_TRUSTED_PROXIES: {shown} {reason} (expected addresses or CIDRs of your load "
                "balancers, e.g. 10.0.0.0/16, separated by commas)"
            ) from None
        if network.prefixlen == 0:
            raise SettingsError(
                f"RAYPD_TRUSTED_PROXIES: {shown} would trust every address, so any client could choose "
                "its own address; name the load balancers' subnets"
            )
        networks.append(network)
    return tuple(networks)


def prepare_home(settings: Settings) -> None:
    """Create RAYPD_HOME's layout; make the passphrase file once, readable by its owner only."""
    settings.home.mkdir(parents=True, exist_ok=True)
    os.chmod(settings.home, 0o700)
    settings.work_root.mkdir(exist_ok=True)
    if settings.backend_url is None:
        settings.state_dir.mkdir(exist_ok=True)
    if settings.passphrase is None and settings.passphrase_file is None and not settings.team_mode:
        path = settings.default_passphrase_file
        if not path.exists():
            # O_EXCL + mode 0600 at creation: the passphrase is never world-readable, not even briefly.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(secrets.token_urlsafe(32))
        os.chmod(path, 0o600)


def drop_empty_passphrase(environ: "os._Environ[str] | dict[str, str]" = os.environ) -> list[str]:
    """Remove PULUMI_CONFIG_PASSPHRASE[_FILE] set to "" from this process's environment.

    The Automation API starts the CLI with this process's environment plus ours, and the CLI reads
    PULUMI_CONFIG_PASSPHRASE first: an empty one (`export PULUMI_CONFIG_PASSPHRASE=` in a shell
    profile) would override the passphrase file and open the secrets with the wrong key.
    Returns the names dropped, for the start-up log.
    """
    dropped = [name for name in ("PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE")
               if name in environ and not environ[name]]
    for name in dropped:
        del environ[name]
    return dropped


def pulumi_env(settings: Settings) -> dict[str, str]:
    """Environment for Pulumi CLI runs: backend and passphrase, by file where we can.

    The passphrase is handed over as a file path, so it never sits in this process's memory or in
    the CLI's environment; a passphrase given in PULUMI_CONFIG_PASSPHRASE is passed on as given.
    """
    env = {
        "PULUMI_BACKEND_URL": settings.effective_backend_url,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
    }
    if settings.passphrase is not None:
        env["PULUMI_CONFIG_PASSPHRASE"] = settings.passphrase
    elif settings.passphrase_file is not None:
        env["PULUMI_CONFIG_PASSPHRASE_FILE"] = str(settings.passphrase_file)
    elif not settings.team_mode:  # team mode makes none for one server alone (team_mode_problems)
        env["PULUMI_CONFIG_PASSPHRASE_FILE"] = str(settings.default_passphrase_file)
    return env
