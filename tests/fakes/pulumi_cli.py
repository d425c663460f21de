#!/usr/bin/env python3
"""A stand-in Pulumi CLI for tests: the commands and behaviour the Automation API engine relies on.

There is no Pulumi CLI on the test machines, so `PulumiEngine` + `LocalWorkspace` + `CliSession`
run against this script through a `bin/pulumi` wrapper (`install(dir)` writes one). It speaks the
CLI's argument syntax as the SDK 3.272 emits it and answers like the real CLI where the engine
depends on it; it creates nothing anywhere:

* FAKE_PULUMI_CALL_LOG, when set, is a file each call appends its arguments to.
* `version` prints FAKE_PULUMI_VERSION (default v3.272.0). Above 3.205.0 the SDK passes
  `--event-log tcp://127.0.0.1:PORT` and serves `pulumirpc.Events/StreamEvents`, which this script
  then streams to (as the real CLI does); at or below, it appends JSON lines to the file path given.
* `stack select|init|rm`, `config set-all`, `stack output --json [--show-secrets]`,
  `stack history --json`, `stack export [--show-secrets]`, `cancel` (drops the lock, nothing else:
  what the file backend does).
* `up`, `preview`, `refresh [--clear-pending-creates]`, `destroy`: a fixed list of resources, one
  step at a time (FAKE_PULUMI_STEP_SECONDS each), with preludeEvent, resourcePreEvent,
  resOutputsEvent, diagnosticEvent (colour markup included), summaryEvent and the cancelEvent every
  operation ends with. Each step is recorded as a pending operation in the state before it starts
  and cleared when it ends, so a SIGKILL mid-step leaves one behind, like the real CLI.
* A changed stack: `up` and `preview` after a successful `up` whose config has changed since emit
  the steps a real update of raypd's program emits for that change (`CHANGES`, a script of this
  stand-in: WHICH resources a change touches is the program's business and is written down here,
  not computed). HOW they are reported follows the Pulumi engine: a pulumi-eks component that
  changes is an `update` while its replaced child (`aws:eks/nodeGroup:NodeGroup`, whose URN carries
  the parent types joined by `$`) gets `create-replacement` + `replace` at once and its
  `delete-replaced` after every create and update has finished; a deleteBeforeReplace resource gets
  `delete-replaced`, `replace`, `create-replacement` (pkg/resource/deploy/step_generator.go,
  "note that the delete step is generated 'later' on"); each step's metadata carries `keys`
  (replace keys), `diffs` and `detailedDiff` (sdk/go/common/apitype/events.go StepEventMetadata);
  the summary counts a replacement once.
* SIGINT during an operation: the CLI's cancel message (pkg/backend/cancellation_scope.go) as a
  stdoutEvent, the step in flight finishes, no new one starts, then "update canceled" (the engine's
  own diagnostic), summary, cancelEvent, exit 1. A second SIGINT: "^C received; terminating", the
  step in flight is abandoned (its pending operation stays), exit 1.

State is one JSON file per stack under the file backend's directory (PULUMI_BACKEND_URL), in
`fake-pulumi/<stack>.json`: resources (with a plaintext secret in the cluster's outputs, as a real
export has), outputs, pending operations, history, the lock and the secrets provider's state.

Config is NOT in the backend, as with the real CLI and a DIY backend: it lives in the stack settings
file `Pulumi.<stack>.yaml` in the work dir (the CLI's cwd), which `stack init` writes with the
passphrase provider's `encryptionsalt` (or `secretsprovider` + `encryptedkey` for
`--secrets-provider`), `config set-all` / `config rm-all` edit, every operation reads, and `stack rm`
deletes (pkg/cmd/pulumi/stack/secrets.go GetSecretsManager; pkg/secrets/passphrase/manager.go).
Secrets in it are `secure: v1:...` values, encrypted with a key from PULUMI_CONFIG_PASSPHRASE[_FILE]
and the salt: no passphrase is the CLI's "passphrase must be set with ..." error, another
passphrase its "incorrect passphrase". The passphrase is checked by every up, preview, refresh and
destroy, secrets or not (pulumi/pulumi#2728: the CLI asks for it before any update). With no
settings file an operation runs with no config, and the secrets provider falls back to the one in
the state only for destroy or when PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER is set
(pkg/cmd/pulumi/stack/secrets.go SecretsManagerLoader.FallbackToState, from
env.FallbackToStateSecretsManager; destroy's loader sets it); otherwise a new salt is made and
written to a new settings file, as the real CLI does (SecretsManagerMustSave). The cipher is a
keyed stand-in, not the CLI's AES-GCM: what matters here is that the value is not in clear and that
only the same passphrase opens it.

`stack select` and `stack init` remember the current stack as the real CLI does, in
PULUMI_HOME (default ~/.pulumi)/workspaces/<project>-<sha1 of cwd/Pulumi.yaml>-workspace.json,
`{"stack": "<name>"}` (sdk/go/common/workspace/workspace.go settingsPath and Save;
pkg/cmd/pulumi/state SetCurrentStack): one file per work dir, for the engine to clean up.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import signal
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Optional
from urllib.parse import urlparse

import yaml

VERSION = os.environ.get("FAKE_PULUMI_VERSION", "v3.272.0")
STEP_SECONDS = float(os.environ.get("FAKE_PULUMI_STEP_SECONDS", "0.05"))
PROJECT = "raypd"
CANCEL_MESSAGE = ("^C received; cancelling. If you would like to terminate immediately, press ^C again.\n"
                  "<{%fg 9%}>Note that terminating immediately may lead to orphaned resources "
                  "and other inconsistencies.\n<{%reset%}>")
TERMINATE_MESSAGE = "<{%fg 9%}>^C received; terminating<{%reset%}>"
# (type, logical name, parent types) in creation order; the stack resource comes first.
GPU_GROUP = "raypd:cluster:GpuNodeGroup"
MNG = "eks:index:ManagedNodeGroup"
RESOURCES = (
    ("aws:ec2/vpc:Vpc", "network-vpc", ""),
    ("aws:iam/role:Role", "cluster-role", ""),
    ("eks:index:Cluster", "cluster-eks", ""),
    (MNG, "decode-nodes", GPU_GROUP),
    ("aws:eks/nodeGroup:NodeGroup", "decode-nodes", f"{GPU_GROUP}${MNG}"),
    ("kubernetes:ray.io/v1:RayService", "pd-service-rayservice", "raypd:serving:PdService"),
    ("kubernetes:batch/v1:Job", "pd-service-rollout-check", "raypd:serving:PdService"),
)
DIGEST = 'metadata.annotations["raypd.io/ray-cluster-digest"]'
# What raypd's program does on `up` when a setting changes (see the module docstring): the config
# key prefix -> (resource name, type, op, changed paths). op: update | replace (new one first) |
# replace-dbr (deleteBeforeReplace: the old one first).
CHANGES: dict[str, list[tuple[str, str, str, list[str]]]] = {
    "raypd:decode.instanceType": [
        ("decode-nodes", MNG, "update", ["instanceTypes"]),
        ("decode-nodes", "aws:eks/nodeGroup:NodeGroup", "replace", ["instanceTypes"]),
        ("pd-service-rayservice", "kubernetes:ray.io/v1:RayService", "replace-dbr",
         [DIGEST, "spec.rayClusterConfig.workerGroupSpecs[0].template"]),
        ("pd-service-rollout-check", "kubernetes:batch/v1:Job", "replace", ["metadata.name"]),
    ],
    "raypd:decode.replicas": [
        ("decode-nodes", MNG, "update", ["scalingConfig.desiredSize"]),
        ("decode-nodes", "aws:eks/nodeGroup:NodeGroup", "update", ["scalingConfig.desiredSize"]),
        ("pd-service-rayservice", "kubernetes:ray.io/v1:RayService", "update",
         ["spec.rayClusterConfig.workerGroupSpecs[0].replicas", "spec.serveConfigV2"]),
        ("pd-service-rollout-check", "kubernetes:batch/v1:Job", "replace", ["metadata.name"]),
    ],
    "raypd:model.": [
        ("pd-service-rayservice", "kubernetes:ray.io/v1:RayService", "update", ["spec.serveConfigV2"]),
        ("pd-service-rollout-check", "kubernetes:batch/v1:Job", "replace", ["metadata.name"]),
    ],
}


class Fail(Exception):
    def __init__(self, message: str, code: int = 255):
        super().__init__(message)
        self.code = code


# ---- arguments ----

def parse(argv: list[str]) -> tuple[list[str], dict[str, Any]]:
    words: list[str] = []
    flags: dict[str, Any] = {}
    valued = {"--stack", "-s", "--color", "--exec-kind", "--event-log", "--page-size", "--page", "--secrets-provider",
              "--message", "--parallel", "--client", "--config-file"}
    repeated = {"--plaintext", "--secret"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            words.extend(argv[i + 1:])
            break
        if "=" in arg and arg.startswith("--") and arg.split("=", 1)[0] in valued:
            key, value = arg.split("=", 1)
            flags[key] = value
        elif arg in valued:
            flags[arg] = argv[i + 1]
            i += 1
        elif arg in repeated:
            flags.setdefault(arg, []).append(argv[i + 1])
            i += 1
        elif arg.startswith("-"):
            flags[arg] = True
        else:
            words.append(arg)
        i += 1
    if "-s" in flags:
        flags["--stack"] = flags.pop("-s")
    return words, flags


# ---- state ----

def state_dir() -> Path:
    url = os.environ.get("PULUMI_BACKEND_URL", "")
    base = Path(urlparse(url).path) if url.startswith("file://") else Path.cwd() / ".pulumi"
    path = base / "fake-pulumi"
    path.mkdir(parents=True, exist_ok=True)
    return path


def state_path(stack: str) -> Path:
    return state_dir() / f"{stack}.json"


def load(stack: str) -> dict[str, Any]:
    path = state_path(stack)
    if not path.exists():
        raise Fail(f"error: no stack named '{stack}' found")
    return json.loads(path.read_text())


def save(stack: str, state: dict[str, Any]) -> None:
    path = state_path(stack)
    tmp = path.with_suffix(".tmp")
    kept = {key: value for key, value in state.items() if key != "config"}  # config is the work dir's
    tmp.write_text(json.dumps(kept, indent=1))
    tmp.replace(path)  # a SIGKILL never leaves half a file


# ---- the stack settings file (in the work dir) and its secrets ----

NO_PASSPHRASE = ("error: passphrase must be set with PULUMI_CONFIG_PASSPHRASE or "
                 "PULUMI_CONFIG_PASSPHRASE_FILE environment variables")


def settings_path(stack: str) -> Path:
    return Path.cwd() / f"Pulumi.{stack}.yaml"


def read_settings(stack: str) -> dict[str, Any]:
    path = settings_path(stack)
    if not path.exists():
        return {}
    document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return document if isinstance(document, dict) else {}


def write_settings(stack: str, document: dict[str, Any]) -> None:
    settings_path(stack).write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")


def remember_current_stack(stack: str) -> None:
    """The workspace bookkeeping file `stack select`/`stack init` write (see the module docstring)."""
    home = Path(os.environ.get("PULUMI_HOME") or Path.home() / ".pulumi")
    project_file = os.path.join(os.getcwd(), "Pulumi.yaml")
    name = f"{PROJECT}-{hashlib.sha1(project_file.encode()).hexdigest()}-workspace.json"
    path = home / "workspaces" / name
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.write_text(json.dumps({"stack": stack}, indent=4), encoding="utf-8")
    path.chmod(0o600)


def passphrase() -> Optional[str]:
    if "PULUMI_CONFIG_PASSPHRASE" in os.environ:
        return os.environ["PULUMI_CONFIG_PASSPHRASE"]
    path = os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE")
    if path:
        try:
            return Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise Fail(f"error: unable to read PULUMI_CONFIG_PASSPHRASE_FILE: {exc}") from None
    return None


def _stream(key: bytes, nonce: bytes, size: int) -> bytes:
    out = b""
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(key + nonce + counter.to_bytes(4, "big")).digest()
        counter += 1
    return out[:size]


def encrypt(key: bytes, text: str) -> str:
    nonce = os.urandom(12)
    data = text.encode()
    body = bytes(a ^ b for a, b in zip(data, _stream(key, nonce, len(data)), strict=True))
    tag = hmac.new(key, nonce + body, hashlib.sha256).digest()[:16]
    return "v1:" + base64.b64encode(nonce).decode() + ":" + base64.b64encode(body + tag).decode()


def decrypt(key: bytes, value: str) -> str:
    try:
        _, nonce_text, body_text = value.split(":", 2)
        nonce, sealed = base64.b64decode(nonce_text), base64.b64decode(body_text)
    except ValueError:
        raise Fail("error: failed to decrypt: malformed ciphertext") from None
    body, tag = sealed[:-16], sealed[-16:]
    if not hmac.compare_digest(tag, hmac.new(key, nonce + body, hashlib.sha256).digest()[:16]):
        raise Fail("error: incorrect passphrase")
    return bytes(a ^ b for a, b in zip(body, _stream(key, nonce, len(body)), strict=True)).decode()


def new_secrets_state(provider: Optional[str]) -> dict[str, Any]:
    """What `stack init` writes into a new settings file for the given --secrets-provider."""
    if provider and provider != "passphrase":
        return {"secretsprovider": provider, "encryptedkey": base64.b64encode(os.urandom(32)).decode()}
    phrase = passphrase()
    if phrase is None:
        raise Fail(NO_PASSPHRASE)
    salt = base64.b64encode(os.urandom(8)).decode()
    key = hashlib.sha256(f"{phrase}:{salt}".encode()).digest()
    return {"encryptionsalt": f"v1:{salt}:{encrypt(key, 'pulumi')}"}


def falls_back_to_state() -> bool:
    """PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER as the CLI's env.Bool reads it (1 or true)."""
    return os.environ.get("PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER", "").lower() in ("1", "true")


