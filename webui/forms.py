"""The new-deployment form: Contract 1 as HTML fields, and the way back to a config dict.

Field names ARE the config keys (`raypd:prefill.tensorParallelSize`), so an error from
`DeploymentSpec.from_config` lands next to the field it names without a mapping table. The fields
are derived from the spec itself (its keys, types, defaults and choices; webui.form_words only adds
the words, sections and groups) and instance-type choices come from the catalogue: the form cannot
disagree with the spec. A key may be three levels deep: a phase's autoscaling block
(`raypd:decode.autoscaling.minReplicas`), whose fields form a group that is all or nothing.
Pure functions; the HF token field is never filled back in (it is a password field).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Optional, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr
from pydantic.alias_generators import to_camel

from components.config import defaults
from components.config.errors import FieldError
from components.config.spec import HF_TOKEN_KEY, NAMESPACE, REGION_KEY, DeploymentSpec
from webui.form_words import PRESENTATION

NAME_FIELD = "name"
TOKEN_FIELD = HF_TOKEN_KEY


@dataclass(frozen=True)
class Field:
    key: str  # the config key (or "name")
    label: str
    kind: str = "text"  # text | int | float | bool | select | password | list (comma-separated)
    default: Any = ""
    choices: tuple[tuple[str, str], ...] = ()
    help: str = ""
    optional: bool = False
    section: str = "general"
    mode: Optional[str] = None  # only submitted in this mode
    wide: bool = False  # takes two grid columns (long choice labels)
    group: str = ""  # drawn in a fieldset of its own inside the section (form_words.GROUPS)

    @property
    def dom_id(self) -> str:
        return "f-" + self.key.replace(":", "-").replace(".", "-")

    @property
    def block(self) -> str:
        """The key of the object a grouped field belongs to (`raypd:decode.autoscaling`), else ""."""
        return self.key.rpartition(".")[0] if self.group else ""

    def default_text(self) -> str:
        if self.kind == "bool":
            return "on" if self.default else ""
        return "" if self.default is None else str(self.default)


# Sections that belong to one mode (the page hides the other mode's sections).
_MODE_OF_SECTION = {"prefill": "disaggregated", "decode": "disaggregated", "kv": "disaggregated",
                    "colocated": "colocated"}


def _kind(annotation: Any) -> tuple[str, bool, tuple[tuple[str, str], ...]]:
    """(form kind, optional, Literal choices) of a spec field's type."""
    optional = False
    if get_origin(annotation) is Union:
        members = [a for a in get_args(annotation) if a is not type(None)]
        optional, annotation = len(members) < len(get_args(annotation)), members[0]
    if get_origin(annotation) is Literal:
        return "select", optional, tuple((str(v), str(v)) for v in get_args(annotation))
    if get_origin(annotation) is tuple:
        return "list", True, ()
    kinds = {bool: "bool", int: "int", float: "float", SecretStr: "password"}
    return kinds.get(annotation, "text"), optional or annotation is SecretStr, ()


def _model_of(annotation: Any) -> Optional[type[BaseModel]]:
    """The spec model a field holds, also behind Optional (a phase's autoscaling block), or None."""
    if get_origin(annotation) is Union:
        members = [a for a in get_args(annotation) if a is not type(None)]
        annotation = members[0] if len(members) == 1 else None
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _keys_under(key: str, annotation: Any, value: Any) -> list[tuple[str, Any, Any]]:
    """(key, type, reference default) of `key` itself, or of every key inside it when it is an
    object; a block the reference leaves out (None) has no defaults inside."""
    model = _model_of(annotation)
    if model is None:
        return [(key, annotation, value)]
    return [item for sub, info in model.model_fields.items()
            for item in _keys_under(f"{key}.{to_camel(sub)}", info.annotation,
                                    None if value is None else getattr(value, sub))]


