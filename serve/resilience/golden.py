"""Golden answers, and the load that is judged against them, both sent by raypd's load generator.

Before the fault, each prompt is asked twice, one request at a time, with the settings that make an
answer repeatable: temperature 0, a fixed sampling `seed`, vLLM's `ignore_eos` and a fixed
`max_tokens` (so every answer is exactly that long). A prompt whose two answers differ (or fail)
has no golden answer: its later answers cannot be judged, and the report names it (`unstable`)
rather than counting a wrong answer that the model itself would give. The steady load cycles
through the same prompts with the same settings (serve.benchmark.loadgen's `keep_text` hook keeps
each answer's text), so every answer of a stable prompt has one right text.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence

from serve.benchmark.loadgen import LoadConfig, run_load
from serve.benchmark.workload import RequestSpec, synthetic_workload

SEED = 1234
ASKED = 2  # each golden prompt is asked this often: two answers that agree are repeatable


@dataclass(frozen=True)
class Workload:
    """What the check sends: a few prompts, how long each answer is, and the sampling settings."""

    prompts: int = 8
    input_tokens: int = 64
    max_tokens: int = 16
    seed: int = SEED

    def specs(self) -> list[RequestSpec]:
        return synthetic_workload(self.prompts, self.input_tokens, self.max_tokens, seed=self.seed)

    def load_specs(self, rate: float, duration_s: float) -> list[RequestSpec]:
        """Enough requests for `duration_s` of Poisson arrivals at `rate` (the load generator stops
        sending at the duration), cycling through the prompts: request i asks prompt i mod n."""
        count = math.ceil(rate * duration_s * 1.5) + 20
        prompts = self.specs()
        return [replace(prompts[i % len(prompts)], index=i) for i in range(count)]

    def config(self, endpoint: str, model: str, **load: Any) -> LoadConfig:
        """The load generator's settings for golden and load requests alike."""
        return LoadConfig(endpoint=endpoint, model=model, ignore_eos=True, keep_text=True,
                          extra_body={"seed": self.seed}, **load)


@dataclass(frozen=True)
class Golden:
    answers: list[Optional[str]]  # per prompt; None: not repeatable, not judged
    records: list[dict[str, Any]]

    @property
    def unstable(self) -> list[int]:
        return [i for i, answer in enumerate(self.answers) if answer is None]

    def as_json(self) -> dict[str, Any]:
        return {"prompts": len(self.answers), "askedEach": ASKED, "unstable": self.unstable,
                "failed": sum(not r.get("ok") for r in self.records)}


def golden_answers(records: Sequence[dict[str, Any]], prompts: int) -> list[Optional[str]]:
    """Prompt p's answer when every request for it answered the same complete text, else None."""
    texts: list[set[Optional[str]]] = [set() for _ in range(prompts)]
    for record in records:
        texts[int(record["index"]) % prompts].add(record.get("text") if record.get("ok") else None)
    return [next(iter(seen)) if len(seen) == 1 else None for seen in texts]


def record_golden(workload: Workload, endpoint: str, model: str, timeout_s: float, **connection: Any) -> Golden:
    """Ask every prompt ASKED times, one request at a time, before any fault."""
    prompts = workload.specs()
    specs = [replace(prompts[i % len(prompts)], index=i) for i in range(len(prompts) * ASKED)]
    config = workload.config(endpoint, model, concurrency=1, timeout_s=timeout_s, **connection)
    records = asyncio.run(run_load(config, specs))
    return Golden(golden_answers(records, len(prompts)), records)
