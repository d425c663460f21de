"""webui.status: the one table of where a job leaves a deployment, and the closed
vocabulary its statuses come from (issue 16 §4)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from webui.status import (
    ENGINE_OPERATIONS,
    OBSERVING_OPERATIONS,
    RUNNING_STATUS,
    STANDING,
    JobStatus,
    Standing,
    parse,
    settle,
    tone,
)

WEBUI = Path(__file__).resolve().parents[2] / "webui"


@pytest.mark.parametrize("operation,job,previous,real,expected,records", [
    ("up", "succeeded", "created", True, "deployed", True),
    ("up", "succeeded", "created", False, "planned (offline)", True),
    ("up", "failed", "deployed", True, "up failed", False),
    ("up", "cancelled", "created", True, "up cancelled", False),
    ("up", "interrupted", "deployed", True, "up interrupted", False),
    ("preview", "succeeded", "created", True, "previewed", True),
    ("preview", "succeeded", "deployed", True, "deployed", True),  # a preview leaves what exists
    ("preview", "failed", "planned (offline)", False, "planned (offline)", False),
    ("refresh", "succeeded", "up failed", True, "up failed", True),
    ("refresh", "failed", "deployed", True, "deployed", False),
    ("clear-pending", "cancelled", "up interrupted", True, "up interrupted", False),
    ("destroy", "failed", "deployed", True, "destroy failed", False),
    ("verify", "failed", "deployed", True, "deployed", False),
    ("benchmark", "succeeded", "deployed", True, "deployed", False),
])
def test_the_outcome_table(operation, job, previous, real, expected, records):
    settled = settle(operation, job, previous, real=real)
    assert (settled.status, settled.records, settled.removed) == (expected, records, False)


def test_a_destroy_that_succeeded_removes_it_and_a_blocked_launch_changes_nothing():
    assert settle("destroy", "succeeded", "deployed", real=True).removed
    assert settle("up", "failed", "created", real=True, blocked=True).status == "created"
    # a succeeded job that handed back nothing is not taken as having made anything
    assert settle("up", "succeeded", "created", real=True, has_result=False).status == "up succeeded"


def test_every_status_the_table_writes_reads_back_with_a_meaning():
    written = {settle(op, job, previous, real=real).status
               for op in (*ENGINE_OPERATIONS, *OBSERVING_OPERATIONS) for job in JobStatus
               if job not in (JobStatus.QUEUED, JobStatus.RUNNING)
               for previous in [s.value for s in Standing] for real in (True, False)} - {None}
    written |= set(RUNNING_STATUS.values())
    for status in written:
        read = parse(status)
        assert read.standing is not None or read.operation is not None, status
    tones = {status: tone(status) for status in written}
    assert tones["deployed"] == tones["planned (offline)"] == "ok"
    assert tones["up failed"] == tones["up interrupted"] == tones["destroy failed"] == "bad"
    assert tones["up cancelled"] == "warn" and tones["updating"] == tones["destroying"] == "busy"
    assert tones["created"] == tones["previewed"] == "neutral"


@pytest.mark.parametrize("text,expected", [
    ("succeeded", "ok"), ("failed", "bad"), ("interrupted", "bad"), ("cancelled", "warn"),
    ("running", "busy"), ("queued", "busy"),
    # not a word raypd writes: unknown, not guessed from a substring ("failed" is in it)
    ("failed over to plan b", "neutral"), ("", "neutral"), (None, "neutral"),
])
def test_job_statuses_and_unknown_text(text, expected):
    assert tone(text) == expected


def test_no_status_word_is_written_outside_the_status_module():
    # ("deployed" and "created" are also field names; the engines speak Pulumi's words: "updating"
    # is a kind of pending operation there.)
    words = set(RUNNING_STATUS.values()) | set(STANDING) - {"deployed"} | {Standing.PREVIEWED.value}
    found = []
    for path in sorted(WEBUI.rglob("*.py")):
        if path == WEBUI / "status.py" or "engines" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in words:
                found.append(f"{path.relative_to(WEBUI)}:{node.lineno} {node.value!r}")
    assert found == [], "use webui.status (Standing, RUNNING_STATUS, settle)"
