"""The production WSGI server the app runs under: waitress, set up once for `python -m webui` and
the benchmarks, so what is measured is what users run.

Not Werkzeug's development server: waitress serves with a pool of threads and bounded
connections. An event stream holds a thread only for a bounded window (the pages ask for
`?window=30` and EventSource resumes from its last event), so a few open tabs cannot starve the
pages of threads.
"""

from __future__ import annotations

from typing import Any, Sequence

from waitress.server import create_server

SERVER_THREADS = 16
CONNECTION_LIMIT = 200


def make_server(app: Any, host: str, port: int, trusted_proxies: Sequence[object] = ()) -> Any:
    """A waitress server bound to host:port (0 = a free port); `.effective_port`, `.run()`,
    `.close()`. Raises OSError when the address cannot be bound.

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
    return create_server(
        app, host=host, port=port, threads=SERVER_THREADS, ident="raypd",
        # Progress events are small: hand each to the socket at once, not when 18 kB piled up.
        send_bytes=1, connection_limit=CONNECTION_LIMIT,
        clear_untrusted_proxy_headers=not trusted_proxies,
    )
