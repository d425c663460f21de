"""serve.api_keys: keys created, listed and revoked in the Secret the gateway reads, through the
Kubernetes stand-in; the CLI's answers, exit codes and that no value leaks beyond the one print."""

from __future__ import annotations

import json
import logging
import re
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from components.render.endpoint_names import FIRST_KEY_NAME, api_keys_secret_name, created_annotation
from serve.api_keys import (
    KEY_PREFIX,
    ApiKeyInputError,
    ApiKeys,
    DuplicateKey,
    LastKey,
    NoKeySecret,
    UnknownKey,
    listed,
    main,
    validate_key_name,
)
from tests.fakes.kube_api import FakeKubeApi
from tests.leaks import file_holds, holds, logged
from tests.unit.cli_support import run_module

FIRST_VALUE = "rpd_first-key-value-from-the-pulumi-program-00"
NS, SERVICE = "inference", "ray-llm"
SECRET = api_keys_secret_name(SERVICE)
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


@pytest.fixture
def kube() -> Iterator[FakeKubeApi]:
    with FakeKubeApi("healthy") as fake:
        fake.put_secret(NS, SECRET, {FIRST_KEY_NAME: FIRST_VALUE},
                        {created_annotation(FIRST_KEY_NAME): "2026-12-01T12:00:00Z"})
        yield fake


def outputs_of(kube: FakeKubeApi, auth: str = "apiKey") -> dict[str, Any]:
    return {**kube.outputs(), "endpoint": {"url": "http://internal-raypd.example", "scope": "vpc", "auth": auth}}


def test_create_list_revoke_round_trip_in_the_secret(kube):
    keys = ApiKeys.for_outputs(outputs_of(kube))
    created = keys.create("ci")
    assert created["key"].startswith(KEY_PREFIX) and len(created["key"]) > 40
    assert RFC3339.match(created["created"])
    assert kube.secret_data(NS, SECRET) == {FIRST_KEY_NAME: FIRST_VALUE, "ci": created["key"]}
    annotations = kube.secret(NS, SECRET)["metadata"]["annotations"]
    assert annotations[created_annotation("ci")] == created["created"]
    assert keys.list() == [{"name": "ci", "created": created["created"]},
                           {"name": FIRST_KEY_NAME, "created": "2026-12-01T12:00:00Z"}]
    assert keys.revoke("ci") == "ci"
    assert kube.secret_data(NS, SECRET) == {FIRST_KEY_NAME: FIRST_VALUE}
    assert created_annotation("ci") not in kube.secret(NS, SECRET)["metadata"]["annotations"]


def test_two_creates_get_different_values():
    keys_made = set()
    with FakeKubeApi("healthy") as kube:
        kube.put_secret(NS, SECRET, {FIRST_KEY_NAME: FIRST_VALUE})
        keys = ApiKeys.for_outputs(outputs_of(kube))
        keys_made = {keys.create(f"k{i}")["key"] for i in range(3)}
    assert len(keys_made) == 3


def interleave(kube: FakeKubeApi, other: Any) -> list[Any]:
    """Run `other()` once, inside the next Secret PATCH, after its request arrived and before it is
    applied: the other writer wins the race. Returns what `other` returned."""
    done: list[Any] = []

    def hook() -> None:
        if not done:
            done.append(None)
            done[0] = other()

    kube.before_secret_patch = hook
    return done


def test_two_creates_of_one_name_racing_leave_the_winners_key_working(kube):
    """Without the resourceVersion precondition the loser's write would replace the winner's
    value: the winner would hold a key the gateway no longer knows."""
    winner = interleave(kube, lambda: ApiKeys.for_outputs(outputs_of(kube)).create("ci"))
    with pytest.raises(DuplicateKey):
        ApiKeys.for_outputs(outputs_of(kube)).create("ci")
    assert kube.secret_data(NS, SECRET)["ci"] == winner[0]["key"]


def test_two_revokes_racing_never_leave_the_secret_without_a_key(kube):
    keys = ApiKeys.for_outputs(outputs_of(kube))
    keys.create("a")
    interleave(kube, lambda: ApiKeys.for_outputs(outputs_of(kube)).revoke(FIRST_KEY_NAME))
    with pytest.raises(LastKey):
        keys.revoke("a")  # read two keys, lost the race, read again: "a" is the last one now
    assert set(kube.secret_data(NS, SECRET)) == {"a"}


def test_many_writers_at_once_all_land(kube):
    errors: list[BaseException] = []

    def work(name: str) -> None:
        try:
            ApiKeys.for_outputs(outputs_of(kube)).create(name)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(f"n{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert set(kube.secret_data(NS, SECRET)) == {FIRST_KEY_NAME, *(f"n{i}" for i in range(6))}


@pytest.mark.parametrize("name", ["", "CI", "-ci", "ci-", "a" * 33, "ci key", "ci\n", "c\u0131", 7, None])
def test_a_bad_name_is_refused_naming_the_field(name):
    with pytest.raises(ApiKeyInputError) as caught:
        validate_key_name(name)
    assert caught.value.field == "name"
    assert "\n" not in str(caught.value)


def test_a_huge_name_is_not_quoted_back():
    with pytest.raises(ApiKeyInputError) as caught:
        validate_key_name("x" * 10_000)
    assert len(str(caught.value)) < 300


def test_duplicate_unknown_and_last_key_are_clear_errors(kube):
    keys = ApiKeys.for_outputs(outputs_of(kube))
    with pytest.raises(DuplicateKey, match="a key named default exists already"):
        keys.create(FIRST_KEY_NAME)
    with pytest.raises(UnknownKey, match="no key named ghost"):
        keys.revoke("ghost")
    with pytest.raises(LastKey, match="create its replacement first"):
        keys.revoke(FIRST_KEY_NAME)
    assert kube.secret_data(NS, SECRET) == {FIRST_KEY_NAME: FIRST_VALUE}  # nothing changed


def test_no_secret_and_auth_none_say_so_plainly(kube):
    with pytest.raises(NoKeySecret, match="auth none"):
        ApiKeys.for_outputs(outputs_of(kube, auth="none")).list()
    assert kube.secret_patches == [] and not any("secrets" in r["path"] for r in kube.requests)
    other = {**outputs_of(kube), "rayServiceName": "other"}
    with pytest.raises(NoKeySecret, match="other-api-keys does not exist: the deployment is not deployed yet"):
        ApiKeys.for_outputs(other).create("ci")


def test_listed_never_shows_values_and_tolerates_a_hand_added_key():
    secret = {"data": {"b": "dmFsdWU=", "a": "dmFsdWU="},
              "metadata": {"annotations": {created_annotation("b"): "yesterday"}}}
    assert listed(secret) == [{"name": "a", "created": None}, {"name": "b", "created": None}]


# ---- the CLI ----

def write_outputs(tmp_path: Path, outputs: dict[str, Any]) -> str:
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(outputs), encoding="utf-8")
    return str(path)


