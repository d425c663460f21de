"""The one error type for user mistakes in a stack configuration.

CLIs turn it into exit code 2 and readable lines; the web API turns it into 400 with
``{"errors": [{"field": ..., "message": ...}]}``. Everything else is a bug and is not caught broadly.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    field: str  # the user-facing config key, e.g. "raypd:prefill.tensorParallelSize"
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class SpecError(Exception):
    """Invalid stack configuration; carries one FieldError per problem found."""

    def __init__(self, errors: list[FieldError]):
        self.errors = list(errors)
        super().__init__("; ".join(str(e) for e in self.errors))

    @classmethod
    def single(cls, field: str, message: str) -> "SpecError":
        return cls([FieldError(field, message)])
