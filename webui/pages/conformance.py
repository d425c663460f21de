"""The Conformance tab: the last conformance report of a deployment as a matrix (feature, its verdict,
the reference's, the evidence), the running job's progress, and the button that starts a run."""

from __future__ import annotations

from typing import Any, Mapping, Optional

from flask import flash, g, redirect, render_template, request, url_for

from components.config.errors import FieldError
from webui.api_models import BodyRefused, ConformanceRequest, parse
from webui.deployments.errors import Conflict, NotFound
from webui.deployments.reads import ACTIVE_STATUSES
from webui.engines.base import EngineError
from webui.errors import render_error
from webui.pages.blueprint import OPERATION_LABELS, bp
from webui.state import raypd

VERDICT_TONES = {"pass": "ok", "differs": "warn", "unsupported": "neutral", "fail": "bad", "skip": "neutral"}
EVIDENCE_CHARS = 220
MAX_FORM_TEXT = 200


def _short(text: Any, limit: int = EVIDENCE_CHARS) -> str:
    words = str(text or "")
    return words if len(words) <= limit else words[: limit - 1] + "…"


def matrix(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per feature of a Contract 7 report: its verdict, the reference's (None without one),
    the evidence shortened, and whether the difference is the serving path's (pdOnly)."""
    rows = []
    for feature in report.get("features") or []:
        ref = feature.get("reference")
        rows.append({"id": feature.get("id"), "title": feature.get("title"), "verdict": feature.get("verdict"),
                     "reference": ref.get("verdict") if isinstance(ref, Mapping) else None,
                     "evidence": _short(feature.get("evidence")), "pdOnly": bool(feature.get("pdOnly"))})
    return rows


def first_divergence(report: Mapping[str, Any]) -> Optional[dict[str, Any]]:
    """The first temperature-0 divergence from the reference a feature found (its feature id, where,
    and the text either side), or None when the answers agreed or nothing was compared."""
    for feature in report.get("features") or []:
        data = feature.get("data") or {}
        if isinstance(data, Mapping) and isinstance(data.get("first_divergence"), int):
            return {"feature": feature.get("id"), "at": data["first_divergence"], "unit": data.get("unit", "token"),
                    "ours": data.get("ours"), "theirs": data.get("theirs"), "evidence": _short(feature.get("evidence"))}
    return None


def _render(name: str, errors: list[FieldError], chosen: str = "", status: int = 200) -> tuple[str, int]:
    app = raypd()
    detail = app.service.get(name, jobs=20)
    record = app.service.record(name)
    job = app.reads.job_of(name, request.args.get("job"))
    if job is None:  # a run still going is what this tab is about
        latest = next((j for j in detail["jobs"] if j["operation"] == "conformance"), None)
        if latest is not None and latest["status"] in ACTIVE_STATUSES:
            job = app.reads.job(latest["id"])
    events = app.reads.latest_events(job["id"], limit=500) if job else []
    unavailable = app.conformance.available(record)
    last = None if unavailable and record["engine"] == "offline" else _last(name)
    return render_template(
        "conformance.html", d=detail, tab="conformance", job=job, events=events,
        active=job is not None and job["status"] in ACTIVE_STATUSES, labels=OPERATION_LABELS,
        job_reports={}, job_steps=None, job_consequences=[], job_assessment=None, job_eta=None, bench_live=None,
        unavailable=unavailable, choices=[] if unavailable else app.conformance.reference_choices(name),
        chosen=chosen or ((last or {}).get("reference") or ""), errors=errors, last=last,
        rows=matrix(last["report"]) if last else [], divergence=first_divergence(last["report"]) if last else None,
        tones=VERDICT_TONES,
    ), status


def _last(name: str) -> Optional[dict[str, Any]]:
    try:
        return raypd().conformance.last(name)
    except NotFound:
        return None


@bp.get("/deployments/<name>/conformance")
def conformance(name: str) -> Any:
    try:
        return _render(name, [])
    except NotFound:
        return render_error(404, f"There is no deployment named “{name}”.")


@bp.post("/deployments/<name>/conformance")
def conformance_post(name: str) -> Any:
    app = raypd()
    chosen = str(request.form.get("reference", "") or "").strip()[:MAX_FORM_TEXT]
    try:
        wanted = parse(ConformanceRequest, {"reference": chosen} if chosen else {})
        job_id = app.conformance.start(name, wanted, g.actor)
    except NotFound:
        return render_error(404, f"There is no deployment named “{name}”.")
    except BodyRefused as exc:
        return _render(name, exc.errors, status=400)
    except Conflict as exc:
        flash(exc.message, "error")
        return redirect(url_for("pages.conformance", name=name, job=exc.job))
    except EngineError as exc:
        return _render(name, [FieldError("engine", exc.message)], status=exc.http_status)
    return redirect(url_for("pages.conformance", name=name, job=job_id))
