"""A section of the definition file made from the model fields it sets: their defaults, ranges,
choices and help texts are the models' own, so the file's schema cannot drift from what the
database holds."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from django.core import validators
from django.db import models
from pydantic import Field, create_model

from .sections import Strict


def section_model(name: str, doc: str, model: type[models.Model], names: list[str], **extra):
    """A pydantic model of `model`'s fields `names` (and `extra`'s, as `(type, Field)`)."""
    fields = {field_name: field_of(model, field_name) for field_name in names}
    fields.update(extra)
    made = create_model(name, __base__=Strict, **fields)
    made.__doc__ = doc
    return made


def field_of(model: type[models.Model], name: str) -> tuple[Any, Any]:
    """The type and pydantic `Field` of `model`'s field `name`."""
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
        kind = Any
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
    description = str(field.help_text or field.verbose_name)
    if field.has_default():
        default = field.default
        if callable(default):
            return kind, Field(default_factory=default, description=description, **limits)
        return kind, Field(default, description=description, **limits)
    if field.null:
        return kind, Field(None, description=description, **limits)
    if field.blank and kind is str:
        return kind, Field("", description=description, **limits)
    return kind, Field(description=description, **limits)


def values_of(instance: models.Model, names: list[str]) -> dict[str, Any]:
    return {name: getattr(instance, name) for name in names}
