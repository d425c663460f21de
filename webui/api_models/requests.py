"""The API's request bodies: strict (no key the model does not name, no "true" for true); `parse`
turns a refusal into `{"errors": [{"field", "message"}]}` entries with the messages people rely on."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Optional, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from components.config.errors import FieldError
from components.config.spec import MAX_STACK_NAME
from components.render.endpoint_names import KEY_NAME_PATTERN
from serve.benchmark.workload import MAX_PROMPT_WORDS, PRESETS
from webui.api_models.common import STACK_NAME_PATTERN, Contract1, Contract1Patch, absent

# ---- requests ----

class ApiRequest(BaseModel):
    """A request body: strict JSON types, no unknown keys. `messages` words a field's type error."""

    model_config = ConfigDict(extra="forbid", strict=True)
    messages: ClassVar[dict[str, str]] = {}


class NoOptions(ApiRequest):
    """Operations that take no options: an empty body, `{}`, or none at all."""


class CreateDeployment(ApiRequest):
    messages: ClassVar[dict[str, str]] = {
        "name": "must be a string", "config": "must be an object of Contract 1 keys"}

    # The stack-name rule lives in components.config.spec (its message names the rule); shown here only.
    name: str = Field(description="the stack name", json_schema_extra={
        "pattern": STACK_NAME_PATTERN, "maxLength": MAX_STACK_NAME})
    config: Contract1 = Field(default_factory=dict)


class ChangeDeployment(ApiRequest):
    messages: ClassVar[dict[str, str]] = {"config": "must be an object of Contract 1 keys (null resets one)"}

    config: Contract1Patch


class UpOptions(ApiRequest):
    messages: ClassVar[dict[str, str]] = {"force": "must be true or false"}

    force: bool = Field(False, description="launch even when a preflight check fails (the job says so)")


class CreateApiKey(ApiRequest):
    messages: ClassVar[dict[str, str]] = {"name": "must be a string (the key's name)"}

    # The name rule lives in components.render.endpoint_names (KEY_NAME_PATTERN); serve.api_keys applies
    # it and its message says the rule; shown here only.
    name: str = Field(description="the key's name", json_schema_extra={
        "pattern": KEY_NAME_PATTERN.pattern, "maxLength": 32})


class ClearPending(ApiRequest):
    messages: ClassVar[dict[str, str]] = {"confirm": "must be the deployment's name"}

    confirm: str = Field(description="the deployment's name, typed")


BENCHMARK_PRESETS = tuple(sorted(PRESETS))
MAX_BENCHMARK_RATES = 8
MAX_BENCHMARK_REQUESTS = 5000
MAX_BENCHMARK_SECONDS = 4 * 3600  # the sending time the rates and request counts add up to
# Every output token is an inter-token gap in the records, which come back through the pod's log:
# 4 to 4.5 bytes each gzipped and in base64, and the kubelet rotates a container's log at 10 MiB by
# default; this leaves room for the progress lines (a few hundred KB over 4 hours).
MAX_BENCHMARK_OUTPUT_TOKENS = 1_500_000


