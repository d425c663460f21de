"""`model-source`: the model can be downloaded, asked before `up` (issue 15).

Hugging Face answers come from huggingface_hub (the real client) talking to the Hub stand-in of
tests/fakes/hf_hub.py over HTTP on 127.0.0.1 (HF_ENDPOINT points at it, as a mirror would); S3
answers come from moto's server (ListObjectsV2, HeadObject), reached through AWS_ENDPOINT_URL.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator, Optional

import boto3
import pytest
from botocore.config import Config

from components.config.checks import Check
from components.config.spec import DeploymentSpec
from components.preflight.cli import main as preflight_main
from components.preflight.model_source import check_hub_source
from components.preflight.run import run_preflight
from components.preflight.s3_source import check_s3_source
from tests.fakes.hf_hub import FakeHub, HubRepo
from tests.unit.cli_support import run_main, run_module
from tests.unit.test_preflight import _closed_port, _isolate, _stack, by_id

ALICE = "hf_AliceTokenGrantedEverything0123456789"  # may read the private and the gated repo
BOB = "hf_BobTokenWithoutGrants0123456789abcdef"  # a valid token with no grants
UNKNOWN = "hf_TokenTheHubNeverIssued000000000000000"
REPOS = {
    "Qwen/Qwen3.5-9B": HubRepo(),
    "acme/private-model": HubRepo(private=True, readers=frozenset({ALICE})),
    "meta-llama/Llama-3.1-8B": HubRepo(gated="manual", readers=frozenset({ALICE})),
    "acme/gguf-only": HubRepo(files=("model-Q4_K_M.gguf", "README.md")),
    "mistralai/native": HubRepo(files=("params.json", "consolidated.safetensors", "tekken.json")),
}


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    with FakeHub(REPOS, tokens={ALICE, BOB}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


def spec_for(source: str, token: Optional[str] = None) -> DeploymentSpec:
    config: dict[str, Any] = {"raypd:model": {"source": source}}
    if token is not None:
        config["raypd:hfToken"] = token
    return DeploymentSpec.from_config(config, "dev")


def check(source: str, token: Optional[str] = None) -> Check:
    return check_hub_source(spec_for(source, token))


# ---- Hugging Face ----

def test_public_repo_passes_without_a_token(hub: FakeHub) -> None:
    result = check("Qwen/Qwen3.5-9B")
    assert result.status == "pass"
    assert f"Qwen/Qwen3.5-9B on {hub.url}: public" in result.detail and "config.json" in result.detail
    assert hub.requests == [("GET", "/api/models/Qwen/Qwen3.5-9B", False)]  # no token was sent


def test_a_typo_in_the_repo_id_fails_with_and_without_a_token(hub: FakeHub) -> None:
    anonymous = check("Qwen/Qwen3.5-9B-Instrcut")
    assert anonymous.status == "fail"
    assert "Qwen/Qwen3.5-9B-Instrcut" in anonymous.detail and "was not found" in anonymous.detail
    assert "raypd:model.source" in anonymous.remedy
    signed_in = check("Qwen/Qwen3.5-9B-Instrcut", BOB)
    assert signed_in.status == "fail" and "this token cannot read it" in signed_in.detail


def test_private_repo_is_named_as_possibly_private(hub: FakeHub) -> None:
    without = check("acme/private-model")
    assert without.status == "fail"
    assert "private" in without.detail and "raypd:hfToken is not set" in without.detail
    assert "raypd:hfToken" in without.remedy
    assert check("acme/private-model", BOB).status == "fail"
    granted = check("acme/private-model", ALICE)
    assert granted.status == "pass" and ": private, readable with raypd:hfToken" in granted.detail


def test_gated_repo_needs_a_token_that_was_granted_access(hub: FakeHub) -> None:
    without = check("meta-llama/Llama-3.1-8B")
    assert without.status == "fail"
    assert "gated" in without.detail and "raypd:hfToken is not set" in without.detail
    assert f"{hub.url}/meta-llama/Llama-3.1-8B" in without.remedy  # where to accept the terms
    refused = check("meta-llama/Llama-3.1-8B", BOB)
    assert refused.status == "fail"
    assert "has not been granted access" in refused.detail and "not in the authorized list" in refused.detail
    granted = check("meta-llama/Llama-3.1-8B", ALICE)
    assert granted.status == "pass" and "granted access" in granted.detail
    # The gate is asked where vLLM meets it: the first file it downloads.
    assert ("HEAD", "/meta-llama/Llama-3.1-8B/resolve/main/config.json", True) in hub.requests


def test_a_token_the_hub_does_not_know_fails(hub: FakeHub) -> None:
    result = check("Qwen/Qwen3.5-9B", UNKNOWN)
    assert result.status == "fail"
    assert "the Hub rejected raypd:hfToken" in result.detail and "401" in result.detail
    assert "settings/tokens" in result.remedy


def test_a_repo_vllm_cannot_load_fails_and_mistral_format_passes(hub: FakeHub) -> None:
    gguf = check("acme/gguf-only")
    assert gguf.status == "fail" and "holds no config.json" in gguf.detail
    mistral = check("mistralai/native")
    assert mistral.status == "pass" and "params.json" in mistral.detail


def test_a_token_preflight_cannot_read_is_said_and_never_a_pass_for_a_gated_repo(hub: FakeHub) -> None:
    # The web app's stored deployments hold the placeholder, not the token.
    gated = check("meta-llama/Llama-3.1-8B", "[secret]")
    assert gated.status == "warn" and "preflight cannot read it" in gated.detail
    public = check("Qwen/Qwen3.5-9B", "[secret]")
    assert public.status == "pass"
    assert all(with_token is False for _, _, with_token in hub.requests)  # the placeholder was never sent


def _says_unreached_from_here(result: Check, reason: str) -> None:
    """No answer about the repo from here is no evidence: a warning that says from where it was
    asked and that the pods download through another network (issue 29 §2)."""
    assert result.status == "warn", result.detail
    assert reason in result.detail
    assert f"from this machine (host {socket.gethostname()}, where preflight runs)" in result.detail
    assert "so nothing was learnt about Qwen/Qwen3.5-9B" in result.detail
    assert "the pods download it through the stack's own network in AWS" in result.detail
    assert "HF_ENDPOINT" in result.remedy and "https://huggingface.co" in result.remedy


def test_a_hub_refusing_connections_warns_saying_from_where(monkeypatch: pytest.MonkeyPatch) -> None:
    dead = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("HF_ENDPOINT", dead)
    _says_unreached_from_here(check("Qwen/Qwen3.5-9B"), f"the Hugging Face Hub at {dead} did not answer (")


def test_a_hub_name_that_does_not_resolve_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_dns(host: Any, *args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example.invalid")
    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    _says_unreached_from_here(check("Qwen/Qwen3.5-9B"), "did not answer (ConnectError: [Errno -2] Name or service")


def test_a_hub_that_never_answers_warns_after_the_short_timeout() -> None:
    with FakeHub(REPOS, hang=True) as silent:
        started = time.monotonic()
        slow = check_hub_source(spec_for("Qwen/Qwen3.5-9B"), endpoint=silent.url, timeout=0.5)
        elapsed = time.monotonic() - started
    _says_unreached_from_here(slow, "Timeout")
    assert elapsed < 10  # the short timeout, not a hang


@pytest.mark.parametrize("status", [502, 503, 504, 500, 407, 429])
def test_a_proxy_or_hub_error_that_is_not_about_the_repo_warns(status: int) -> None:
    with FakeHub(REPOS, status=status) as proxy:
        result = check_hub_source(spec_for("Qwen/Qwen3.5-9B"), endpoint=proxy.url)
    _says_unreached_from_here(result, f"answered HTTP {status} (upstream unavailable) while reading")


def test_what_the_hub_says_about_the_repo_or_token_still_fails(hub: FakeHub) -> None:
    # 404 (a typo), 401 (no token for a private repo; an unknown token), 403 (gated, no grant),
    # gated without a token: the pods would get the same answer.
    assert [check(source, token).status for source, token in [
        ("Qwen/Qwen3.5-9B-Instrcut", BOB), ("acme/private-model", None), ("Qwen/Qwen3.5-9B", UNKNOWN),
        ("meta-llama/Llama-3.1-8B", BOB), ("meta-llama/Llama-3.1-8B", None),
    ]] == ["fail"] * 5


def test_a_first_preview_of_the_reference_without_the_hub_does_not_read_failed(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The preview and the CLI run the same preflight: no AWS credentials, no Hub from here.
    _isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    report = run_preflight(spec_for("Qwen/Qwen3.5-9B"))
    assert report.ok and report.verdict != "failed"
    assert by_id(report)["model-source"].status == "warn"
    result = run_main(preflight_main, "--config", str(_stack(tmp_path, {})))
    assert result.returncode == 0, result.stdout
    assert "FAILED" not in result.stdout and "[WARN] model-source" in result.stdout


def test_hf_hub_offline_skips_and_says_why(monkeypatch: pytest.MonkeyPatch, hub: FakeHub) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = check("Qwen/Qwen3.5-9B")
    assert result.status == "skip" and "HF_HUB_OFFLINE" in result.detail
    assert hub.requests == []


def test_the_token_appears_in_no_report_log_or_output(hub: FakeHub, monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    texts = []
    for source in ("Qwen/Qwen3.5-9B", "acme/private-model", "meta-llama/Llama-3.1-8B", "nobody/none"):
        for token in (ALICE, BOB, UNKNOWN):
            texts.append(json.dumps(check(source, token).model_dump()))
    _isolate(monkeypatch, tmp_path)  # no AWS: the CLI runs the memory fit and this check only
    stack = _stack(tmp_path, {"raypd:model": {"source": "meta-llama/Llama-3.1-8B"}, "raypd:hfToken": BOB})
    for args in (("--json",), ()):
        result = run_main(preflight_main, "--config", str(stack), *args)
        assert result.returncode == 1, result.stderr  # BOB was not granted the gated model
        texts += [result.stdout, result.stderr]
    texts.append(caplog.text)
    for token in (ALICE, BOB, UNKNOWN):
        for index, text in enumerate(texts):
            assert token not in text, f"text #{index} holds a token"


def test_cli_fails_a_typo_through_the_hub(hub: FakeHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _isolate(monkeypatch, tmp_path)
    stack = _stack(tmp_path, {"raypd:model": {"source": "Qwen/Qwen3.5-9B-Instrcut"}})
    result = run_main(preflight_main, "--config", str(stack), "--json")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    checks = {c["id"]: c for c in json.loads(result.stdout)["checks"]}
    assert checks["model-source"]["status"] == "fail"
    assert checks["aws-credentials"]["status"] == "skip"  # no AWS needed for a Hub source


# ---- S3 ----

@pytest.fixture
def s3_aws(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{moto_endpoint}/moto-api/reset", method="POST"))
    _isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    s3 = boto3.Session().client("s3", region_name="us-east-2")
    s3.create_bucket(Bucket="raypd-weights", CreateBucketConfiguration={"LocationConstraint": "us-east-2"})
    for key in ("qwen3.5-9b/config.json", "qwen3.5-9b/model.safetensors", "nested/qwen/config.json"):
        s3.put_object(Bucket="raypd-weights", Key=key, Body=b"{}")
    return s3


def s3_check(source: str) -> Check:
    return by_id(run_preflight(spec_for(source)))["model-source"]


@pytest.mark.slow
def test_s3_prefix_with_config_json_passes(s3_aws: Any) -> None:
    result = s3_check("s3://raypd-weights/qwen3.5-9b/")
    assert result.status == "pass", result.detail
    assert "s3://raypd-weights/qwen3.5-9b/ exists and holds a readable config.json" in result.detail


@pytest.mark.parametrize(("source", "said"), [
    ("s3://raypd-weights/qwen3.5-9b-typo", "holds no objects: the prefix does not exist"),
    ("s3://raypd-weights/nested", "holds no config.json at its top"),
    ("s3://no-such-bucket-raypd/qwen", "bucket no-such-bucket-raypd of s3://no-such-bucket-raypd/qwen/ does not exist"),
])
@pytest.mark.slow
def test_s3_source_that_cannot_be_loaded_fails(s3_aws: Any, source: str, said: str) -> None:
    result = s3_check(source)
    assert result.status == "fail"
    assert said in result.detail
    assert "raypd:model.source" in result.remedy or "upload" in result.remedy


@pytest.mark.slow
def test_s3_nested_folder_is_named(s3_aws: Any) -> None:
    assert "sub-folders: qwen/" in s3_check("s3://raypd-weights/nested").detail


def test_s3_that_does_not_answer_from_here_warns(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _isolate(monkeypatch, tmp_path)
    client = boto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing").client(
        "s3", region_name="us-east-2", endpoint_url=f"http://127.0.0.1:{_closed_port()}",
        config=Config(connect_timeout=2, retries={"max_attempts": 1}))
    result = check_s3_source(spec_for("s3://raypd-weights/qwen3.5-9b/"), lambda: client)
    assert result.status == "warn", result.detail
    assert result.detail.startswith(f"S3 did not answer from this machine (host {socket.gethostname()}, "
                                    "where preflight runs) while listing s3://raypd-weights/qwen3.5-9b/")
    assert "the pods read it through the stack's own network in AWS" in result.detail


def test_s3_source_without_aws_credentials_skips_with_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _isolate(monkeypatch, tmp_path)
    result = s3_check("s3://raypd-weights/qwen3.5-9b/")
    assert result.status == "skip"
    assert "read with AWS credentials" in result.detail and "no AWS credentials" in result.detail


# ---- Evidence when the Hub's answer is thin or about another repo ----

class _NotAHub(BaseHTTPRequestHandler):
    """A server at HF_ENDPOINT that is not a Hub (a misconfigured proxy or mirror): every GET is
    200 `{"id": "x"}`, every HEAD 200 with none of the Hub's headers unless `hub_headers`."""

    protocol_version = "HTTP/1.1"
    hub_headers = False

    def log_message(self, *args: Any) -> None:
        pass

    def _reply(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        body = b'{"id": "x"}'
        self._reply(body)
        self.wfile.write(body)

    def do_HEAD(self) -> None:  # noqa: N802
        self._reply(b"{}")


@pytest.fixture
def not_a_hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotAHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}"
    monkeypatch.setenv("HF_ENDPOINT", url)
    yield url
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_an_answer_about_another_repo_is_no_evidence_for_a_typo(not_a_hub: str) -> None:
    result = check("Qwen/Qwen3.5-9B-Instrcut")
    assert result.status == "fail", result.detail
    assert "Qwen/Qwen3.5-9B-Instrcut" in result.detail and "X-Repo-Commit" in result.detail
    assert "HF_ENDPOINT" in result.remedy


