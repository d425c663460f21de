"""Every file a raypd CLI reads goes through one bounded, regular-file-only reader
(components.config.safe_documents `read_file`), issue 29 §3: `serve.benchmark` read its own way
(deep JSON in --outputs/--prompts ended in a RecursionError traceback, `--prompts /dev/zero` in a
MemoryError, a FIFO hung it), and a FIFO as a kubeconfig's certificate-authority, client-certificate
or client-key hung `serve.verify` and `serve.api_keys` (only tokenFile was guarded).

A CLI that hangs would hang the suite: each runs in a thread watched for PATIENCE_S, and a FIFO it
still waits on is then opened for writing, which lets it go."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

import pytest

from components.config.safe_documents import FileRefused, read_file
from components.config.spec import DeploymentSpec
from components.render.outputs import render_stack_outputs
from components.stack.offline_plan import main as plan_main
from serve.api_keys import main as api_keys_main
from serve.benchmark.__main__ import main as benchmark_main
from serve.verify.__main__ import main as verify_main
from tests.patience import PATIENCE_S
from tests.unit.cli_support import ROOT, run_main

NOT_REGULAR = "is not a regular file"
DEEP = "[" * 5000 + "]" * 5000


def finished(main: Callable[[Sequence[str]], int], *args: str,
             fifos: Sequence[Path] = ()) -> subprocess.CompletedProcess[str]:
    """`run_main` that fails, instead of hanging, when the CLI does not end within PATIENCE_S."""
    done: list[subprocess.CompletedProcess[str]] = []
    thread = threading.Thread(target=lambda: done.append(run_main(main, *args)), daemon=True)
    thread.start()
    thread.join(PATIENCE_S)
    if thread.is_alive():
        for fifo in fifos:  # a reader blocked in open() gets a writer, then end of file
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(PATIENCE_S)
        pytest.fail(f"{' '.join(args)} hung reading a FIFO")
    return done[0]


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def one_line(result: subprocess.CompletedProcess[str], *fragments: str) -> str:
    assert "Traceback" not in result.stderr and "Error:" not in result.stderr.split(":", 1)[0], result.stderr
    text = result.stderr + result.stdout
    assert all(fragment in text for fragment in fragments), text
    return text


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory", "missing", "too-big", "nul"])
def test_the_reader_takes_regular_files_up_to_their_limit_only(tmp_path: Path, kind: str) -> None:
    path: Any = tmp_path / "file"
    if kind == "fifo":
        fifo(path)
    elif kind == "dev-zero":
        path = "/dev/zero"
    elif kind == "directory":
        path.mkdir()
    elif kind == "too-big":
        path.write_bytes(b"x" * 1025)
    elif kind == "nul":
        path = "a\0b"
    with pytest.raises(FileRefused) as refused:
        read_file(path, 1024)
    expected = {"fifo": NOT_REGULAR, "dev-zero": NOT_REGULAR, "directory": NOT_REGULAR,
                "missing": "cannot read F: No such file", "too-big": "is larger than 1 KiB",
                "nul": "cannot read F: the name holds a NUL"}[kind]
    assert expected in refused.value.about("F")
    (tmp_path / "ok").write_bytes(b"x" * 1024)
    assert read_file(tmp_path / "ok", 1024) == b"x" * 1024


def test_a_stack_file_that_is_a_fifo_is_one_config_line(tmp_path: Path) -> None:
    stack = fifo(tmp_path / "Pulumi.demo.yaml")
    result = finished(plan_main, "--config", str(stack), fifos=[stack])
    assert result.returncode == 2
    one_line(result, "--config", NOT_REGULAR)


def _benchmark(tmp_path: Path, *args: str) -> list[str]:
    return ["run", "--concurrency", "1", "--requests", "1", "--out", str(tmp_path / "out"), *args]


@pytest.mark.parametrize("kind", ["deep", "fifo"])
def test_benchmark_outputs_and_prompts_are_read_safely(tmp_path: Path, kind: str) -> None:
    source = tmp_path / "given"
    if kind == "deep":
        source.write_text(DEEP, encoding="utf-8")
    else:
        fifo(source)
    why = "nested more than 64 levels" if kind == "deep" else NOT_REGULAR
    pipes = [source] if kind == "fifo" else []
    outputs = finished(benchmark_main, *_benchmark(tmp_path, "--outputs", str(source)), fifos=pipes)
    assert outputs.returncode == 2
    one_line(outputs, "--outputs", why)
    prompts = finished(benchmark_main, *_benchmark(tmp_path, "--endpoint", "http://127.0.0.1:9/v1", "--model", "m",
                                                  "--prompts", str(source)), fifos=pipes)
    assert prompts.returncode == 2
    one_line(prompts, "--prompts", why)


def _capped(memory_bytes: int) -> Callable[[], None]:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    return cap


@pytest.mark.slow
@pytest.mark.parametrize("option", ["--outputs", "--prompts"])
def test_benchmark_refuses_dev_zero_instead_of_reading_it_without_end(tmp_path: Path, option: str) -> None:
    """In its own process, its memory capped: reading /dev/zero without end (as before) must end
    in this process's MemoryError, never in the machine's OOM killer."""
    target = ["--outputs", "/dev/zero"] if option == "--outputs" else [
        "--endpoint", "http://127.0.0.1:9/v1", "--model", "m", "--prompts", "/dev/zero"]
    result = subprocess.run([sys.executable, "-m", "serve.benchmark", *_benchmark(tmp_path, *target)],
                            cwd=ROOT, capture_output=True, text=True, timeout=PATIENCE_S,
                            preexec_fn=_capped(2 * 1024 ** 3))
    assert result.returncode == 2
    one_line(result, option, NOT_REGULAR)


def test_benchmark_compare_reads_a_run_safely(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    summary = fifo(run / "summary.json")
    (run / "requests.jsonl").write_text("", encoding="utf-8")
    result = finished(benchmark_main, "compare", str(run), str(run), "--out", str(tmp_path / "report"),
                      fifos=[summary])
    assert result.returncode == 2
    one_line(result, "summary.json", NOT_REGULAR)


def _outputs_with(tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any]) -> Path:
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9", **cluster}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": user}],
    }
    spec = DeploymentSpec.from_config({}, "demo")
    outputs = {**render_stack_outputs(spec, availability_zone="us-east-2a", cluster_name="raypd-demo"),
               "kubeconfig": json.dumps(kubeconfig)}
    path = tmp_path / "outputs.json"
    path.write_text(json.dumps(outputs), encoding="utf-8")
    return path


@pytest.mark.parametrize("field", ["certificate-authority", "client-certificate", "client-key"])
def test_kubeconfig_files_that_are_fifos_end_verify_and_api_keys(tmp_path: Path, field: str) -> None:
    pipe = fifo(tmp_path / "pipe.pem")
    regular = tmp_path / "regular.pem"
    regular.write_text("not a real certificate\n", encoding="utf-8")
    if field == "certificate-authority":
        cluster, user = {"certificate-authority": str(pipe)}, {"token": "t0ken-for-the-test"}
    else:
        other = "client-key" if field == "client-certificate" else "client-certificate"
        cluster, user = {"insecure-skip-tls-verify": True}, {field: str(pipe), other: str(regular)}
    outputs = _outputs_with(tmp_path, cluster, user)
    for main, args in ((verify_main, ["--outputs", str(outputs)]),
                       (api_keys_main, ["--outputs", str(outputs), "list"])):
        result = finished(main, *args, fifos=[pipe])
        assert result.returncode in (1, 2)
        one_line(result, f"the kubeconfig's {field} file {NOT_REGULAR}")
