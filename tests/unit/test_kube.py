"""serve.kube: kubeconfig handling, the EKS token minted in Python, bounded calls, readable errors.

Every server here is on 127.0.0.1 (tests.fakes.kube_api or a bare socket); nothing reaches AWS.
"""

from __future__ import annotations

import base64
import json
import socket
import stat
from pathlib import Path
from typing import Iterator
from urllib.parse import parse_qs, urlsplit

import botocore.session
import pytest

from serve.kube import (
    ALLOW_HTTP_CREDENTIALS_EXTENSION,
    EKS_TOKEN_PREFIX,
    KubeConfigError,
    KubeError,
    KubeNotFound,
    client_from_kubeconfig,
    mint_eks_token,
)
from tests.fakes.kube_api import DEFAULT_TOKEN, FakeKubeApi

FAKE_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
FAKE_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def fake_aws_session() -> botocore.session.Session:
    session = botocore.session.Session()
    session.set_credentials(FAKE_KEY_ID, FAKE_SECRET)
    return session


def decode_token(token: str) -> str:
    body = token[len(EKS_TOKEN_PREFIX):]
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode("utf-8")


@pytest.fixture
def kube() -> Iterator[FakeKubeApi]:
    with FakeKubeApi("healthy") as fake:
        yield fake


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a connection fails the test: presigning must be offline."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network used: {args}")
    monkeypatch.setattr(socket, "create_connection", refuse)


def exec_marker_script(directory: Path, name: str = "aws") -> tuple[Path, Path]:
    """A program that leaves a file behind if anyone runs it."""
    marker = directory / "exec-was-run"
    script = directory / name
    script.write_text(f"#!/bin/sh\ntouch '{marker}'\necho '{{}}'\n", encoding="utf-8")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, marker


# ---- the EKS token ----

def test_eks_token_is_the_aws_cli_format(no_network: None) -> None:
    token = mint_eks_token("raypd-dev", "us-east-2", session=fake_aws_session())
    assert token.startswith("k8s-aws-v1.")
    assert not token.endswith("=")  # base64url without padding
    url = urlsplit(decode_token(token))
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert url.scheme == "https" and url.hostname == "sts.us-east-2.amazonaws.com"
    assert query["Action"] == "GetCallerIdentity" and query["Version"] == "2011-06-15"
    assert query["X-Amz-Expires"] == "60"
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"].split(";")
    assert query["X-Amz-Credential"].startswith(FAKE_KEY_ID + "/")
    assert query["X-Amz-Credential"].endswith("/us-east-2/sts/aws4_request")
    # the cluster name is signed as a header, not sent as a parameter
    assert "x-k8s-aws-id" not in query and "raypd-dev" not in url.query


def test_eks_token_signature_depends_on_the_cluster(no_network: None) -> None:
    one = parse_qs(urlsplit(decode_token(mint_eks_token("a", "us-east-2", session=fake_aws_session()))).query)
    two = parse_qs(urlsplit(decode_token(mint_eks_token("b", "us-east-2", session=fake_aws_session()))).query)
    if one["X-Amz-Date"] == two["X-Amz-Date"]:
        assert one["X-Amz-Signature"] != two["X-Amz-Signature"]