@pytest.fixture
def mirror(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """A mirror whose model info has no file list: the config is asked for by HEAD."""
    with FakeHub(REPOS, tokens={ALICE, BOB}, list_files=False) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        yield server


def test_without_a_file_list_the_config_is_asked_for_by_head(mirror: FakeHub) -> None:
    public = check("Qwen/Qwen3.5-9B")
    assert public.status == "pass", public.detail
    assert "config.json" in public.detail
    assert ("HEAD", "/Qwen/Qwen3.5-9B/resolve/main/config.json", False) in mirror.requests
    mistral = check("mistralai/native")
    assert mistral.status == "pass" and "params.json" in mistral.detail, mistral.detail
    gguf = check("acme/gguf-only")
    assert gguf.status == "fail" and "holds no config.json" in gguf.detail, gguf.detail
    assert check("Qwen/Qwen3.5-9B-Instrcut").status == "fail"
    gated = check("meta-llama/Llama-3.1-8B", BOB)
    assert gated.status == "fail" and "has not been granted access" in gated.detail


def test_the_hub_matches_repo_ids_in_any_case(hub: FakeHub) -> None:
    result = check("qwen/qwen3.5-9B")
    assert result.status == "pass", result.detail
    assert "Qwen/Qwen3.5-9B" in result.detail  # the Hub's own spelling is shown


def test_a_renamed_repo_warns_with_its_new_name(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeHub(REPOS, tokens={ALICE, BOB}, renamed={"OldOrg/Qwen3.5-9B": "Qwen/Qwen3.5-9B"}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        result = check("OldOrg/Qwen3.5-9B")
        assert result.status == "warn", result.detail
        assert "Qwen/Qwen3.5-9B" in result.detail and "renamed" in result.detail
        assert "raypd:model.source" in result.remedy and "Qwen/Qwen3.5-9B" in result.remedy
        # The old name serves the files the pods fetch (the evidence for not failing).
        assert ("HEAD", "/OldOrg/Qwen3.5-9B/resolve/main/config.json", False) in server.requests


# ---- HF_ENDPOINT ----

PASSWORD = "s3cretMirrorPassw0rd"
NO_URL_CHARACTER = "HF_ENDPOINT holds a character no URL may hold"
BAD_ENDPOINTS = {  # what is wrong: (the value, what the detail must say)
    "port out of range": ("https://huggingface.co:99999",
                          "HF_ENDPOINT is not a valid URL (https://huggingface.co:99999: Port out of range"),
    "a password": (f"https://mirror-user:{PASSWORD}@huggingface.co",
                   "HF_ENDPOINT carries a user name or password (https://***@huggingface.co)"),
    "unclosed IPv6": ("http://[::1", "HF_ENDPOINT is not a valid URL (http://[::1: Invalid IPv6 URL)"),
    "not http": ("ftp://x", "HF_ENDPOINT must be an https:// (or http://) URL, not ftp://x"),
    "no host": ("https://", "HF_ENDPOINT names no host"),
    "no host, a port": ("http://:8080/", "HF_ENDPOINT names no host"),
    "port zero": ("http://hub.example:0", "HF_ENDPOINT names port 0"),
    "a query": ("https://hub.example/?x=1", "HF_ENDPOINT has a query or fragment"),
    "a newline": ("https://hub.example/\nX-Injected: 1", f"{NO_URL_CHARACTER} (U+000A at position 21"),
    "a control character": ("https://hub\x01.example", f"{NO_URL_CHARACTER} (U+0001"),
    "shell syntax": ("https://$(touch /tmp/raypd-pwned)/", f"{NO_URL_CHARACTER} (U+0020"),
    "undecodable bytes": ("https://hub\udcff.example", f"{NO_URL_CHARACTER} (U+DCFF"),
    "huge": ("https://" + "h" * 100_000 + ".example", "HF_ENDPOINT is 100016 characters long"),
}


@pytest.mark.parametrize(("value", "said"), BAD_ENDPOINTS.values(), ids=BAD_ENDPOINTS.keys())
def test_a_malformed_hf_endpoint_fails_naming_it(monkeypatch: pytest.MonkeyPatch, value: str, said: str) -> None:
    monkeypatch.setenv("HF_ENDPOINT", value)
    result = check("Qwen/Qwen3.5-9B")
    assert result.status == "fail"
    assert result.detail.startswith(said), result.detail
    assert "HF_ENDPOINT" in result.remedy
    assert PASSWORD not in result.detail + result.remedy and "mirror-user" not in result.detail
    assert len(result.detail) < 600
    assert all(ch.isprintable() and ch.isascii() for ch in result.detail + result.remedy)


def test_a_mirror_url_with_a_password_is_refused_unsent_and_unshown(monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx would turn the URL's credentials into basic auth in place of the bearer token, so the
    # check would ask without raypd:hfToken while saying it asked with it.
    with FakeHub(REPOS, tokens={BOB}) as server:
        port = server.url.rsplit(":", 1)[1]
        monkeypatch.setenv("HF_ENDPOINT", f"http://mirror-user:{PASSWORD}@127.0.0.1:{port}")
        result = check("meta-llama/Llama-3.1-8B", BOB)
    assert result.status == "fail"
    assert "HF_ENDPOINT carries a user name or password (http://***@127.0.0.1:" in result.detail
    assert PASSWORD not in result.detail + result.remedy and "mirror-user" not in result.detail
    assert server.requests == []  # nothing was sent


def test_the_detail_says_the_pods_download_from_the_public_hub(hub: FakeHub) -> None:
    # The pods get HF_TOKEN and HF_HOME only (components/render/rayservice.py), never HF_ENDPOINT.
    result = check("Qwen/Qwen3.5-9B")
    assert "the pods download from https://huggingface.co" in result.detail


CLI_CASES = ("port out of range", "unclosed IPv6", "a password")  # the first two crashed at import


@pytest.mark.parametrize(("value", "said"), [BAD_ENDPOINTS[name] for name in CLI_CASES], ids=CLI_CASES)
def test_cli_with_a_malformed_hf_endpoint_fails_model_source_without_a_traceback(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str, said: str) -> None:
    # A fresh interpreter: huggingface_hub reads HF_ENDPOINT when it is first imported.
    _isolate(monkeypatch, tmp_path)
    monkeypatch.setenv("HF_ENDPOINT", value)
    stack = _stack(tmp_path, {"raypd:model": {"source": "Qwen/Qwen3.5-9B"}})
    result = run_module("components.preflight", "--config", str(stack), "--json")
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1, result.stderr
    model_source = {c["id"]: c for c in json.loads(result.stdout)["checks"]}["model-source"]
    assert model_source["status"] == "fail" and model_source["detail"].startswith(said), model_source
    assert PASSWORD not in result.stdout + result.stderr