class BenchmarkRequest(ApiRequest):
    """A benchmark of a running deployment, in the cluster (serve.benchmark; docs/benchmark.md)."""

    messages: ClassVar[dict[str, str]] = {
        "preset": f"must be one of {', '.join(BENCHMARK_PRESETS)}", "api": "must be chat or completions",
        "rates": f"must be 1 to {MAX_BENCHMARK_RATES} request rates (numbers > 0 and at most 500 per s)",
        "requests": f"must be an integer from 1 to {MAX_BENCHMARK_REQUESTS}",
        "inputTokens": "must be an integer from 1 to 131072", "outputTokens": "must be an integer from 1 to 32768",
        "sloTtftMs": "must be a number of milliseconds > 0", "sloTpotMs": "must be a number of milliseconds > 0",
        "timeoutS": "must be a number of seconds from 1 to 600", "ignoreEos": "must be true or false",
    }

    preset: Literal["chat", "rag", "agentic"] = Field("chat", description=(
        "chat 1024 in / 256 out; rag 8192 in / 256 out; agentic 4096 in (3584 shared prefix) / 128 out"))
    api: Literal["chat", "completions"] = Field("chat", description="/v1/chat/completions or /v1/completions")
    rates: list[Annotated[float, Field(gt=0, le=500, allow_inf_nan=False)]] = Field(
        min_length=1, max_length=MAX_BENCHMARK_RATES,
        description="Poisson request rates (req/s); several make a sweep, which gives the goodput")
    requests: int = Field(100, ge=1, le=MAX_BENCHMARK_REQUESTS, description="requests per rate")
    inputTokens: Optional[int] = absent("prompt length in words (about tokens); default: the preset's",
                                        ge=1, le=131072)
    outputTokens: Optional[int] = absent("max_tokens; default: the preset's", ge=1, le=32768)
    sloTtftMs: Optional[float] = absent("TTFT SLO (with sloTpotMs): SLO attainment and goodput", gt=0, le=600_000)
    sloTpotMs: Optional[float] = absent("TPOT SLO (with sloTtftMs)", gt=0, le=60_000)
    timeoutS: float = Field(60.0, ge=1, le=600, description="per request, from send to the last token")
    ignoreEos: bool = Field(False, description="vLLM's ignore_eos: every answer is exactly outputTokens long")

    @model_validator(mode="after")
    def _consistent(self) -> "BenchmarkRequest":
        if (self.sloTtftMs is None) != (self.sloTpotMs is None):
            missing = "sloTpotMs" if self.sloTpotMs is None else "sloTtftMs"
            raise ValueError(f"{missing}: the two SLOs go together (sloTtftMs and sloTpotMs): give both or neither")
        if len(set(self.rates)) != len(self.rates):
            raise ValueError("rates: a rate is repeated")
        if self.inputTokens is not None and self.requests * self.inputTokens > MAX_PROMPT_WORDS:
            raise ValueError(f"inputTokens: {self.requests} requests x {self.inputTokens} input tokens is more than "
                             f"the {MAX_PROMPT_WORDS:,} prompt words the load generator builds up front")
        output_tokens = self.requests * len(self.rates) * (self.outputTokens or PRESETS[self.preset]["output_tokens"])
        if output_tokens > MAX_BENCHMARK_OUTPUT_TOKENS:
            raise ValueError(f"requests: {self.requests} requests x {len(self.rates)} rates x "
                             f"{output_tokens // (self.requests * len(self.rates))} output tokens is more than "
                             f"{MAX_BENCHMARK_OUTPUT_TOKENS:,} output tokens, which the results could not bring back "
                             "through the pod's log; run fewer requests or several benchmarks")
        seconds = sum(self.requests / rate for rate in self.rates)
        if seconds > MAX_BENCHMARK_SECONDS:
            raise ValueError(f"requests: {self.requests} requests per rate at these rates would send for "
                             f"{seconds / 3600:.1f} h; the most is {MAX_BENCHMARK_SECONDS // 3600} h")
        return self


RequestT = TypeVar("RequestT", bound=ApiRequest)
_ORDER = {"extra_forbidden": 0, "missing": 1}


def parse(model: type[RequestT], body: dict[str, Any]) -> RequestT:
    """Validate a decoded JSON object; raise `BodyRefused` with one entry per field.

    Unknown keys come first (naming the key and what is allowed), then missing ones, then type
    errors in the model's own words.
    """
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        allowed = ", ".join(sorted(model.model_fields)) or "none"
        problems = []
        for error in sorted(exc.errors(), key=lambda e: _ORDER.get(e["type"], 2)):
            field = ".".join(str(part) for part in error["loc"]) or "body"
            if error["type"] == "extra_forbidden":
                problems.append(FieldError(field, f"unknown key; allowed: {allowed}"))
            elif error["type"] == "missing":
                problems.append(FieldError(field, "is required"))
            elif not error["loc"] and error["type"] == "value_error":
                # A rule across fields (a model validator) names its field first: "field: why".
                text = str(error["ctx"]["error"]) if "ctx" in error else error["msg"]
                named, _, why = text.partition(": ")
                problems.append(FieldError(named, why) if named in model.model_fields else FieldError(field, text))
            else:
                top = str(error["loc"][0]) if error["loc"] else field
                problems.append(FieldError(field, model.messages.get(field) or model.messages.get(top, error["msg"])))
        raise BodyRefused(problems) from None


class BodyRefused(Exception):
    """A request body the API refuses: 400 with these field errors."""

    def __init__(self, errors: list[FieldError]):
        super().__init__("; ".join(f"{e.field}: {e.message}" for e in errors))
        self.errors = errors
