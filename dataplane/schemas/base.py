"""What every schema type shares: the type names, references, the parse error and the parsed-schema protocol.

Kept free of any schema library so the registry, the REST Proxy and the Spark client can name these types
without importing fastavro, jsonschema or the Protobuf parser.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol


class SchemaType(enum.StrEnum):
    """Confluent's ``schemaType`` names; a request that omits the field means AVRO."""

    AVRO = "AVRO"
    JSON = "JSON"
    PROTOBUF = "PROTOBUF"

    @classmethod
    def from_request(cls, value: str | None) -> SchemaType:
        """The type a registration asks for: Confluent's default (AVRO) when absent, an error when unknown."""
        if value is None or value == "":
            return cls.AVRO
        try:
            return cls(value.upper())
        except ValueError:
            raise SchemaError(f"Unknown schema type: {value!r} (expected AVRO, JSON or PROTOBUF)") from None


@dataclass(frozen=True, slots=True)
class Reference:
    """A schema's dependency on another registered schema (Confluent's ``references`` entry).

    ``name`` is how the schema text names it: an Avro full type name, a Protobuf import path, a JSON Schema
    ``$ref`` URL. The registry looks ``subject``/``version`` up and hands the text over by ``name``.
    """

    name: str
    subject: str
    version: int


class SchemaError(ValueError):
    """The schema text cannot be used; ``message`` is what Confluent's 42201 "Invalid schema" answer carries."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class WireFormatError(ValueError):
    """Bytes that are not a Confluent-framed message."""


class PayloadError(ValueError):
    """A value that does not fit its schema, or bytes that do not decode with it."""


class ParsedSchema(Protocol):
    """A schema parsed and checked, with the strings the registry stores and compares."""

    @property
    def schema_type(self) -> SchemaType: ...

    @property
    def references(self) -> tuple[Reference, ...]: ...

    def canonical(self) -> str:
        """The stored form: formatting-independent, so two texts of the same schema share one id."""
        ...

    def normalized(self) -> str:
        """Confluent's ``normalize=true`` form: also independent of declaration order and spelling of names."""
        ...


def resolve_reference(name: str, resolved: Mapping[str, str]) -> str:
    """The text of a referenced schema, or the parse error Confluent gives for a missing reference."""
    try:
        return resolved[name]
    except KeyError:
        raise SchemaError(f"Invalid schema: reference {name!r} was not resolved") from None
