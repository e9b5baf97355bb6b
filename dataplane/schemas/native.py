"""Avro payloads as fastavro's plain Python values, with schema resolution against a reader schema.

``wire.avro_decode``/``avro_encode`` speak Avro's JSON encoding (what the REST Proxy carries); a Spark task
wants the values themselves (records as dicts, ``date``/``datetime``/``Decimal`` for logical types, unions as
the branch's value) and needs a record written with an older schema read as the newer one, as Confluent's
deserializer does when given a reader schema. Both schemas' codecs wrap the value in the same one-field
record (``AvroSchema.codec``), so fastavro's resolution between them is the resolution of the values.
"""

from __future__ import annotations

import io
from typing import Any

import fastavro
import fastavro.validation

from dataplane.schemas.avro import AvroSchema
from dataplane.schemas.wire import PayloadError, _reason


def avro_decode_native(writer: AvroSchema, payload: bytes, reader: AvroSchema | None = None) -> Any:
    """The value of Avro binary ``payload`` written with ``writer``, resolved to ``reader`` when given.

    Unions of several records come back as ``(record full name, value)`` tuples (fastavro's
    ``return_record_name_override``), so a caller can tell the branches apart; every byte must be consumed.
    """
    source = io.BytesIO(payload)
    try:
        record = fastavro.schemaless_reader(source, writer.codec, reader.codec if reader is not None else None,
                                           return_record_name=True, return_record_name_override=True)
    except Exception as exc:  # corrupt input or unresolvable schemas: EOFError, SchemaResolutionError, ...
        raise PayloadError(f"payload does not decode with the Avro schema: {_reason(exc)}") from None
    if source.tell() != len(payload):
        raise PayloadError(f"payload has {len(payload) - source.tell()} bytes after the Avro value")
    return record["v"]  # type: ignore[index,call-overload]  # the wrapper record is always a dict


def avro_encode_native(schema: AvroSchema, value: Any) -> bytes:
    """Avro binary of a plain Python ``value``; ``PayloadError`` names the field that does not fit."""
    wrapped = {"v": value}
    try:
        fastavro.validation.validate(wrapped, schema.codec, raise_errors=True)
        out = io.BytesIO()
        fastavro.schemaless_writer(out, schema.codec, wrapped)
    except fastavro.validation.ValidationError as exc:
        problems = "; ".join(_reason(Exception(str(e))) for e in exc.errors) or _reason(exc)
        raise PayloadError(f"value does not match the Avro schema: {problems}") from None
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise PayloadError(f"value does not match the Avro schema: {_reason(exc)}") from None
    return out.getvalue()
