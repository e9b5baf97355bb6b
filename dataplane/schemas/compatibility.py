"""Compatibility levels over a subject's history (Confluent's semantics), for every schema type.

BACKWARD: the new schema reads data written with the old one (consumers upgrade first); FORWARD: the old
schema reads data written with the new one (producers upgrade first); FULL: both. A plain level compares
with the latest version only, a ``_TRANSITIVE`` one with every version. Schemas of different types never
are compatible.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence

from dataplane.schemas.avro import AvroSchema, avro_compatibility, parse_avro
from dataplane.schemas.base import Reference, SchemaError, SchemaType
from dataplane.schemas.json_schema import JsonSchema, json_schema_compatibility, parse_json_schema
from dataplane.schemas.protobuf import ProtobufSchema, parse_protobuf, protobuf_compatibility

AnySchema = AvroSchema | JsonSchema | ProtobufSchema


class CompatibilityLevel(enum.StrEnum):
    NONE = "NONE"
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        return self.value.startswith(("FORWARD", "FULL"))


def parse_schema(
    schema_type: SchemaType,
    text: str,
    references: Sequence[Reference] = (),
    resolved: Mapping[str, str] | None = None,
) -> AnySchema:
    """Parse ``text`` as ``schema_type``; ``resolved`` maps every (transitively) referenced name to its text.

    A schema nested deeper than the interpreter's recursion limit is refused as invalid (the parsers recurse once
    a level), never left to surface as a server error."""
    try:
        if schema_type is SchemaType.AVRO:
            return parse_avro(text, references, resolved)
        if schema_type is SchemaType.JSON:
            return parse_json_schema(text, references, resolved)
        return parse_protobuf(text, references, resolved)
    except RecursionError:
        raise SchemaError(f"Invalid schema: the {schema_type.value} schema nests too deeply") from None


def can_read(reader: AnySchema, writer: AnySchema) -> list[str]:
    """Why ``reader`` cannot read data written with ``writer``; empty when it can."""
    if isinstance(reader, AvroSchema) and isinstance(writer, AvroSchema):
        return avro_compatibility(reader, writer)
    if isinstance(reader, JsonSchema) and isinstance(writer, JsonSchema):
        return json_schema_compatibility(writer, reader)
    if isinstance(reader, ProtobufSchema) and isinstance(writer, ProtobufSchema):
        return protobuf_compatibility(writer, reader)
    return [f"Incompatible schema type: {reader.schema_type} cannot read {writer.schema_type}"]


def check(new: AnySchema, existing: Sequence[AnySchema], level: CompatibilityLevel) -> list[str]:
    """Why ``new`` may not follow ``existing`` (oldest first) under ``level``; empty when it may.

    Each message names the direction and the existing version (1 = oldest) it fails against; the newest
    versions are reported first, as Confluent does.
    """
    if level is CompatibilityLevel.NONE or not existing:
        return []
    numbered = list(enumerate(existing, start=1))
    against = numbered[::-1] if level.transitive else numbered[-1:]
    problems: list[str] = []
    for version, old in against:
        if new.schema_type != old.schema_type:
            problems.append(f"Incompatible schema type: new {new.schema_type}, version {version} "
                            f"{old.schema_type}")
            continue
        if level.backward:
            problems += [f"BACKWARD (new schema reading version {version}): {p}" for p in can_read(new, old)]
        if level.forward:
            problems += [f"FORWARD (version {version} reading the new schema): {p}" for p in can_read(old, new)]
    return problems
