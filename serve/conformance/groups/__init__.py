"""Every feature, one module per group; `FEATURES` in the order they run (risky ones are moved to
the end by serve.conformance.run, and `server.alive` comes after them)."""

from serve.conformance.features import Feature
from serve.conformance.groups import (
    alive,
    basics,
    disconnect,
    limits,
    logprobs,
    models,
    reference,
    sampling,
    structured,
    tools,
)

FEATURES: tuple[Feature, ...] = (
    *models.FEATURES, *basics.FEATURES, *sampling.FEATURES, *logprobs.FEATURES, *structured.FEATURES,
    *tools.FEATURES, *limits.FEATURES, *disconnect.FEATURES, *reference.FEATURES, *alive.FEATURES,
)
FEATURE_IDS: tuple[str, ...] = tuple(f.id for f in FEATURES)
