"""A request rate that changes over time: steps and linear ramps, and the send times they give.

Why: scaling is only seen under a load that changes. A schedule is a list of steps, each starting
at `at` seconds from the run start and lasting until the next one starts (the last one until the
schedule's `end`): a steady `rate` (requests/s, 0 for a pause), or a ramp from `rate` to `to`,
linear over the step. Inline (`--schedule`), the smallest form that says all of it:

    0s:1,60s:8,180s:1->4,300s:end       (times: a number with s, m or h; a bare number is seconds)

and the same as a YAML or JSON document (`--schedule-file`):

    steps: [{at: 0s, rate: 1}, {at: 60s, rate: 8}, {at: 180s, rate: 1, to: 4}]
    end: 300s

Send times (open loop) come from the schedule's expected count Lambda(t), the integral of the
rate: Poisson arrivals are Lambda^-1 of the running sum of unit exponential gaps (time rescaling
of a homogeneous Poisson process, so each step gets Poisson arrivals at its own rate); uniform
arrivals are evenly spaced in Lambda, the k-th where Lambda reaches k - 1/2 (a steady step of rate
r and length d then gets exactly r*d requests, none on a step boundary).

Pure and standard library only: this module is one of job.RUN_FILES (the in-cluster Job).
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

ARRIVALS = ("poisson", "uniform")
MAX_RATE = 10_000.0  # requests/s: far beyond what one client sends on time (docs/benchmark.md)
MAX_STEPS = 200  # a schedule is a few steps; traffic of its own shape is a trace's job
MAX_SCHEDULE_S = 7 * 86_400.0
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+", re.ASCII)
_TIME = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(s|m|h)?\s*", re.ASCII)
_UNIT_S = {None: 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}


class ScheduleError(ValueError):
    """A schedule that cannot be used; the message names the step and the field (exit 2 in the CLI)."""


@dataclass(frozen=True)
class Step:
    """From `at` (s) to the next step's start: `rate` requests/s, ramping linearly to `to` if given."""

    at: float
    rate: float
    to: Optional[float] = None

    @property
    def end_rate(self) -> float:
        return self.rate if self.to is None else self.to


@dataclass(frozen=True)
class Schedule:
    steps: tuple[Step, ...]
    end: float

    def bounds(self, index: int) -> tuple[float, float]:
        """(start, end) of step `index`, seconds from the run start."""
        later = self.steps[index + 1].at if index + 1 < len(self.steps) else self.end
        return self.steps[index].at, later

    def step_at(self, t: float) -> Optional[int]:
        """The index of the step running at `t` (a boundary belongs to the step it starts), or None
        outside [0, end)."""
        if not 0 <= t < self.end:
            return None
        return max(i for i, step in enumerate(self.steps) if step.at <= t)

    def expected(self, index: Optional[int] = None) -> float:
        """Expected requests in step `index` (all steps for None): the rate's integral over it."""
        indices = range(len(self.steps)) if index is None else [index]
        total = 0.0
        for i in indices:
            start, end = self.bounds(i)
            total += (self.steps[i].rate + self.steps[i].end_rate) / 2 * (end - start)
        return total

    def inline(self) -> str:
        """The inline form (`--schedule`) of this schedule, for a pod that cannot read the file."""
        parts = [f"{step.at:g}s:{step.rate:g}" + ("" if step.to is None else f"->{step.to:g}") for step in self.steps]
        return ",".join([*parts, f"{self.end:g}s:end"])

    def until(self, end: float) -> "Schedule":
        """The schedule cut at `end` seconds (--duration), when that comes first."""
        if end >= self.end:
            return self
        kept = tuple(step for step in self.steps if step.at < end)
        last = kept[-1]
        if last.to is not None:  # the ramp keeps its slope up to the cut
            start, stop = self.bounds(len(kept) - 1)
            cut = last.rate + (last.to - last.rate) * (end - start) / (stop - start)
            kept = (*kept[:-1], Step(last.at, last.rate, cut))
        return Schedule(kept, end)


