"""Access control and browser hardening for every request.

- The access token (RAYPD_TOKEN, or one generated at start) guards everything except /healthz and /readyz, the
  login page and the static files (public code, no data). The API takes `Authorization: Bearer`;
  browsers log in once and get an HttpOnly, SameSite=Strict session cookie.
- Browser forms carry a per-session CSRF token; API calls made with the cookie (the page's own
  EventSource) may only read unless they send it as X-CSRF-Token.
- Headers: a CSP with no inline script or style, nosniff, frame deny, no referrer, no caching.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import ipaddress
import secrets
import threading
import time
from collections import deque
from datetime import timedelta
from typing import Any, Iterable, Optional, Union
from urllib.parse import unquote_plus, urlparse

from flask import Flask, Response, current_app, g, redirect, request, session, url_for
from flask.typing import ResponseReturnValue

from webui.errors import api_error, render_error
from webui.settings import IPNetwork

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
PUBLIC_ENDPOINTS = {"healthz", "readyz", "pages.login", "pages.login_post", "static"}
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
SESSION_COOKIE = "raypd_session"
# Login attempts allowed per minute before answering 429 (the token is long; this stops scripts).
LOGIN_ATTEMPTS_PER_MINUTE = 10
# Query parameters that carry a credential. The app never reads one (the token goes in a header or
# the login form), but a URL that carried one must not be handed on: not into the login redirect's
# `next=`, the login page, browser history after login, or a log. Compared case-insensitively.
CREDENTIAL_PARAMETERS = frozenset({
    "token", "access_token", "auth_token", "raypd_token", "api_key", "apikey", "auth",
    "authorization", "bearer", "password", "passphrase", "secret",
})


def session_secret(token: str) -> bytes:
    """Sessions are signed with a key derived from the token: changing the token logs everyone out."""
    return hmac.new(token.encode("utf-8"), b"raypd-session-v1", hashlib.sha256).digest()


def token_matches(expected: str, given: Optional[str]) -> bool:
    if not given:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), given.encode("utf-8"))


def bearer_token() -> Optional[str]:
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip() or None


def csrf_token() -> str:
    token = session.get("csrf")
    if not token:
        token = secrets.token_urlsafe(32)
        session["csrf"] = token
    return token


def csrf_valid(given: Optional[str]) -> bool:
    expected = session.get("csrf")
    return isinstance(expected, str) and bool(expected) and token_matches(expected, given)


def without_credentials(target: str) -> str:
    """`target` without its credential parameters (CREDENTIAL_PARAMETERS); every other parameter is
    kept byte for byte, in its order (re-encoding could change what the page is asked for)."""
    path, question, rest = target.partition("?")
    if not question:
        return target
    query, hash_mark, fragment = rest.partition("#")
    kept = [part for part in query.split("&")
            if unquote_plus(part.partition("=")[0]).strip().lower() not in CREDENTIAL_PARAMETERS]
    kept_query = "&".join(part for part in kept if part)
    return path + ("?" + kept_query if kept_query else "") + hash_mark + fragment


def safe_next(target: Optional[str]) -> str:
    """Only same-site paths after login (no open redirect), and no credential in them.

    Browsers read a backslash as a slash and drop tabs and newlines from URLs, so "/" + backslash +
    "evil.example", or "/", a tab, "/evil.example", would leave the site although urlparse sees a
    local path: refuse both.
    """
    if not target:
        return "/"
    if "\\" in target or any(ord(ch) < 0x21 or ord(ch) == 0x7F for ch in target):
        return "/"
    parsed = urlparse(target)
    if parsed.scheme or parsed.netloc or not target.startswith("/") or target.startswith("//"):
        return "/"
    return without_credentials(target)


class LoginThrottle:
    """Wrong tokens per client address in the last minute; an address over the limit waits.

    The client address is the peer's, or behind a trusted proxy the one it forwarded
    (TrustedProxies): behind a load balancer the peer is the balancer, shared by everyone.

    Per address, so that someone guessing from one place cannot lock everyone else out; bounded in
    the number of addresses it remembers, so that guessing from many cannot fill the memory.
    """

    MAX_ADDRESSES = 10_000

    def __init__(self, per_minute: int = LOGIN_ATTEMPTS_PER_MINUTE):
        self.per_minute = per_minute
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, address: str, now: float) -> deque[float]:
        failures = self._failures.get(address, deque())
        while failures and now - failures[0] > 60:
            failures.popleft()
        return failures

    def blocked(self, address: str) -> bool:
        with self._lock:
            failures = self._recent(address, time.monotonic())
            if not failures:
                self._failures.pop(address, None)
            return len(failures) >= self.per_minute

    def failed(self, address: str) -> None:
        now = time.monotonic()
        with self._lock:
            failures = self._recent(address, now)
            failures.append(now)
            self._failures[address] = failures
            if len(self._failures) > self.MAX_ADDRESSES:
                del self._failures[next(iter(self._failures))]  # the longest-known address goes


def signed_in() -> bool:
    """A browser session counts while the store says it was not ended (logout ends it there, so
    a cookie saved before logging out is worth nothing after)."""
    session_id = session.get("sid")
    if not session.get("auth") or not isinstance(session_id, str):
        return False
    lifetime = current_app.permanent_session_lifetime.total_seconds()
    return current_app.extensions["raypd"].store.session_active(session_id, lifetime)


def client_address() -> str:
    """The client's address (REMOTE_ADDR, already resolved through trusted proxies)."""
    return request.remote_addr or "unknown"


