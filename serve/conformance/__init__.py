"""`serve.conformance`: the OpenAI surface of an endpoint, feature by feature, with evidence (issue 32).

    python -m serve.conformance (--endpoint URL | --outputs FILE|-) [--reference URL]
        [--api-key-env VAR] --model ID [--json] [--out DIR]

Layers: client.py sends every feature's requests through the official `openai` client and records
them (exchange.py); groups/ holds one module per group of features, each a probe (client layer) and
a pure judge of the recorded exchanges; run.py runs them against the endpoint and a reference;
report.py is the versioned report (Contract 7 in docs/contracts.md) and the table; outdir.py writes
`--out` with API keys redacted. For a program (verify's api-parity, the web app):
`run_features(Session(...), names, reference=Session(...)) -> Report`.
"""

from serve.conformance.client import Session
from serve.conformance.features import Verdict
from serve.conformance.report import SCHEMA_VERSION, FeatureResult, Report
from serve.conformance.run import UnknownFeature, run_features

__all__ = ["SCHEMA_VERSION", "FeatureResult", "Report", "Session", "UnknownFeature", "Verdict", "run_features"]