def secrets_key(document: dict[str, Any], state: dict[str, Any], fallback_to_state: bool) -> bytes:
    """The key the settings file's secrets are sealed with. A file without a secrets provider takes
    the one in the state when `fallback_to_state`, else gets a new salt; either way the document
    changes and the caller saves it (the CLI saves the file then)."""
    if document.get("secretsprovider"):  # a cloud KMS stands behind this in the real CLI
        return hashlib.sha256(f"{document['secretsprovider']}:{document.get('encryptedkey')}".encode()).digest()
    if not document.get("encryptionsalt"):
        fallback = ((state.get("secrets_providers") or {}).get("state") or {}) if fallback_to_state else {}
        if "encryptedkey" in fallback:
            document.update(fallback)
            return secrets_key(document, state, fallback_to_state)
        if "salt" not in fallback:
            document.update(new_secrets_state(None))
        else:
            document["encryptionsalt"] = fallback["salt"]
    phrase = passphrase()
    if phrase is None:
        raise Fail(NO_PASSPHRASE)
    _, salt, check = document["encryptionsalt"].split(":", 2)
    key = hashlib.sha256(f"{phrase}:{salt}".encode()).digest()
    if decrypt(key, check) != "pulumi":
        raise Fail("error: incorrect passphrase")
    return key


