"""alive: after every other feature (the risky ones last), the endpoint still answers a plain chat.

vllm#50792 reports `echo` / `prompt_logprobs` crashing a PD decoder: a crash is not one feature's
failure but the deployment's, and a report that ends on it must say so plainly.
"""

from __future__ import annotations

from typing import Sequence

from serve.conformance.client import Session
from serve.conformance.exchange import Exchange
from serve.conformance.features import Context, Feature, Outcome, by_label, failed, not_answered, passed
from serve.conformance.groups.basics import request

GROUP = "alive"


def probe(session: Session, ctx: Context) -> list[Exchange]:
    return [session.chat("after", **request("chat", max_tokens=4))]


def judge(exchanges: Sequence[Exchange], ctx: Context) -> Outcome:
    broken = not_answered(by_label(exchanges, "after"), "a plain chat after the risky features")
    if broken is not None:
        return failed(f"{broken.evidence}: the endpoint stopped answering, so a feature tested before "
                      "broke the deployment, not only its own request (see the risky features' verdicts)")
    return passed("a plain chat is still answered after every other feature")


FEATURES = [Feature("server.alive", GROUP, "the endpoint still answers after the risky features", probe, judge)]
