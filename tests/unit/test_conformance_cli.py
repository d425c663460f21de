"""`python -m serve.conformance`'s input: every hostile value is one line on stderr naming its flag,
exit 2, no traceback, nothing sent; --outputs is read as every raypd CLI reads it (serve.evidence)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from serve.conformance.__main__ import main
from tests.fakes.vllm_openai import VllmStandIn
from tests.unit.cli_support import run_main


def _run(*args: str, environ: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return run_main(lambda argv: main(argv, environ=environ or {}), *args)


@pytest.mark.parametrize(("args", "flag"), [
    (["--endpoint", "ftp://x", "--model", "m"], "--endpoint"),
    (["--endpoint", "http://", "--model", "m"], "--endpoint"),
    (["--endpoint", "http://h:99999", "--model", "m"], "--endpoint"),
    (["--endpoint", "http://user:pw@h", "--model", "m"], "--endpoint"),
    (["--endpoint", "http://h/\x1b[31m", "--model", "m"], "--endpoint"),
    (["--endpoint", "http://h?x=1", "--model", "m"], "--endpoint"),
    (["--endpoint", "http://h", "--model", "m", "--reference", "javascript:alert(1)"], "--reference"),
    (["--endpoint", "http://h", "--model", "m y"], "--model"),
    (["--endpoint", "http://h", "--model", "m\x00"], "--model"),
    (["--endpoint", "http://h", "--model", "x" * 300], "--model"),
    (["--endpoint", "http://h"], "--model"),
    (["--endpoint", "http://h", "--model", "m", "--api-key-env", "NOT-A-NAME"], "--api-key-env"),
    (["--endpoint", "http://h", "--model", "m", "--api-key-env", "UNSET_VAR"], "--api-key-env"),
    (["--model", "m"], "--endpoint"),
    (["--endpoint", "http://h", "--outputs", "-", "--model", "m"], "--outputs"),
])
def test_hostile_input_is_one_line_naming_the_flag(args: list[str], flag: str) -> None:
    done = _run(*args)
    assert done.returncode == 2, done
    assert done.stderr.startswith("conformance: ") and done.stderr.count("\n") == 1, done.stderr
    assert flag in done.stderr and "Traceback" not in done.stderr
    assert "\x1b" not in done.stderr and "\x00" not in done.stderr


def test_a_key_variable_with_control_characters_is_refused_without_quoting_it() -> None:
    done = _run("--endpoint", "http://h", "--model", "m", "--api-key-env", "K", environ={"K": "se cret\n"})
    assert done.returncode == 2 and "--api-key-env K" in done.stderr and "se cret" not in done.stderr


def test_out_that_is_a_file_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    with VllmStandIn() as server:
        done = _run("--endpoint", server.url, "--model", "tiny", "--out", str(target))
        assert done.returncode == 2 and "--out" in done.stderr
        assert server.requests == []


def test_outputs_give_the_endpoint_key_and_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "rpd_outputs-key-abcdefghijkl"
    with VllmStandIn() as server:
        outputs = {"endpoint": {"url": server.url + "/v1", "scope": "internet", "auth": "apiKey"},
                   "apiKey": key, "modelId": "tiny"}
        monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(outputs)))
        done = _run("--outputs", "-", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["endpoint"] == server.url and report["model"] == "tiny"
    assert key not in done.stdout


@pytest.mark.parametrize(("outputs", "said"), [
    ("not json", "--outputs: the outputs on stdin"),
    ("[]", "--outputs: the outputs on stdin must be a JSON object"),
    ("{}", "no endpoint.url"),
    ('{"endpoint": {"url": "http://svc.ns:8000", "scope": "cluster"}, "modelId": "m"}', "scope cluster"),
])
def test_unusable_outputs_say_why(outputs: str, said: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(outputs))
    done = _run("--outputs", "-")
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1


def test_an_outputs_file_that_is_a_directory_is_named(tmp_path: Path) -> None:
    done = _run("--outputs", str(tmp_path))
    assert done.returncode == 2 and "--outputs" in done.stderr and "Traceback" not in done.stderr
