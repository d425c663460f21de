"""The deployment forms edit each phase's autoscaling block (issue 30 §3): five fields per phase in an
"Autoscaling" group, three levels deep (`raypd:decode.autoscaling.minReplicas`). Empty = no block on
a new deployment; on the change form, emptying a phase's group turns its autoscaling off (a null in
the merge patch), and filling any field sends the whole block, cleared keys as null. The preview of a
new bound says "in place"; so does turning one phase's block on or off while another phase
autoscales; turning off the last one says a new Ray cluster starts (components.changes.rayservice)."""

from __future__ import annotations

from typing import Any

import pytest

from components.config.errors import FieldError
from components.config.spec import DeploymentSpec
from tests.web.support import AUTH, extract_csrf, field_error, form_defaults, login, text_of, wait_for_job
from webui import forms
from webui.merge_patch import merge_patch

PHASES = ("prefill", "decode", "colocated")
KEYS = ("minReplicas", "maxReplicas", "targetOngoingRequests", "upscaleDelaySeconds", "downscaleDelaySeconds")
BLOCK = {"minReplicas": 1, "maxReplicas": 4, "targetOngoingRequests": 8, "upscaleDelaySeconds": 30,
         "downscaleDelaySeconds": 1200}
SCALED = {"raypd:decode": {"replicas": 1, "autoscaling": BLOCK}}


def _typed(phase: str, block: dict[str, Any]) -> dict[str, str]:
    """A phase's autoscaling group as a browser submits it (every field, "" where left empty)."""
    return {f"raypd:{phase}.autoscaling.{key}": str(block.get(key, "")) for key in KEYS}


# ---- pure: fields, config, patch ----

@pytest.mark.parametrize("phase", PHASES)
def test_each_phase_has_the_five_autoscaling_fields_in_one_group_of_its_section(phase):
    fields = [forms.FIELDS_BY_KEY[f"raypd:{phase}.autoscaling.{key}"] for key in KEYS]
    assert {(f.section, f.group, f.block) for f in fields} == {(phase, "autoscaling", f"raypd:{phase}.autoscaling")}
    assert [f.kind for f in fields] == ["int", "int", "float", "float", "float"]
    assert all(f.default == "" and f.optional for f in fields)  # empty: no autoscaling
    assert f"raypd:{phase}.autoscaling" not in forms.FIELDS_BY_KEY  # the block itself is no field


def test_a_new_deployment_form_with_empty_groups_has_no_block_and_a_filled_group_makes_one():
    _, config, errors = forms.form_to_config(forms.default_values())
    assert errors == [] and "autoscaling" not in config["raypd:decode"]
    assert "autoscaling" not in config["raypd:prefill"]
    _, config, errors = forms.form_to_config(forms.default_values() | _typed("decode", BLOCK))
    assert errors == [] and config["raypd:decode"]["autoscaling"] == BLOCK
    assert DeploymentSpec.from_config(config, "f").decode.max_replicas == 4


def test_the_change_form_is_filled_with_the_deployed_block():
    values = forms.values_from_config("s", DeploymentSpec.from_config(SCALED, "s").public_config())
    assert {key: values[f"raypd:decode.autoscaling.{key}"] for key in KEYS} == {
        "minReplicas": "1", "maxReplicas": "4", "targetOngoingRequests": "8", "upscaleDelaySeconds": "30",
        "downscaleDelaySeconds": "1200"}
    assert values["raypd:prefill.autoscaling.maxReplicas"] == ""  # a fixed count: the group is empty


