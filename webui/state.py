"""What one app instance owns (hung off `app.extensions["raypd"]`; no module-level state)."""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from flask import current_app

from webui.api_key_service import ApiKeyService
from webui.benchmarking import BenchmarkService
from webui.conformance_runs import ConformanceService
from webui.deployments.commands import Deployments
from webui.deployments.reads import Reads
from webui.engines.select import EngineSet
from webui.jobs import JobRunner
from webui.resilience_runs import ResilienceService
from webui.security import LoginThrottle
from webui.settings import Settings
from webui.store import Store

DRAFT_TTL_SECONDS = 30 * 60
MAX_DRAFTS = 200
# Said at the token field when the form comes back with a draft this server no longer holds: a
# launch without it would deploy a gated model that cannot be downloaded (issue 29 §3).
DRAFT_LOST = (f"the Hugging Face token typed earlier is no longer held here (a preview keeps it for "
              f"{DRAFT_TTL_SECONDS // 60} minutes, for at most {MAX_DRAFTS} previews at once, and a "
              "restart forgets it): type it again, or leave the field empty to go on without a token")


class TokenDrafts:
    """HF tokens typed into the form, held in memory between "Preview" and "Launch" only.

    The preview page must not echo the token back (not even in a hidden field), so it carries a
    random draft id instead. Drafts expire, and a restart forgets them (the user types it again).
    """

    def __init__(self) -> None:
        self._drafts: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def put(self, token: str) -> str:
        draft = secrets.token_urlsafe(16)
        now = time.monotonic()
        with self._lock:
            self._drafts = {k: v for k, v in self._drafts.items() if v[1] > now}
            while len(self._drafts) >= MAX_DRAFTS:
                self._drafts.pop(next(iter(self._drafts)))
            self._drafts[draft] = (token, now + DRAFT_TTL_SECONDS)
        return draft

    def lost(self, draft: Optional[str]) -> bool:
        """A draft the form carries that is no longer held (expired, pushed out, or a restart)."""
        return bool(draft) and self.peek(draft) is None

    def peek(self, draft: Optional[str]) -> Optional[str]:
        if not draft:
            return None
        with self._lock:
            item = self._drafts.get(draft)
        if item is None or item[1] < time.monotonic():
            return None
        return item[0]

    def drop(self, draft: Optional[str]) -> None:
        if draft:
            with self._lock:
                self._drafts.pop(draft, None)


class FragmentCache:
    """A rendered piece of a page, kept while the data it was rendered from is the same object.

    The list page's 200 rows cost as much to render as to read; the service hands out the same
    listing object while it is fresh, so the rows are rendered once per listing, not per request.
    """

    def __init__(self) -> None:
        self._items: dict[str, tuple[object, Any]] = {}
        self._lock = threading.Lock()

    def render(self, key: str, source: object, render: Callable[[], Any]) -> Any:
        with self._lock:
            cached = self._items.get(key)
        if cached is not None and cached[0] is source:
            return cached[1]
        fragment = render()
        with self._lock:
            self._items[key] = (source, fragment)
        return fragment


@dataclass
class Raypd:
    settings: Settings
    store: Store
    runner: JobRunner
    engines: EngineSet
    service: Deployments  # webui/deployments: every deployment operation the views ask for
    benchmarks: BenchmarkService
    api_keys: ApiKeyService  # the endpoint's API keys, in the cluster (never in the store)
    conformance: ConformanceService  # the Conformance tab: serve.conformance runs as jobs
    drafts: TokenDrafts = field(default_factory=TokenDrafts)
    throttle: LoginThrottle = field(default_factory=LoginThrottle)
    fragments: FragmentCache = field(default_factory=FragmentCache)
    reads: Reads = field(init=False)
    resilience: ResilienceService = field(init=False)  # the Resilience tab (issue 31 §2)

    def __post_init__(self) -> None:
        self.reads = Reads(self.store)
        self.resilience = ResilienceService(self.service)

    def start_session(self) -> str:
        """A login: the session id the cookie carries (the store lists live ones)."""
        return self.store.start_session()

    def end_session(self, session_id: str) -> None:
        self.store.end_session(session_id)

    def close(self) -> None:
        # Cancel every job first (the real engine SIGINTs its CLIs), give the CLIs a bounded time
        # to exit (PulumiEngine.stop_processes), then wait for the job threads to record the end.
        self.runner.shutdown(wait=False)
        for engine in self.engines.engines.values():
            stop = getattr(engine, "stop_processes", None)
            if stop is not None:
                stop()
        self.runner.shutdown(wait=True)
        self.store.close()


def raypd() -> Raypd:
    return current_app.extensions["raypd"]
