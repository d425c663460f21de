"""A new API key of the endpoint is in exactly one answer, the one that created it (the JSON API's
201, the page's answer to its create form), and nowhere else: not in any other answer of any GET
route the app has (every deployment, every job, its event stream), not in the answers that refuse a
key operation, an app log record, the audit log, a job record or event, the session cookie, or any
file under RAYPD_HOME (the SQLite database read as bytes); neither as it is nor base64-encoded, as
the Secret holds it. The search goes wherever a leak could land, not where the code hopes to stop
one (tests/web/test_secrets.py does the same for the HF token); the CLI's `create` is searched
the same way in tests/unit/test_api_keys.py.
"""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path
from typing import Any, Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient

from serve.benchmark.compare import PLOT_NAMES
from tests.fakes.kube_api import FakeKubeApi
from tests.leaks import file_holds, holds, logged
from tests.web.keys_support import deploy_live, session_contents
from tests.web.support import AUTH, extract_csrf, login, text_of, wait_for_job

KEYS = "/api/v1/deployments/live/api-keys"


@pytest.fixture
def kube() -> Iterator[FakeKubeApi]:
    with FakeKubeApi("healthy") as fake:
        yield fake


def every_get_answer(app: Flask, client: FlaskClient) -> list[tuple[str, str]]:
    """(path, body) of every GET route of the app, for every deployment, job and benchmark run it
    has (pages with the signed-in session, the API with the token). A route with an argument this
    function cannot fill in fails the test: a new route must be searched too."""
    deployments = [d["name"] for d in client.get("/api/v1/deployments", headers=AUTH).get_json()["deployments"]]
    jobs = [job["id"] for name in deployments
            for job in client.get(f"/api/v1/deployments/{name}", headers=AUTH).get_json()["jobs"]]
    runs = [run["id"] for run in client.get("/api/v1/benchmarks", headers=AUTH).get_json()["runs"]]
    # No benchmark run here (a run never reads the keys): those routes are read with a run that
    # does not exist, so their 404 answers are searched too.
    fill = {"name": deployments, "job_id": jobs, "run": runs or ["none"], "plot": list(PLOT_NAMES)}
    urls = app.url_map.bind("localhost")
    paths = [f"/deployments/{name}?job={job}" for name in deployments for job in jobs]
    for rule in app.url_map.iter_rules():
        if "GET" not in (rule.methods or ()) or rule.endpoint == "static":  # static: the repo's files
            continue
        unknown = set(rule.arguments) - set(fill)
        assert not unknown, f"GET {rule.rule}: say what to fill {sorted(unknown)} with, so it is searched"
        names = sorted(rule.arguments)
        for values in itertools.product(*(fill[name] for name in names)):
            paths.append(urls.build(rule.endpoint, dict(zip(names, values, strict=True))))
    answers = []
    for path in paths:
        response = client.get(path, headers=AUTH if path.startswith("/api/") else {})
        assert response.status_code < 500, (path, response.status_code)
        answers.append((f"GET {path}", response.get_data(as_text=True)))
    assert len(answers) > 30 and any(path.endswith("/events") for path, _ in answers)
    return answers


@pytest.mark.slow
def test_a_new_key_is_in_the_answer_that_created_it_and_nowhere_else(make_app, kube, caplog):
    caplog.set_level(logging.DEBUG)
    env = deploy_live(make_app, kube)
    app, client = env["app"], env["client"]
    login(client)
    answers: list[tuple[str, str]] = []

    def keep(label: str, response: Any, status: int) -> str:
        assert response.status_code == status, (label, response.get_data(as_text=True)[:400])
        body = response.get_data(as_text=True)
        answers.append((label, body))
        return body

    # Created through the JSON API, and through the deployment page's form.
    from_api = json.loads(keep("create (API)", client.post(KEYS, headers=AUTH, json={"name": "ci"}), 201))["key"]
    page = text_of(client.get("/deployments/live"))
    keep("create (page)", client.post("/deployments/live/api-keys",
                                      data={"name": "web", "csrf_token": extract_csrf(page)}), 200)
    secret = kube.secret_data(env["ns"], env["secret"])
    from_page = secret["web"]
    assert secret["ci"] == from_api and from_page.startswith("rpd_")

    # Refusals around them: a name taken (both ways), a bad one, an unknown and a last key.
    keep("create ci again (API)", client.post(KEYS, headers=AUTH, json={"name": "ci"}), 409)
    page = text_of(client.get("/deployments/live"))
    keep("create web again (page)", client.post("/deployments/live/api-keys",
                                                data={"name": "web", "csrf_token": extract_csrf(page)}), 302)
    keep("page after the refusal", client.get("/deployments/live"), 200)
    keep("bad name (API)", client.post(KEYS, headers=AUTH, json={"name": "Not OK"}), 400)
    keep("revoke ghost (API)", client.delete(f"{KEYS}/ghost", headers=AUTH), 404)
    # Jobs that run while the keys exist: their events, records and verify report are searched.
    for operation in ("refresh", "verify", "up"):
        job = client.post(f"/api/v1/deployments/live/{operation}", headers=AUTH).get_json()["job"]
        assert wait_for_job(client, job)["status"] == "succeeded", operation
    keep("revoke ci (API)", client.delete(f"{KEYS}/ci", headers=AUTH), 204)
    page = text_of(client.get("/deployments/live"))
    keep("revoke web (page)", client.post("/deployments/live/api-keys/web/revoke",
                                          data={"csrf_token": extract_csrf(page)}), 302)
    answers += every_get_answer(app, client)

    for key, where in ((from_api, "create (API)"), (from_page, "create (page)")):
        holders = [label for label, body in answers if holds(body, key)]
        assert holders == [where], f"the key created by {where} is in {holders}"
        assert dict(answers)[where].count(key) == 1  # shown once in it, too
        assert not holds(logged(caplog), key), "an app log record has the key"
        assert not holds(session_contents(app, client), key), "the session cookie has the key"
        store = app.extensions["raypd"].store
        assert not holds(json.dumps(store.audit_entries(), default=str), key), "an audit row has the key"
        for job in store.jobs_for("live"):
            record = json.dumps(job, default=str) + json.dumps(store.latest_events(job["id"]), default=str)
            assert not holds(record, key), f"job {job['id']} ({job['operation']}) has the key"
        home: Path = app.extensions["raypd"].settings.home
        files = [path for path in home.rglob("*") if path.is_file()]
        assert any(path.name == "raypd.db" for path in files)
        for path in files:
            assert not file_holds(path, key), f"{path} has the key"
    actions = [a["action"] for a in app.extensions["raypd"].store.audit_entries()]
    assert actions.count("api key created") == 2 and actions.count("api key revoked") == 2  # it did audit
