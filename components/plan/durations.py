"""How long a deployment takes: typical seconds per resource type, the plan's critical path, an ETA.

Pulumi does not say how long an update will take. What it does know is the dependency graph: the
offline plan (Contract 2) lists every resource with the names it `dependsOn`, and the engine
starts a resource as soon as everything it depends on is done. So the wall time of a `pulumi up`
is the longest path through that graph, weighted by how long each resource takes to create. That
path is dominated by three slow steps of the reference deployment: the EKS control plane, the GPU
node group and the RayService (which is Ready only once every node has pulled the serving image
and loaded the model). The rest (VPC, subnets, IAM, Namespace...) take seconds.

`TYPICAL` (components.plan.typical_durations, re-exported here) is the one table of typical
creation times, each with where the number comes from. The web app replaces entries with the
medians of its own past runs (`measured_durations`, `merged`) once it has them: what this
account, region and model actually take beats any quote.

Everything here is plain data in, numbers out: resources are the plan's dicts (`type`, `name`,
`dependsOn`, optionally `inputs`), durations a mapping of key -> seconds. No Pulumi import, so the
web app and the benches can use it without the SDK loaded.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Optional, Sequence

from components.config.defaults import GPU_ROLE_LABEL
from components.plan.typical_durations import (
    CHANGE_TIMES,
    GPU_NODE_GROUP,
    MANAGED_NODE_GROUP,
    TYPICAL,
    TYPICAL_SECONDS,
    Typical,
)

__all__ = [
    "CHANGE_TIMES", "COMPONENT_PREFIXES", "DEFAULT_SECONDS", "GPU_AMI_MARKER", "GPU_NODE_GROUP",
    "LATE_FLOOR_FRACTION", "MANAGED_NODE_GROUP", "TYPICAL", "TYPICAL_SECONDS", "CriticalPath", "Resource",
    "Typical", "critical_path", "duration_key", "measured_durations", "merged", "path_steps",
    "remaining_seconds", "seconds_for",
]

Resource = Mapping[str, Any]

GPU_AMI_MARKER = "NVIDIA"  # raypd's GPU groups use AL2023_x86_64_NVIDIA
# Component resources (the project's own `raypd:` types, the stack) create nothing themselves:
# their time is their children's, which the plan lists separately.
COMPONENT_PREFIXES = ("raypd:", "pulumi:pulumi:Stack")
# Any type the table does not know: most AWS and Kubernetes API objects are created in seconds.
DEFAULT_SECONDS = 10.0
# A started resource that has run past its typical time is still expected to take a little
# longer, not zero: without a floor, the ETA of a late RayService would read "0 s" for as long as
# it stays late, which is exactly when the user most wants an honest number.
LATE_FLOOR_FRACTION = 0.10


class CriticalPath(NamedTuple):
    """The longest chain of dependencies: its total seconds and its names, first to last."""

    seconds: float
    names: tuple[str, ...]


# ---- one resource's time ----

def duration_key(resource: Resource) -> str:
    """The table key of a resource: its type token, except GPU node groups get their own.

    The web app should record measured samples under this key too (it has the plan, so it can
    map an event's name to the plan's resource), or a GPU group's 10 minutes would be averaged
    with the system group's 3.
    """
    kind = str(resource.get("type", ""))
    if kind == MANAGED_NODE_GROUP:
        inputs = resource.get("inputs") or {}
        labels = inputs.get("labels") or {}
        ami = str(inputs.get("amiType") or "")
        if GPU_AMI_MARKER in ami.upper() or all(labels.get(k) == v for k, v in GPU_ROLE_LABEL.items()):
            return GPU_NODE_GROUP
    return kind


def seconds_for(resource: Resource, durations: Mapping[str, float]) -> float:
    """Typical seconds of one resource: its key, else its type, else 0 for components, else default.

    Falling back from the GPU key to the plain type keeps a measured-only mapping usable.
    """
    key = duration_key(resource)
    kind = str(resource.get("type", ""))
    for candidate in (key, kind):
        if candidate in durations:
            return float(durations[candidate])
    if kind.startswith(COMPONENT_PREFIXES):
        return 0.0
    return DEFAULT_SECONDS


# ---- the graph ----

def _graph(
    resources: Sequence[Resource],
) -> tuple[list[str], dict[str, Resource], dict[str, list[str]]]:
    """Names in plan order, name -> resource, name -> the dependencies that are in the plan."""
    order: list[str] = []
    by_name: dict[str, Resource] = {}
    for resource in resources:
        name = str(resource["name"])
        if name in by_name:
            # dependsOn refers to names: two resources with one name cannot be told apart.
            raise ValueError(f"two resources are named {name!r}; dependsOn cannot tell them apart")
        by_name[name] = resource
        order.append(name)
    deps = {
        # Names outside the list (e.g. the stack, or resources of another plan) are ignored;
        # duplicates are kept once, in the order given.
        name: list(dict.fromkeys(
            str(d) for d in (by_name[name].get("dependsOn") or []) if d in by_name
        ))
        for name in order
    }
    return order, by_name, deps


def _topological(order: list[str], deps: Mapping[str, list[str]]) -> list[str]:
    """Dependencies before dependents; ValueError naming a cycle. Iterative: no recursion limit."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    result: list[str] = []
    for root in order:
        if state.get(root) == 2:
            continue
        path: list[str] = [root]
        iterators = [iter(deps[root])]
        state[root] = 1
        while path:
            step = next(iterators[-1], None)
            if step is None:
                done = path.pop()
                iterators.pop()
                state[done] = 2
                result.append(done)
            elif state.get(step) == 1:
                cycle = path[path.index(step):] + [step]
                raise ValueError("dependency cycle: " + " -> ".join(cycle))
            elif state.get(step) != 2:
                state[step] = 1
                path.append(step)
                iterators.append(iter(deps[step]))
    return result