def _spec_keys() -> list[tuple[str, Any, Any]]:
    """(Contract 1 key, field type, reference default) for every key, in the spec's order."""
    reference = DeploymentSpec.from_config({}, "dev")
    return [item for name, info in DeploymentSpec.model_fields.items() if name != "stack"
            for item in _keys_under(REGION_KEY if name == "region" else f"{NAMESPACE}:{to_camel(name)}",
                                    info.annotation, getattr(reference, name))]


def form_fields() -> list[Field]:
    fields = [Field(NAME_FIELD, "Deployment name", "text", "", help=(
        "the Pulumi stack name: lower-case letters, digits and '-', at most 40 characters"))]
    for key, annotation, default in _spec_keys():
        words = dict(PRESENTATION[key])  # KeyError: a new spec key needs its words here
        kind, optional, choices = _kind(annotation)
        made = words.pop("choices", None)
        if made is not None:
            kind, choices = "select", made()
        section = words.pop("section", "general")
        if isinstance(default, (tuple, list)) or default is None:
            default = ""
        fields.append(Field(key, words.pop("label"), kind, default, choices, words.pop("help", ""),
                            optional=optional or (kind == "text" and default == ""), section=section,
                            mode=_MODE_OF_SECTION.get(section), **words))
    return fields


FIELDS: tuple[Field, ...] = tuple(form_fields())
FIELDS_BY_KEY = {field.key: field for field in FIELDS}
# A section belongs to a mode when its fields do (the page hides the other mode's sections).
SECTION_MODES = {field.section: field.mode for field in FIELDS if field.mode is not None}


def default_values() -> dict[str, str]:
    return {field.key: field.default_text() for field in FIELDS}


def values_from_config(name: str, config: Mapping[str, Any]) -> dict[str, str]:
    """A deployment's stored Contract 1 config as the form shows it ("Change settings")."""
    values = default_values()
    values[NAME_FIELD] = name
    for field in FIELDS:
        if field.key == NAME_FIELD or field.kind == "password":
            continue
        value = _lookup(config, field.key)
        if value is None:
            continue
        if field.kind == "bool":
            values[field.key] = "on" if value else ""
        elif field.kind == "list":
            values[field.key] = ", ".join(str(item) for item in value) if isinstance(value, list) else str(value)
        elif isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
            values[field.key] = str(int(value))  # a target of 8 reads "8", as typed, not "8.0"
        else:
            values[field.key] = str(value)
    return values


def form_to_patch(form: Mapping[str, str]) -> tuple[dict[str, Any], list[FieldError]]:
    """The change form -> a PATCH body's config, applied as the API's PATCH is (a JSON Merge Patch,
    webui.merge_patch): every shown key; an optional field left empty resets its key (None), a
    nested one too, since a merge keeps a sub-key the patch leaves out; an empty token field keeps
    the token the stack has. Keys of the other mode's sections are left out, so they keep their values.
    A group left all empty turns its block off (`autoscaling: null`): an object of nulls instead
    would merge into an empty block, which is still on (and which the spec refuses)."""
    _, config, errors = form_to_config(form)
    mode = _form_mode(form)
    shown = [field for field in FIELDS if field.key != NAME_FIELD and field.kind != "password"
             and field.mode in (None, mode)]
    for block in sorted({field.block for field in shown if field.block}):
        if _lookup(config, block) is None:
            _put(config, block, None)
    for field in shown:
        if field.optional:
            _null_unless_given(config, field.key)
    return config, errors


def _lookup(config: Mapping[str, Any], key: str) -> Any:
    """The value at a dotted Contract 1 key (`raypd:decode.autoscaling.minReplicas`), None if absent."""
    value: Any = config
    for part in key.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _put(config: dict[str, Any], key: str, value: Any) -> None:
    """Set a dotted key, making the objects above it."""
    *parents, leaf = key.split(".")
    node = config
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value


def _null_unless_given(config: dict[str, Any], key: str) -> None:
    """A null (reset) for a key the form left empty; nothing under an object that is reset whole."""
    *parents, leaf = key.split(".")
    node = config
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            return
    node.setdefault(leaf, None)