def test_eks_token_without_credentials_is_a_readable_error(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(KubeConfigError, match="cannot sign an EKS token for cluster raypd-dev"):
        mint_eks_token("raypd-dev", "us-east-2")


def test_exec_kubeconfig_is_read_never_run(tmp_path: Path) -> None:
    script, marker = exec_marker_script(tmp_path)
    with FakeKubeApi("healthy", accept_token=lambda t: t.startswith(EKS_TOKEN_PREFIX)) as fake:
        client = client_from_kubeconfig(fake.kubeconfig(exec_command=str(script)),
                                        session=fake_aws_session())
        nodes = client.list_nodes("role=gpu-worker")
    assert len(nodes) == 2
    assert not marker.exists(), "the kubeconfig's exec command was run"


def test_exec_token_is_signed_for_the_kubeconfig_cluster_and_region(tmp_path: Path) -> None:
    script, _ = exec_marker_script(tmp_path)
    seen: list[str] = []

    def accept(token: str) -> bool:
        seen.append(token)
        return token.startswith(EKS_TOKEN_PREFIX)

    with FakeKubeApi("healthy", accept_token=accept) as fake:
        client_from_kubeconfig(fake.kubeconfig(exec_command=str(script)),
                               session=fake_aws_session()).list_nodes()
    url = decode_token(seen[0])
    assert "sts.us-east-2.amazonaws.com" in url


def test_other_exec_plugins_are_refused_not_run(tmp_path: Path, kube: FakeKubeApi) -> None:
    script, marker = exec_marker_script(tmp_path, name="gke-gcloud-auth-plugin")
    with pytest.raises(KubeConfigError, match="never runs kubeconfig commands"):
        client_from_kubeconfig(kube.kubeconfig(exec_command=str(script)))
    assert not marker.exists()


# ---- kubeconfig parsing ----

def test_yaml_and_json_kubeconfigs_work(kube: FakeKubeApi) -> None:
    for fmt in ("yaml", "json"):
        client = client_from_kubeconfig(kube.kubeconfig(fmt=fmt))
        assert [n["metadata"]["labels"]["role"] for n in client.list_nodes("role=gpu-worker")] == \
            ["gpu-worker", "gpu-worker"]


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("clusters: [unclosed\n  token: SECRET-IN-BROKEN-YAML", "not valid YAML"),
    ("- just\n- a list\n", "not a YAML/JSON mapping"),
    ("apiVersion: v1\nkind: Config\nclusters: []\n", "no current-context"),
    ("current-context: x\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n", "no cluster"),
    ("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
     "clusters: [{name: c, cluster: {server: 'ftp://nope'}}]\n", "https:// server"),
    ("[" * 5000, "the kubeconfig is"),
    ("current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
     "clusters: [{name: c, cluster: {server: 'https://k', certificate-authority-data: bm90IGEgY2VydA==}}]\n",
     "not a PEM certificate"),
], ids=["empty", "broken-yaml", "list", "no-context", "no-cluster", "bad-server", "deep", "bad-ca"])
def test_bad_kubeconfigs_are_readable_errors(text: str, message: str) -> None:
    with pytest.raises(KubeConfigError) as caught:
        client_from_kubeconfig(text)
    assert message in str(caught.value)
    assert "SECRET-IN-BROKEN-YAML" not in str(caught.value)


def test_client_repr_hides_the_token(kube: FakeKubeApi) -> None:
    client = client_from_kubeconfig(kube.kubeconfig())
    assert DEFAULT_TOKEN not in repr(client)


# ---- calls and errors ----

def test_refused_credentials_say_so_without_the_token(kube: FakeKubeApi) -> None:
    client = client_from_kubeconfig(kube.kubeconfig(token="wrong-token-abc123"))
    with pytest.raises(KubeError) as caught:
        client.list_nodes()
    assert "the kubeconfig's credentials were refused" in str(caught.value)
    assert caught.value.status == 401
    assert "wrong-token-abc123" not in str(caught.value)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def kubeconfig_for(server: str, user: dict[str, object], *, allow_http: bool = True) -> str:
    cluster: dict[str, object] = {"server": server}
    if allow_http:
        cluster["extensions"] = [{"name": ALLOW_HTTP_CREDENTIALS_EXTENSION, "extension": True}]
    return json.dumps({"current-context": "c",
                       "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
                       "clusters": [{"name": "k", "cluster": cluster}],
                       "users": [{"name": "u", "user": user}]})


def test_connection_refused_names_the_api_address() -> None:
    port = free_port()
    text = kubeconfig_for(f"http://127.0.0.1:{port}", {"token": "tok-should-not-show"})
    with pytest.raises(KubeError) as caught:
        client_from_kubeconfig(text).list_nodes()
    assert f"cannot reach the Kubernetes API at http://127.0.0.1:{port}" in str(caught.value)
    assert "tok-should-not-show" not in str(caught.value)


def test_a_silent_server_times_out_with_a_readable_error() -> None:
    with socket.socket() as listener:  # accepts connections (backlog) but never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(4)
        port = listener.getsockname()[1]
        text = kubeconfig_for(f"http://127.0.0.1:{port}", {"token": "t"})
        client = client_from_kubeconfig(text, timeout=0.5)
        with pytest.raises(KubeError, match="did not answer within 0.5 s"):
            client.list_nodes()


