"""Server-rendered pages through the Flask test client: login, CSRF, form, preview, launch, teardown."""

from __future__ import annotations

import re

import pytest

from tests.patience import PATIENCE_S
from tests.web.support import (
    AUTH,
    TOKEN,
    create,
    extract_csrf,
    field_error,
    form_defaults,
    login,
    text_of,
    wait_for_job,
)
from webui.engines.base import OFFLINE_NOTICE

PAGES = ["/", "/deployments/new", "/deployments/demo"]


@pytest.fixture
def browser(client):
    login(client)
    return client


# ---- login and access ----

@pytest.mark.parametrize("path", PAGES)
def test_pages_redirect_to_login_without_a_session(client, path):
    response = client.get(path)
    assert response.status_code == 302
    assert "/login" in response.headers["Location"]


def test_login_with_a_wrong_token_is_refused(client):
    page = client.get("/login")
    response = client.post("/login", data={"token": "wrong-token-value", "csrf_token": extract_csrf(text_of(page))})
    assert response.status_code == 401
    assert "not valid" in text_of(response)
    assert client.get("/").status_code == 302


def test_login_sets_an_httponly_samesite_strict_cookie(client):
    page = client.get("/login")
    response = client.post("/login", data={"token": TOKEN, "csrf_token": extract_csrf(text_of(page)), "next": "/"})
    assert response.status_code == 302
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    assert client.get("/").status_code == 200


def test_login_without_csrf_token_is_refused(client):
    client.get("/login")
    response = client.post("/login", data={"token": TOKEN})
    assert response.status_code == 400
    assert client.get("/").status_code == 302


def test_login_never_redirects_off_site(client):
    page = client.get("/login")
    response = client.post("/login", data={
        "token": TOKEN, "csrf_token": extract_csrf(text_of(page)), "next": "https://evil.example/",
    })
    assert response.headers["Location"] == "/"


@pytest.mark.parametrize("target", ["/\\evil.example/", "/\t/evil.example/", "/\n/evil.example", "\\\\evil.example"])
def test_login_refuses_paths_browsers_would_read_as_another_site(client, target):
    page = client.get("/login")
    response = client.post("/login", data={
        "token": TOKEN, "csrf_token": extract_csrf(text_of(page)), "next": target,
    })
    assert response.status_code == 302
    assert response.headers["Location"] == "/"


def test_login_keeps_a_same_site_next_path(client):
    page = client.get("/login")
    response = client.post("/login", data={
        "token": TOKEN, "csrf_token": extract_csrf(text_of(page)), "next": "/deployments/new?x=1",
    })
    assert response.headers["Location"] == "/deployments/new?x=1"


def test_repeated_wrong_logins_are_throttled_for_that_address_only(app):
    guesser = app.test_client()
    guesser.environ_base["REMOTE_ADDR"] = "10.9.9.9"
    csrf = extract_csrf(text_of(guesser.get("/login")))
    codes = [guesser.post("/login", data={"token": f"guess-{i}", "csrf_token": csrf}).status_code
             for i in range(12)]
    assert codes[0] == 401 and codes[-1] == 429
    assert guesser.post("/login", data={"token": TOKEN, "csrf_token": csrf}).status_code == 429
    colleague = app.test_client()
    colleague.environ_base["REMOTE_ADDR"] = "10.1.1.1"
    csrf = extract_csrf(text_of(colleague.get("/login")))
    assert colleague.post("/login", data={"token": TOKEN, "csrf_token": csrf}).status_code == 302


def test_wrong_bearer_tokens_are_throttled_per_address_too(app):
    guesser, colleague = app.test_client(), app.test_client()
    guesser.environ_base["REMOTE_ADDR"] = "10.9.9.8"
    colleague.environ_base["REMOTE_ADDR"] = "10.1.1.2"
    codes = [guesser.get("/api/v1/deployments", headers={"Authorization": f"Bearer wrong-{i}"}).status_code
             for i in range(11)]
    assert codes[0] == 401 and codes[-1] == 429
    assert guesser.get("/api/v1/deployments", headers=AUTH).status_code == 429
    assert colleague.get("/api/v1/deployments", headers=AUTH).status_code == 200