def form_values(form: Mapping[str, str]) -> dict[str, str]:
    """The submitted values to show again (every field except the token)."""
    values = {}
    for field in FIELDS:
        if field.kind == "password":
            continue
        if field.kind == "bool":
            values[field.key] = "on" if form.get(field.key) else ""
        else:
            values[field.key] = str(form.get(field.key, ""))
    return values


# What a number field takes: ASCII digits only. Python's int() and float() also take "1_0", full-width
# and Arabic-Indic digits, "nan" and "inf"; a form shows one thing and means another with those.
_FORM_INT = re.compile(r"[+-]?[0-9]{1,18}")
_FORM_FLOAT = re.compile(r"[+-]?(?:[0-9]{1,18}(?:\.[0-9]{0,18})?|\.[0-9]{1,18})(?:[eE][+-]?[0-9]{1,3})?")


def parse_form_int(text: str) -> int:
    """A whole number as typed in a form (ASCII digits, at most 18); ValueError otherwise."""
    if not _FORM_INT.fullmatch(text.strip()):
        raise ValueError("not a whole number")
    return int(text.strip())


def parse_form_float(text: str) -> float:
    """A decimal number as typed in a form (ASCII digits, optional exponent); ValueError otherwise."""
    if not _FORM_FLOAT.fullmatch(text.strip()):
        raise ValueError("not a number")
    return float(text.strip())


def _convert(field: Field, raw: str) -> Any:
    if field.kind == "list":
        return [item for item in re.split(r"[\s,]+", raw.strip()) if item]
    if field.kind == "int":
        try:
            return parse_form_int(raw)
        except ValueError:
            raise ValueError("must be a whole number (digits 0-9)") from None
    if field.kind == "float":
        try:
            return parse_form_float(raw)
        except ValueError:
            raise ValueError("must be a number such as 0.9") from None
    return raw.strip() if field.kind != "password" else raw


def _form_mode(form: Mapping[str, str]) -> str:
    """The serving mode the form was submitted in (its sections are the ones shown)."""
    return (form.get("raypd:mode") or defaults.MODE).strip()


def form_to_config(form: Mapping[str, str]) -> tuple[str, dict[str, Any], list[FieldError]]:
    """Form values -> (name, Contract 1 config, type errors). Values are checked by the spec later."""
    mode = _form_mode(form)
    config: dict[str, Any] = {}
    errors: list[FieldError] = []
    name = str(form.get(NAME_FIELD, "")).strip()
    for field in FIELDS:
        if field.key == NAME_FIELD:
            continue
        if field.mode is not None and field.mode != mode:
            continue
        if field.kind == "bool":
            value: Any = bool(form.get(field.key))
        else:
            raw = str(form.get(field.key, ""))
            if not raw.strip() and (field.optional or field.kind == "password"):
                continue
            if not raw.strip():
                errors.append(FieldError(field.key, "is required"))
                continue
            try:
                value = _convert(field, raw)
            except ValueError as exc:
                errors.append(FieldError(field.key, str(exc)))
                continue
        _put(config, field.key, value)
    return name, config, errors


def split_errors(errors: list[FieldError], fields: Optional[Mapping[str, Field]] = None,
                 ) -> tuple[dict[str, str], list[FieldError]]:
    """Errors that belong next to a field of `fields` (default: the deployment form's), and the rest
    (shown above the form)."""
    known = FIELDS_BY_KEY if fields is None else fields
    by_field: dict[str, str] = {}
    general: list[FieldError] = []
    for error in errors:
        key = re.sub(r"(\[\d+\]|\.\d+)$", "", error.field)  # raypd:adminRoleArns[1], rates.0 -> the field
        if key in known:
            message = error.message if key == error.field else f"{error.field}: {error.message}"
            by_field.setdefault(key, message)
        else:
            general.append(error)
    return by_field, general
