"""Hostile and wrongly typed input through the API and the form: 400 naming the field, never 500,
never stored; pages keep working for everyone afterwards."""

from __future__ import annotations

import pytest

from tests.web.support import AUTH, create, extract_csrf, form_defaults, login, text_of

BAD_TEXT = ["\ud800", "a\udfffb", "line\nbreak", "nul\x00", "esc\x1b[31m"]


@pytest.mark.parametrize("bad", BAD_TEXT)
@pytest.mark.parametrize("config,field", [
    (lambda bad: {"raypd:model": {"id": bad}}, "raypd:model.id"),
    (lambda bad: {"raypd:model": {"source": bad}}, "raypd:model.source"),
    (lambda bad: {"raypd:image": bad}, "raypd:image"),
    (lambda bad: {"raypd:namespace": bad}, "raypd:namespace"),
    (lambda bad: {"aws:region": bad}, "aws:region"),
    (lambda bad: {"raypd:hfToken": bad}, "raypd:hfToken"),
    (lambda bad: {"raypd:adminRoleArns": [bad]}, "raypd:adminRoleArns[0]"),
])
def test_text_that_is_not_text_is_400_and_never_stored(client, bad, config, field):
    response = client.post("/api/v1/deployments", json={"name": "evil", "config": config(bad)}, headers=AUTH)
    assert response.status_code == 400
    assert field in [error["field"] for error in response.get_json()["errors"]]
    assert client.get("/api/v1/deployments/evil", headers=AUTH).status_code == 404


@pytest.mark.parametrize("bad", BAD_TEXT)
def test_a_bad_name_is_400_too(client, bad):
    response = client.post("/api/v1/deployments", json={"name": bad, "config": {}}, headers=AUTH)
    assert response.status_code == 400 and response.get_json()["errors"][0]["field"] == "name"


@pytest.mark.parametrize("config,field", [
    ({"raypd:decode": {"replicas": "2"}}, "raypd:decode.replicas"),
    ({"raypd:decode": {"replicas": 2.0}}, "raypd:decode.replicas"),
    ({"raypd:decode": {"replicas": True}}, "raypd:decode.replicas"),
    ({"raypd:model": {"gpuMemoryUtilization": "0.5"}}, "raypd:model.gpuMemoryUtilization"),
    ({"raypd:model": {"enforceEager": "yes"}}, "raypd:model.enforceEager"),
    ({"raypd:model": {"enforceEager": 1}}, "raypd:model.enforceEager"),
    ({"raypd:systemNodes": {"count": "1"}}, "raypd:systemNodes.count"),
    ({"raypd:prefill": "{" * 5000}, "raypd:prefill"),
    ({"raypd:model": {"id": "a'$(touch x)"}}, "raypd:model.id"),
    ({"raypd:image": "repo/ray:tag;rm -rf /"}, "raypd:image"),
])
def test_wrong_types_and_grammar_are_400_not_converted(client, config, field):
    response = client.post("/api/v1/deployments", json={"name": "typed", "config": config}, headers=AUTH)
    assert response.status_code == 400, response.get_json()
    assert field in [error["field"] for error in response.get_json()["errors"]]


def test_right_types_still_pass_including_a_whole_number_for_a_fraction(client):
    created = create(client, "fine", {"raypd:model": {"gpuMemoryUtilization": 0.5, "enforceEager": False},
                                      "raypd:decode": {"replicas": 2},
                                      "raypd:image": "public.ecr.aws/deep-learning-containers/ray:serve-llm-cuda"})
    assert created["spec"]["raypd:decode"]["replicas"] == 2


def test_pages_still_work_for_everyone_after_hostile_attempts(app):
    browser = app.test_client()
    login(browser)
    for bad in BAD_TEXT:
        browser.post("/api/v1/deployments", json={"name": "x", "config": {"raypd:model": {"id": bad}}},
                     headers=AUTH)
    create(browser, "ok")
    assert browser.get("/").status_code == 200 and browser.get("/deployments/ok").status_code == 200
    page = text_of(browser.get("/deployments/new"))
    values = form_defaults(page) | {"name": "formbad", "csrf_token": extract_csrf(page),
                                    "raypd:model.id": "esc\x1b[31mx", "raypd:decode.replicas": "two"}
    answer = browser.post("/deployments/new", data=values)
    assert answer.status_code == 400
    assert "must be a whole number" in text_of(answer)  # the form converts its own text
    values["raypd:decode.replicas"] = "1"
    answer = browser.post("/deployments/new", data=values)
    assert answer.status_code == 400 and "not valid text" in text_of(answer)
    assert browser.get("/").status_code == 200
