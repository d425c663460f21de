"""Logging in with the access token, and out (which ends the session in the store too)."""

from __future__ import annotations

from typing import Any

from flask import g, redirect, render_template, request, session, url_for
from flask.typing import ResponseReturnValue

from webui.pages.blueprint import bp
from webui.security import client_address, csrf_token, csrf_valid, safe_next, token_matches
from webui.state import raypd


@bp.get("/login")
def login() -> str:
    csrf_token()
    return render_template("login.html", next=safe_next(request.args.get("next")), error=None)


@bp.post("/login")
def login_post() -> Any:
    app = raypd()
    target = safe_next(request.form.get("next"))
    if not csrf_valid(request.form.get("csrf_token")):
        return render_template("login.html", next=target,
                               error="The login form expired; try again."), 400
    if app.throttle.blocked(client_address()):
        return render_template("login.html", next=target,
                               error="Too many failed attempts; wait a minute."), 429
    if not token_matches(app.settings.token, request.form.get("token", "").strip()):
        app.throttle.failed(client_address())
        app.service.audit(g.actor, "login", "web", "failed", None)
        return render_template("login.html", next=target, error="That access token is not valid."), 401
    session.clear()
    session.permanent = True
    session["auth"] = True
    session["sid"] = app.start_session()
    csrf_token()
    app.service.audit(g.actor, "login", "web", "succeeded", None)
    return redirect(target)


@bp.post("/logout")
def logout() -> ResponseReturnValue:
    session_id = session.get("sid")
    if isinstance(session_id, str):
        raypd().end_session(session_id)  # a copy of the cookie must not outlive the logout
    session.clear()
    return redirect(url_for("pages.login"))
