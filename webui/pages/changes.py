"""Changing a deployment's settings: the change form, discarding pending changes, and the
preview's rollout-strategy buttons. Nothing here touches the cloud: a change or a strategy ends in a
preview, a discard puts the deployed settings back on the stack."""

from __future__ import annotations

from typing import Any

from flask import flash, g, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from components.config.defaults import UPGRADE_STRATEGIES
from components.config.errors import FieldError, SpecError
from webui import form_words, forms
from webui.deployments.errors import Conflict, NotFound
from webui.engines.base import EngineError
from webui.errors import render_error
from webui.pages.blueprint import bp
from webui.pages.operations import start_operation
from webui.state import raypd


def _render_change(name: str, values: dict[str, str], errors: list[FieldError], status: int = 200) -> tuple[str, int]:
    by_field, general = forms.split_errors(errors)
    return render_template(
        "change.html", name=name, values=values, field_errors=by_field, general_errors=general,
        sections=form_words.SECTIONS, groups=form_words.GROUPS, section_modes=forms.SECTION_MODES,
        fields=[f for f in forms.FIELDS if f.key != forms.NAME_FIELD],
    ), status


@bp.get("/deployments/<name>/change")
def deployment_change(name: str) -> Any:
    try:
        record = raypd().service.record(name)
    except NotFound:
        return render_error(404, f"There is no deployment named “{name}”.")
    return _render_change(name, forms.values_from_config(name, record["config"]), [])


@bp.post("/deployments/<name>/change")
def deployment_change_post(name: str) -> Any:
    app = raypd()
    values = forms.form_values(request.form) | {forms.NAME_FIELD: name}
    patch, errors = forms.form_to_patch(request.form)
    if errors:
        return _render_change(name, values, errors, status=400)
    token = request.form.get(forms.TOKEN_FIELD, "")
    if token.strip():
        patch[forms.TOKEN_FIELD] = token.strip()
    try:
        app.service.change(name, patch, g.actor)
    except NotFound:
        return render_error(404, f"There is no deployment named “{name}”.")
    except SpecError as exc:
        return _render_change(name, values, exc.errors, status=400)
    except Conflict as exc:
        flash(exc.message, "error")
        return redirect(url_for("pages.deployment", name=name, job=exc.job))
    except EngineError as exc:
        return _render_change(name, values, [FieldError("engine", exc.message)], status=exc.http_status)
    flash("Settings saved. Nothing changes in the cloud until Deploy; the preview below shows what it "
          "would do.", "info")
    return start_operation(name, "preview")


@bp.post("/deployments/<name>/discard")
def deployment_discard(name: str) -> ResponseReturnValue:
    """Discard the pending changes: the deployed (offline: planned) settings back on the stack."""
    try:
        detail = raypd().service.discard(name, g.actor)
    except NotFound:
        return render_error(404, f"There is no deployment named “{name}”.")
    except Conflict as exc:
        flash(exc.message, "error")
        return redirect(url_for("pages.deployment", name=name, job=exc.job))
    except EngineError as exc:
        flash(f"Nothing was discarded: {exc.message}", "error")
        return redirect(url_for("pages.deployment", name=name))
    label = detail["deployed"]["label"] if detail.get("deployed") else "deployed"
    kept = [c["note"] for c in (detail.get("pending") or {}).get("changes", []) if c.get("note")]
    flash(f"Pending changes discarded: the stack has the {label} settings again (nothing ran in the cloud)."
          + (" Still pending: " + "; ".join(kept) + "." if kept else ""), "info")
    return redirect(url_for("pages.deployment", name=name))


@bp.post("/deployments/<name>/strategy")
def deployment_strategy(name: str) -> Any:
    """The preview's "roll it out this way" buttons: set raypd:upgradeStrategy (a pending setting
    like any other) and preview again, so the new preview shows what that strategy will do."""
    app = raypd()
    wanted = request.form.get("strategy", "")
    if wanted not in UPGRADE_STRATEGIES:
        return render_error(400, "Pick one of the strategies the preview offers.")
    try:
        app.service.change(name, {"raypd:upgradeStrategy": wanted}, g.actor)
    except NotFound:
        return render_error(404, f"There is no deployment named “{name}”.")
    except Conflict as exc:
        flash(exc.message, "error")
        return redirect(url_for("pages.deployment", name=name, job=exc.job))
    except (SpecError, EngineError) as exc:
        flash(str(getattr(exc, "message", exc)), "error")
        return redirect(url_for("pages.deployment", name=name))
    flash("Strategy saved. Nothing changes in the cloud until Deploy; the preview below shows what it "
          "would do.", "info")
    return start_operation(name, "preview")
