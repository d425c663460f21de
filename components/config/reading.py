"""Reading Contract 1 keys: from `aws:region` and `raypd:<key>` to the spec's fields, and back.

`DeploymentSpec.from_config` validates; this module does what comes before and after: it picks
raypd's keys out of a config (other namespaces belong to providers), refuses unknown keys,
decodes Pulumi's JSON text, refuses text no page could show (control characters, lone surrogates)
and runaway nesting, and turns pydantic's error locations back into the user-facing keys
(``raypd:prefill.tensorParallelSize``) so people can find what to fix.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Optional, TypeVar

from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from components.config.errors import FieldError, SpecError
from components.config.rules import BAD_TEXT, NOT_TEXT
from components.config.safe_documents import DocumentError, DuplicateKeyError, load_json

NAMESPACE = "raypd"
REGION_KEY = "aws:region"
MAX_NESTING = 8
T = TypeVar("T")


def read_fields(config: Mapping[str, Any], stack: str, aliases: Mapping[str, str],
                json_text: bool = True) -> tuple[dict[str, Any], list[FieldError]]:
    """The spec's input (camelCase names, plus `stack`) from Contract 1 keys, and the problems of
    the keys left out of it: unknown keys, JSON text refused, text that is not text. The rest is
    still validated, so every problem is reported at once. `aliases`: raypd key name -> the spec's
    field name. `json_text`: an object or array may come as JSON text (Pulumi config); False for
    the JSON API, where `"{\"id\": \"m\"}"` is a string, and a string is not an object."""
    if not isinstance(config, Mapping):
        raise SpecError.single("config", "must be an object of config keys")
    fields: dict[str, Any] = {"stack": stack}
    problems: list[FieldError] = []
    for key, value in config.items():
        if not isinstance(key, str):
            problems.append(FieldError(str(key), "config keys must be strings"))
            continue
        if key == REGION_KEY:
            fields["region"] = value
            continue
        namespace, _, name = key.partition(":")
        if namespace != NAMESPACE:
            continue
        if name not in aliases:
            problems.append(FieldError(key, f"unknown key; known keys: {', '.join(sorted(aliases))}"))
            continue
        try:
            fields[aliases[name]] = _decode_structured(value, key) if json_text else value
        except SpecError as exc:
            problems.extend(exc.errors)
    read: dict[str, Any] = {}
    for field, value in fields.items():
        alias = _field_alias(field)
        bad_text = [] if field == "stack" else _text_problems(value, config_key((alias,)))
        problems.extend(bad_text)
        if not bad_text:
            read[alias] = value
    return read, problems


def top_level_key(field: str) -> str:
    """The spec field (camelCase) a user-facing key belongs to: raypd:prefill.instanceType ->
    prefill, raypd:adminRoleArns[0] -> adminRoleArns, aws:region -> region."""
    if field == REGION_KEY or field.startswith(REGION_KEY + "."):
        return "region"
    name = field.partition(":")[2] if field.startswith(f"{NAMESPACE}:") else field
    return re.split(r"[.\[]", name, maxsplit=1)[0]


def validate_each_field(validate: Callable[[dict[str, Any]], T],
                        fields: dict[str, Any]) -> tuple[Optional[T], list[FieldError], set[str]]:
    """(the validated result, the field problems, the keys that failed): `validate` again without
    the keys that failed, their defaults standing in, until it succeeds.

    pydantic runs a model's cross-field checks only once every field is valid, and a SpecError a
    field validator raises (one with its own keys) ends the validation of the others: so one typo
    would hide every other problem until it is fixed. The result lets the caller run the
    cross-field checks whose keys all validated (the defaults that stand in must not be judged).
    """
    problems: list[FieldError] = []
    failed: set[str] = set()
    rest = dict(fields)
    while True:
        try:
            return validate(rest), problems, failed
        except ValidationError as exc:
            errors = field_errors(exc)
        except SpecError as exc:
            errors = exc.errors
        problems.extend(errors)
        newly = {top_level_key(error.field) for error in errors} & set(rest)
        failed |= {top_level_key(error.field) for error in errors}
        if not newly:  # a problem no key of the input explains (the model itself): stop here
            return None, problems, failed
        rest = {key: value for key, value in rest.items() if key not in newly}


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
