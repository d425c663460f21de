"""Time to serving of a raypd deployment, from the offline plan and the typical-duration table.

    python bench/serving_time_bench.py

Builds the offline plan (Pulumi mock runtime, nothing created) of two stacks and prints, for
each, the critical path of the plan's dependency graph weighted by `components.plan.durations.TYPICAL`:
the time from `pulumi up` to a RayService that serves (Ready: model loaded on every node), the
steps of that path with their seconds, and the number of resources.
1. the reference stack (Pulumi.dev.yaml: 2 x g6.8xlarge, one shared GPU node group);
2. a heterogeneous stack: prefill on p5.48xlarge TP8, decode on g6e.48xlarge TP8 with 2 replicas
   (two GPU node groups), written to a temporary stack file.
The times are estimates from published timings, not measurements of this machine; nothing is
asserted about them. Not a test.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # a script: make the project importable from anywhere

import yaml  # noqa: E402 (after the path set-up)

from components.plan import durations  # noqa: E402
from components.stack.offline_plan import plan_file  # noqa: E402

REFERENCE_STACK = ROOT / "Pulumi.dev.yaml"
HETEROGENEOUS = {
    "raypd:prefill": {"instanceType": "p5.48xlarge", "tensorParallelSize": 8},
    "raypd:decode": {"instanceType": "g6e.48xlarge", "tensorParallelSize": 8, "replicas": 2},
}


def report(case: str, document: dict[str, Any]) -> None:
    resources = document["resources"]
    table = durations.TYPICAL_SECONDS
    path = durations.critical_path(resources, table)
    gpu_groups = sum(1 for r in resources if durations.duration_key(r) == durations.GPU_NODE_GROUP)
    print(f"{case}: time to serving {path.seconds / 60:.1f} min ({path.seconds:.0f} s), "
          f"{len(resources)} resources, {gpu_groups} GPU node group(s)")
    elapsed = 0.0
    by_name = {r["name"]: r for r in resources}
    for _kind, name, seconds in durations.path_steps(resources, path, table):
        elapsed += seconds
        key = durations.duration_key(by_name[name])  # the type, "[gpu]" for GPU node groups
        print(f"  {seconds:6.0f} s  (done at {elapsed / 60:5.1f} min)  {key:45s} {name}")
    print()


def main() -> int:
    report("reference", plan_file(str(REFERENCE_STACK)))
    with tempfile.TemporaryDirectory() as scratch:
        stack_file = Path(scratch) / "Pulumi.bench.yaml"
        stack_file.write_text(yaml.safe_dump({"config": HETEROGENEOUS}), encoding="utf-8")
        report("heterogeneous", plan_file(str(stack_file), "bench"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