def test_objects_logs_and_proxies(kube: FakeKubeApi) -> None:
    client = client_from_kubeconfig(kube.kubeconfig())
    service = client.get_rayservice("inference", "ray-llm")
    assert service["status"]["conditions"][0]["type"] == "Ready"
    with pytest.raises(KubeNotFound):
        client.get_rayservice("inference", "no-such-service")
    pods = client.list_pods("inference", "ray.io/node-type=worker")
    assert {p["metadata"]["labels"]["ray.io/group"] for p in pods} == {"gpu"}
    log = client.pod_log("inference", pods[0]["metadata"]["name"], container="ray-worker", tail_lines=50)
    assert "Backend LIBFABRIC was instantiated" in log
    metrics = client.pod_proxy("inference", pods[0]["metadata"]["name"], 8080, "metrics")
    assert metrics.status == 200 and "ray_node_cpu_utilization" in metrics.text()
    assert "ray_vllm_" not in metrics.text()  # Ray exports vLLM's series only once they were used
    models = client.service_proxy("inference", "ray-llm-serve-svc", 8000, "/v1/models")
    assert models.json()["data"][0]["id"] == "qwen3.5-9b"
    chat = client.service_proxy(
        "inference", "ray-llm-serve-svc", 8000, "v1/chat/completions", method="POST",
        body=json.dumps({"model": "qwen3.5-9b", "messages": [{"role": "user", "content": "hi"}],
                         "max_tokens": 4}).encode())
    assert chat.status == 200 and chat.json()["choices"][0]["finish_reason"] == "length"
    after = "".join(client.pod_proxy("inference", p["metadata"]["name"], 8080, "metrics").text() for p in pods)
    assert "ray_vllm_nixl_xfer_time_seconds_count" in after and "ReplicaId=" in after
    assert "ray_vllm_nixl_num_failed_transfers" not in after  # not exported while 0
    actors = client.service_proxy("inference", "ray-llm-head-svc", 8265, "api/v0/actors", query=[
        ("filter_keys", "class_name"), ("filter_predicates", "="), ("filter_values", "RayWorkerWrapper")])
    rows = actors.json()["data"]["result"]["result"]
    assert rows and {row["class_name"] for row in rows} == {"RayWorkerWrapper"}
    paths = [r["path"] for r in kube.requests]
    assert "/api/v1/namespaces/inference/services/ray-llm-serve-svc:8000/proxy/v1/chat/completions" in paths
    assert not any("/exec" in p or "/portforward" in p for p in paths)


def test_forbidden_says_what_was_not_allowed_not_that_the_credentials_are_wrong(kube: FakeKubeApi) -> None:
    kube.refuse_jobs = 403
    client = client_from_kubeconfig(kube.kubeconfig())
    with pytest.raises(KubeError) as caught:
        client.create("/apis/batch/v1/namespaces/inference/jobs", {"kind": "Job", "metadata": {"name": "b"}})
    assert caught.value.status == 403
    assert "may not POST /apis/batch/v1/namespaces/inference/jobs" in str(caught.value)
    assert "credentials" not in str(caught.value) and DEFAULT_TOKEN not in str(caught.value)


# ---- credentials are secrets from the moment they are read ----

# Whitespace around a token is what a copy, an `echo > file` or a YAML block scalar adds: trimmed, as
# client-go trims a tokenFile, and the token works. Anything inside it no Authorization header can
# carry; guessing which token was meant would send another credential than the one written, so it
# is refused, naming the field and never quoting it.
PADDED_TOKENS = {"newline": "planted-tok-1234\n", "spaces-and-crlf": "  planted-tok-1234\r\n"}
BROKEN_TOKENS = {"nul": "planted\x00tok-1234", "umlaut": "planted-tök-1234", "spaces": "planted tok 1234",
                 "line-separator": "planted-tok-1234\u2028x", "surrogate": "planted-\ud800-tok-1234"}


@pytest.mark.parametrize("token", list(PADDED_TOKENS.values()), ids=list(PADDED_TOKENS))
def test_whitespace_around_a_token_is_trimmed_and_the_token_works(kube: FakeKubeApi, token: str) -> None:
    accepted: list[str] = []
    kube.accept_token = lambda candidate: accepted.append(candidate) or candidate == "planted-tok-1234"
    client = client_from_kubeconfig(kube.kubeconfig(fmt="json", token=token))
    assert len(client.list_nodes("role=gpu-worker")) == 2
    assert accepted == ["planted-tok-1234"]