def stack_config(stack: str, state: dict[str, Any], fallback_to_state: bool) -> dict[str, dict[str, Any]]:
    """The settings file's config, secrets opened: {key: {"value", "secret"}} ({} without a file).
    The secrets manager is made (and the passphrase checked) whether or not any value is secret;
    a settings file it had to complete is saved."""
    document = read_settings(stack)
    before = json.dumps(document, sort_keys=True)
    key = secrets_key(document, state, fallback_to_state)
    if json.dumps(document, sort_keys=True) != before:
        write_settings(stack, document)
    config = {}
    for name, value in (document.get("config") or {}).items():
        if isinstance(value, dict) and "secure" in value:
            config[name] = {"value": decrypt(key, value["secure"]), "secret": True}
        else:
            config[name] = {"value": value if isinstance(value, str) else json.dumps(value), "secret": False}
    return config


def urn(stack: str, type_: str, name: str, parents: str = "") -> str:
    chain = f"{parents}${type_}" if parents else type_
    return f"urn:pulumi:{stack}::{PROJECT}::{chain}::{name}"


def parents_of(type_: str, name: str) -> str:
    return next((p for t, n, p in RESOURCES if (t, n) == (type_, name)), "")


def flat_config(config: dict[str, Any]) -> dict[str, Any]:
    """`raypd:decode` = '{"replicas": 2}' (config set-all's JSON text) -> `raypd:decode.replicas`."""
    flat: dict[str, Any] = {}
    for key, entry in config.items():
        value = entry.get("value") if isinstance(entry, dict) else entry
        try:
            parsed = json.loads(value) if isinstance(value, str) and value.startswith("{") else value
        except ValueError:
            parsed = value
        if isinstance(parsed, dict):
            for inner, item in parsed.items():
                flat[f"{key}.{inner}"] = item
        else:
            flat[key] = parsed
    return flat


