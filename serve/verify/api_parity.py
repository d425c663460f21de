"""Verify check `api-parity`: the OpenAI features the stack promises still work through the PD path
(issue 32 §2): a streamed answer's final usage chunk, `stop`, the same text twice at temperature 0,
logprobs, and a prompt over max_model_len refused with an OpenAI 400 (not a 500).

These are serve.conformance's features (`FEATURES` names them), run by its `run_features` with the
official `openai` client, so every request and every judge has one home; verify only maps their
verdicts to its statuses (`to_check`):
- pass: the feature works;
- fail or differs: broken, `fail`, one line per feature naming it and the judge's evidence;
- unsupported (a clean 4xx refusal): also `fail`. The stack promises these features (raypd's
  engines run vLLM, which serves them all); a refusal is a promise broken, however politely;
- skip: `warn`. A skip here never means the feature broke; it means the endpoint gave no case to
  judge (the model's answer held no usable stop string, the model card gives no max_model_len).
  Failing on that would blame the stack for missing evidence, and passing would claim what was not
  seen, so it is said, as verify says every missing evidence (Contract 5: never pass without it).

It reaches the endpoint as endpoint-models and endpoint-chat do (serve/verify/endpoint.py): through
the API server's service proxy, or the --endpoint URL with the key those checks send there
(serve/verify/external.py `key_for_endpoint`); never through the proxy, which drops it. It runs
after kv-transfer's readings, so its requests do not blur that check's counters, and only when
endpoint-chat got its 200 (otherwise that check has already said why). Every request is bounded by
verify's chat timeout, and all of them together by `BUDGET_SECONDS` (`Budget`): about ten short
requests, a second or two on a healthy stack.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

import httpx2

from components.config.checks import Check
from serve.conformance import Session, run_features
from serve.conformance.features import Verdict
from serve.conformance.report import FeatureResult, Report
from serve.evidence import shorten
from serve.verify.endpoint import ChatOutcome, Endpoint
from serve.verify.report import TITLES

CHECK_ID = "api-parity"
TITLE = TITLES[CHECK_ID]
FEATURES = ("chat.stream_usage", "chat.stop", "sampling.temperature0", "chat.logprobs",
            "limits.over_max_model_len")
BUDGET_SECONDS = 60.0
BROKEN = (Verdict.FAIL, Verdict.DIFFERS, Verdict.UNSUPPORTED)
REMEDY = ("clients that use the feature get broken answers: run the whole suite with its raw exchanges, "
          "`python -m serve.conformance --outputs FILE --out DIR`; docs/openai-api.md says what a client can "
          "do instead, and docs/troubleshooting.md#an-openai-feature-broke-through-pd--api-parity where to look")


class Budget(httpx2.BaseTransport):
    """All of the check's requests within `seconds`: each request's timeouts are cut to what is left,
    and once nothing is left a request fails at once (the `openai` client's APITimeoutError), so a
    stack that answers slowly costs verify the budget, not ten chat timeouts."""

    def __init__(self, inner: httpx2.BaseTransport, seconds: float, clock: Callable[[], float] = time.monotonic):
        self.inner, self.seconds, self.clock = inner, seconds, clock
        self.deadline = clock() + seconds
        self.spent = False

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        left = self.deadline - self.clock()
        if left <= 0:
            self.spent = True
            raise httpx2.ReadTimeout(f"api-parity's budget of {self.seconds:g} s is spent", request=request)
        timeouts = dict(request.extensions.get("timeout") or {})
        request.extensions["timeout"] = {k: left if v is None else min(v, left)
                                         for k, v in {"connect": None, "read": None, "write": None,
                                                      "pool": None, **timeouts}.items()}
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def check_api_parity(endpoint: Optional[Endpoint], chat: ChatOutcome, model: str, timeout: float,
                     budget_seconds: float = BUDGET_SECONDS, scrub: Callable[[str], str] = lambda text: text) -> Check:
    if endpoint is None:
        return Check.skipped(CHECK_ID, TITLE, "no endpoint: the Kubernetes API is not reachable")
    if chat.status != 200:
        return Check.skipped(CHECK_ID, TITLE, "not run: the endpoint did not answer the test chat with 200 "
                             "(endpoint-chat says why)")
    budget = Budget(endpoint.transport(), budget_seconds)
    api_key = endpoint.api_key
    session = Session(endpoint.base_url, model, api_key=api_key, timeout_s=timeout, transport=budget)
    try:
        report = run_features(session, FEATURES)
    finally:
        session.close()

    def hide(text: str) -> str:  # the key never reaches a report, whatever an answer quoted
        return scrub(text.replace(api_key, "<api key>") if api_key else text)

    return to_check(report, endpoint.describe, budget if budget.spent else None, hide)


def _line(result: FeatureResult) -> str:
    return f"{result.id} {result.verdict.value}: {shorten(result.outcome.evidence, 240)}"


def to_check(report: Report, where: str, spent: Optional[Budget] = None,
             hide: Callable[[str], str] = lambda text: text) -> Check:
    """The check for a conformance report of FEATURES (the module docstring says why each status)."""
    sent = sum(len(r.exchanges) for r in report.results)
    broken = [r for r in report.results if r.verdict in BROKEN]
    skipped = [r for r in report.results if r.verdict == Verdict.SKIP]
    if broken:
        head = (f"the budget of {spent.seconds:g} s ran out before every answer came; " if spent else "")
        return Check.failed(CHECK_ID, TITLE, hide(head + f"{len(broken)} of {len(report.results)} promised "
                            f"feature(s) broken on {where}: " + "; ".join(_line(r) for r in broken)), REMEDY)
    passed = ", ".join(r.id for r in report.results if r.verdict == Verdict.PASS)
    if skipped:
        return Check.warned(CHECK_ID, TITLE, hide(f"not judged on {where}: " + "; ".join(_line(r) for r in skipped)
                                                  + f" (passed: {passed or 'none'})"),
                            "run `python -m serve.conformance` for the whole suite and the raw exchanges")
    return Check.passed(CHECK_ID, TITLE, hide(f"{passed} pass on {where} ({sent} requests through the openai "
                                              f"client, {report.seconds:.1f} s)"))
