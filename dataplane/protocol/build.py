"""Build a kio entity of any version from version-agnostic values.

kio generates one set of frozen dataclasses per message version, so a handler
that serves Metadata v0..v12 would otherwise need thirteen code paths. Handlers
describe a response once, as plain values for the newest version; ``build``
keeps the fields the requested version has, drops the rest, and builds nested
entities (and tuples of them) recursively.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class _Field:
    name: str
    required: bool
    entity: type | None  # the nested entity class, if the field holds one or a tuple of them
    many: bool


def _nested_entity(annotation: Any) -> tuple[type | None, bool]:
    """(entity class, is_tuple) for annotations like Sub, Sub | None, tuple[Sub, ...]."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _nested_entity(arg)
            if found[0] is not None:
                return found
        return None, False
    if origin is tuple:
        args = typing.get_args(annotation)
        if args and dataclasses.is_dataclass(args[0]):
            return typing.cast(type, args[0]), True
        return None, False
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return annotation, False
    return None, False


@functools.cache
def _fields(cls: type) -> tuple[_Field, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for field in dataclasses.fields(cls):
        entity, many = _nested_entity(hints[field.name])
        required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
        out.append(_Field(field.name, required, entity, many))
    return tuple(out)


def build(cls: type[T], values: Mapping[str, Any]) -> T:
    """An instance of ``cls`` from ``values``; raises TypeError naming a missing required field."""
    kwargs: dict[str, Any] = {}
    for field in _fields(typing.cast(type, cls)):
        if field.name not in values:
            if field.required:
                raise TypeError(f"{cls.__module__}.{cls.__qualname__} needs field {field.name!r}")
            continue
        value = values[field.name]
        if field.entity is not None and value is not None:
            if field.many:
                value = tuple(item if isinstance(item, field.entity) else build(field.entity, item)
                              for item in value)
            elif not isinstance(value, field.entity):
                value = build(field.entity, value)
        kwargs[field.name] = value
    return cls(**kwargs)


def nested(cls: type, *path: str) -> type:
    """The entity class reached from ``cls`` through the named fields (``nested(Resp, "results", "configs")``),
    so a handler can build repeated parts once and reuse them (``build`` keeps entities it is given)."""
    for name in path:
        field = next((f for f in _fields(cls) if f.name == name), None)
        if field is None or field.entity is None:
            raise TypeError(f"{cls.__qualname__}.{name} holds no entity")
        cls = field.entity
    return cls
