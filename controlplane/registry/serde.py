"""Records in Confluent's wire format, written and read with a cluster's registry: what the REST Proxy, the live
tail and the console's message browser share.

A schema's text never changes once it has an id, so parsed schemas are cached per process by (cluster, id), for
as long as the process lives (bounded, least recently used out first). A hard delete does not reach the cache:
a process that has decoded with a schema keeps decoding records written with it, as Confluent's clients do.
Safe from any thread; the ORM lookup on a miss runs on the caller's thread (never an event loop's).
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from controlplane.clusters.models import Cluster
from controlplane.registry import selectors
from controlplane.registry.selectors import LATEST
from dataplane.schemas import AnySchema, AvroSchema, JsonSchema, ProtobufSchema, SchemaType, wire

CACHE_SIZE = 4096


@dataclass(frozen=True, slots=True)
class WriterSchema:
    """A registered schema, parsed: what a record is encoded with and what its id frames. ``frame`` encodes and
    frames one value (the format's JSON) as :func:`encode` does with no ``message``, prepared once per schema
    (an Avro schema's checks compiled, the id's header packed) since every record of a request shares it."""

    schema_id: int
    parsed: AnySchema
    frame: Callable[[Any], bytes] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "frame", _framer(self.schema_id, self.parsed))  # frozen: set once, here

    @property
    def schema_type(self) -> SchemaType:
        return self.parsed.schema_type


def _framer(schema_id: int, parsed: AnySchema) -> Callable[[Any], bytes]:
    if not isinstance(parsed, AvroSchema) or not 0 <= schema_id <= 0xFFFFFFFF:  # (an id too large: the error)
        return lambda value: _encode(schema_id, parsed, value, None)
    header = wire.frame(schema_id, b"")
    encode = wire.avro_encoder(parsed)
    return lambda value: header + encode(value)


@dataclass(frozen=True, slots=True)
class Decoded:
    """A framed record's value in its format's JSON (Avro: Avro's JSON encoding), with the id that framed it."""

    schema_id: int
    schema_type: SchemaType
    value: Any


class _Cache:
    """(cluster pk, schema id) → WriterSchema, least recently used out first. Owned by the module; any thread."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[tuple[uuid.UUID, int], WriterSchema] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[uuid.UUID, int]) -> WriterSchema | None:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple[uuid.UUID, int], value: WriterSchema) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_CACHE = _Cache(CACHE_SIZE)


def writer_schema(cluster: Cluster, schema_id: int) -> WriterSchema:
    """The schema registered with ``schema_id`` in ``cluster``'s registry; RegistryError 40403 when none."""
    key = (cluster.pk, schema_id)
    found = _CACHE.get(key)
    if found is None:
        schema = selectors.schema_get(cluster, schema_id)
        found = WriterSchema(schema.schema_id, selectors.parsed_of(schema))
        _CACHE.put(key, found)
    return found


def cached_writer_schema(cluster_pk: Any, schema_id: int) -> WriterSchema | None:
    """:func:`writer_schema` when this process has it, else None; never reads the database (for an event loop)."""
    return _CACHE.get((cluster_pk, schema_id))


def subject_schema(cluster: Cluster, subject: str, version: int = LATEST) -> WriterSchema:
    """``version`` of ``subject`` (default: the newest live one); RegistryError 40401/40402 when absent."""
    row = selectors.version_get(cluster, subject, version)
    return writer_schema(cluster, row.schema.schema_id)


def encode(writer: WriterSchema, value: Any, *, message: str | None = None) -> bytes:
    """``value`` (the format's JSON) encoded with ``writer`` and framed; ``message`` picks a Protobuf message
    (default: the file's first). Raises ``wire.PayloadError`` when the value does not fit the schema."""
    if message is None:
        return writer.frame(value)
    return _encode(writer.schema_id, writer.parsed, value, message)


def _encode(schema_id: int, parsed: AnySchema, value: Any, message: str | None) -> bytes:
    if isinstance(parsed, AvroSchema):
        return wire.frame(schema_id, wire.avro_encode(parsed, value))
    if isinstance(parsed, JsonSchema):
        return wire.frame(schema_id, wire.json_encode(parsed, value))
    indexes, payload = wire.protobuf_encode(parsed, value, message)
    return wire.frame(schema_id, payload, indexes)


def looks_framed(data: bytes | None) -> bool:
    """Whether ``data`` could be a framed record: the magic byte and room for an id."""
    return data is not None and len(data) >= wire.HEADER.size and data[0] == wire.MAGIC


def decode(cluster: Cluster, data: bytes) -> Decoded:
    """A framed record decoded with the schema its id names. Raises ``wire.WireFormatError`` (not framed),
    ``RegistryError`` 40403 (unknown id) or ``wire.PayloadError`` (bytes that do not fit the schema)."""
    schema_id, _, _ = wire.unframe(data)
    writer = writer_schema(cluster, schema_id)
    parsed = writer.parsed
    if isinstance(parsed, ProtobufSchema):
        _, indexes, payload = wire.unframe(data, protobuf=True)
        return Decoded(schema_id, SchemaType.PROTOBUF, wire.protobuf_decode(parsed, indexes, payload))
    payload = bytes(data[wire.HEADER.size:])
    if isinstance(parsed, AvroSchema):
        return Decoded(schema_id, SchemaType.AVRO, wire.avro_decode(parsed, payload))
    return Decoded(schema_id, SchemaType.JSON, wire.json_decode(parsed, payload))


def forget_cached() -> None:
    """Drop every cached schema (tests that count queries start from a cold cache)."""
    _CACHE.clear()