def change_steps(deployed: dict[str, Any], config: dict[str, Any]) -> dict[tuple[str, str], tuple[str, list[str]]]:
    """(name, type) -> (op, changed paths) for the settings that differ (CHANGES)."""
    before, after = flat_config(deployed), flat_config(config)
    changed = [k for k in set(before) | set(after) if before.get(k) != after.get(k)]
    steps: dict[tuple[str, str], tuple[str, list[str]]] = {}
    for prefix, touched in CHANGES.items():
        if any(key.startswith(prefix) for key in changed):
            for name, type_, op, paths in touched:
                old_op, old_paths = steps.get((name, type_), ("update", []))
                strongest = op if op.startswith("replace") or old_op == "update" else old_op
                steps[(name, type_)] = (strongest, sorted(set(old_paths) | set(paths)))
    return steps


def now_text() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# ---- events ----

class EventSink:
    """Where engine events go: the SDK's gRPC Events service, or a JSON-lines file."""

    def __init__(self, target: Optional[str]):
        self.sequence = 0
        self._file = None
        self._queue = None
        self._thread = None
        if not target:
            return
        if target.startswith("tcp://"):
            import queue
            import threading

            import grpc
            from pulumi.runtime.proto import events_pb2, events_pb2_grpc

            self._queue = queue.Queue()
            channel = grpc.insecure_channel(target[len("tcp://"):])
            stub = events_pb2_grpc.EventsStub(channel)

            def requests():
                while True:
                    item = self._queue.get()
                    if item is None:
                        return
                    yield events_pb2.EventRequest(event=item)

            self._thread = threading.Thread(target=lambda: stub.StreamEvents(requests()), daemon=True)
            self._thread.start()
        else:
            self._file = open(target, "a", encoding="utf-8")

    def emit(self, **payload: Any) -> None:
        self.sequence += 1
        line = json.dumps({"sequence": self.sequence, "timestamp": int(time.time()), **payload})
        if self._file is not None:
            self._file.write(line + "\n")
            self._file.flush()
        elif self._queue is not None:
            self._queue.put(line)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        if self._queue is not None:
            self._queue.put(None)
            self._thread.join(10)


