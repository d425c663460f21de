"""API keys in the web app: the JSON API and the deployment page manage the keys in the cluster's
Secret (the Kubernetes stand-in), show a new key exactly once, and keep every value out of the job
store, the logs, the session cookie and every other answer."""

from __future__ import annotations

import json
import logging
import shlex
from pathlib import Path
from typing import Any, Iterator

import pytest

from components.render.endpoint_names import FIRST_KEY_NAME
from tests.fakes.kube_api import FakeKubeApi
from tests.patience import PATIENCE_S
from tests.web.keys_support import (
    FIRST_CREATED,
    FIRST_KEY,
    EndpointEngine,
    deploy_live,
    endpoint_output,
    quiet_checks,
    seed_keys,
    session_contents,
)
from tests.web.support import AUTH, create, extract_csrf, login, text_of, wait_for_job

KEYS = "/api/v1/deployments/live/api-keys"


@pytest.fixture
def kube() -> Iterator[FakeKubeApi]:
    with FakeKubeApi("healthy") as fake:
        yield fake


@pytest.fixture
def deployed(make_app, kube) -> dict[str, Any]:
    """A deployed "live" deployment whose cluster is the stand-in, with the program's first key."""
    return deploy_live(make_app, kube)


def data(env: dict[str, Any]) -> dict[str, str]:
    return env["kube"].secret_data(env["ns"], env["secret"])


def test_api_creates_lists_and_revokes_keys_in_the_clusters_secret(deployed):
    client = deployed["client"]
    listed = client.get(KEYS, headers=AUTH)
    assert listed.status_code == 200
    assert listed.get_json() == {"keys": [{"name": FIRST_KEY_NAME, "created": FIRST_CREATED}]}

    made = client.post(KEYS, headers=AUTH, json={"name": "ci"})
    assert made.status_code == 201
    key = made.get_json()["key"]
    assert made.get_json()["name"] == "ci" and key.startswith("rpd_")
    assert data(deployed) == {FIRST_KEY_NAME: FIRST_KEY, "ci": key}  # what the gateway reads now
    names = [k["name"] for k in client.get(KEYS, headers=AUTH).get_json()["keys"]]
    assert names == ["ci", FIRST_KEY_NAME]

    gone = client.delete(f"{KEYS}/ci", headers=AUTH)
    assert gone.status_code == 204 and gone.get_data() == b""
    assert data(deployed) == {FIRST_KEY_NAME: FIRST_KEY}
    audit = deployed["app"].extensions["raypd"].store.audit_entries()
    assert [a["action"] for a in audit[:2]] == ["api key revoked", "api key created"]
    assert all(key not in json.dumps(a, default=str) for a in audit)


def test_api_refusals_name_the_field_and_change_nothing(deployed):
    client = deployed["client"]

    def error(response: Any, status: int) -> dict[str, str]:
        assert response.status_code == status, response.get_json()
        return response.get_json()["errors"][0]

    assert error(client.post(KEYS, headers=AUTH, json={"name": "Not OK"}), 400)["field"] == "name"
    assert error(client.post(KEYS, headers=AUTH, json={"name": 5}), 400)["field"] == "name"
    assert error(client.post(KEYS, headers=AUTH, json={}), 400)["field"] == "name"
    assert error(client.post(KEYS, headers=AUTH, json={"name": "ci", "ttl": 3}), 400)["field"] == "ttl"
    duplicate = error(client.post(KEYS, headers=AUTH, json={"name": FIRST_KEY_NAME}), 409)
    assert duplicate["field"] == "name" and "exists already" in duplicate["message"]
    unknown = error(client.delete(f"{KEYS}/ghost", headers=AUTH), 404)
    assert unknown["field"] == "keyName" and "no key named ghost" in unknown["message"]
    last = error(client.delete(f"{KEYS}/{FIRST_KEY_NAME}", headers=AUTH), 409)
    assert last["field"] == "keyName" and "last key" in last["message"]
    assert error(client.get("/api/v1/deployments/nope/api-keys", headers=AUTH), 404)["field"] == "name"
    assert data(deployed) == {FIRST_KEY_NAME: FIRST_KEY}


