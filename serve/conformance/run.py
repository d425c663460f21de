"""`run_features`: the selected features against an endpoint, and the same requests against a
reference; the one function the CLI, verify's api-parity and the web app call.

Order: every feature in groups' order, the `risky` ones (those known to crash a PD decoder) after
the rest, then `server.alive`, so a crash costs the features after it nothing and is named. Two
features with the same probe (the models list) share its exchanges. A probe that raises (a bug, or
an answer no judge foresaw) makes that feature `fail` with the reason, and the run goes on: one
feature never hides the others.
"""

from __future__ import annotations

import datetime
import logging
import time
from typing import Callable, Iterable, Optional, Sequence

from serve.conformance.client import CLIENT_VERSION, Session
from serve.conformance.exchange import Exchange, shorten
from serve.conformance.features import Context, Feature, Outcome, Verdict, failed, skipped
from serve.conformance.groups import FEATURE_IDS, FEATURES
from serve.conformance.groups.models import max_model_len
from serve.conformance.report import FeatureResult, Report

log = logging.getLogger(__name__)
LAST = "server.alive"


class UnknownFeature(ValueError):
    """A feature name that is not one of FEATURE_IDS (or a group's prefix)."""


def select(names: Optional[Iterable[str]]) -> list[Feature]:
    """The features named (an id, or a group prefix such as `chat` or `logprobs`), in run order."""
    chosen = list(FEATURES)
    if names is not None:
        wanted = list(names)
        unknown = [n for n in wanted if not any(f.id == n or f.id.startswith(n + ".") or f.group == n
                                                for f in FEATURES)]
        if unknown:
            raise UnknownFeature(f"unknown feature(s) {', '.join(map(repr, unknown))}; known: "
                                 f"{', '.join(FEATURE_IDS)}")
        chosen = [f for f in FEATURES if any(f.id == n or f.id.startswith(n + ".") or f.group == n
                                             for n in wanted)]
    safe = [f for f in chosen if not f.risky and f.id != LAST]
    return safe + [f for f in chosen if f.risky] + [f for f in chosen if f.id == LAST]


def discover(session: Session, metrics_url: Optional[str] = None) -> tuple[Context, Exchange]:
    """The context the features need: the model's max_model_len from the models list."""
    listing = session.list_models("discover")
    return Context(session.model, max_model_len(listing, session.model), metrics_url), listing


def _probe(feature: Feature, session: Session, ctx: Context,
           cache: dict[object, list[Exchange]]) -> tuple[list[Exchange], Optional[Outcome]]:
    if feature.probe in cache:
        return cache[feature.probe], None
    try:
        exchanges = feature.probe(session, ctx)
    except Exception as exc:  # noqa: BLE001 - one feature's surprise must not end the run (module doc)
        log.debug("probe of %s raised", feature.id, exc_info=True)
        return [], failed(f"the probe could not run: {type(exc).__name__}: {shorten(str(exc), 200)}")
    cache[feature.probe] = exchanges
    return exchanges, None


def _judge(feature: Feature, exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
    try:
        return feature.judge(exchanges, ctx)
    except Exception as exc:  # noqa: BLE001 - an answer no judge foresaw is a failure, with its reason
        log.debug("judge of %s raised", feature.id, exc_info=True)
        return failed(f"the answer could not be judged: {type(exc).__name__}: {shorten(str(exc), 200)}")


def _one(feature: Feature, session: Session, ctx: Context, cache: dict[object, list[Exchange]]
         ) -> tuple[list[Exchange], Outcome]:
    exchanges, broken = _probe(feature, session, ctx, cache)
    return exchanges, broken or _judge(feature, exchanges, ctx)


def combine(feature: Feature, mine: Outcome, theirs: Optional[Outcome], ours: Sequence[Exchange],
            reference: Optional[Sequence[Exchange]]) -> Outcome:
    """The row's verdict: the endpoint's own, or the comparison's where the feature is judged
    against the reference (and `differs` where a passing answer is not the reference's)."""
    if feature.needs_reference:
        if reference is None:
            return skipped("needs --reference: the same weights served another way (plain vLLM or colocated)")
        if mine.verdict != Verdict.PASS:
            return mine
        if theirs is not None and theirs.verdict != Verdict.PASS:
            return failed(f"the reference did not answer: {theirs.evidence}")
    if feature.compare is None or reference is None or mine.verdict != Verdict.PASS:
        return mine
    if theirs is not None and theirs.verdict != Verdict.PASS and not feature.needs_reference:
        return mine
    compared = feature.compare(ours, reference)
    return compared if compared is not None else mine


def run_features(session: Session, names: Optional[Iterable[str]] = None, *, reference: Optional[Session] = None,
                 metrics_url: Optional[str] = None, reference_metrics_url: Optional[str] = None,
                 on_result: Optional[Callable[[FeatureResult], None]] = None) -> Report:
    """Run the features (all, or those `names` select) and return the report.

    `reference` is a Session on the same weights served another way; `metrics_url` a Prometheus
    page with the endpoint's engines' vLLM series when its own /metrics has none (disconnect).
    Raises UnknownFeature for a name that selects nothing; every other problem is a verdict.
    """
    features = select(names)
    started, clock = datetime.datetime.now(datetime.timezone.utc), time.monotonic()
    ctx, _ = discover(session, metrics_url)
    ref_ctx = discover(reference, reference_metrics_url)[0] if reference is not None else None
    cache: dict[object, list[Exchange]] = {}
    ref_cache: dict[object, list[Exchange]] = {}
    results = []
    for feature in features:
        ours, mine = _one(feature, session, ctx, cache)
        theirs: Optional[Outcome] = None
        ref_exchanges: Optional[list[Exchange]] = None
        if reference is not None and ref_ctx is not None:
            ref_exchanges, theirs = _one(feature, reference, ref_ctx, ref_cache)
        outcome = combine(feature, mine, theirs, ours, ref_exchanges)
        result = FeatureResult(feature.id, feature.group, feature.title, outcome,
                               None if feature.needs_reference else theirs,
                               tuple(ours), tuple(ref_exchanges or ()))
        results.append(result)
        if on_result is not None:
            on_result(result)
    return Report(endpoint=session.root, model=session.model, results=tuple(results),
                  reference=reference.root if reference is not None else None, max_model_len=ctx.max_model_len,
                  started=started.isoformat(timespec="seconds"), seconds=time.monotonic() - clock,
                  versions={"openai": CLIENT_VERSION})
