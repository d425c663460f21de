"""A tiny Serve application for tests/real/serve_updates, imported by Ray's workers (not by pytest).

Built like Ray Serve LLM's apps: an application builder takes `args` and binds a deployment whose
init args are those args, under a name with a colon (`Decode:tiny`, as Ray Serve LLM names its
engines). Each replica answers with its args and a random id drawn at start, so a test can tell a
replica that kept running from one that was started again. At start it prints a line that begins
with "0", as tqdm's first progress line does (`0it [00:00, ?it/s]`), and one after it: Ray's log API
must hand such a log back as it is (tests/real/serve_updates/test_ray_head.py).
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from ray import serve

DEPLOYMENT = "Decode:tiny"
ZERO_LINE = "0it [00:00, ?it/s]"


@serve.deployment(name=DEPLOYMENT, num_replicas=1, ray_actor_options={"num_cpus": 0.1})
class Probe:
    def __init__(self, settings: dict[str, Any]):
        self.settings = settings
        self.started = uuid.uuid4().hex
        self.pid = os.getpid()
        print(ZERO_LINE, flush=True)  # the replica actor's .out file
        print(f"probe {self.started} ready", flush=True)

    async def __call__(self, request: Any) -> dict[str, Any]:
        return {"settings": self.settings, "started": self.started, "pid": self.pid}


def build(args: dict[str, Any]) -> Any:
    """The application builder (`import_path: probe_app:build`), as raypd's PD app is one."""
    return Probe.bind(dict(args))
