"""How the stand-in HTTP servers answer with JSON: one home for the bytes every handler wrote alike."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


def send_json(handler: BaseHTTPRequestHandler, status: int, document: Any) -> None:
    """`document` as the whole answer, with its length (clients on keep-alive read exactly that)."""
    body = json.dumps(document).encode("utf-8")
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
