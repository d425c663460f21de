"""Numbers in forms are ASCII digits only, and JSON bodies name each key once (issue 16 §2): Python's
int() reads "1_0" as 10 and "١٠" (Arabic-Indic) or "１０" (full-width) as 10, json.loads keeps the
last of two keys; the user sees one value and raypd would use another."""

from __future__ import annotations

import pytest

from tests.web.support import AUTH
from webui.api_models import BodyRefused
from webui.benchmarking import request_from_form
from webui.forms import form_to_config, parse_form_float, parse_form_int

NOT_ASCII_NUMBERS = ["1_0", "\u0661\u0660", "\uff11\uff10", "\u0967\u0966", "1e3", "0x10", "", "nan",
                     "9" * 5000, "$(echo 1)", "1;2", "\ud800", "1\x00"]
NOT_FLOATS = ["1_0.5", "\u0660.\u0665", "\uff10.\uff15", "nan", "inf", "-Infinity", "0x1p-2", "1e99999",
              "\ud800", ".", "$(echo 0.5)"]


@pytest.mark.parametrize("text", NOT_ASCII_NUMBERS)
def test_form_int_takes_ascii_digits_only(text: str) -> None:
    with pytest.raises(ValueError):
        parse_form_int(text)


@pytest.mark.parametrize("text", NOT_FLOATS)
def test_form_float_takes_ascii_decimals_only(text: str) -> None:
    with pytest.raises(ValueError):
        parse_form_float(text)


def test_plain_numbers_still_read() -> None:
    assert parse_form_int(" 12 ") == 12 and parse_form_int("-3") == -3
    assert parse_form_float("0.9") == 0.9 and parse_form_float(".5") == 0.5 and parse_form_float("2") == 2.0
    assert parse_form_float("1.5e2") == 150.0


@pytest.mark.parametrize("text", ["1_0", "\u0661\u0660", "\uff11\uff10"])
def test_the_deployment_form_names_the_field(text: str) -> None:
    _, config, errors = form_to_config({"name": "x", "raypd:decode.replicas": text,
                                        "raypd:model.gpuMemoryUtilization": "0\uff0e9"})
    fields = {error.field: error.message for error in errors}
    assert "digits 0-9" in fields["raypd:decode.replicas"]
    assert "raypd:model.gpuMemoryUtilization" in fields
    assert "replicas" not in config.get("raypd:decode", {})


@pytest.mark.parametrize("field, text", [("requests", "1_0"), ("requests", "\u0661\u0660"),
                                         ("rates", "1, \uff12"), ("rates", "1_0"), ("timeoutS", "nan")])
def test_the_benchmark_form_names_the_field(field: str, text: str) -> None:
    form = {"rates": "1", "requests": "10", field: text}
    with pytest.raises(BodyRefused) as caught:
        request_from_form(form)
    assert [error.field for error in caught.value.errors] == [field]


@pytest.mark.parametrize("body, field", [
    ('{"name": "a", "name": "b", "config": {}}', "name"),
    ('{"name": "dup", "config": {"raypd:mode": "colocated", "raypd:mode": "disaggregated"}}', "config.raypd:mode"),
    ('{"name": "dup", "config": {"raypd:model": {"id": "a", "id": "$(rm -rf ~)"}}}', "config.raypd:model.id"),
    ('{"name": "dup", "config": {"raypd:model": {"id": "\\ud800", "id": "b"}}}', "config.raypd:model.id"),
])
def test_a_key_given_twice_is_400_naming_it_and_nothing_is_created(client, body: str, field: str) -> None:
    response = client.post("/api/v1/deployments", data=body, content_type="application/json", headers=AUTH)
    assert response.status_code == 400, response.get_data(as_text=True)
    assert [error["field"] for error in response.get_json()["errors"]] == [field]
    for name in ("a", "b", "dup"):
        assert client.get(f"/api/v1/deployments/{name}", headers=AUTH).status_code == 404


@pytest.mark.parametrize("body", ['{"name": "n", "config": {"raypd:decode": {"replicas": ' + "9" * 5000 + "}}}",
                                  '{"name": "n", "config": ' + "[" * 5000 + "}",
                                  '{"name": "n", "config": {"x": NaN}}'], ids=["5000-digits", "deep", "nan"])
def test_hostile_json_bodies_are_400_not_500(client, body: str) -> None:
    response = client.post("/api/v1/deployments", data=body, content_type="application/json", headers=AUTH)
    assert response.status_code == 400
    assert response.get_json()["errors"][0]["field"] == "body"


def test_patch_refuses_a_duplicate_key_and_changes_nothing(client) -> None:
    created = client.post("/api/v1/deployments", json={"name": "keep", "config": {}}, headers=AUTH)
    assert created.status_code == 201, created.get_data(as_text=True)
    response = client.patch("/api/v1/deployments/keep", content_type="application/json", headers=AUTH,
                            data='{"config": {"raypd:mode": "colocated", "raypd:mode": "disaggregated"}}')
    assert response.status_code == 400 and response.get_json()["errors"][0]["field"] == "config.raypd:mode"
    assert client.get("/api/v1/deployments/keep", headers=AUTH).get_json()["spec"]["raypd:mode"] == "disaggregated"


# An object or an array written as JSON text is a string in the JSON API (issue 29 §3): the lenient
# reading of Pulumi config, which hands objects to programs as JSON text, is not the API's.
JSON_TEXT = [("raypd:model", '{"id": "m"}'), ("raypd:decode", '{"replicas": 2}'),
             ("raypd:endpoint", '{"scope": "cluster"}'), ("raypd:adminRoleArns", "[]")]


@pytest.mark.parametrize("key, text", JSON_TEXT)
def test_json_text_is_not_an_object_on_create(client, key: str, text: str) -> None:
    response = client.post("/api/v1/deployments", json={"name": "text", "config": {key: text}}, headers=AUTH)
    assert response.status_code == 400, response.get_data(as_text=True)
    assert [error["field"] for error in response.get_json()["errors"]] == [key]
    assert client.get("/api/v1/deployments/text", headers=AUTH).status_code == 404


@pytest.mark.parametrize("key, text", JSON_TEXT)
def test_json_text_is_not_an_object_in_a_patch_and_changes_nothing(client, key: str, text: str) -> None:
    assert client.post("/api/v1/deployments", json={"name": "text", "config": {}}, headers=AUTH).status_code == 201
    before = client.get("/api/v1/deployments/text", headers=AUTH).get_json()["spec"]
    response = client.patch("/api/v1/deployments/text", json={"config": {key: text}}, headers=AUTH)
    assert response.status_code == 400, response.get_data(as_text=True)
    assert [error["field"] for error in response.get_json()["errors"]] == [key]
    assert client.get("/api/v1/deployments/text", headers=AUTH).get_json()["spec"] == before
