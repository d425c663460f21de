"""The Ray Serve config of a deployment plan: re-exported from `components.serve_config`.

The renderer lives in `components` so that imports run one way (`serve` uses `components`, never
the reverse); this module keeps the names `serve.render`, `serve.evidence` and scripts import.
"""

from __future__ import annotations

from components.serve_config import (  # noqa: F401 (re-exports)
    APP_NAME,
    COLOCATED_IMPORT_PATH,
    HTTP_HOST,
    KV_LOAD_FAILURE_POLICY,
    KV_ROLE,
    PD_IMPORT_PATH,
    PIN_STRATEGY,
    ROUTE_PREFIX,
    render_application,
    render_llm_config,
    render_serve_config,
    render_serve_config_yaml,
    to_yaml,
)