def parse_seconds(text: Any, where: str) -> float:
    """`90`, `90s`, `1.5m`, `2h` -> seconds; a number as a YAML/JSON value is seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        match = _TIME.fullmatch(str(text)) if isinstance(text, str) else None
        if match is None:
            raise ScheduleError(f"{where} must be a time like 60s, 1.5m or 2h, got {text!r}")
        value = float(match.group(1)) * _UNIT_S[match.group(2)]
    if not math.isfinite(value) or value < 0 or value > MAX_SCHEDULE_S:
        raise ScheduleError(f"{where} must be between 0 and {MAX_SCHEDULE_S:g} s, got {text!r}")
    return value


def _rate(value: Any, where: str) -> float:
    if isinstance(value, str):  # ASCII digits only: float() alone reads "٢" as 2 and "1e3", "inf" too
        if not _NUMBER.fullmatch(value.strip()):
            raise ScheduleError(f"{where} must be a number of requests/s, got {value!r}")
        value = float(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ScheduleError(f"{where} must be a number of requests/s, got {value!r}")
    if not math.isfinite(value) or not 0 <= value <= MAX_RATE:
        raise ScheduleError(f"{where} must be between 0 and {MAX_RATE:g} requests/s, got {value!r}")
    return float(value)


def _checked(steps: Sequence[Step], end: Optional[float], name: str) -> Schedule:
    if not steps:
        raise ScheduleError(f"{name} has no steps")
    if len(steps) > MAX_STEPS:
        raise ScheduleError(f"{name} has {len(steps)} steps, more than {MAX_STEPS}")
    if steps[0].at != 0:
        raise ScheduleError(f"{name} step 1 must start at 0s, got {steps[0].at:g}s")
    for number in range(1, len(steps)):
        if steps[number].at <= steps[number - 1].at:
            raise ScheduleError(f"{name} step {number + 1} at must be later than step {number}'s "
                                f"({steps[number].at:g}s <= {steps[number - 1].at:g}s)")
    if end is None:
        raise ScheduleError(f"{name} needs an end: a last `END:end` step, `end:` in the file, or --duration")
    if end <= steps[-1].at:
        raise ScheduleError(f"{name} end ({end:g}s) must be later than the last step's start ({steps[-1].at:g}s)")
    return Schedule(tuple(steps), end)


def parse_inline(text: str, end: Optional[float] = None) -> Schedule:
    """`0s:1,60s:8,180s:1->4,300s:end`: comma-separated `AT:RATE`, `AT:FROM->TO` and a last
    `AT:end`; without the `end` entry the schedule ends at `end` (--duration)."""
    steps: list[Step] = []
    stop: Optional[float] = None
    entries = [part.strip() for part in text.split(",")]
    for number, entry in enumerate(entries, 1):
        where = f"--schedule step {number} ({entry!r})"
        if stop is not None:
            raise ScheduleError(f"{where}: nothing may follow the `end` entry")
        at, colon, rate = entry.partition(":")
        if not colon:
            raise ScheduleError(f"{where} must be AT:RATE, AT:FROM->TO or AT:end")
        start = parse_seconds(at, f"{where} at")
        if rate.strip() == "end":
            stop = start
            continue
        first, arrow, last = rate.partition("->")
        steps.append(Step(start, _rate(first, f"{where} rate"), _rate(last, f"{where} ramp end") if arrow else None))
    return _checked(steps, stop if stop is not None else end, "--schedule")


def from_document(document: Any, name: str, end: Optional[float] = None) -> Schedule:
    """A schedule file's document: `{steps: [{at, rate, to?}], end?}`; unknown keys are errors."""
    if not isinstance(document, Mapping):
        raise ScheduleError(f"{name} must be a mapping with `steps` (and `end`)")
    unknown = sorted(str(key) for key in document if key not in ("steps", "end"))
    if unknown:
        raise ScheduleError(f"{name}: unknown key {unknown[0]!r} (steps, end)")
    steps_value = document.get("steps")
    if not isinstance(steps_value, list):
        raise ScheduleError(f"{name}: steps must be a list of {{at, rate, to?}}")
    steps = []
    for number, item in enumerate(steps_value):
        where = f"{name}: steps[{number}]"
        if not isinstance(item, Mapping):
            raise ScheduleError(f"{where} must be a mapping {{at, rate, to?}}")
        extra = sorted(str(key) for key in item if key not in ("at", "rate", "to"))
        if extra:
            raise ScheduleError(f"{where}: unknown key {extra[0]!r} (at, rate, to)")
        for key in ("at", "rate"):
            if key not in item:
                raise ScheduleError(f"{where}.{key} is required")
        steps.append(Step(parse_seconds(item["at"], f"{where}.at"), _rate(item["rate"], f"{where}.rate"),
                          _rate(item["to"], f"{where}.to") if item.get("to") is not None else None))
    stop = parse_seconds(document["end"], f"{name}: end") if document.get("end") is not None else end
    return _checked(steps, stop, name)


def _inverse(schedule: Schedule, mass: float, index: int, before: float) -> float:
    """The time in step `index` (whose start has expected count `before`) where the expected count
    reaches `mass`: the root of before + r0 u + s u^2 / 2 = mass, in a form stable for any slope."""
    start, end = schedule.bounds(index)
    step = schedule.steps[index]
    slope = (step.end_rate - step.rate) / (end - start)
    d = mass - before
    root = math.sqrt(max(0.0, step.rate * step.rate + 2 * slope * d))
    return start + (2 * d / (step.rate + root) if step.rate + root > 0 else 0.0)


def arrivals(schedule: Schedule, kind: str = "poisson", seed: int = 0, limit: Optional[int] = None) -> list[float]:
    """Send offsets (s from the run start) for the schedule: Poisson or uniform (module docstring);
    at most `limit` of them."""
    if kind not in ARRIVALS:
        raise ScheduleError(f"--arrivals must be one of {', '.join(ARRIVALS)}, got {kind!r}")
    rng = random.Random(seed)
    offsets: list[float] = []
    before, index = 0.0, 0
    mass = rng.expovariate(1.0) if kind == "poisson" else 0.5
    while index < len(schedule.steps) and (limit is None or len(offsets) < limit):
        in_step = schedule.expected(index)
        if mass >= before + in_step:  # past this step's share: on to the next
            before += in_step
            index += 1
            continue
        offsets.append(_inverse(schedule, mass, index, before))
        mass += rng.expovariate(1.0) if kind == "poisson" else 1.0
    return offsets