def test_forms_without_csrf_token_are_refused(browser):
    create(browser, "demo")
    for path in ("/deployments/new", "/deployments/demo/up", "/deployments/demo/destroy", "/logout"):
        response = browser.post(path, data={"confirm": "demo"})
        assert response.status_code == 403, path  # as the API answers a session without X-CSRF-Token
        assert "expired" in text_of(response)
    assert browser.get("/api/v1/deployments/demo", headers=AUTH).get_json()["jobs"] == []


def test_logout_ends_the_session(browser):
    csrf = extract_csrf(text_of(browser.get("/")))
    assert browser.post("/logout", data={"csrf_token": csrf}).status_code == 302
    assert browser.get("/").status_code == 302


def test_a_cookie_saved_before_logout_is_worthless_after_it(app):
    browser = app.test_client()
    login(browser)
    saved = browser.get_cookie("raypd_session").value
    csrf = extract_csrf(text_of(browser.get("/")))
    assert browser.post("/logout", data={"csrf_token": csrf}).status_code == 302
    thief = app.test_client()
    thief.set_cookie("raypd_session", saved)
    assert thief.get("/").status_code == 302  # to the login page
    assert thief.get("/api/v1/deployments").status_code == 401


def test_browser_session_may_read_the_api_but_not_change_it_without_csrf(browser):
    assert browser.get("/api/v1/deployments").status_code == 200
    response = browser.post("/api/v1/deployments", json={"name": "x"})
    assert response.status_code == 403
    csrf = extract_csrf(text_of(browser.get("/")))
    assert browser.post("/api/v1/deployments", json={"name": "x"}, headers={"X-CSRF-Token": csrf}).status_code == 201


