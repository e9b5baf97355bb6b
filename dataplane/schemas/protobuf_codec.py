"""Protobuf payloads: values in Protobuf's canonical JSON mapping ↔ Protobuf binary, for a parsed schema.

The JSON side is what Confluent's REST Proxy reads and writes (protobuf-java's ``JsonFormat``, see
``ProtobufSchemaUtils.toJson``): on the way out, fields by their ``json_name`` (lowerCamelCase) and fields
without presence printed even when at their default (``includingDefaultValueFields``); 64-bit integers as
strings, bytes as base64, enums by name, well-known types in their special forms (a ``Timestamp`` as an RFC
3339 string, ...). On the way in, the proto name and the JSON name are both accepted and an unknown field is
an error, as ``JsonFormat.parser()`` does.

Descriptors are built from the schema (``protobuf_descriptors``) once per schema object and cached on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.protobuf import descriptor_pool, json_format, message_factory
from google.protobuf.message import DecodeError, EncodeError, Message

from dataplane.schemas.base import PayloadError, SchemaError
from dataplane.schemas.protobuf import ProtobufSchema, message_indexes, message_name
from dataplane.schemas.protobuf_descriptors import build_pool


def _pool(schema: ProtobufSchema) -> descriptor_pool.DescriptorPool:
    pool = schema.cache.get("pool")
    if pool is None:
        try:
            pool = build_pool(schema)
        except SchemaError as exc:
            raise PayloadError(f"schema cannot encode Protobuf payloads: {exc.message}") from None
        except (TypeError, ValueError) as exc:  # the pool refuses a descriptor the parser let through
            raise PayloadError(f"schema cannot encode Protobuf payloads: {exc}") from None
        schema.cache["pool"] = pool
    return pool


def _new(schema: ProtobufSchema, full_name: str) -> Message:
    descriptor = _pool(schema).FindMessageTypeByName(full_name)
    return message_factory.GetMessageClass(descriptor)()


def resolve_message(schema: ProtobufSchema, message: str | None) -> str:
    """The full name of ``message`` (full or relative to the package); None: the file's first message."""
    if message is None:
        first = schema.nesting.get(schema.package, ())
        if not first:
            raise PayloadError("the Protobuf schema declares no message")
        return first[0]
    try:
        return message_name(schema, message_indexes(schema, message))
    except KeyError:
        raise PayloadError(f"no message {message!r} in the Protobuf schema") from None


def message_class(schema: ProtobufSchema, message: str | None = None) -> type[Message]:
    """The runtime class of ``message`` (as ``resolve_message`` names it), for callers that map fields to their
    own types (the Spark client) instead of going through the JSON mapping."""
    descriptor = _pool(schema).FindMessageTypeByName(resolve_message(schema, message))
    cls: type[Message] = message_factory.GetMessageClass(descriptor)
    return cls


def protobuf_encode(schema: ProtobufSchema, value: Any, message: str | None = None) -> tuple[list[int], bytes]:
    """(message indexes, payload): ``value`` in Protobuf's canonical JSON mapping, for ``message`` (fully
    qualified or relative name; None = the first message of the file, as Confluent's REST Proxy does).
    PayloadError on a value that does not fit."""
    full = resolve_message(schema, message)
    if not isinstance(value, dict):
        raise PayloadError(f"value does not match the Protobuf message {full!r}: expected a JSON object, "
                           f"got {type(value).__name__}")
    try:
        parsed = json_format.ParseDict(value, _new(schema, full))
        payload = parsed.SerializeToString(deterministic=True)
    except json_format.ParseError as exc:
        raise PayloadError(f"value does not match the Protobuf message {full!r}: {exc}") from None
    except EncodeError:
        missing = ", ".join(parsed.FindInitializationErrors())
        raise PayloadError(f"value does not match the Protobuf message {full!r}: required fields missing: "
                           f"{missing}") from None
    return message_indexes(schema, full), payload


def protobuf_decode(schema: ProtobufSchema, indexes: Sequence[int], payload: bytes) -> Any:
    """The JSON mapping of the message at ``indexes`` decoded from ``payload``; PayloadError on bad bytes."""
    try:
        full = message_name(schema, indexes)
    except KeyError as exc:
        raise PayloadError(str(exc.args[0])) from None
    decoded = _new(schema, full)
    try:
        decoded.ParseFromString(payload)
    except DecodeError as exc:
        raise PayloadError(f"payload does not decode as the Protobuf message {full!r}: {exc}") from None
    if not decoded.IsInitialized():
        missing = ", ".join(decoded.FindInitializationErrors())
        raise PayloadError(f"payload does not decode as the Protobuf message {full!r}: required fields missing: "
                           f"{missing}")
    return json_format.MessageToDict(decoded, always_print_fields_with_no_presence=True)
