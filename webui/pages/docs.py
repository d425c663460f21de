"""raypd's docs, served by the app (webui.docs_pages): the pages every "see docs/..." links to."""

from __future__ import annotations

from typing import Any

from flask import render_template, url_for

from webui.docs_pages import read_doc, render_markdown
from webui.errors import render_error
from webui.pages.blueprint import bp


def doc_url(name: str, anchor: str = "") -> str:
    """The URL of a served doc's page, with its "#anchor" if any."""
    return url_for("pages.doc", name=name) + anchor


@bp.get("/docs/<name>")
def doc(name: str) -> Any:
    text = read_doc(name)
    if text is None:
        return render_error(404, f"There is no doc named “{name}”.")
    return render_template("doc.html", name=name, body=render_markdown(text, doc_url))