@pytest.mark.slow
def test_the_cluster_down_or_no_secret_is_a_plain_503_or_409(deployed):
    client, kube = deployed["client"], deployed["kube"]
    kube.delete_secret(deployed["ns"], deployed["secret"])  # a stack deployed before keys existed
    missing = client.get(KEYS, headers=AUTH)
    assert missing.status_code == 409 and "does not exist" in missing.get_json()["errors"][0]["message"]
    kube.stop()
    down = client.post(KEYS, headers=AUTH, json={"name": "ci"})
    assert down.status_code == 503
    assert "cannot reach the Kubernetes API" in down.get_json()["errors"][0]["message"]


def test_auth_none_and_a_deployment_not_deployed_say_so(make_app, kube):
    seed_keys(kube)
    engine = EndpointEngine(kube, endpoint_output(auth="none"))
    app = make_app(engine=engine)
    quiet_checks(app)
    client = app.test_client()
    create(client, "live")
    engine.live = None  # nothing deployed: the stack has no outputs
    early = client.get(KEYS, headers=AUTH)
    assert early.status_code == 409 and "not deployed yet" in early.get_json()["errors"][0]["message"]
    engine.live = {**kube.outputs(), "endpoint": endpoint_output(auth="none")}
    none = client.post(KEYS, headers=AUTH, json={"name": "ci"})
    assert none.status_code == 409 and "auth none" in none.get_json()["errors"][0]["message"]
    assert kube.secret_patches == []


def test_an_offline_plan_has_no_cluster_and_no_keys(client):
    create(client, "demo")
    refused = client.post("/api/v1/deployments/demo/api-keys", headers=AUTH, json={"name": "ci"})
    assert refused.status_code == 409
    assert "an offline plan has no cluster" in refused.get_json()["errors"][0]["message"]
    login(client)
    page = text_of(client.get("/deployments/demo"))
    assert 'id="api-keys-unavailable"' in page and "an offline plan has no cluster" in page
    assert 'id="api-key-create"' not in page


@pytest.mark.slow
def test_the_page_creates_a_key_shows_it_once_and_revokes_it(deployed, caplog):
    caplog.set_level(logging.DEBUG)
    app, client = deployed["app"], deployed["client"]
    login(client)
    page = text_of(client.get("/deployments/live"))
    assert 'id="api-keys"' in page and 'data-keys-url="/api/v1/deployments/live/api-keys"' in page
    made = client.post("/deployments/live/api-keys", data={"name": "web", "csrf_token": extract_csrf(page)})
    key = data(deployed)["web"]
    # The key is in the answer to the form itself: a redirect's next page could be served by another
    # server of a team, which never saw the key. Nothing keeps it for later, not even the session.
    shown = text_of(made)
    assert made.status_code == 200 and made.headers["Cache-Control"] == "no-store"
    assert f'value="{key}"' in shown and "shown only this once" in shown
    assert 'data-page-url="/deployments/live"' in shown  # where the script moves the address to
    assert key not in session_contents(app, client)
    again = text_of(client.get("/deployments/live"))
    assert key not in again and 'id="new-api-key"' not in again  # the page's own address: gone

    revoked = client.post("/deployments/live/api-keys/web/revoke", data={"csrf_token": extract_csrf(again)})
    assert revoked.status_code == 302
    assert "web" not in data(deployed)
    assert "API key web revoked" in text_of(client.get("/deployments/live"))
    no_csrf = client.post("/deployments/live/api-keys/default/revoke", data={})
    assert no_csrf.status_code == 403 and FIRST_KEY_NAME in data(deployed)

    home: Path = app.extensions["raypd"].settings.home
    for path in home.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
    assert key not in caplog.text
    for path in ("/api/v1/deployments/live", KEYS, "/api/v1/deployments/live/checks"):
        assert key not in client.get(path, headers=AUTH).get_data(as_text=True)


