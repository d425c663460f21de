"""`real_pd_pair`: one real vLLM prefill/decode pair for every test in this directory (see ../conftest.py)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Iterator

import pytest

from tests.real.locate import RealVllm
from tests.real.machine_lock import machine_lock
from tests.real.pd_pair import PdPair, start_pair
from tests.real.processes import stopping

log = logging.getLogger(__name__)
RESILIENCE_MODULE = "test_resilience_on_real_pair.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The resilience tests last in this package: they kill and restart the prefill engine (and
    leave it ready); every other test here sees the pair as it started. Only this package's places
    in the list are reordered (as tests/real/ray/conftest.py does, for the same reason)."""
    here = Path(__file__).parent
    places = [i for i, item in enumerate(items) if item.path.parent == here]
    ours = sorted((items[i] for i in places), key=lambda item: item.path.name == RESILIENCE_MODULE)
    for place, item in zip(places, ours, strict=True):
        items[place] = item


@pytest.fixture(scope="package")
def real_pd_pair(real: RealVllm, real_artifacts: Path) -> Iterator[PdPair]:
    """Started once for this package and stopped after its last test (NIXL's UCX thread burns
    half a core per idle engine); engine output in test-artifacts/real/pair/<engine>.log."""
    with machine_lock("tests/real/pair"), stopping([]) as processes:
        pair = start_pair(real, real_artifacts / "pair", processes)
        log.info("real PD pair ready in %.0f s", pair.ready_s)
        yield pair
