"""The production WSGI server the app runs under: waitress, set up once for `python -m webui` and
the benchmarks, so what is measured is what users run.

Not Werkzeug's development server: waitress serves with a pool of threads and bounded
connections. An event stream holds a thread only for a bounded window (the pages ask for
`?window=30` and EventSource resumes from its last event), so a few open tabs cannot starve the
pages of threads.
"""

from __future__ import annotations

import time
from typing import Any, Optional, Sequence

from waitress.channel import HTTPChannel
from waitress.server import create_server

SERVER_THREADS = 16
CONNECTION_LIMIT = 200
# How long a client may take to send a request (headers and body) from its first byte, and how long
# a connection may sit with nothing arriving and nothing being served. Waitress's defaults (120 s of
# silence, looked for every 30 s, and no bound at all for a client that trickles a byte now and then)
# let 210 half-sent requests take every connection: /healthz and /login then hung for 120 s and
# more (issue 29 §3). A request from a person or a program arrives in milliseconds; a page's next
# request on a kept-alive connection simply opens a new one after IDLE_SECONDS.
REQUEST_SECONDS = 10.0
IDLE_SECONDS = 10
CLEANUP_SECONDS = 1  # how often waitress looks for silent connections (waitress/server.py maintenance)


class DeadlineChannel(HTTPChannel):
    """A connection that must deliver each request whole within `request_seconds` of its first
    byte, however it trickles. Waitress bounds only silence (`channel_timeout`, against
    `last_activity`, which every byte renews: waitress/channel.py `handle_read`); a client sending
    a byte every few seconds would hold its connection for ever."""

    request_seconds = REQUEST_SECONDS
    request_started: Optional[float] = None

    def received(self, data: bytes) -> bool:
        now = time.monotonic()
        if self.request is None:  # these bytes begin a request (waitress/channel.py `received`)
            self.request_started = now
        elif self.request_started is not None and now - self.request_started > self.request_seconds:
            self.will_close = True  # closed by the main loop (waitress/channel.py `handle_write`)
            return False
        accepted: bool = super().received(data)
        if self.request is None:  # every request these bytes began is complete
            self.request_started = None
        return accepted


def make_server(app: Any, host: str, port: int, trusted_proxies: Sequence[object] = (),
                request_seconds: float = REQUEST_SECONDS, idle_seconds: int = IDLE_SECONDS) -> Any:
    """A waitress server bound to host:port (0 = a free port); `.effective_port`, `.run()`,
    `.close()`. Raises OSError when the address cannot be bound.

    Half-sent requests (slowloris): a connection whose request is not whole `request_seconds`
    after its first byte, or that stays silent for `idle_seconds` with nothing being served, is
    closed, so held connections free their slots and a health check waits at most about that long.
    A response being served (an event stream) is never cut: waitress's maintenance skips a
    connection with a request in hand. Beyond loopback, put a proxy in front that buffers whole
    requests (docs/webui.md, "Behind a load balancer"): from one address, a client can open
    CONNECTION_LIMIT connections faster than any timeout frees them.

    Forwarding headers (waitress/proxy_headers.py, adjustments.py): waitress's own `trusted_proxy`
    is ONE exact peer address or "*", and when it trusts a peer it rewrites REMOTE_ADDR to the hop
    `trusted_proxy_count` from the right, whatever that hop is. A load balancer has many addresses
    (a subnet), and "*" would make waitress believe the header from every client and lose the peer
    address needed to tell a proxy from a client. So waitress is never told to trust anyone:
    - no trusted proxies (RAYPD_TRUSTED_PROXIES empty): `clear_untrusted_proxy_headers=True`,
      waitress drops X-Forwarded-* and Forwarded before the app sees them (and the app drops them
      too);
    - trusted proxies: waitress passes the headers on untouched with REMOTE_ADDR the real peer, and
      the app's TrustedProxies middleware (webui/security.py) believes X-Forwarded-For only from a
      peer in the trusted networks, then removes every forwarding header.
    """
    server = create_server(
        app, host=host, port=port, threads=SERVER_THREADS, ident="raypd",
        # Progress events are small: hand each to the socket at once, not when 18 kB piled up.
        send_bytes=1, connection_limit=CONNECTION_LIMIT,
        channel_timeout=idle_seconds, cleanup_interval=CLEANUP_SECONDS,
        clear_untrusted_proxy_headers=not trusted_proxies,
    )
    # Each accepted connection is made as `server.channel_class(...)` (waitress/server.py handle_accept).
    server.channel_class = type("RaypdChannel", (DeadlineChannel,), {"request_seconds": request_seconds})
    return server