def step_meta(op: str, stack: str, type_: str, name: str, paths: Optional[list[str]] = None,
              replace: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"op": op, "urn": urn(stack, type_, name, parents_of(type_, name)),
                                "type": type_, "provider": ""}
    if paths:
        kind = "update-replace" if replace else "update"
        metadata["detailedDiff"] = {path: {"diffKind": kind, "inputDiff": True} for path in paths}
        metadata["diffs"] = sorted({path.split(".")[0].split("[")[0] for path in paths})
        if replace:
            metadata["keys"] = metadata["diffs"]
    return {"metadata": metadata}


# ---- operations ----

class Interrupts:
    """SIGINT once: finish the step in flight, start no other. Twice: abandon it and exit."""

    def __init__(self, events: EventSink):
        self.count = 0
        self.events = events
        self.announced = 0
        signal.signal(signal.SIGINT, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:
        self.count += 1

    def poll(self) -> None:
        """Called between ticks: say what the signals mean (as the CLI does at once), or terminate."""
        while self.announced < self.count:
            self.announced += 1
            if self.announced == 1:
                self.events.emit(stdoutEvent={"message": CANCEL_MESSAGE, "color": "always"})
                print(CANCEL_MESSAGE.replace("<{%fg 9%}>", "").replace("<{%reset%}>", ""), flush=True)
            else:
                self.events.emit(stdoutEvent={"message": TERMINATE_MESSAGE, "color": "always"})
                self.events.emit(cancelEvent={})
                self.events.close()
                print("^C received; terminating", flush=True)
                raise SystemExit(1)

    @property
    def cancelled(self) -> bool:
        return self.count > 0


def run_step(stack: str, state: dict[str, Any], kind: str, type_: str, name: str,
             interrupts: Interrupts, apply: Callable[[], None]) -> None:
    """One resource step, recorded as pending while it runs (what a SIGKILL leaves behind)."""
    # Inputs in plaintext, the HF token among them (as an export --show-secrets has them).
    token = state["config"].get("raypd:hfToken", {}).get("value", "")
    resource = {"urn": urn(stack, type_, name, parents_of(type_, name)), "type": type_, "custom": True,
                "inputs": {"name": name, "hfToken": token}}
    state["pending_operations"].append({"resource": resource, "type": kind})
    save(stack, state)
    deadline = time.monotonic() + STEP_SECONDS
    while time.monotonic() < deadline:
        interrupts.poll()
        time.sleep(min(0.02, max(0.0, deadline - time.monotonic())))
    interrupts.poll()
    apply()
    state["pending_operations"] = [op for op in state["pending_operations"] if op["resource"]["urn"] != resource["urn"]]
    save(stack, state)


def operation(kind: str, stack: str, flags: dict[str, Any]) -> int:
    state = load(stack)
    # From the work dir's settings file; never saved in the backend.
    state["config"] = stack_config(stack, state, fallback_to_state=kind == "destroy" or falls_back_to_state())
    if kind != "preview":
        if state.get("lock"):
            raise Fail("error: the stack is currently locked by 1 lock(s). Either wait for the other "
                       "process(es) to end or delete the lock file with `pulumi cancel`.")
        state["lock"] = os.getpid()
        save(stack, state)
    events = EventSink(flags.get("--event-log"))
    interrupts = Interrupts(events)
    started = now_text()
    config = {k: ("[secret]" if v["secret"] else v["value"]) for k, v in state["config"].items()}
    events.emit(preludeEvent={"config": config})
    print(f"{'Previewing update' if kind == 'preview' else kind.capitalize()} ({stack})", flush=True)
    changes: dict[str, int] = {}
    existing = {r["urn"]: r for r in state["resources"]}
    stack_urn = urn(stack, "pulumi:pulumi:Stack", f"{PROJECT}-{stack}")
    plan: list[tuple[str, str, str]] = []  # (op, type, name)
    planned_changes = (change_steps(state.get("deployed_config") or {}, state["config"])
                       if kind in ("up", "preview") and state.get("deployed_config") is not None else {})
    deferred: list[tuple[str, str, list[str]]] = []  # replaced resources deleted after all else
    if kind in ("up", "preview"):
        plan = [("same" if urn(stack, t, n, p) in existing else "create", t, n) for t, n, p in RESOURCES]
    elif kind == "refresh":
        if flags.get("--clear-pending-creates"):
            state["pending_operations"] = [op for op in state["pending_operations"] if op["type"] != "creating"]
        # A new checkpoint carries pending creates over and nothing else.
        state["pending_operations"] = [op for op in state["pending_operations"] if op["type"] == "creating"]
        save(stack, state)
        plan = [("refresh", r["type"], urn_name(r["urn"])) for r in state["resources"]]
    elif kind == "destroy":
        plan = [("delete", r["type"], urn_name(r["urn"])) for r in reversed(state["resources"])]
    if kind in ("up", "preview"):
        events.emit(resourcePreEvent=step_meta("same" if existing else "create", stack,
                                               "pulumi:pulumi:Stack", f"{PROJECT}-{stack}"))
        events.emit(diagnosticEvent={
            "urn": stack_urn, "prefix": "", "message": "<{%fg 13%}><{%bold%}>raypd:<{%reset%}> "
            "prefill 1 x g6.8xlarge, decode 1 x g6.8xlarge in us-east-2a\n", "color": "raw",
            "severity": "info",
        })
    def change_step(op: str, type_: str, name: str, paths: list[str], replace: bool) -> None:
        events.emit(resourcePreEvent=step_meta(op, stack, type_, name, paths, replace))
        if kind == "up":
            pending = {"update": "updating", "create-replacement": "creating",
                       "delete-replaced": "deleting"}.get(op)
            if pending:
                run_step(stack, state, pending, type_, name, interrupts, lambda: None)
        events.emit(resOutputsEvent=step_meta(op, stack, type_, name, paths, replace))

    for op, type_, name in plan:
        if interrupts.cancelled:
            break
        if op == "same" and (name, type_) in planned_changes:
            change, paths = planned_changes[(name, type_)]
            if change == "update":
                change_step("update", type_, name, paths, False)
            elif change == "replace":
                change_step("create-replacement", type_, name, paths, True)
                change_step("replace", type_, name, paths, True)
                deferred.append((type_, name, paths))
            else:  # replace-dbr
                change_step("delete-replaced", type_, name, paths, True)
                change_step("replace", type_, name, paths, True)
                change_step("create-replacement", type_, name, paths, True)
            counted = "update" if change == "update" else "replace"
            changes[counted] = changes.get(counted, 0) + 1
            continue
        events.emit(resourcePreEvent=step_meta(op, stack, type_, name))
        if kind == "preview" or op == "same":
            events.emit(resOutputsEvent=step_meta(op, stack, type_, name))
            changes[op] = changes.get(op, 0) + 1
            continue
        pending_kind = {"create": "creating", "delete": "deleting", "refresh": "reading"}[op]

        def apply(op: str = op, type_: str = type_, name: str = name) -> None:
            resource_urn = urn(stack, type_, name, parents_of(type_, name))
            if op == "create":
                outputs: dict[str, Any] = {"id": f"{name}-0a1b2c"}
                if type_ == "eks:index:Cluster":
                    token = state["config"].get("raypd:hfToken", {}).get("value", "")
                    outputs["kubeconfig"] = f"apiVersion: v1\nusers: [{{token: {token}}}]"
                state["resources"].append({"urn": resource_urn, "type": type_, "custom": True,
                                           "id": outputs["id"], "outputs": outputs})
            elif op == "delete":
                state["resources"] = [r for r in state["resources"] if r["urn"] != resource_urn]

        run_step(stack, state, pending_kind, type_, name, interrupts, apply)
        events.emit(resOutputsEvent=step_meta(op, stack, type_, name))
        changes[op] = changes.get(op, 0) + 1
    for type_, name, paths in deferred:  # "generated later on, after all creates/updates finish"
        if interrupts.cancelled:
            break
        change_step("delete-replaced", type_, name, paths, True)
    interrupts.poll()
    cancelled = interrupts.cancelled
    if kind == "up" and not cancelled:
        state["deployed_config"] = json.loads(json.dumps(state["config"]))
        state["outputs"] = {"modelId": "qwen3.5-9b", "region": state["config"].get("aws:region", {}).get("value"),
                            "kubeconfig": "apiVersion: v1\nkind: Config"}
        state["secret_outputs"] = ["kubeconfig"]
        events.emit(resOutputsEvent=step_meta("same" if existing else "create", stack,
                                              "pulumi:pulumi:Stack", f"{PROJECT}-{stack}"))
    if kind == "destroy" and not cancelled:
        state["outputs"], state["secret_outputs"] = {}, []
    verb = "preview" if kind == "preview" else "update"
    if cancelled:
        events.emit(diagnosticEvent={"message": f"{verb} canceled\n", "color": "raw", "severity": "error",
                                     "prefix": "<{%fg 1%}>error: <{%reset%}>"})
    events.emit(summaryEvent={"maybeCorrupt": False, "durationSeconds": 1, "resourceChanges": changes,
                              "PolicyPacks": {}})
    events.emit(cancelEvent={})
    events.close()
    if kind != "preview":
        state["lock"] = None
        state["history"].insert(0, {
            "kind": {"up": "update"}.get(kind, kind), "startTime": started, "endTime": now_text(),
            "message": "", "environment": {"exec.kind": "auto.local"},
            "config": {k: {"value": v["value"] if not v["secret"] else "[secret]", "secret": v["secret"]}
                       for k, v in state["config"].items()},
            "result": "failed" if cancelled else "succeeded", "version": len(state["history"]) + 1,
            "resourceChanges": changes,
        })
        save(stack, state)
    if cancelled:
        print(f"error: {verb} canceled", flush=True)
        return 1
    return 0


def urn_name(value: str) -> str:
    return value.rsplit("::", 1)[-1]


# ---- commands ----

def main(argv: list[str]) -> int:
    log = os.environ.get("FAKE_PULUMI_CALL_LOG")
    if log:  # lets a test see which commands ran (and that none did)
        with open(log, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(argv) + "\n")
    words, flags = parse(argv)
    if words == ["version"]:
        print(VERSION)
        return 0
    if not flags.get("--non-interactive"):
        raise Fail("error: the Automation API always passes --non-interactive", 2)
    stack = flags.get("--stack") or (words[2] if len(words) > 2 else None)
    if words[:2] == ["stack", "init"]:
        if state_path(words[2]).exists():
            raise Fail(f"error: stack '{words[2]}' already exists")
        secrets_state = new_secrets_state(flags.get("--secrets-provider"))
        save(words[2], {"resources": [], "pending_operations": [], "outputs": {},
                        "secret_outputs": [], "history": [], "lock": None,
                        "secrets_providers": {"type": "cloud" if "secretsprovider" in secrets_state else "passphrase",
                                              "state": secrets_state if "secretsprovider" in secrets_state
                                              else {"salt": secrets_state["encryptionsalt"]}}})
        write_settings(words[2], secrets_state)
        remember_current_stack(words[2])
        print(f"Created stack '{words[2]}'")
        return 0
    if words[:2] == ["stack", "select"]:
        load(stack)
        remember_current_stack(stack)
        return 0
    if words[:2] == ["stack", "rm"]:
        state = load(stack)
        if state["resources"] and not flags.get("--force"):
            raise Fail(f"error: '{stack}' still has resources; removal rejected")
        state_path(stack).unlink()
        if not flags.get("--preserve-config"):
            settings_path(stack).unlink(missing_ok=True)
        print(f"Stack '{stack}' has been removed!")
        return 0
    if words[:2] == ["config", "set-all"]:
        state = load(stack)
        document = read_settings(stack)
        config = document.setdefault("config", {})
        for item in flags.get("--plaintext", []):
            key, value = item.split("=", 1)
            config[key] = value
        if flags.get("--secret"):
            sealing = secrets_key(document, state, falls_back_to_state())
            for item in flags["--secret"]:
                key, value = item.split("=", 1)
                config[key] = {"secure": encrypt(sealing, value)}
        write_settings(stack, document)
        return 0
    if words[:2] == ["config", "rm-all"]:
        load(stack)
        document = read_settings(stack)
        for key in words[2:]:
            (document.get("config") or {}).pop(key, None)
        write_settings(stack, document)
        return 0
    if words[:2] == ["stack", "output"]:
        state = load(stack)
        shown = {k: (v if flags.get("--show-secrets") or k not in state["secret_outputs"] else "[secret]")
                 for k, v in state["outputs"].items()}
        print(json.dumps(shown, indent=2))
        return 0
    if words[:2] == ["stack", "history"]:
        entries = load(stack)["history"]
        if "--page-size" in flags:
            size, page = int(flags["--page-size"]), int(flags.get("--page", 1))
            entries = entries[(page - 1) * size: page * size]
        print(json.dumps(entries, indent=2))
        return 0
    if words[:2] == ["stack", "export"]:
        state = load(stack)
        resources = [{"urn": urn(stack, "pulumi:pulumi:Stack", f"{PROJECT}-{stack}"),
                      "type": "pulumi:pulumi:Stack", "custom": False}]
        for resource in state["resources"]:
            outputs = dict(resource["outputs"])
            if not flags.get("--show-secrets") and "kubeconfig" in outputs:
                outputs["kubeconfig"] = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
                                         "ciphertext": "v1:ZmFrZQ=="}
            resources.append({**resource, "outputs": outputs})
        deployment: dict[str, Any] = {
            "manifest": {"time": now_text(), "magic": "", "version": VERSION.lstrip("v")},
            "secrets_providers": state.get("secrets_providers") or {"type": "passphrase", "state": {}},
            "resources": resources,
        }
        if state["pending_operations"]:
            deployment["pending_operations"] = state["pending_operations"]
        print(json.dumps({"version": 3, "deployment": deployment}, indent=4))
        return 0
    if words[:1] == ["cancel"]:
        state = load(stack)
        state["lock"] = None  # the file backend's cancel deletes the lock and nothing else
        save(stack, state)
        print(f"The currently running update for '{stack}' has been canceled!")
        return 0
    if words[:1] and words[0] in ("up", "preview", "refresh", "destroy"):
        return operation(words[0], stack, flags)
    raise Fail(f"error: unknown command {' '.join(words)!r} (the stand-in CLI does not do it)", 2)


def install(directory: Path, python: str = sys.executable) -> Path:
    """Write `directory/bin/pulumi` running this script; returns the root to give PulumiCommand."""
    binary = directory / "bin" / "pulumi"
    binary.parent.mkdir(parents=True, exist_ok=True)
    binary.write_text(f'#!/bin/sh\nexec "{python}" "{Path(__file__).resolve()}" "$@"\n')
    binary.chmod(0o755)
    return directory


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except Fail as exc:
        print(str(exc), file=sys.stderr)
        sys.exit(exc.code)
