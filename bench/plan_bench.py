"""Wall-time benchmark of the offline plan (`python -m components.plan`), as a user runs it.

    python bench/plan_bench.py [--runs N]

Measures two cases, each as a fresh subprocess (interpreter start, imports, mock run, JSON):
1. the reference stack (Pulumi.dev.yaml): target < 3 s;
2. a stack with 8 GPU node groups: target < 5 s. A stack file cannot ask for 8 groups (there are
   at most two phases, so at most two groups), so this case runs the same CLI (`plan.main`) in a
   child process where the node-group planner returns 8 groups: the heterogeneous stack's prefill
   (p5.48xlarge) and decode (g6e.48xlarge) groups, four copies of each under distinct names. The
   planner is replaced in its one module (components.plan.topology): the deployment plan is built from
   it once and every consumer (program, RayService, serve config, outputs) reads that plan, so the
   run registers 8 GPU ManagedNodeGroups and renders 8 Ray worker groups through the real code.
Prints the timings (min and median of N runs) and whether each meets its target. Not a test.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # a script: make the project importable from anywhere

from components.config.defaults import GPU_ROLE_LABEL  # noqa: E402 (after the path set-up)

REFERENCE_STACK = ROOT / "Pulumi.dev.yaml"
TARGETS = {"reference": 3.0, "eight-groups": 5.0}
SYNTHETIC_GROUPS = 8
HETEROGENEOUS = {
    "raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 8},
    "raypd:decode": {"instanceType": "g6e.48xlarge", "tensorParallelSize": 8, "replicas": 2},
}


def _eight_groups_child() -> int:
    """Run the plan CLI with the node-group planner replaced by an 8-group one."""
    import yaml

    from components.config import defaults
    from components.config.spec import DeploymentSpec
    from components.plan import topology
    from components.stack import offline_plan as plan

    real_groups = topology.plan_deployment(DeploymentSpec.from_config(HETEROGENEOUS, "bench")).groups
    copies = SYNTHETIC_GROUPS // len(real_groups)
    synthetic = []
    for group in real_groups:
        for index in range(copies):
            name = f"{group.name}{index}"
            synthetic.append(dataclasses.replace(
                group,
                name=name,
                labels={**group.labels, defaults.PHASE_LABEL_KEY: name},
                ray_resource=f"raypd_{name}",
            ))

    def eight_groups(spec: Any) -> list[Any]:
        return list(synthetic)

    # The one planner: plan_deployment calls it, and nothing else does.
    topology.plan_gpu_groups = eight_groups
    stack_file = Path(sys.argv[2])
    stack_file.write_text(yaml.safe_dump({"config": HETEROGENEOUS}), encoding="utf-8")
    return plan.main(["--config", str(stack_file), "--stack", "bench", "--json"])


def _time(command: list[str]) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr}")
    return elapsed, json.loads(result.stdout)


def _gpu_groups(document: dict[str, Any]) -> int:
    return sum(
        1 for r in document["resources"]
        if r["type"] == "eks:index:ManagedNodeGroup"
        and r["inputs"].get("labels", {}).get("role") == GPU_ROLE_LABEL["role"]
    )


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--eight-groups-child":
        return _eight_groups_child()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per case (default 3)")
    args = parser.parse_args()

    python = sys.executable
    with tempfile.TemporaryDirectory() as scratch:
        cases = {
            "reference": [python, "-m", "components.plan", "--config", str(REFERENCE_STACK), "--json"],
            "eight-groups": [
                python, str(Path(__file__).resolve()), "--eight-groups-child",
                str(Path(scratch) / "Pulumi.bench.yaml"),
            ],
        }
        failed = False
        for case, command in cases.items():
            times = []
            groups = 0
            for _ in range(args.runs):
                elapsed, document = _time(command)
                times.append(elapsed)
                groups = _gpu_groups(document)
            best, median = min(times), statistics.median(times)
            ok = median < TARGETS[case]
            failed |= not ok
            print(
                f"{case:13s} GPU node groups: {groups}  resources: {len(document['resources'])}  "
                f"min {best:.2f} s  median {median:.2f} s  (target < {TARGETS[case]:.0f} s: "
                f"{'ok' if ok else 'MISSED'})"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
