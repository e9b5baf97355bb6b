"""The Schema Registry's pure core: parse Avro, JSON Schema and Protobuf, compare versions, frame payloads.

Sans-IO: references arrive as a mapping of name → schema text the caller looked up; nothing here reads a
file, a socket or a database. Shared by the control plane's registry and REST Proxy and by the Spark client.
"""

from __future__ import annotations

from dataplane.schemas.avro import AvroSchema, avro_compatibility, parse_avro
from dataplane.schemas.base import ParsedSchema, PayloadError, Reference, SchemaError, SchemaType, WireFormatError
from dataplane.schemas.compatibility import AnySchema, CompatibilityLevel, can_read, check, parse_schema
from dataplane.schemas.json_schema import JsonSchema, json_schema_compatibility, parse_json_schema
from dataplane.schemas.protobuf import (
    ProtobufSchema,
    message_indexes,
    message_name,
    parse_protobuf,
    protobuf_compatibility,
)
from dataplane.schemas.protobuf_codec import protobuf_decode, protobuf_encode
from dataplane.schemas.protobuf_descriptors import serialized_descriptor

__all__ = [
    "AnySchema",
    "AvroSchema",
    "CompatibilityLevel",
    "JsonSchema",
    "ParsedSchema",
    "PayloadError",
    "ProtobufSchema",
    "Reference",
    "SchemaError",
    "SchemaType",
    "WireFormatError",
    "avro_compatibility",
    "can_read",
    "check",
    "json_schema_compatibility",
    "message_indexes",
    "message_name",
    "parse_avro",
    "parse_json_schema",
    "parse_protobuf",
    "parse_schema",
    "protobuf_compatibility",
    "protobuf_decode",
    "protobuf_encode",
    "serialized_descriptor",
]
