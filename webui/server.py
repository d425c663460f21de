"""The production WSGI server the app runs under: waitress, set up once for `python -m webui` and
the benchmarks, so what is measured is what users run.

Not Werkzeug's development server: waitress serves with a pool of threads and bounded
connections. An event stream holds a thread only for a bounded window (the pages ask for
`?window=30` and EventSource resumes from its last event), so a few open tabs cannot starve the
pages of threads.
"""

from __future__ import annotations

from typing import Any

from waitress.server import create_server

SERVER_THREADS = 16
CONNECTION_LIMIT = 200


def make_server(app: Any, host: str, port: int) -> Any:
    """A waitress server bound to host:port (0 = a free port); `.effective_port`, `.run()`,
    `.close()`. Raises OSError when the address cannot be bound."""
    return create_server(
        app, host=host, port=port, threads=SERVER_THREADS, ident="raypd",
        # Progress events are small: hand each to the socket at once, not when 18 kB piled up.
        send_bytes=1, connection_limit=CONNECTION_LIMIT, clear_untrusted_proxy_headers=True,
    )