def test_cli_create_prints_the_key_alone_on_stdout_and_list_never_shows_it(kube, tmp_path, capsys):
    outputs = write_outputs(tmp_path, outputs_of(kube))
    assert main(["--outputs", outputs, "create", "ci"]) == 0
    printed = capsys.readouterr()
    key = printed.out.strip()
    assert key == kube.secret_data(NS, SECRET)["ci"]
    assert key not in printed.err and "printed once" in printed.err
    assert main(["--outputs", outputs, "list", "--json"]) == 0
    listing = capsys.readouterr()
    assert [k["name"] for k in json.loads(listing.out)["keys"]] == ["ci", FIRST_KEY_NAME]
    assert key not in listing.out + listing.err and FIRST_VALUE not in listing.out + listing.err
    assert main(["--outputs", outputs, "--json", "revoke", "ci"]) == 0
    assert json.loads(capsys.readouterr().out) == {"revoked": "ci"}


def test_cli_create_shows_a_key_once_on_stdout_and_nowhere_else(kube, tmp_path, capsys, caplog, monkeypatch):
    """As tests/web/test_api_key_shown_once.py for the web app: each new key is in the stdout of the
    one `create` that made it, and in no other output or error of any command, no log record and no
    file (the working directory, HOME and the temp directory all point into tmp_path here)."""
    caplog.set_level(logging.DEBUG)
    for name in ("work", "home", "tmp"):
        (tmp_path / name).mkdir()
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    outputs = write_outputs(tmp_path, outputs_of(kube))
    printed: list[tuple[str, str, str]] = []  # (command, stdout, stderr)

    def run(*argv: str, code: int = 0) -> None:
        assert main(["--outputs", outputs, *argv]) == code, argv
        out = capsys.readouterr()
        printed.append((" ".join(argv), out.out, out.err))

    run("create", "ci")
    run("--json", "create", "batch")
    made = {0: kube.secret_data(NS, SECRET)["ci"], 1: kube.secret_data(NS, SECRET)["batch"]}  # run: key
    run("create", "ci", code=1)  # the name is taken
    run("create", "Bad Name", code=2)
    run("list")
    run("list", "--json")
    run("revoke", "ghost", code=1)
    run("revoke", "ci")
    run("--json", "revoke", "batch")

    assert printed[0][1] == made[0] + "\n"  # alone on stdout: KEY=$(... create ci) works
    for index, key in made.items():
        holders = [(argv, stream) for argv, out, err in printed
                   for stream, text in (("stdout", out), ("stderr", err)) if holds(text, key)]
        assert holders == [(printed[index][0], "stdout")], f"the key made by run {index} is in {holders}"
        assert printed[index][1].count(key) == 1
        assert not holds(logged(caplog), key), "a log record has the key"
        for path in tmp_path.rglob("*"):
            assert not (path.is_file() and file_holds(path, key)), f"{path} has the key"
    assert [path.name for path in tmp_path.rglob("*") if path.is_file()] == ["outputs.json"]  # wrote nothing


def test_cli_exit_codes_and_one_line_errors(kube, tmp_path, capsys):
    outputs = write_outputs(tmp_path, outputs_of(kube))
    assert main(["--outputs", outputs, "create", "Bad Name"]) == 2
    assert capsys.readouterr().err.startswith("api-keys: name: ")
    assert main(["--outputs", outputs, "revoke", "ghost"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no key named ghost" in err
    assert main(["--outputs", str(tmp_path / "missing.json"), "list"]) == 2
    assert "cannot read the outputs file" in capsys.readouterr().err
    kube.stop()
    assert main(["--outputs", outputs, "list"]) == 1
    assert "cannot reach the Kubernetes API" in capsys.readouterr().err


def test_cli_as_a_process_reads_stdin_and_a_kubeconfig_file(kube, tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kube.kubeconfig(), encoding="utf-8")
    outputs = {k: v for k, v in outputs_of(kube).items() if k != "kubeconfig"}
    path = write_outputs(tmp_path, outputs)
    created = run_module("serve.api_keys", "--outputs", path, "--kubeconfig", str(kubeconfig),
                         "create", "batch", "--json")
    assert created.returncode == 0, created.stderr
    answer = json.loads(created.stdout)
    assert answer["key"] == kube.secret_data(NS, SECRET)["batch"]
    assert "Traceback" not in created.stderr
    usage = run_module("serve.api_keys", "--outputs", path, "rotate")
    assert usage.returncode == 2 and "Traceback" not in usage.stderr
