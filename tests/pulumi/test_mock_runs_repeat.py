"""The mock runtime is stable: 10 runs, in fresh processes and repeated in one, same result.

pulumi-eks components under Pulumi's stock mocks fail about half the runs ("attached to a
different loop"); components.stack.mockrun avoids that. A flaky plan would make the web app's offline
engine flaky, so this runs the plan 10 times (2 fresh processes x 5 runs each, references,
heterogeneous and colocated stacks interleaved) and asks for 10 successes and identical documents: a
failure rate of one half passes all ten once in a thousand suites. (It ran 4 processes: two more
fresh imports of pulumi_aws cost a minute of CI for a one-in-a-million margin.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.pulumi.conftest import COLOCATED, HETEROGENEOUS

ROOT = Path(__file__).resolve().parents[2]
PROCESSES = 2
RUNS_PER_PROCESS = 5
pytestmark = pytest.mark.slow

CHILD = """
import hashlib, json, sys
from components.stack.offline_plan import run_plan
stacks = json.loads(sys.argv[1])
names = sorted(stacks)
for i in range(int(sys.argv[2])):
    name = names[i % len(names)]
    document = json.dumps(run_plan(stacks[name], (), "dev"), sort_keys=True)
    print(name, hashlib.sha256(document.encode()).hexdigest(), flush=True)
"""


def run_child() -> subprocess.CompletedProcess[str]:
    stacks = {"reference": {}, "heterogeneous": HETEROGENEOUS, "colocated": COLOCATED}
    return subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(stacks), str(RUNS_PER_PROCESS)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )


def test_ten_plan_runs_all_succeed_with_identical_documents():
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda _: run_child(), range(PROCESSES)))
    digests: dict[str, set[str]] = {}
    runs = 0
    for result in results:
        assert result.returncode == 0, result.stderr[-2000:]
        for line in result.stdout.splitlines():
            name, digest = line.split()
            digests.setdefault(name, set()).add(digest)
            runs += 1
    assert runs == PROCESSES * RUNS_PER_PROCESS
    assert {name: len(values) for name, values in digests.items()} == {
        "reference": 1, "heterogeneous": 1, "colocated": 1
    }