@pytest.mark.slow
def test_a_bad_name_on_the_page_is_a_message_not_a_key(deployed):
    client = deployed["client"]
    login(client)
    csrf = extract_csrf(text_of(client.get("/deployments/live")))
    client.post("/deployments/live/api-keys", data={"name": "Bad Name", "csrf_token": csrf})
    page = text_of(client.get("/deployments/live"))
    assert "is not a key name" in page and 'id="new-api-key"' not in page
    assert set(data(deployed)) == {FIRST_KEY_NAME}


@pytest.mark.slow
def test_connect_box_shows_the_endpoint_and_a_curl_that_reads_the_key_from_the_environment(deployed):
    client = deployed["client"]
    connect = client.get("/api/v1/deployments/live", headers=AUTH).get_json()["connect"]
    assert connect["externalUrl"] == endpoint_output()["url"] and connect["endpointScope"] == "vpc"
    words = shlex.split(connect["externalCurl"].replace("\\\n", " "))
    assert words[:3] == ["curl", "-s", endpoint_output()["url"] + "/chat/completions"]
    assert "Authorization: Bearer $RAYPD_API_KEY" in connect["externalCurl"]
    assert FIRST_KEY not in json.dumps(connect)
    login(client)
    page = text_of(client.get("/deployments/live"))
    assert 'id="external-url"' in page and "RAYPD_API_KEY" in page


def test_a_hostile_endpoint_url_stays_one_shell_word():
    from webui.deployments.views import external_connect

    url = "http://x.example/v1'; touch /tmp/pwned; echo '"
    found = external_connect({"endpoint": {"url": url, "auth": "apiKey"}}, '{"model": "m"}')
    words = shlex.split(found["externalCurl"].replace("\\\n", " "))
    assert words[2] == url + "/v1/chat/completions"
    assert external_connect({"endpoint": {"url": "https://e.example/v1/", "auth": "none"}}, "{}")[
        "externalUrl"] == "https://e.example/v1"
    assert "Authorization" not in external_connect({"endpoint": {"url": "https://e", "auth": "none"}}, "{}")[
        "externalCurl"]
    assert external_connect({"modelId": "m"}, "{}") == {}


@pytest.mark.slow
def test_the_verify_job_tests_the_endpoint_with_the_stacks_api_key_and_keeps_it_nowhere(make_app, kube, caplog):
    from tests.fakes.keyed_endpoint import KeyedEndpoint

    caplog.set_level(logging.DEBUG)
    secret = seed_keys(kube)
    ns = kube.spec.namespace
    with KeyedEndpoint(kube.spec.model.id, lambda: kube.secret_data(ns, secret)) as gateway:
        app = make_app(engine=EndpointEngine(kube, endpoint_output(url=f"{gateway.url}/v1")))  # the real verify
        client = app.test_client()
        create(client, "live")
        up = wait_for_job(client, client.post("/api/v1/deployments/live/up", headers=AUTH).get_json()["job"],
                          timeout=4 * PATIENCE_S)
        checks = {c["id"]: c for c in up["reports"]["verify"]["checks"]}
        assert checks["endpoint-external"]["status"] == "pass", checks["endpoint-external"]
        assert checks["endpoint-auth"]["status"] == "pass", checks["endpoint-auth"]
        assert [r["authorization"] for r in gateway.requests] == [True, False, True]
        events = client.get(f"/api/v1/jobs/{up['id']}/events", headers=AUTH).get_data(as_text=True)
    home: Path = app.extensions["raypd"].settings.home
    for path in home.rglob("*"):
        if path.is_file():
            assert FIRST_KEY.encode() not in path.read_bytes(), path
    assert FIRST_KEY not in events + caplog.text + json.dumps(up)


@pytest.mark.slow
def test_a_stack_deployed_before_keys_existed_has_no_box_to_load(fake_app, fake_engine):
    client = fake_app.test_client()
    quiet_checks(fake_app)
    create(client, "old")
    wait_for_job(client, client.post("/api/v1/deployments/old/up", headers=AUTH).get_json()["job"])
    login(client)
    page = text_of(client.get("/deployments/old"))  # its outputs: no endpoint (FakeEngine's)
    assert 'data-unavailable="1"' in page and "deployed before raypd exposed its endpoint" in page
