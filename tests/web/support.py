"""Helpers for the web app tests: settings on a temp RAYPD_HOME, a fake engine, client shortcuts.

The offline engine is the real one (it runs `components.plan` in a subprocess, ~1.5 s a run), so
lifecycle tests exercise the same path users get. `FakeEngine` stands in where a test must control
timing (block an operation to provoke 409, cancel mid-run) or the real Automation API would be
needed (statuses of a "real" deployment).
"""

from __future__ import annotations

import html
import json
import re
import threading
import time
from pathlib import Path
from typing import Any, Optional

from flask.testing import FlaskClient

from tests.patience import PATIENCE_S
from webui import Settings
from webui.engines.base import (
    JobContext,
    OperationCancelled,
    OperationFailed,
    OperationResult,
    PendingOperations,
    resource_record,
)
from webui.engines.workdir import StackFiles

TOKEN = "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HF_TOKEN = "hf_TestSecretTokenValue0123456789abcd"
FINAL = ("succeeded", "failed", "cancelled", "interrupted")


def settings_for(home: Path, engine: str = "offline", **env: str) -> Settings:
    return Settings.from_env({"RAYPD_HOME": str(home), "RAYPD_ENGINE": engine, "RAYPD_TOKEN": TOKEN, **env})


class FakeEngine:
    """A controllable engine: blocks until `gate` is set, fails when `fail_with` is set."""

    def __init__(self, name: str = "pulumi", real: bool = True):
        self.name = name
        self.real = real
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Event()
        self.fail_with: Optional[str] = None
        self.created: list[tuple[str, bool]] = []  # (stack, whether a token came along)
        self.released: list[str] = []
        self.removed: list[str] = []
        self.live: Optional[dict[str, Any]] = None  # what live_outputs answers (secrets in clear)
        self.pending: list[dict[str, Any]] = []  # pending operations "in the state"
        self.configured: list[tuple[Any, Optional[str], list[str]]] = []  # (spec, token, removed) per configure
        self.refuse_configure: Optional[str] = None  # configure raises OperationFailed with this
        self.plans_seen: list[Optional[dict[str, Any]]] = []  # deployed_plan per run

    def create(self, spec: Any, hf_token: Optional[str]) -> None:
        self.created.append((spec.stack, hf_token is not None))

    def configure(self, spec: Any, hf_token: Optional[str], removed: list[str]) -> None:
        self.configured.append((spec, hf_token, list(removed)))
        if self.refuse_configure:
            raise OperationFailed(self.refuse_configure)
        self.created.append((spec.stack, hf_token is not None))

    def run(self, stack: str, operation: str, ctx: JobContext,
            known_resources: Optional[list[dict[str, Any]]] = None,
            deployed_plan: Optional[dict[str, Any]] = None) -> OperationResult:
        self.plans_seen.append(deployed_plan)
        ctx.on_cancel(self.gate.set)
        if operation in ("up", "destroy") and self.pending:
            raise PendingOperations(self.pending)  # as the real engine does before it starts
        if operation == "clear-pending":
            self.pending = []
        ctx.emit(resource_record("started", "create", "aws:ec2/vpc:Vpc", "vpc", 0, 2, "create vpc"))
        self.started.set()
        if not self.gate.wait(2 * PATIENCE_S):
            raise OperationFailed("fake engine was never released")
        if ctx.cancelled:
            raise OperationCancelled()
        if self.fail_with:
            ctx.emit(resource_record("failed", "create", "aws:eks/cluster:Cluster", "eks", 1, 2,
                                     "failed to create eks"))
            raise OperationFailed(self.fail_with)
        ctx.emit(resource_record("finished", "create", "aws:ec2/vpc:Vpc", "vpc", 1, 2, "created vpc"))
        ctx.emit(resource_record("finished", "create", "aws:eks/cluster:Cluster", "eks", 2, 2, "created eks"))
        if operation == "destroy":
            return OperationResult(resources=[])
        return OperationResult(
            outputs={"modelId": "qwen3.5-9b", "kubeconfig": "[secret]"},
            resources=[{"type": "aws:ec2/vpc:Vpc", "name": "vpc"}, {"type": "aws:eks/cluster:Cluster", "name": "eks"}],
        )

    def remove(self, stack: str) -> None:
        self.removed.append(stack)

    def release(self, stack: str) -> None:
        self.released.append(stack)

    def live_outputs(self, stack: str) -> Optional[dict[str, Any]]:
        return self.live

    def pending_operations(self, stack: str) -> list[dict[str, Any]]:
        return list(self.pending)


