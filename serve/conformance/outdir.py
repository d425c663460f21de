"""`--out DIR`: the report (report.json, report.txt) and, for every feature that did not pass, the
raw exchanges it was judged on (exchanges/<feature>.json: the endpoint's and the reference's
requests and answers), with every API key redacted.

A key can reach these files only through an answer (a server or gateway that echoes the
Authorization header into an error message, as a misconfigured proxy does): requests are recorded
without headers. So redaction is applied to the finished text of every file, and to what is printed,
not to chosen fields: whatever path a key took into the report, it leaves as `[redacted]`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from serve.conformance.features import Verdict
from serve.conformance.report import Report

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8  # a shorter "key" (e.g. vLLM's placeholder EMPTY) would redact ordinary words


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret (and its JSON-escaped form) replaced by [redacted]."""
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET_CHARS}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
        escaped = json.dumps(secret)[1:-1]
        if escaped != secret:
            text = text.replace(escaped, REDACTED)
    return text


def _dumps(document: Any) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


def exchanges_document(report: Report, feature_id: str) -> dict[str, Any]:
    result = report.result(feature_id)
    return {"feature": result.id, "title": result.title, **result.outcome.to_json(),
            "endpoint": report.endpoint, "exchanges": [ex.to_json() for ex in result.exchanges],
            "reference": report.reference,
            "referenceOutcome": result.reference.to_json() if result.reference is not None else None,
            "referenceExchanges": [ex.to_json() for ex in result.reference_exchanges]}


def write_out(report: Report, directory: Path, secrets: Iterable[str]) -> list[Path]:
    """Write the report and every non-pass feature's exchanges; returns the files written."""
    keys = list(secrets)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "exchanges").mkdir(exist_ok=True)
    files = {directory / "report.json": _dumps(report.to_json()), directory / "report.txt": report.table()}
    for result in report.results:
        if result.verdict != Verdict.PASS or result.pd_only:
            files[directory / "exchanges" / f"{result.id}.json"] = _dumps(exchanges_document(report, result.id))
    for path, text in files.items():
        path.write_text(redact(text, keys), encoding="utf-8")
    return list(files)