@pytest.mark.parametrize("token", list(BROKEN_TOKENS.values()), ids=list(BROKEN_TOKENS))
def test_a_token_with_characters_no_header_can_carry_is_refused_never_quoted(kube: FakeKubeApi,
                                                                              token: str) -> None:
    accepted: list[str] = []
    kube.accept_token = lambda candidate: accepted.append(candidate) or candidate == "planted-tok-1234"
    with pytest.raises(KubeConfigError) as caught:
        client_from_kubeconfig(kube.kubeconfig(fmt="json", token=token))
    assert "token holds characters a bearer token cannot have" in str(caught.value)
    assert "planted" not in str(caught.value) and "1234" not in str(caught.value)
    assert not accepted


def test_token_file_is_read_trimmed(tmp_path: Path, kube: FakeKubeApi) -> None:
    path = tmp_path / "token"
    path.write_text(DEFAULT_TOKEN + "\n", encoding="utf-8")
    client = client_from_kubeconfig(kube.kubeconfig(user={"tokenFile": str(path)}))
    assert len(client.list_nodes("role=gpu-worker")) == 2


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory", "huge", "binary", "missing"])
def test_token_file_must_be_a_small_regular_text_file(tmp_path: Path, kube: FakeKubeApi,
                                                      kind: str) -> None:
    import os

    path = tmp_path / "token"
    secret = "tokenfile-secret-98765"
    if kind == "dev-zero":
        path = Path("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)  # opening it for reading blocks for ever unless done non-blocking
    elif kind == "directory":
        path.mkdir()
    elif kind == "huge":
        path.write_text(secret * 10_000, encoding="utf-8")
    elif kind == "binary":
        path.write_bytes(b"\xff\xfe" + secret.encode())
    with pytest.raises(KubeConfigError) as caught:
        client_from_kubeconfig(kube.kubeconfig(user={"tokenFile": str(path)}))
    why = {"dev-zero": "is not a regular file", "fifo": "is not a regular file",
           "directory": "is not a regular file", "huge": "is larger than 64 KiB",
           "binary": "is not UTF-8 text", "missing": "cannot read the kubeconfig's tokenFile"}[kind]
    assert why in str(caught.value) and secret not in str(caught.value)


def test_no_credentials_go_to_plain_http_unless_the_kubeconfig_says_so(kube: FakeKubeApi,
                                                                        tmp_path: Path) -> None:
    seen: list[str] = []
    kube.accept_token = lambda candidate: seen.append(candidate) or True
    for user in ({"token": DEFAULT_TOKEN}, {"username": "admin", "password": "hunter2-pass"},
                 {"tokenFile": str(tmp_path / "t")}):
        (tmp_path / "t").write_text(DEFAULT_TOKEN, encoding="utf-8")
        with pytest.raises(KubeConfigError, match="plain http://: raypd will not send") as caught:
            client_from_kubeconfig(kube.kubeconfig(user=user, allow_http=False))
        assert ALLOW_HTTP_CREDENTIALS_EXTENSION in str(caught.value)
        assert DEFAULT_TOKEN not in str(caught.value) and "hunter2" not in str(caught.value)
    script, _ = exec_marker_script(tmp_path)
    with pytest.raises(KubeConfigError, match="plain http://"):
        client_from_kubeconfig(kube.kubeconfig(exec_command=str(script), allow_http=False))
    assert seen == [] and kube.requests == []
    anonymous = client_from_kubeconfig(kube.kubeconfig(user={}, allow_http=False))  # kubectl proxy style
    assert anonymous.auth_headers() == {}
    allowed = client_from_kubeconfig(kube.kubeconfig(allow_http=True))
    assert allowed.auth_headers() == {"Authorization": f"Bearer {DEFAULT_TOKEN}"}


def test_a_directly_built_client_keeps_its_token_off_plain_http(kube: FakeKubeApi) -> None:
    from serve.kube import KubeClient

    seen: list[str] = []
    kube.accept_token = lambda candidate: seen.append(candidate) or True
    client = KubeClient(server=kube.url, ssl_context=None, token=DEFAULT_TOKEN)
    assert client.auth_headers() == {}
    with pytest.raises(KubeError, match="HTTP 401"):
        client.list_nodes()  # sent without credentials: the server refuses
    assert seen == []
