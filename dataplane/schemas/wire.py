"""Confluent's wire format and the payload codecs, so callers never touch fastavro, jsonschema or protobuf.

A framed message is::

    b"\\x00"              magic byte
    >I                   schema id (4 bytes, big-endian)
    [varint...]          Protobuf only: message indexes (zig-zag varints: count, then each index;
                         the first message, [0], is written as the single byte 0)
    payload              Avro binary, Protobuf binary or UTF-8 JSON

Avro values cross this module in Avro's JSON encoding (unions as ``{"type": value}``, bytes and fixed as
ISO-8859-1 strings), which is what the REST Proxy's ``application/vnd.kafka.avro.v2+json`` carries.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable, Sequence
from typing import Any

import fastavro
import fastavro.validation
import jsonschema.exceptions

from dataplane.schemas.avro import AvroSchema, JsonEncodingMismatch, native_converter, native_of_json
from dataplane.schemas.base import PayloadError, WireFormatError
from dataplane.schemas.json_schema import JsonSchema
from dataplane.schemas.protobuf import ProtobufSchema
from dataplane.schemas.protobuf_codec import protobuf_decode, protobuf_encode

MAGIC = 0
HEADER = struct.Struct(
    ">B"  # magic byte (0)
    "I"  # schema id
)
_MAX_INDEXES = 1024  # a count above this is corruption, not a schema's nesting

__all__ = ["HEADER", "MAGIC", "PayloadError", "WireFormatError", "avro_decode", "avro_encode", "avro_encoder", "frame",
           "json_decode", "json_encode", "json_validate", "protobuf_decode", "protobuf_encode", "protobuf_frame",
           "protobuf_unframe", "unframe"]


def frame(schema_id: int, payload: bytes, message_indexes: Sequence[int] | None = None) -> bytes:
    """Magic byte, schema id, the Protobuf message indexes when given, then the payload."""
    if not 0 <= schema_id <= 0xFFFFFFFF:
        raise WireFormatError(f"schema id {schema_id} does not fit in 4 bytes")
    header = HEADER.pack(MAGIC, schema_id)
    if message_indexes is None:
        return header + payload
    if list(message_indexes) in ([], [0]):
        return header + b"\x00" + payload
    return header + _varint(len(message_indexes)) + b"".join(_varint(i) for i in message_indexes) + payload


def unframe(data: bytes, *, protobuf: bool = False) -> tuple[int, tuple[int, ...], bytes]:
    """(schema id, message indexes, payload); the indexes are read only for Protobuf (else ``()``)."""
    if len(data) < HEADER.size:
        raise WireFormatError(f"message too short for the schema registry framing: {len(data)} bytes")
    magic, schema_id = HEADER.unpack_from(data)
    if magic != MAGIC:
        raise WireFormatError(f"unknown magic byte {magic} (expected {MAGIC})")
    if not protobuf:
        return schema_id, (), bytes(data[HEADER.size:])
    count, offset = _read_varint(data, HEADER.size)
    if count == 0:
        return schema_id, (0,), bytes(data[offset:])
    if not 0 < count <= _MAX_INDEXES:
        raise WireFormatError(f"invalid message index count {count}")
    indexes = []
    for _ in range(count):
        index, offset = _read_varint(data, offset)
        if index < 0:
            raise WireFormatError(f"invalid message index {index}")
        indexes.append(index)
    return schema_id, tuple(indexes), bytes(data[offset:])


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while zigzag & ~0x7F:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    out.append(zigzag)
    return bytes(out)


def _read_varint(data: bytes, offset: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if offset >= len(data):
            raise WireFormatError("message indexes truncated")
        byte = data[offset]
        offset += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), offset
        shift += 7
        if shift > 63:
            raise WireFormatError("message index varint too long")


# -- Avro ----------------------------------------------------------------------------------------------------

def avro_encode(schema: AvroSchema, value: Any) -> bytes:
    """Avro binary of ``value`` given in Avro's JSON encoding.

    One walk checks the value and turns it into what fastavro's (compiled) writer takes (:func:`avro.
    native_of_json`): a fifth of the cost of fastavro's own JSON decoder and validation, which REST produce
    paid per record."""
    try:
        native = native_of_json(schema, value)
    except JsonEncodingMismatch as exc:
        raise PayloadError(f"value does not match the Avro schema: {exc}") from None
    out = io.BytesIO()
    try:
        fastavro.schemaless_writer(out, schema.codec, {"v": native})
    except (ValueError, TypeError, OverflowError) as exc:  # a logical type's value it cannot write
        raise PayloadError(f"value does not match the Avro schema: {_reason(exc)}") from None
    return out.getvalue()


def avro_encoder(schema: AvroSchema) -> Callable[[Any], bytes]:
    """:func:`avro_encode` for many values of one schema (what a REST request's records share): the same bytes
    and errors. The schema is prepared once: the value checks compiled (:func:`avro.native_converter`) and, for
    a top level that is an object (a record, enum, array...) with no references, fastavro's schema of it alone,
    so no wrapper record is made per value (a fifth of the writer's time)."""
    convert = native_converter(schema)
    codec = schema.codec
    plain = fastavro.parse_schema(schema.raw) if isinstance(schema.raw, dict) and not schema.references else None
    write = fastavro.schemaless_writer

    def encode(value: Any) -> bytes:
        try:
            native = convert(value)
        except JsonEncodingMismatch as exc:
            raise PayloadError(f"value does not match the Avro schema: {exc}") from None
        out = io.BytesIO()
        try:
            if plain is not None:
                write(out, plain, native)
            else:
                write(out, codec, {"v": native})
        except (ValueError, TypeError, OverflowError):
            return avro_encode(schema, value)  # the wrapper's path, which words the error as it always has
        return out.getvalue()
    return encode


def avro_decode(schema: AvroSchema, payload: bytes) -> Any:
    """The value of Avro binary ``payload``, in Avro's JSON encoding; every byte must be consumed."""
    source = io.BytesIO(payload)
    try:
        record = fastavro.schemaless_reader(source, schema.codec, None)
    except Exception as exc:  # truncated or corrupt input surfaces as EOFError, IndexError, UnicodeError, ...
        raise PayloadError(f"payload does not decode with the Avro schema: {_reason(exc)}") from None
    if source.tell() != len(payload):
        raise PayloadError(f"payload has {len(payload) - source.tell()} bytes after the Avro value")
    out = io.StringIO()
    fastavro.json_writer(out, schema.codec, [record])
    return json.loads(out.getvalue())["v"]


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return text.replace(".v", "").replace("_SluiceValueWrapper", "value")


# -- JSON Schema ---------------------------------------------------------------------------------------------

def json_validate(schema: JsonSchema, value: Any) -> None:
    """Raise ``PayloadError`` naming the first (most relevant) violation when ``value`` breaks ``schema``."""
    error = jsonschema.exceptions.best_match(schema.validator.iter_errors(value))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        raise PayloadError(f"value does not match the JSON schema at '#/{where}': {error.message}")


def json_encode(schema: JsonSchema, value: Any) -> bytes:
    """UTF-8 JSON of ``value`` after validation (the payload Confluent's JSON Schema serializer frames)."""
    json_validate(schema, value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def json_decode(schema: JsonSchema, payload: bytes) -> Any:
    """The value of a JSON payload, validated against ``schema``."""
    try:
        value = json.loads(payload)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PayloadError(f"payload is not JSON: {exc}") from None
    json_validate(schema, value)
    return value


# -- Protobuf (the codec lives in protobuf_codec; framed here) -----------------------------------------------

def protobuf_frame(schema_id: int, schema: ProtobufSchema, value: Any, message: str | None = None) -> bytes:
    """``value`` (Protobuf's JSON mapping) as a framed record of ``message`` (None: the file's first)."""
    indexes, payload = protobuf_encode(schema, value, message)
    return frame(schema_id, payload, indexes)


def protobuf_unframe(data: bytes, schema_of: Callable[[int], ProtobufSchema]) -> tuple[int, Any]:
    """(schema id, value) of a framed Protobuf record; ``schema_of`` looks the writer's schema up by id."""
    schema_id, indexes, payload = unframe(data, protobuf=True)
    return schema_id, protobuf_decode(schema_of(schema_id), indexes, payload)
