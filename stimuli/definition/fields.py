"""A section of the definition file made from the model fields it sets: their defaults, ranges,
choices and help texts are the models' own, so the file's schema cannot drift from what the
database holds."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from django.core import validators
from django.core.exceptions import ValidationError
from django.db import models
from pydantic import Field, create_model

from ..errors import Refused
from .sections import Strict


def section_model(
    name: str,
    doc: str,
    model: type[models.Model],
    names: list[str],
    *,
    described: dict[str, str] | None = None,
    **extra,
):
    """A pydantic model of `model`'s fields `names` (and `extra`'s, as `(type, Field)`).
    `described`: what a key means, in the file's words, where the field's help text does not
    say it (the manual's reference of the file shows every key's description)."""
    described = described or {}
    fields = {
        field_name: field_of(model, field_name, described.get(field_name)) for field_name in names
    }
    fields.update(extra)
    made = create_model(name, __base__=Strict, **fields)
    made.__doc__ = doc
    return made


def field_of(
    model: type[models.Model], name: str, description: str | None = None
) -> tuple[Any, Any]:
    """The type and pydantic `Field` of `model`'s field `name` (described by `description`, or
    by the field's help text)."""
    field = model._meta.get_field(name)
    kind: Any
    limits: dict[str, Any] = {}
    if field.choices:
        kind = Literal[tuple(value for value, _ in field.flatchoices)]
    elif isinstance(field, models.BooleanField):
        kind = bool
    elif isinstance(field, models.IntegerField):
        kind = int
        if isinstance(
            field,
            models.PositiveIntegerField
            | models.PositiveSmallIntegerField
            | models.PositiveBigIntegerField,
        ):
            limits["ge"] = 0
    elif isinstance(field, models.FloatField):
        kind = float
    elif isinstance(field, models.DateTimeField):
        kind = dt.datetime
    elif isinstance(field, models.JSONField):
        # An object or a list as its default is; what it holds, the model's own check says.
        default = field.default() if callable(field.default) else field.default
        kind = list[Any] if isinstance(default, list) else dict[str, Any]
    else:
        kind = str
        if field.max_length:
            limits["max_length"] = field.max_length
    # The field's own validators: Django adds the database's integer range to `validators`,
    # which would make the schema depend on the database in use.
    for validator in [*field.default_validators, *field._validators]:
        if isinstance(validator, validators.MinValueValidator):
            limits["ge"] = validator.limit_value
        elif isinstance(validator, validators.MaxValueValidator):
            limits["le"] = validator.limit_value
    if field.null:
        kind = kind | None
    description = description or str(field.help_text or field.verbose_name)
    if field.has_default():
        default = field.default
        if callable(default):
            # A factory's value is not in a JSON Schema by itself: the manual shows it.
            shown = {"default": default()} if isinstance(field, models.JSONField) else None
            return kind, Field(
                default_factory=default,
                description=description,
                json_schema_extra=shown,
                **limits,
            )
        return kind, Field(default, description=description, **limits)
    if field.null:
        return kind, Field(None, description=description, **limits)
    if field.blank and kind is str:
        return kind, Field("", description=description, **limits)
    return kind, Field(description=description, **limits)


def values_of(instance: models.Model, names: list[str]) -> dict[str, Any]:
    return {name: getattr(instance, name) for name in names}


def validated(instance: models.Model) -> None:
    """The model's own checks, each problem named by its field as a section's refusal."""
    try:
        instance.full_clean()
    except ValidationError as exc:
        raise Refused([f"{k}: {m}" for k, ms in exc.message_dict.items() for m in ms]) from None