def _actor(kind: str) -> str:
    return f"{kind}@{request.remote_addr or 'unknown'}"


def _authorize() -> Optional[ResponseReturnValue]:
    if request.endpoint in PUBLIC_ENDPOINTS:
        return None
    token = g.raypd_token
    is_api = request.path.startswith("/api/")
    if is_api:
        given = bearer_token()
        if given is not None:
            throttle: LoginThrottle = current_app.extensions["raypd"].throttle
            if throttle.blocked(client_address()):
                return api_error(429, "Authorization", "too many wrong tokens from this address; wait a minute")
            if token_matches(token, given):
                g.actor = _actor("api-token")
                return None
            throttle.failed(client_address())
        if signed_in():
            if request.method not in SAFE_METHODS and not csrf_valid(request.headers.get(CSRF_HEADER)):
                return api_error(403, CSRF_HEADER, "a browser session must send its CSRF token")
            g.actor = _actor("browser")
            return None
        response = api_error(401, "Authorization", "send 'Authorization: Bearer <access token>'")
        response.headers["WWW-Authenticate"] = 'Bearer realm="raypd"'
        return response
    if not signed_in():
        if request.method in SAFE_METHODS:
            # safe_next drops a token sent in the URL (refused: it is never read from there).
            return redirect(url_for("pages.login", next=safe_next(request.full_path.rstrip("?"))))
        return redirect(url_for("pages.login"))
    if request.method not in SAFE_METHODS and not csrf_valid(request.form.get(CSRF_FIELD)):
        # 403 as the API answers a session's missing X-CSRF-Token: a well-formed request refused
        # because nothing shows it came from this app's own page.
        return render_error(403, "This form has expired. Reload the page and try again.")
    g.actor = _actor("browser")
    return None


def _harden(response: Response) -> Response:
    response.headers.setdefault("Content-Security-Policy", CSP)
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cross-Origin-Opener-Policy"] = "same-origin"
    if request.endpoint != "static":
        response.headers["Cache-Control"] = "no-store"
    return response


IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
# Every forwarding header waitress knows (waitress/proxy_headers.py, PROXY_HEADERS), as WSGI keys.
FORWARDING_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_HOST", "HTTP_X_FORWARDED_PROTO",
                      "HTTP_X_FORWARDED_PORT", "HTTP_X_FORWARDED_BY", "HTTP_FORWARDED")
PROXY_PEER_KEY = "raypd.proxy_peer"  # the proxy's own address, when REMOTE_ADDR was replaced


