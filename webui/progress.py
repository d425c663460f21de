"""Progress that means something on a real update: the total before the first resource, and an ETA.

Pulumi announces neither how many steps an update has nor how long they take. raypd knows both
in advance: the offline plan of the same spec lists every resource and what it waits for, and
`components.plan.durations` says how long each type typically takes on AWS, replaced by what this app
measured on its own past runs (`Store.resource_durations`). The ETA is the longest chain of what is
not finished yet (the critical path), so it follows the slow steps (EKS cluster, GPU node groups,
RayService until the model is loaded), not the count of fast ones.

`ProgressPlan.decorate` is hung on the job's context (`JobContext.decorate`): whichever engine
emits the records, each resource record leaves with the planned total and `etaSeconds`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from components.plan.durations import (
    TYPICAL_SECONDS,
    critical_path,
    duration_key,
    measured_durations,
    merged,
    remaining_seconds,
)

Resource = Mapping[str, Any]


def durations_for(planned: Sequence[Resource], samples: Iterable[tuple[str, str, float]]) -> dict[str, float]:
    """The typical table, overridden by medians measured here. Samples are (name, type, seconds)
    and are keyed like the plan keys them (a GPU node group is not the system node group)."""
    by_name = {str(resource.get("name")): resource for resource in planned}
    keyed = [
        (duration_key(by_name[name]) if name in by_name else type_, seconds)
        for name, type_, seconds in samples
    ]
    return merged(TYPICAL_SECONDS, measured_durations(keyed))


def planned_total(planned: Sequence[Resource], preview_changes: Optional[Mapping[str, Any]]) -> int:
    """Steps the update will take: the last preview's change summary when there is one (it knows
    about resources that already exist), else every resource of the offline plan."""
    if preview_changes:
        counted = sum(int(count) for count in preview_changes.values() if isinstance(count, (int, float)))
        if counted > 0:
            return counted
    return len(planned)


@dataclass
class ProgressPlan:
    planned: Sequence[Resource]
    durations: dict[str, float]
    total: int
    clock: Callable[[], float] = time.monotonic
    finished: set[str] = field(default_factory=set)
    started: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._names = {str(resource.get("name")) for resource in self.planned}

    @property
    def eta_seconds(self) -> int:
        now = self.clock()
        elapsed = {name: now - since for name, since in self.started.items()}
        return round(remaining_seconds(self.planned, self.durations, self.finished, elapsed))

    def opening_record(self) -> dict[str, Any]:
        """What the job shows before the first resource: how many steps, how long to serving."""
        seconds = round(critical_path(self.planned, self.durations).seconds)
        return {"kind": "status", "status": "running", "done": 0, "total": self.total,
                "etaSeconds": seconds,
                "message": f"planned: {self.total} resources, about {_minutes(seconds)} to serving "
                           "(typical AWS durations and this app's past runs)"}

    def decorate(self, record: dict[str, Any]) -> dict[str, Any]:
        if record.get("kind") != "resource":
            return record
        name = str(record.get("name"))
        if name in self._names:
            if record.get("state") == "started":
                self.started.setdefault(name, self.clock())
            else:
                self.finished.add(name)
                self.started.pop(name, None)
        total = max(int(record.get("total") or 0), self.total)
        return {**record, "total": total, "etaSeconds": self.eta_seconds}


def _minutes(seconds: float) -> str:
    return f"{max(1, round(seconds / 60))} min"