class StoredStackEngine(FakeEngine):
    """A fake engine that keeps each stack's config in the store's settings files, as the real
    engines do (so every server sharing the store reads the same), and says which config each up
    ran with. An up reads the file only once `may_read` is set (not "real": no offline plan for
    an ETA, no verify after the up)."""

    def __init__(self) -> None:
        super().__init__(real=False)
        self.files: Optional[StackFiles] = None
        self.ran_with: list[dict[str, Any]] = []
        self.may_read = threading.Event()
        self.may_read.set()

    def attach(self, files: StackFiles) -> None:  # the app hands every engine its store
        self.files = files

    def stack_config(self, stack: str) -> Optional[dict[str, Any]]:
        """The stack's config as its settings file in the store says, or None without one."""
        assert self.files is not None
        text = self.files.stack_file(stack)
        return None if text is None else json.loads(text)

    def _write(self, spec: Any) -> None:
        assert self.files is not None
        self.files.save_stack_file(spec.stack, json.dumps(spec.public_config()))

    def create(self, spec: Any, hf_token: Optional[str]) -> None:
        super().create(spec, hf_token)
        self._write(spec)

    def configure(self, spec: Any, hf_token: Optional[str], removed: list[str]) -> None:
        super().configure(spec, hf_token, removed)  # (raises when refuse_configure is set)
        self._write(spec)

    def run(self, stack: str, operation: str, ctx: JobContext,
            known_resources: Optional[list[dict[str, Any]]] = None,
            deployed_plan: Optional[dict[str, Any]] = None) -> OperationResult:
        if operation == "up":
            assert self.may_read.wait(PATIENCE_S)
            self.ran_with.append(self.stack_config(stack) or {})
        return super().run(stack, operation, ctx, known_resources, deployed_plan)


def wait_for_job(client: FlaskClient, job_id: str, timeout: float = PATIENCE_S,
                 headers: Optional[dict[str, str]] = None) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/api/v1/jobs/{job_id}", headers=headers or AUTH).get_json()
        if job["status"] in FINAL:
            return job
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish in {timeout} s")


def create(client: FlaskClient, name: str = "demo", config: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    response = client.post("/api/v1/deployments", json={"name": name, "config": config or {}}, headers=AUTH)
    assert response.status_code == 201, response.get_json()
    return response.get_json()


def login(client: FlaskClient) -> None:
    """Log a test client in through the real login form (CSRF token included)."""
    page = client.get("/login")
    csrf = extract_csrf(page.get_data(as_text=True))
    response = client.post("/login", data={"token": TOKEN, "csrf_token": csrf, "next": "/"})
    assert response.status_code == 302, response.get_data(as_text=True)


def extract_csrf(html: str) -> str:
    marker = 'name="csrf_token" value="'
    start = html.index(marker) + len(marker)
    return html[start: html.index('"', start)]


def text_of(response) -> str:
    return html.unescape(response.get_data(as_text=True))


def field_error(page: str, field_id: str) -> str:
    match = re.search(rf'id="{re.escape(field_id)}-error"[^>]*>([^<]*)<', page)
    return html.unescape(match.group(1)) if match else ""


def form_defaults(page: str) -> dict[str, str]:
    """The values a browser would submit for the form as rendered (text inputs, selects, checkboxes)."""
    values = {}
    for name, value in re.findall(r'<input type="text" id="[^"]+" name="([^"]+)" value="([^"]*)"', page):
        values[html.unescape(name)] = html.unescape(value)
    for select in re.findall(r'<select id="[^"]+" name="([^"]+)".*?</select>', page, flags=re.S):
        block = page[page.index(f'name="{select}"'):]
        block = block[: block.index("</select>")]
        chosen = re.search(r'<option value="([^"]*)" selected', block)
        values[html.unescape(select)] = html.unescape(chosen.group(1))
    for name in re.findall(r'<input type="checkbox" id="[^"]+" name="([^"]+)" value="on" checked', page):
        values[html.unescape(name)] = "on"
    return values