def _longest(
    resources: Sequence[Resource],
    weight: Callable[[str, Resource], float],
    roots: frozenset[str] = frozenset(),
) -> CriticalPath:
    """Longest weighted path; resources in `roots` are treated as having no pending dependencies."""
    order, by_name, deps = _graph(resources)
    finish: dict[str, float] = {}
    previous: dict[str, Optional[str]] = {}
    for name in _topological(order, deps):
        best: Optional[str] = None
        if name not in roots:
            for dep in deps[name]:  # first listed wins a tie: deterministic
                if best is None or finish[dep] > finish[best]:
                    best = dep
        previous[name] = best
        finish[name] = weight(name, by_name[name]) + (finish[best] if best is not None else 0.0)
    if not finish:
        return CriticalPath(0.0, ())
    end = order[0]
    for name in order:  # plan order breaks ties between equally long ends
        if finish[name] > finish[end]:
            end = name
    names: list[str] = []
    cursor: Optional[str] = end
    while cursor is not None:
        names.append(cursor)
        cursor = previous[cursor]
    return CriticalPath(finish[end], tuple(reversed(names)))


def critical_path(resources: Sequence[Resource], durations: Mapping[str, float]) -> CriticalPath:
    """The longest path through the plan's dependsOn DAG: the time a `pulumi up` needs.

    Pulumi starts a resource as soon as all it depends on is created, with unbounded parallelism
    by default, so with typical durations the update takes the longest dependency chain. The
    returned names run from the first resource created to the last. Raises ValueError on a cycle.
    """
    return _longest(resources, lambda _name, resource: seconds_for(resource, durations))


def remaining_seconds(
    resources: Sequence[Resource],
    durations: Mapping[str, float],
    finished: Iterable[str],
    started: Mapping[str, float],
) -> float:
    """The ETA during a run: the longest path over what is not finished yet.

    - finished resources count 0;
    - a started resource (name -> seconds since it started) counts what is left of its typical
      time, but at least LATE_FLOOR_FRACTION of it: one running late is still expected to take
      a little longer, so the ETA never claims "done" while something is still being created;
      its dependencies are behind it (the engine started it), so nothing before it counts;
    - any other resource counts its typical time.
    Names that are not in the plan are ignored.
    """
    done = set(finished)
    running = {name: elapsed for name, elapsed in started.items() if name not in done}

    def weight(name: str, resource: Resource) -> float:
        if name in done:
            return 0.0
        typical = seconds_for(resource, durations)
        if name in running:
            elapsed = running[name]
            if not math.isfinite(elapsed) or elapsed < 0:
                elapsed = 0.0
            return max(typical - elapsed, LATE_FLOOR_FRACTION * typical)
        return typical

    return _longest(resources, weight, roots=frozenset(running)).seconds


# ---- learning from past runs ----

def measured_durations(samples: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Median seconds per key from (key, seconds) samples of past runs.

    The median, not the mean: one run that waited on a quota or a retry must not move the ETA
    of every later run. Non-positive, NaN and infinite samples (a resource that was skipped, or a
    clock that jumped) are ignored; keys with no valid sample are left out.
    """
    by_key: dict[str, list[float]] = {}
    for key, seconds in samples:
        try:
            value = float(seconds)
        except (TypeError, ValueError):
            continue
        if math.isfinite(value) and value > 0:
            by_key.setdefault(str(key), []).append(value)
    return {key: float(statistics.median(values)) for key, values in by_key.items()}


def merged(table: Mapping[str, float], measured: Mapping[str, float]) -> dict[str, float]:
    """The table with measured medians in place of quotes wherever there is a measurement."""
    return {**table, **measured}


def path_steps(
    resources: Sequence[Resource], path: CriticalPath, durations: Mapping[str, float]
) -> list[tuple[str, str, float]]:
    """(type, name, seconds) for every step of a path, for printing."""
    by_name = {str(r["name"]): r for r in resources}
    return [
        (str(by_name[name]["type"]), name, seconds_for(by_name[name], durations)) for name in path.names
    ]