def test_pages_carry_security_headers_and_no_inline_script(browser):
    response = browser.get("/deployments/new")
    csp = response.headers["Content-Security-Policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    page = text_of(response)
    assert re.search(r"<script(?![^>]*\ssrc=)", page) is None
    assert " style=" not in page and "<style" not in page


# ---- list ----

def test_list_page_shows_each_deployment_with_engine_cost_and_status(browser):
    create(browser, "alpha")
    create(browser, "beta", {"raypd:mode": "colocated"})
    page = text_of(browser.get("/"))
    assert "alpha" in page and "beta" in page
    assert "offline" in page
    assert "$4.38/h" in page  # the reference: 2 x g6.8xlarge + m7i.xlarge + EKS + NAT
    assert "colocated" in page and "disaggregated" in page
    assert "created" in page
    assert "Pulumi CLI" in page or "nothing is created in AWS" in page  # the engine banner


def test_empty_list_invites_a_first_deployment(browser):
    page = text_of(browser.get("/"))
    assert "No deployments yet" in page


# ---- new deployment form ----

def test_new_form_starts_at_the_reference_defaults(browser):
    page = text_of(browser.get("/deployments/new"))
    values = form_defaults(page)
    assert values["aws:region"] == "us-east-2"
    assert values["raypd:prefill.instanceType"] == "g6.8xlarge"
    assert values["raypd:model.source"] == "Qwen/Qwen3.5-9B"
    assert values["raypd:kvTransfer.backend"] == "LIBFABRIC"
    assert values["raypd:model.enforceEager"] == "on"
    assert 'type="password"' in page and 'name="raypd:hfToken"' in page


def test_bad_value_shows_the_error_next_to_its_field(browser):
    page = text_of(browser.get("/deployments/new"))
    values = form_defaults(page) | {"name": "demo", "raypd:prefill.tensorParallelSize": "2",
                                    "raypd:decode.replicas": "two", "csrf_token": extract_csrf(page),
                                    "action": "preview"}
    response = browser.post("/deployments/new", data=values)
    assert response.status_code == 400
    body = text_of(response)
    assert "g6.8xlarge has 1" in field_error(body, "f-raypd-prefill-tensorParallelSize")
    assert field_error(body, "f-raypd-decode-replicas") == "must be a whole number (digits 0-9)"
    assert 'value="2"' in body  # what was typed stays in the form
    assert browser.get("/api/v1/deployments").get_json()["deployments"] == []


def test_bad_name_is_reported_on_the_name_field(browser):
    page = text_of(browser.get("/deployments/new"))
    values = form_defaults(page) | {"name": "Bad Name!", "csrf_token": extract_csrf(page)}
    body = text_of(browser.post("/deployments/new", data=values))
    assert "DNS-1123" in field_error(body, "f-name")


def test_preview_shows_node_groups_gpus_yaml_cost_and_architecture(browser):
    page = text_of(browser.get("/deployments/new"))
    values = form_defaults(page) | {
        "name": "hetero", "raypd:prefill.instanceType": "p5.48xlarge",
        "raypd:prefill.tensorParallelSize": "8", "raypd:decode.instanceType": "g6e.48xlarge",
        "raypd:decode.tensorParallelSize": "8", "raypd:kvTransfer.backend": "UCX",
        "csrf_token": extract_csrf(page), "action": "preview",
    }
    response = browser.post("/deployments/new", data=values)
    assert response.status_code == 200, field_error(text_of(response), "f-name")
    body = text_of(response)
    assert "Preview: hetero" in body
    assert "p5.48xlarge" in body and "g6e.48xlarge" in body
    assert "kind: RayService" in body and "apiVersion: ray.io/v1" in body
    assert "<svg" in body and "KV cache" in body and "NIXL (UCX" in body
    assert "UCX moves the KV cache at TCP speed" in body  # the spec's warning
    assert OFFLINE_NOTICE in body
    assert re.search(r"\$\d[\d,]*\.\d\d/h", body)
    assert browser.get("/api/v1/deployments").get_json()["deployments"] == []  # nothing created yet


def test_colocated_preview_draws_no_kv_path(browser):
    page = text_of(browser.get("/deployments/new"))
    values = form_defaults(page) | {"name": "colo", "raypd:mode": "colocated",
                                    "csrf_token": extract_csrf(page)}
    body = text_of(browser.post("/deployments/new", data=values))
    diagram = body[body.index("<svg"): body.index("</svg>")]  # (the preflight may say "KV cache")
    assert "Colocated" in diagram and "KV cache" not in diagram


def test_edit_from_preview_keeps_the_values(browser):
    page = text_of(browser.get("/deployments/new"))
    values = form_defaults(page) | {"name": "keep", "raypd:model.maxModelLen": "8192",
                                    "csrf_token": extract_csrf(page), "action": "edit"}
    body = text_of(browser.post("/deployments/new", data=values))
    assert 'value="8192"' in body and 'value="keep"' in body


def test_name_taken_is_reported_before_launch(browser):
    create(browser, "taken")
    page = text_of(browser.get("/deployments/new"))
    values = form_defaults(page) | {"name": "taken", "csrf_token": extract_csrf(page)}
    body = text_of(browser.post("/deployments/new", data=values))
    assert "already exists" in field_error(body, "f-name")


# ---- launch, deployment page, teardown ----

@pytest.mark.slow
def test_launch_then_watch_then_tear_down(browser):
    page = text_of(browser.get("/deployments/new"))
    values = form_defaults(page) | {"name": "web", "csrf_token": extract_csrf(page), "action": "launch"}
    response = browser.post("/deployments/new", data=values)
    assert response.status_code == 302
    location = response.headers["Location"]
    assert location.startswith("/deployments/web?job=")
    job_id = location.split("job=")[1]
    running = text_of(browser.get(location))
    assert 'id="job-progress"' in running and f'data-job-id="{job_id}"' in running
    assert wait_for_job(browser, job_id, headers={})["status"] == "succeeded"

    done = text_of(browser.get("/deployments/web"))
    assert "planned (offline)" in done
    assert OFFLINE_NOTICE in done
    assert "100%" in done
    assert "kubectl -n inference port-forward svc/ray-llm-serve-svc 8000:8000" in done
    assert "/v1/chat/completions" in done and '"model": "qwen3.5-9b"' in done
    assert "kind: RayService" in done
    assert "[secret]" in done  # the kubeconfig output, masked
    assert "kubernetes:ray.io/v1:RayService" in done

    csrf = extract_csrf(done)
    wrong = browser.post("/deployments/web/destroy", data={"csrf_token": csrf, "confirm": "we"})
    assert wrong.status_code == 302
    assert "exactly" in text_of(browser.get(wrong.headers["Location"]))
    assert browser.get("/api/v1/deployments/web").status_code == 200

    teardown = browser.post("/deployments/web/destroy", data={"csrf_token": csrf, "confirm": "web"})
    destroy_job = teardown.headers["Location"].split("job=")[1]
    assert wait_for_job(browser, destroy_job, headers={})["status"] == "succeeded"
    assert browser.get("/deployments/web").status_code == 404
    after = browser.get(teardown.headers["Location"])  # the page the tear-down redirected to
    assert after.status_code == 302 and after.headers["Location"] == "/?removed=web"
    assert "was torn down" in text_of(browser.get("/?removed=web"))
    assert 'data-name="web"' not in text_of(browser.get("/"))


@pytest.mark.slow
def test_operation_buttons_start_jobs_and_a_second_one_is_refused(fake_app, fake_engine):
    client = fake_app.test_client()
    login(client)
    create(client, "ops")
    fake_engine.gate.clear()
    csrf = extract_csrf(text_of(client.get("/deployments/ops")))
    first = client.post("/deployments/ops/up", data={"csrf_token": csrf})
    assert "job=" in first.headers["Location"]
    assert fake_engine.started.wait(PATIENCE_S)
    second = client.post("/deployments/ops/refresh", data={"csrf_token": csrf})
    page = text_of(client.get(second.headers["Location"]))
    assert "is busy" in page
    assert re.search(r'id="op-refresh"[^>]*disabled', page)
    fake_engine.gate.set()
    wait_for_job(client, first.headers["Location"].split("job=")[1], headers={})
    detail = text_of(client.get("/deployments/ops"))
    assert "deployed" in detail and "real" in detail
    assert OFFLINE_NOTICE not in detail


def test_cancel_button_cancels_the_running_job(fake_app, fake_engine):
    client = fake_app.test_client()
    login(client)
    create(client, "cx")
    fake_engine.gate.clear()
    csrf = extract_csrf(text_of(client.get("/deployments/cx")))
    job_id = client.post("/deployments/cx/up", data={"csrf_token": csrf}).headers["Location"].split("job=")[1]
    assert fake_engine.started.wait(PATIENCE_S)
    assert 'id="cancel-job"' in text_of(client.get(f"/deployments/cx?job={job_id}"))
    client.post(f"/jobs/{job_id}/cancel", data={"csrf_token": csrf})
    assert wait_for_job(client, job_id, headers={})["status"] == "cancelled"


def test_unknown_deployment_page_is_a_friendly_404(browser):
    response = browser.get("/deployments/nothing-here")
    assert response.status_code == 404
    body = text_of(response)
    assert "nothing-here" in body and "Traceback" not in body


def test_huge_form_post_is_refused(browser):
    csrf = extract_csrf(text_of(browser.get("/deployments/new")))
    response = browser.post("/deployments/new", data={"csrf_token": csrf, "name": "x" * (200 * 1024)})
    assert response.status_code == 413


def test_a_stored_config_that_no_longer_validates_still_shows_and_tears_down(app, browser):
    from components.config.spec import DeploymentSpec
    from webui.summary import summarize

    spec = DeploymentSpec.from_config({}, "legacy")
    config = spec.public_config() | {"raypd:prefill": {"instanceType": "g4dn.12xlarge"}}  # not in the catalogue
    app.extensions["raypd"].store.create_deployment("legacy", "offline", config, summarize(spec))
    page = browser.get("/deployments/legacy")
    assert page.status_code == 200
    body = text_of(page)
    assert "no longer validates" in body and "raypd:prefill.instanceType" in body
    api = browser.get("/api/v1/deployments/legacy", headers=AUTH).get_json()
    assert api["connect"] is None and any("no longer validates" in w for w in api["warnings"])
    response = browser.post("/deployments/legacy/destroy",
                            data={"csrf_token": extract_csrf(body), "confirm": "legacy"})
    job_id = response.headers["Location"].split("job=")[1]
    assert wait_for_job(browser, job_id, headers={})["status"] == "succeeded"
    assert browser.get("/api/v1/deployments/legacy", headers=AUTH).status_code == 404


def test_a_page_loaded_while_a_finished_tear_down_records_its_end_goes_to_the_list(app):
    browser = app.test_client()
    login(browser)
    store = app.extensions["raypd"].store
    create(browser, "quick")
    job = store.create_job("quick", "destroy", "offline", "t", "destroying")
    store.set_job_running(job)
    store.delete_deployment("quick")  # done: the record goes before the job's end is written
    response = browser.get(f"/deployments/quick?job={job}")
    assert response.status_code == 302 and response.headers["Location"] == "/?removed=quick"


def test_admin_roles_from_the_form_become_a_list_and_a_bad_one_is_named_next_to_the_field(browser):
    page = text_of(browser.get("/deployments/new"))
    good = "arn:aws:iam::123456789012:role/raypd-web, arn:aws:iam::123456789012:role/ci"
    values = form_defaults(page) | {"name": "admins", "csrf_token": extract_csrf(page), "action": "launch",
                                    "force": "1", "raypd:adminRoleArns": good}
    bad = browser.post("/deployments/new", data=values | {"raypd:adminRoleArns": "arn:aws:iam::1:user/bob"})
    assert bad.status_code == 400
    assert field_error(text_of(bad), "f-raypd-adminRoleArns").startswith("raypd:adminRoleArns[0]")
    assert browser.post("/deployments/new", data=values).status_code == 302
    spec = browser.get("/api/v1/deployments/admins").get_json()["spec"]
    assert spec["raypd:adminRoleArns"] == ["arn:aws:iam::123456789012:role/raypd-web",
                                          "arn:aws:iam::123456789012:role/ci"]


@pytest.mark.slow
def test_the_deployment_page_plans_the_deployment_once_per_request(browser, monkeypatch):
    """The detail's connect commands, the deployed summary, the diagram and the RayService YAML all
    come from one plan (webui/deployments/reads.py get_with_plan): a second plan_deployment is a
    regression. Counted wherever the function is bound, so a new `from ... import` is counted too."""
    import sys

    from components.plan import topology

    original = topology.plan_deployment
    calls: list[str] = []

    def counted(spec):
        calls.append(spec.stack)
        return original(spec)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith(("webui", "components")) and \
                getattr(module, "plan_deployment", None) is original:
            monkeypatch.setattr(module, "plan_deployment", counted)
    create(browser, "once")
    for deployed in (False, True):
        if deployed:  # an offline up: the page now draws the planned (deployed) settings
            job = browser.post("/api/v1/deployments/once/up", headers=AUTH).get_json()["job"]
            assert wait_for_job(browser, job)["status"] == "succeeded"
        calls.clear()
        page = browser.get("/deployments/once")
        assert page.status_code == 200 and "kind: RayService" in page.get_data(as_text=True)
        assert calls == ["once"], f"planned {len(calls)} times (deployed: {deployed})"
