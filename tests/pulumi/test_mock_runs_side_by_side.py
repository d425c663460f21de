"""Two mock runs in one process at once each finish with their own outputs.

The web app's jobs and a timed-out run can leave a mock run going on another thread while the next
starts. Pulumi keeps every Output's task in `SETTINGS.outputs`, which fresh threads share; before
mockrun gave each run its own set, the second run waited on the first run's tasks from its own loop
and failed with "Event loop is closed" (CI, tests/pulumi/test_access_and_addons.py) or hung.
"""

from __future__ import annotations

import threading
from typing import Any

import pulumi
import pytest

import components.stack.mockrun as mockrun
from components.stack.mockrun import run_program


def test_a_run_started_while_another_is_mid_program_finishes_and_so_does_the_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mockrun, "RUN_TIMEOUT_SECONDS", 30)
    first_is_waiting = threading.Event()
    second_is_done = threading.Event()
    results: dict[str, Any] = {}

    def held(value: int) -> int:
        first_is_waiting.set()
        second_is_done.wait(30)  # keeps the first run's task pending while the second runs whole
        return value + 1

    def first_program() -> dict[str, Any]:
        return {"first": pulumi.Output.from_input(1).apply(held)}

    def second_program() -> dict[str, Any]:
        return {"second": pulumi.Output.from_input(10).apply(lambda value: value * 2)}

    def run_first() -> None:
        try:
            results["first"] = run_program(first_program, project="p", stack="first", region="us-east-1")
        except BaseException as exc:  # noqa: BLE001 reported by the assertion below
            results["first"] = exc

    first = threading.Thread(target=run_first)
    first.start()
    try:
        assert first_is_waiting.wait(30), "the first run never reached its apply"
        second = run_program(second_program, project="p", stack="second", region="us-east-1")
    finally:
        second_is_done.set()
        first.join(60)
    assert second.outputs["second"].value == 20
    assert not isinstance(results["first"], BaseException), results["first"]
    assert results["first"].outputs["first"].value == 2