def parse_address(text: str) -> Optional[IPAddress]:
    """An address as proxies write it in X-Forwarded-For: `1.2.3.4`, `1.2.3.4:5678`, `2001:db8::1`,
    `[2001:db8::1]:5678`, maybe quoted; an IPv4-mapped IPv6 address is its IPv4 one. None for
    anything else ("unknown", an obfuscated identifier, garbage)."""
    text = text.strip().strip('"')
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:
        text = text.partition(":")[0]  # IPv4 with a port
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def forwarded_client(peer: str, forwarded_for: str, trusted: Iterable[IPNetwork]) -> str:
    """The client's address: the peer's own, unless the peer is a trusted proxy; then the
    right-most X-Forwarded-For hop that is not a trusted proxy.

    Right to left because each proxy appends the address it saw: the right-most entries were written
    by our proxies, everything left of the first untrusted one may be the client's invention. An
    entry that is not an address stops the walk at the last hop vouched for; with every hop trusted,
    the left-most one is the client.
    """
    networks = tuple(trusted)

    def is_trusted(address: Optional[IPAddress]) -> bool:
        return address is not None and any(address in network for network in networks)

    if not networks or not is_trusted(parse_address(peer)):
        return peer
    client = peer
    for hop in reversed(forwarded_for.split(",")) if forwarded_for else ():
        address = parse_address(hop)
        if address is None:
            break
        client = str(address)
        if not is_trusted(address):
            break
    return client


class TrustedProxies:
    """WSGI middleware: REMOTE_ADDR becomes the client's address when a trusted proxy sent the request
    (`forwarded_client`); then every forwarding header is removed, so nothing later can believe one.

    Done here rather than by waitress (webui/server.py says why) or werkzeug's ProxyFix: ProxyFix
    believes a fixed number of hops from *any* peer, so behind a server that passes the headers on
    it would let every client pick its own address (and so escape the login throttle).
    """

    def __init__(self, app: Any, trusted: Iterable[IPNetwork]):
        self.app = app
        self.trusted = tuple(trusted)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        peer = environ.get("REMOTE_ADDR") or ""
        client = forwarded_client(peer, environ.get("HTTP_X_FORWARDED_FOR", ""), self.trusted)
        if client != peer:
            environ[PROXY_PEER_KEY] = peer
            environ["REMOTE_ADDR"] = client
        for key in FORWARDING_HEADERS:
            environ.pop(key, None)
        return self.app(environ, start_response)


class BoundedChunkedBody:
    """WSGI middleware: a chunked body is read here, up to the limit, and handed on measured.

    A chunked request has no Content-Length, and Werkzeug cuts such a stream at the limit without
    saying so (valid JSON + padding would be accepted). Here the whole body is read first; one
    larger than the limit reaches the app as "Content-Length: limit + 1" with nothing to read, so
    the usual 413 answers it, in the usual format.
    """

    def __init__(self, app: Any, max_body_bytes: int):
        self.app = app
        self.max_body_bytes = max_body_bytes

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        if not environ.get("CONTENT_LENGTH") and "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
            stream, data = environ["wsgi.input"], b""
            while len(data) <= self.max_body_bytes:
                piece = stream.read(min(65536, self.max_body_bytes + 1 - len(data)))
                if not piece:
                    break
                data += piece
            oversize = len(data) > self.max_body_bytes
            environ["wsgi.input"] = io.BytesIO(b"" if oversize else data)
            environ["CONTENT_LENGTH"] = str(self.max_body_bytes + 1 if oversize else len(data))
            environ.pop("wsgi.input_terminated", None)
            environ.pop("HTTP_TRANSFER_ENCODING", None)  # what follows is a plain, measured body
        return self.app(environ, start_response)


def init_security(app: Flask, token: str, max_body_bytes: int,
                  trusted_proxies: Iterable[IPNetwork] = ()) -> None:
    app.wsgi_app = BoundedChunkedBody(app.wsgi_app, max_body_bytes)  # type: ignore[method-assign]
    app.wsgi_app = TrustedProxies(app.wsgi_app, trusted_proxies)  # type: ignore[method-assign]
    app.secret_key = session_secret(token)
    app.config.update(
        SESSION_COOKIE_NAME=SESSION_COOKIE,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        PERMANENT_SESSION_LIFETIME=timedelta(hours=12),
        MAX_CONTENT_LENGTH=max_body_bytes,
        MAX_FORM_MEMORY_SIZE=max_body_bytes,
    )

    @app.before_request
    def _token_in_g() -> Optional[ResponseReturnValue]:
        g.raypd_token = token
        g.actor = _actor("anonymous")
        return _authorize()

    app.after_request(_harden)
    app.jinja_env.globals["csrf_token"] = csrf_token