def _patched(stored: dict[str, Any], **typed: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the change form's patch, the stored config after it) for the stored config's form with
    `typed` (field key -> text) changed."""
    values = forms.values_from_config("s", stored) | {key.replace("__", "."): text for key, text in typed.items()}
    patch, errors = forms.form_to_patch(values)
    assert errors == []
    return patch, merge_patch(stored, patch)


def test_clearing_a_phases_group_sends_autoscaling_null_and_turns_it_off():
    stored = DeploymentSpec.from_config(SCALED, "s").public_config()
    cleared = {f"raypd:decode__autoscaling__{key}": "" for key in KEYS}
    patch, after = _patched(stored, **cleared)
    assert "autoscaling" in patch["raypd:decode"] and patch["raypd:decode"]["autoscaling"] is None
    assert "autoscaling" not in after["raypd:decode"]
    assert DeploymentSpec.from_config(after, "s").decode.autoscaling is None


def test_a_filled_group_sends_the_whole_block_with_a_cleared_key_as_null():
    stored = DeploymentSpec.from_config(SCALED, "s").public_config()
    patch, after = _patched(stored, **{"raypd:decode__autoscaling__maxReplicas": "6",
                                       "raypd:decode__autoscaling__downscaleDelaySeconds": " "})
    assert patch["raypd:decode"]["autoscaling"] == {
        "minReplicas": 1, "maxReplicas": 6, "targetOngoingRequests": 8.0, "upscaleDelaySeconds": 30.0,
        "downscaleDelaySeconds": None}
    assert after["raypd:decode"]["autoscaling"] == {
        "minReplicas": 1, "maxReplicas": 6, "targetOngoingRequests": 8.0, "upscaleDelaySeconds": 30.0}
    assert patch["raypd:prefill"]["autoscaling"] is None  # its group is empty: stays off


def test_a_block_set_in_the_other_mode_is_left_alone_by_the_change_form():
    stored = DeploymentSpec.from_config({**SCALED, "raypd:colocated": {"autoscaling": BLOCK | {"maxReplicas": 3}}},
                                        "s").public_config()
    patch, after = _patched(stored)
    assert "raypd:colocated" not in patch  # the form hides the colocated section in this mode
    assert after["raypd:colocated"]["autoscaling"]["maxReplicas"] == 3
    assert after["raypd:decode"]["autoscaling"] == stored["raypd:decode"]["autoscaling"]


def test_a_non_number_in_a_group_is_an_error_naming_its_field():
    _, _, errors = forms.form_to_config(forms.default_values() | _typed("decode", BLOCK | {"minReplicas": "one"}))
    assert errors == [FieldError("raypd:decode.autoscaling.minReplicas", "must be a whole number (digits 0-9)")]


def test_the_specs_autoscaling_errors_land_next_to_their_fields():
    by_field, general = forms.split_errors([
        FieldError("raypd:decode.autoscaling.minReplicas", "minReplicas 3 is above maxReplicas 2"),
        FieldError("raypd:prefill.autoscaling.targetOngoingRequests", "is required")])
    assert general == [] and by_field == {
        "raypd:decode.autoscaling.minReplicas": "minReplicas 3 is above maxReplicas 2",
        "raypd:prefill.autoscaling.targetOngoingRequests": "is required"}


# ---- pages ----

def test_the_new_form_draws_an_autoscaling_fieldset_per_phase_linking_to_the_scaling_doc(client):
    login(client)
    page = text_of(client.get("/deployments/new"))
    for phase in PHASES:
        start = page.index(f'id="{phase}-autoscaling"')
        group = page[start:page.index("</fieldset>", start)]
        assert "<legend>Autoscaling</legend>" in group
        assert '<a href="/docs/scaling.md">docs/scaling.md</a>' in group
        for key in KEYS:
            assert f'name="raypd:{phase}.autoscaling.{key}" value=""' in group
    # Inside the phase's own section, so the mode switch hides it with its phase.
    decode = page[page.index('section-decode" data-mode="disaggregated"'):]
    assert decode.index('id="decode-autoscaling"') < decode.index("section-colocated")


def test_the_new_form_shows_the_specs_errors_next_to_the_autoscaling_fields(client):
    login(client)
    page = text_of(client.get("/deployments/new"))
    values = form_defaults(page) | {"name": "bad", "csrf_token": extract_csrf(page)} | _typed(
        "decode", {"minReplicas": "3", "maxReplicas": "2", "targetOngoingRequests": "8"}) | _typed(
        "prefill", {"maxReplicas": "2", "targetOngoingRequests": "x"})
    body = text_of(client.post("/deployments/new", data=values))
    assert "minReplicas 3 is above maxReplicas 2" in field_error(body, "f-raypd-decode-autoscaling-minReplicas")
    assert field_error(body, "f-raypd-prefill-autoscaling-targetOngoingRequests") == "must be a number such as 0.9"
    # Sent back as typed, so the user fixes rather than retypes.
    assert 'name="raypd:decode.autoscaling.minReplicas" value="3"' in body


def _save_change(browser, name: str, changed: dict[str, str]) -> dict[str, Any]:
    """Post the change form as shown with `changed`, and wait for the preview it starts."""
    page = text_of(browser.get(f"/deployments/{name}/change"))
    values = form_defaults(page) | {"csrf_token": extract_csrf(page)} | changed
    values.pop("name", None)
    saved = browser.post(f"/deployments/{name}/change", data=values)
    assert saved.status_code == 302, text_of(saved)[:800]
    return wait_for_job(browser, saved.headers["Location"].split("job=")[1], headers={})


def _said(preview: dict[str, Any]) -> str:
    """What a preview says the change does to serving (the assessment's effects)."""
    return " ".join(effect["detail"] for effect in preview["summary"]["assessment"]["effects"])


@pytest.mark.slow
def test_create_with_autoscaling_change_a_bound_turn_phases_on_and_off(app):
    browser = app.test_client()
    login(browser)
    page = text_of(browser.get("/deployments/new"))
    values = form_defaults(page) | {"name": "scaled", "csrf_token": extract_csrf(page), "action": "launch",
                                    "force": "1"} | _typed("decode", BLOCK)
    launched = browser.post("/deployments/new", data=values)
    assert launched.status_code == 302, text_of(launched)[:800]
    assert wait_for_job(browser, launched.headers["Location"].split("job=")[1], headers={})["status"] == "succeeded"
    spec = browser.get("/api/v1/deployments/scaled", headers=AUTH).get_json()["spec"]
    assert spec["raypd:decode"]["autoscaling"] == BLOCK and "autoscaling" not in spec["raypd:prefill"]

    # A new bound: Serve reconfigures the deployment, no engine restarts.
    page = text_of(browser.get("/deployments/scaled/change"))
    assert 'name="raypd:decode.autoscaling.maxReplicas" value="4"' in page
    preview = _save_change(browser, "scaled", {"raypd:decode.autoscaling.maxReplicas": "6"})
    assert preview["status"] == "succeeded"
    assessment = preview["summary"]["assessment"]
    assert assessment["kind"] == "in place" and assessment["chosen"]["downtimeSeconds"] == 0
    assert "decode: maxReplicas 4 -> 6: in place, no engine restarts" in _said(preview)
    shown = text_of(browser.get(f"/deployments/scaled?job={preview['id']}"))
    assert "raypd:decode.autoscaling.maxReplicas" in shown and "in place, no engine restarts" in shown

    # Prefill's group filled while decode autoscales: only its autoscaling_config changes.
    on = _save_change(browser, "scaled", _typed("prefill", {"minReplicas": "1", "maxReplicas": "2",
                                                            "targetOngoingRequests": "4"}))
    spec = browser.get("/api/v1/deployments/scaled", headers=AUTH).get_json()["spec"]
    assert spec["raypd:prefill"]["autoscaling"] == {"minReplicas": 1, "maxReplicas": 2, "targetOngoingRequests": 4.0}
    assert on["summary"]["assessment"]["kind"] == "in place"
    assert "prefill: autoscaling turned on (1..2 replicas, target 4 ongoing requests each" in _said(on)

    # Decode's group emptied: autoscaling: null, off (prefill still autoscales: in place).
    off = _save_change(browser, "scaled", {f"raypd:decode.autoscaling.{key}": "" for key in KEYS})
    spec = browser.get("/api/v1/deployments/scaled", headers=AUTH).get_json()["spec"]
    assert "autoscaling" not in spec["raypd:decode"] and spec["raypd:prefill"]["autoscaling"]["maxReplicas"] == 2
    assert off["summary"]["assessment"]["kind"] == "in place"
    assert "decode: autoscaling turned off, a fixed count of 1: in place, no engine restarts" in _said(off)

    # Prefill's emptied too: no phase autoscales, the workers lose the node autoscaler's annotation,
    # so a new Ray cluster (every engine reloads) against the deployed stack, where decode autoscaled.
    fixed = _save_change(browser, "scaled", {f"raypd:prefill.autoscaling.{key}": "" for key in KEYS})
    spec = browser.get("/api/v1/deployments/scaled", headers=AUTH).get_json()["spec"]
    assert "autoscaling" not in spec["raypd:decode"] and "autoscaling" not in spec["raypd:prefill"]
    assert fixed["summary"]["assessment"]["kind"] == "new Ray cluster"
    assert "autoscaling is turned off for decode" in _said(fixed) and "every engine loads the model" in _said(fixed)
