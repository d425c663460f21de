"""Reading Contract 1 keys: from `aws:region` and `raypd:<key>` to the spec's fields, and back.

`DeploymentSpec.from_config` validates; this module does what comes before and after: it picks
raypd's keys out of a config (other namespaces belong to providers), refuses unknown keys,
decodes Pulumi's JSON text, refuses text no page could show (control characters, lone surrogates)
and runaway nesting, and turns pydantic's error locations back into the user-facing keys
(``raypd:prefill.tensorParallelSize``) so people can find what to fix.
"""

from __future__ import annotations

from typing import Any, Mapping

from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from components.config.errors import FieldError, SpecError
from components.config.rules import BAD_TEXT, NOT_TEXT
from components.config.safe_documents import DocumentError, DuplicateKeyError, load_json

NAMESPACE = "raypd"
REGION_KEY = "aws:region"
MAX_NESTING = 8


def read_fields(config: Mapping[str, Any], stack: str, aliases: Mapping[str, str],
                json_text: bool = True) -> dict[str, Any]:
    """The spec's input (camelCase names, plus `stack`) from Contract 1 keys; SpecError for unknown
    keys and for text that is not text. `aliases`: raypd key name -> the spec's field name.
    `json_text`: an object or array may come as JSON text (Pulumi config); False for the JSON API,
    where `"{\"id\": \"m\"}"` is a string, and a string is not an object."""
    if not isinstance(config, Mapping):
        raise SpecError.single("config", "must be an object of config keys")
    fields: dict[str, Any] = {"stack": stack}
    unknown: list[FieldError] = []
    for key, value in config.items():
        if not isinstance(key, str):
            unknown.append(FieldError(str(key), "config keys must be strings"))
            continue
        if key == REGION_KEY:
            fields["region"] = value
            continue
        namespace, _, name = key.partition(":")
        if namespace != NAMESPACE:
            continue
        if name not in aliases:
            unknown.append(FieldError(key, f"unknown key; known keys: {', '.join(sorted(aliases))}"))
            continue
        fields[aliases[name]] = _decode_structured(value, key) if json_text else value
    if unknown:
        raise SpecError(unknown)
    problems = [problem for field, value in fields.items() if field != "stack"
                for problem in _text_problems(value, config_key((_field_alias(field),)))]
    if problems:
        raise SpecError(problems)
    return {_field_alias(k): v for k, v in fields.items()}


def _field_alias(name: str) -> str:
    return "stack" if name == "stack" else to_camel(name)


def _decode_structured(value: Any, key: str) -> Any:
    """Pulumi hands object-valued config to programs as JSON text; accept both forms. Text that
    starts like JSON but is refused by components.config.safe_documents (a key twice, a 5000-digit number,
    runaway nesting) is that key's error; other text is left for the model to judge."""
    if isinstance(value, str) and value.lstrip().startswith(("{", "[")):
        try:
            return load_json(value)
        except DuplicateKeyError as exc:
            raise SpecError.single(f"{key}.{exc.path}", "is given twice") from None
        except DocumentError as exc:
            if exc.problem.startswith("is not valid JSON"):
                return value
            raise SpecError.single(key, f"JSON text that {exc.problem}") from None
    return value


def _text_problems(value: Any, where: str, depth: int = 0) -> list[FieldError]:
    """Control characters, lone surrogates and runaway nesting anywhere in a value, by key path.

    Checked before the model sees the value: its messages quote values, and a page quoting a
    surrogate cannot be written out at all.
    """
    if depth > MAX_NESTING:
        return [FieldError(where, f"is nested more than {MAX_NESTING} levels deep")]
    if isinstance(value, str):
        if BAD_TEXT.search(value):
            return [FieldError(where, NOT_TEXT)]
        return []
    problems: list[FieldError] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str) or BAD_TEXT.search(key):
                problems.append(FieldError(where, "has a key that is not valid text"))
                continue
            problems.extend(_text_problems(item, f"{where}.{key}", depth + 1))
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            problems.extend(_text_problems(item, f"{where}[{index}]", depth + 1))
    return problems


def config_key(loc: tuple[Any, ...]) -> str:
    """Turn a pydantic error location into the user-facing config key."""
    parts = [str(p) for p in loc if not isinstance(p, int)]
    if not parts:
        return "config"
    head, rest = parts[0], parts[1:]
    key = REGION_KEY if head == "region" else f"{NAMESPACE}:{head}"
    return ".".join([key, *rest])


def field_errors(exc: ValidationError) -> list[FieldError]:
    """pydantic's errors as FieldErrors under the user-facing keys."""
    errors = []
    for item in exc.errors(include_url=False):
        message = item["msg"]
        if message.startswith("Value error, "):
            message = message[len("Value error, "):]
        if item["type"] == "extra_forbidden":
            message = "unknown key"
        errors.append(FieldError(config_key(tuple(item["loc"])), message))
    return errors
