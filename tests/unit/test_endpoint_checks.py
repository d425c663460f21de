"""endpoint-external and endpoint-auth against real HTTP servers on 127.0.0.1: a stand-in for the
gateway that enforces keys as Envoy's api_key_auth filter does (tests/fakes/keyed_endpoint.py),
fed by the Kubernetes stand-in's key Secret so a revoke takes effect on the next request."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any, Iterator

import pytest

from components.render.endpoint_names import FIRST_KEY_NAME, api_keys_secret_name
from serve.api_keys import ApiKeys
from serve.evidence import VerifyInputError
from serve.verify.__main__ import main
from serve.verify.external import (
    API_KEY_ENV,
    EndpointTarget,
    check_endpoint_auth,
    check_endpoint_external,
    endpoint_checks,
    read_api_key,
)
from tests.fakes.keyed_endpoint import KeyedEndpoint
from tests.fakes.kube_api import FakeKubeApi

MODEL = "qwen3.5-9b"
KEY = "rpd_a-valid-key-for-the-endpoint-0123456789abcdef"
T = 5.0


@pytest.fixture
def gateway() -> Iterator[KeyedEndpoint]:
    with KeyedEndpoint(MODEL, lambda: {FIRST_KEY_NAME: KEY}) as server:
        yield server


def target(url: str, scope: str = "vpc", auth: str = "apiKey") -> EndpointTarget:
    found = EndpointTarget.from_outputs({"endpoint": {"url": url, "scope": scope, "auth": auth}})
    assert found is not None
    return found


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_valid_key_lists_the_model_and_no_key_or_a_wrong_one_is_refused(gateway):
    where = target(gateway.url + "/v1")
    external = check_endpoint_external(where, KEY, MODEL, T)
    assert external.status == "pass" and MODEL in external.detail and KEY not in external.detail
    auth = check_endpoint_auth(where, T)
    assert auth.status == "pass"
    assert "without a key: HTTP 401" in auth.detail and "with a wrong key: HTTP 401" in auth.detail
    assert [r["authorization"] for r in gateway.requests] == [True, False, True]


def test_a_revoked_key_fails_on_the_next_request_without_a_redeploy():
    with FakeKubeApi("healthy") as kube:
        ns, secret = kube.spec.namespace, api_keys_secret_name(kube.spec.service_name)
        kube.put_secret(ns, secret, {FIRST_KEY_NAME: KEY})
        with KeyedEndpoint(MODEL, lambda: kube.secret_data(ns, secret)) as gateway:
            outputs = {**kube.outputs(), "endpoint": {"url": gateway.url, "scope": "vpc", "auth": "apiKey"}}
            keys = ApiKeys.for_outputs(outputs)
            made = keys.create("ci")["key"]
            assert endpoint_checks(outputs, made, T)[0].status == "pass"
            keys.revoke("ci")
            revoked = endpoint_checks(outputs, made, T)[0]
    assert revoked.status == "fail" and "refused the API key (HTTP 401)" in revoked.detail
    assert made not in revoked.detail + revoked.remedy


def test_an_open_endpoint_fails_endpoint_auth():
    with KeyedEndpoint(MODEL, dict, open=True) as gateway:
        auth = check_endpoint_auth(target(gateway.url), T)
    assert auth.status == "fail" and "the endpoint is open" in auth.detail and "HTTP 200" in auth.detail


def test_letting_requests_without_a_key_through_is_open_even_if_a_wrong_key_is_refused():
    with KeyedEndpoint(MODEL, lambda: {"ci": KEY}, allow_missing=True) as gateway:
        auth = check_endpoint_auth(target(gateway.url), T)
    assert auth.status == "fail" and "without a key: HTTP 200" in auth.detail


def test_neither_open_nor_refused_is_no_evidence_and_warns():
    with KeyedEndpoint(MODEL, dict, open=True) as gateway:  # every path but /v1/models is a 404
        auth = check_endpoint_auth(target(gateway.url + "/elsewhere"), T)
    assert auth.status == "warn" and "HTTP 404" in auth.detail


def test_a_known_key_of_a_forbidden_client_is_a_403_the_check_reports():
    with KeyedEndpoint(MODEL, lambda: {"ci": KEY}, forbidden=("ci",)) as gateway:
        external = check_endpoint_external(target(gateway.url), KEY, MODEL, T)
    assert external.status == "fail" and "HTTP 403" in external.detail


def test_auth_none_warns_that_the_endpoint_is_open_by_choice():
    with KeyedEndpoint(MODEL, dict, open=True) as gateway:
        checks = endpoint_checks({"modelId": MODEL, "endpoint": {"url": gateway.url, "scope": "vpc",
                                                                  "auth": "none"}}, None, T)
    assert [c.status for c in checks] == ["pass", "warn"]
    assert "open" in checks[1].detail and "by choice" in checks[1].detail
    assert not gateway.requests[0]["authorization"]


def test_the_wrong_model_behind_the_route_fails(gateway):
    external = check_endpoint_external(target(gateway.url), KEY, "another-model", T)
    assert external.status == "fail" and "without the model another-model" in external.detail


def test_without_an_endpoint_or_for_scope_cluster_both_checks_skip_and_say_why(gateway):
    assert [c.status for c in endpoint_checks({"modelId": MODEL}, KEY, T)] == ["skip", "skip"]
    cluster = endpoint_checks({"modelId": MODEL, "apiKey": KEY,
                               "endpoint": {"url": gateway.url, "scope": "cluster", "auth": "apiKey"}}, None, T)
    assert [c.status for c in cluster] == ["skip", "skip"]
    assert "drops the Authorization header" in cluster[0].detail
    assert gateway.requests == []  # nothing was sent


def test_no_key_to_test_with_skips_endpoint_external(gateway):
    outputs = {"modelId": MODEL, "apiKey": "[secret]",
               "endpoint": {"url": gateway.url, "scope": "internet", "auth": "apiKey"}}
    external, auth = endpoint_checks(outputs, None, T)
    assert external.status == "skip" and "no API key" in external.detail and API_KEY_ENV in external.remedy
    assert auth.status == "pass"


def test_the_outputs_api_key_is_used_when_none_is_given(gateway):
    outputs = {"modelId": MODEL, "apiKey": KEY, "endpoint": {"url": gateway.url, "scope": "vpc", "auth": "apiKey"}}
    assert endpoint_checks(outputs, None, T)[0].status == "pass"


def test_a_vpc_endpoint_out_of_reach_is_a_skip_with_how_to_run_from_inside():
    where = target(f"http://127.0.0.1:{closed_port()}")
    for check in (check_endpoint_external(where, KEY, MODEL, T), check_endpoint_auth(where, T)):
        assert check.status == "skip" and "refused the connection" in check.detail
        assert "inside the VPC" in check.remedy and "--api-key-file" in check.remedy
    unresolved = check_endpoint_external(target("http://internal-raypd-gw.invalid"), KEY, MODEL, T)
    assert unresolved.status == "skip" and "does not resolve" in unresolved.detail


def test_an_internet_endpoint_out_of_reach_warns_instead_of_skipping():
    check = check_endpoint_external(target(f"http://127.0.0.1:{closed_port()}", scope="internet"), KEY, MODEL, T)
    assert check.status == "warn" and "allowedCidrs" in check.remedy


def test_read_api_key_from_a_file_or_the_environment(tmp_path: Path):
    path = tmp_path / "key"
    path.write_text(f"  {KEY}\n", encoding="utf-8")
    assert read_api_key(str(path), {}) == KEY
    assert read_api_key(None, {API_KEY_ENV: KEY}) == KEY
    assert read_api_key(None, {}) is None
    path.write_text("two words\n", encoding="utf-8")
    with pytest.raises(VerifyInputError) as bad:
        read_api_key(str(path), {})
    assert "two words" not in str(bad.value)
    with pytest.raises(VerifyInputError, match="not a regular file"):
        read_api_key(str(tmp_path), {})
    with pytest.raises(VerifyInputError, match="cannot read"):
        read_api_key(str(tmp_path / "missing"), {})


def test_the_verify_cli_takes_the_key_from_a_file_and_never_prints_it(gateway, tmp_path, capsys):
    with FakeKubeApi("healthy") as kube:
        outputs: dict[str, Any] = {**kube.outputs(),
                                   "endpoint": {"url": f"{gateway.url}/v1", "scope": "vpc", "auth": "apiKey"},
                                   "apiKey": "[secret]"}  # as `pulumi stack output --json` prints it
        (tmp_path / "outputs.json").write_text(json.dumps(outputs), encoding="utf-8")
        (tmp_path / "key").write_text(KEY, encoding="utf-8")
        code = main(["--outputs", str(tmp_path / "outputs.json"), "--api-key-file", str(tmp_path / "key"), "--json"])
    printed = capsys.readouterr()
    report = {c["id"]: c for c in json.loads(printed.out)["checks"]}
    assert report["endpoint-external"]["status"] == "pass", report["endpoint-external"]
    assert report["endpoint-auth"]["status"] == "pass"
    assert KEY not in printed.out + printed.err
    assert code in (0, 1)  # the rest of the report is the stand-in cluster's business
    assert main(["--outputs", str(tmp_path / "outputs.json"), "--api-key-file", str(tmp_path)]) == 2
