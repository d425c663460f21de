"""Server-rendered pages: list, new deployment (form -> preview -> launch), deployment, its
settings, operations, Benchmark, Resilience and Conformance tabs and API keys, login, and raypd's docs.

Views are thin: they turn form posts into calls of `app.service` (webui/deployments) and render
templates. Every page extends base.html; the little JavaScript there is lives in static/app.js (the
CSP forbids inline). One blueprint (`bp`, "pages"); each module adds the routes of one part.
"""

from __future__ import annotations

from webui.pages import benchmark, changes, conformance, deployments, docs, keys, login, operations, resilience
from webui.pages.blueprint import bp

__all__ = ["benchmark", "bp", "changes", "conformance", "deployments", "docs", "keys", "login", "operations",
           "resilience"]
