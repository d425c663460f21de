"""Loaded by every Python process of the real engines (tests/real/quiet_nixl.py puts this directory
on their PYTHONPATH): NIXL's progress thread sleeps in poll() between events instead of spinning.

NIXL 1.5.1's Python agent hard-codes `agent_config.pthrDelay = 0` (nixl_cu12/_api.py, `nixl_agent`),
and the UCX backend's progress thread passes that delay to poll() as its timeout
(ai-dynamo/nixl src/plugins/ucx/ucx_backend.cpp, `nixlUcxSharedThread`): with 0 the thread never
sleeps. vLLM offers no knob for it. Measured here: an idle CPU engine burned 29-30 CPU-seconds in
30 s, a whole core each, so the pair alone saturated this 2-core machine; with a 1 ms timeout,
1 CPU-second in 30 s, and five chats through the pair took 2.9 s instead of 4.5 s. A transfer's
completion still wakes the thread at once (poll watches the UCX workers' event fds); the delay
only bounds how long a missed wake-up waits, which is what NIXL's comment says it is for.

This changes NIXL's polling, never what it transfers: the KV-transfer tests read the same
transfer counters. On a GPU node raypd leaves NIXL as it ships.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from types import ModuleType
from typing import Any, Optional, Sequence

DELAY_US = int(os.environ.get("RAYPD_TEST_NIXL_PROGRESS_DELAY_US", "1000"))


class _QuietNixlFinder(importlib.abc.MetaPathFinder):
    """Finds `nixl_cu*._bindings` through the other finders and wraps its `nixlAgent` once loaded."""

    def find_spec(self, fullname: str, path: Optional[Sequence[str]],
                  target: Optional[ModuleType] = None) -> Optional[importlib.machinery.ModuleSpec]:
        if not (fullname.startswith("nixl_") and fullname.endswith("._bindings")):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                _wrap_loader(spec.loader)
                return spec
        return None


def _wrap_loader(loader: Any) -> None:
    load = loader.exec_module

    def exec_module(module: ModuleType) -> None:
        load(module)
        agent = module.nixlAgent

        def quiet_agent(name: str, config: Any) -> Any:
            if config.pthrDelay == 0:
                config.pthrDelay = DELAY_US
            return agent(name, config)

        module.nixlAgent = quiet_agent

    loader.exec_module = exec_module


sys.meta_path.insert(0, _QuietNixlFinder())
