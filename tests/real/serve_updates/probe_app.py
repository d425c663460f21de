"""A tiny Serve application for tests/real/serve_updates, imported by Ray's workers (not by pytest).

Built like Ray Serve LLM's apps: an application builder takes `args` and binds a deployment whose
init args are those args, under a name with a colon (`Decode:tiny`, as Ray Serve LLM names its
engines). Each replica answers with its args and a random id drawn at start, so a test can tell a
replica that kept running from one that was started again.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from ray import serve

DEPLOYMENT = "Decode:tiny"


@serve.deployment(name=DEPLOYMENT, num_replicas=1, ray_actor_options={"num_cpus": 0.1})
class Probe:
    def __init__(self, settings: dict[str, Any]):
        self.settings = settings
        self.started = uuid.uuid4().hex
        self.pid = os.getpid()

    async def __call__(self, request: Any) -> dict[str, Any]:
        return {"settings": self.settings, "started": self.started, "pid": self.pid}


def build(args: dict[str, Any]) -> Any:
    """The application builder (`import_path: probe_app:build`), as raypd's PD app is one."""
    return Probe.bind(dict(args))
