"""A deployment's API keys: create (the new value is shown once, in this answer only) and revoke.
The values never go into the session cookie, a flash message or a URL."""

from __future__ import annotations

from flask import flash, g, make_response, redirect, request, url_for
from flask.typing import ResponseReturnValue

from webui.api_key_service import KeysUnavailable
from webui.api_models import BodyRefused
from webui.deployments.errors import NotFound
from webui.engines.base import EngineError
from webui.errors import render_error
from webui.pages.blueprint import bp
from webui.pages.deployments import render_deployment
from webui.state import raypd


@bp.post("/deployments/<name>/api-keys")
def api_key_create(name: str) -> ResponseReturnValue:
    app = raypd()
    try:
        created = app.api_keys.create(name, str(request.form.get("name", "")).strip(), g.actor)
    except NotFound:
        return render_error(404, f"There is no deployment named “{name}”.")
    except BodyRefused as exc:
        flash("; ".join(f"Key {e.field}: {e.message}" for e in exc.errors), "error")
    except (KeysUnavailable, EngineError) as exc:
        flash(exc.message, "error")
    else:
        # The new key is in this answer and nowhere else (no redirect to a page that would have to
        # find it again: behind a load balancer that page may be served by another server). The
        # page's script swaps the address for the deployment's, so a reload is a plain GET.
        answer = make_response(render_deployment(name, new_key=created))
        answer.headers["Cache-Control"] = "no-store"
        return answer
    return redirect(url_for("pages.deployment", name=name, _anchor="api-keys"))


@bp.post("/deployments/<name>/api-keys/<key_name>/revoke")
def api_key_revoke(name: str, key_name: str) -> ResponseReturnValue:
    app = raypd()
    try:
        revoked = app.api_keys.revoke(name, key_name, g.actor)
    except NotFound as exc:
        flash(str(exc), "error")
    except BodyRefused as exc:
        flash("; ".join(e.message for e in exc.errors), "error")
    except (KeysUnavailable, EngineError) as exc:
        flash(exc.message, "error")
    else:
        flash(f"API key {revoked} revoked: the gateway refuses it within moments, no redeploy needed.", "info")
    return redirect(url_for("pages.deployment", name=name, _anchor="api-keys"))
