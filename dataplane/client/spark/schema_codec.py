"""Typed keys and values: the registry schemas a query reads or writes with, and the Arrow batches they make.

Planning (driver) resolves each typed side's schema once (``resolve_read``/``resolve_write``): the reader
schema fixes the DataFrame's type for the whole query, as ``from_avro``'s schema does. Tasks (executors)
decode each record with the schema whose id it carries (looked up once per id: clients and their caches live
as long as the Python worker) and resolve it to the reader schema, so records written with an older
compatible version read as the latest. A record that is not framed, names an unknown id or does not
decode fails the task (``FAILFAST``, naming topic, partition and offset) or reads as a null struct with
its bytes in ``_corrupt_<side>`` (``PERMISSIVE``).

Protobuf records are parsed with the reader's message class, as Confluent's deserializer given a message type
parses them: fields match by number (the wire's rule, so a renamed field still reads), fields the writer lacks
read as null or their default (``schema_protobuf``); the writer's schema (by id) only checks that the record's
message indexes name the reader's message.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from google.protobuf.message import DecodeError, EncodeError, Message
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import BinaryType, DataType, StructField, StructType

from dataplane.client.registry import RegisteredSchema, RegistryClient, RegistryError, SchemaLookup, StaticSchemas
from dataplane.client.spark.options import SparkSourceError
from dataplane.client.spark.schema_options import RegistryOptions, SchemaOptions, SideOptions
from dataplane.client.spark.schema_protobuf import fill_message, message_reader, protobuf_spark_type
from dataplane.client.spark.schema_types import (
    Convert,
    avro_spark_type,
    avro_write_convert,
    json_spark_type,
    json_to_spark,
    spark_avro_schema,
)
from dataplane.schemas import AvroSchema, JsonSchema, ProtobufSchema, SchemaType, message_indexes, message_name
from dataplane.schemas.native import avro_decode_native, avro_encode_native
from dataplane.schemas.protobuf_codec import message_class, resolve_message
from dataplane.schemas.wire import (
    HEADER,
    MAGIC,
    PayloadError,
    WireFormatError,
    frame,
    json_decode,
    json_encode,
    unframe,
)

_EXPECTED = {"avro": SchemaType.AVRO, "jsonschema": SchemaType.JSON, "protobuf": SchemaType.PROTOBUF}
_clients: dict[RegistryOptions, SchemaLookup] = {}
_clients_lock = threading.Lock()


def registry_client(options: RegistryOptions) -> SchemaLookup:
    """One client (and so one schema-by-id cache) per registry and key in this process; the inline schemas'
    lookup when the query was given them instead of a registry."""
    with _clients_lock:
        client = _clients.get(options)
        if client is None:
            if options.inline is not None:
                try:
                    client = StaticSchemas(options.inline, source="the schemas given to this query")
                except RegistryError as exc:
                    raise SparkSourceError(f"option 'schema.registry.inline': {exc}") from None
            else:
                client = RegistryClient(options.url, options.key, options.secret, timeout=options.timeout_ms / 1000)
            if len(_clients) >= 64:  # inline schemas make a key per query: bound what a long-lived worker keeps
                _clients.clear()
            _clients[options] = client
        return client


def _schema_of(client: SchemaLookup, side: SideOptions) -> RegisteredSchema:
    try:
        if side.schema_id is not None:
            found = client.schema_by_id(side.schema_id)
        else:
            found = client.version(side.subject, side.version if side.version is not None else "latest")
    except RegistryError as exc:
        raise SparkSourceError(f"{side.side}.format={side.format}: {exc}") from None
    if found.schema_type is not _EXPECTED[side.format]:
        raise SparkSourceError(f"{side.side}.format={side.format}, but the schema of subject {side.subject!r} "
                               f"(id {found.id}) is {found.schema_type}")
    return found


def _message(side: SideOptions, found: RegisteredSchema) -> str | None:
    """The full name of the Protobuf message a side reads or writes (None for other formats)."""
    if not isinstance(found.parsed, ProtobufSchema):
        return None
    try:
        return resolve_message(found.parsed, side.message)
    except PayloadError as exc:
        raise SparkSourceError(f"{side.side}.schema.message: {exc} (schema id {found.id} of subject "
                               f"{side.subject!r}; messages: {', '.join(found.parsed.messages)})") from None


# -- reading --------------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SideRead:
    side: str
    format: str
    reader_id: int
    spark_type: DataType
    message: str | None = None  # Protobuf: the reader message's full name


@dataclass(frozen=True, slots=True)
class TypedRead:
    registry: RegistryOptions
    mode: str
    sides: tuple[SideRead, ...]

    def spark_schema(self, base: StructType) -> StructType:
        """``base`` (the Kafka source's columns) with the typed sides' columns typed, plus ``_corrupt_*``."""
        typed = {s.side: s.spark_type for s in self.sides}
        fields = [StructField(f.name, typed.get(f.name, f.dataType), True) for f in base.fields]
        if self.mode == "PERMISSIVE":
            fields += [StructField(f"_corrupt_{s.side}", BinaryType(), True) for s in self.sides]
        return StructType(fields)


def resolve_read(options: SchemaOptions) -> TypedRead:
    """Look the reader schemas up (latest, a version or an id) and derive the columns' Spark types."""
    client = registry_client(options.registry)
    sides = []
    for side in (options.key, options.value):
        if side is None:
            continue
        found = _schema_of(client, side)
        if isinstance(found.parsed, AvroSchema):
            spark_type, _ = avro_spark_type(found.parsed)
        elif isinstance(found.parsed, JsonSchema):
            spark_type = json_spark_type(found.parsed)
        else:
            message = _message(side, found)
            try:
                spark_type = protobuf_spark_type(message_class(found.parsed, message).DESCRIPTOR)
            except PayloadError as exc:
                raise SparkSourceError(f"{side.side}.format=protobuf: {exc}") from None
            sides.append(SideRead(side.side, side.format, found.id, spark_type, message))
            continue
        sides.append(SideRead(side.side, side.format, found.id, spark_type))
    return TypedRead(options.registry, options.mode, tuple(sides))


class _SideDecoder:
    """Decodes one column of framed payloads into values of the reader's Spark type (one per task)."""

    def __init__(self, client: SchemaLookup, side: SideRead) -> None:
        self.client = client
        self.side = side
        reader = client.schema_by_id(side.reader_id).parsed
        self.reader = reader if isinstance(reader, AvroSchema) else None
        self.convert: Convert | None = avro_spark_type(reader)[1] if isinstance(reader, AvroSchema) else None
        if isinstance(reader, ProtobufSchema):
            self.message_class = message_class(reader, side.message)
            self.read_message = message_reader(self.message_class.DESCRIPTOR)
        self.arrow_type = to_arrow_type(side.spark_type, timezone="UTC")
        self.writers: dict[int, Any] = {}
        self.missing: dict[int, str] = {}  # ids the registry does not know, or of another schema type

    def _writer(self, schema_id: int) -> Any:
        """The writer schema of an id, looked up once per task; an id the registry does not have (404) is the
        record's fault, any other registry failure (401, unreachable) the query's, never a null row."""
        found = self.writers.get(schema_id)
        if found is None:
            missing = self.missing.get(schema_id)
            if missing is not None:
                raise PayloadError(missing)
            try:
                registered = self.client.schema_by_id(schema_id)
            except RegistryError as exc:
                if exc.status != 404:
                    raise SparkSourceError(str(exc)) from None
                self.missing[schema_id] = str(exc)
                raise PayloadError(str(exc)) from None
            if registered.schema_type is not _EXPECTED[self.side.format]:
                self.missing[schema_id] = f"schema id {schema_id} is {registered.schema_type}, not {self.side.format}"
                raise PayloadError(self.missing[schema_id])
            found = self.writers[schema_id] = registered.parsed
        return found

    def decode_one(self, data: bytes) -> Any:
        if len(data) < HEADER.size or data[0] != MAGIC:
            raise PayloadError("not in the schema registry's wire format (no magic byte 0 and schema id)")
        schema_id = HEADER.unpack_from(data)[1]
        writer = self._writer(schema_id)
        payload = data[HEADER.size:]
        if isinstance(writer, ProtobufSchema):
            return self._protobuf(writer, data)
        if isinstance(writer, AvroSchema):
            value = avro_decode_native(writer, payload, None if schema_id == self.side.reader_id else self.reader)
            return value if self.convert is None else self.convert(value)
        return json_to_spark(self.side.spark_type, json_decode(writer, payload))

    def _protobuf(self, writer: ProtobufSchema, data: bytes) -> Any:
        try:
            schema_id, indexes, payload = unframe(data, protobuf=True)
            written = message_name(writer, indexes)
        except (WireFormatError, KeyError) as exc:
            raise PayloadError(f"bad Protobuf message indexes: {exc}") from None
        if written != self.side.message:
            raise PayloadError(f"the record is a {written!r} (schema id {schema_id}), the reader reads "
                               f"{self.side.message!r}")
        message = self.message_class()
        try:
            message.ParseFromString(payload)
        except DecodeError as exc:
            raise PayloadError(f"payload does not decode as the Protobuf message {written!r}: {exc}") from None
        if not message.IsInitialized():
            raise PayloadError(f"payload does not decode as the Protobuf message {written!r}: required fields "
                               f"missing: {', '.join(message.FindInitializationErrors())}")
        try:
            return self.read_message(message)
        except (OverflowError, ValueError) as exc:  # a Timestamp beyond what Python's datetime holds
            raise PayloadError(f"a value of the Protobuf message {written!r} has no Spark value: {exc}") from None

    def decode(self, column: pa.Array, where: Callable[[int], str], permissive: bool) -> tuple[pa.Array, pa.Array]:
        values: list[Any] = []
        corrupt: list[bytes | None] = []
        for i, data in enumerate(column.to_pylist()):
            if data is None:
                values.append(None)
                corrupt.append(None)
                continue
            try:
                values.append(self.decode_one(data))
                corrupt.append(None)
            except PayloadError as exc:
                if not permissive:
                    raise SparkSourceError(f"cannot decode the {self.side.side} of {where(i)} as "
                                           f"{self.side.format}: {exc} (mode=PERMISSIVE reads it as null)") from None
                values.append(None)
                corrupt.append(data)
        try:
            array = pa.array(values, type=self.arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise SparkSourceError(f"decoded {self.side.side}s do not fit {self.side.spark_type.simpleString()}: "
                                   f"{exc}") from None
        return array, pa.array(corrupt, type=pa.binary())


class BatchDecoder:
    """Turns the source's Arrow batches into typed ones (built in the task, never pickled)."""

    def __init__(self, typed: TypedRead, base: StructType) -> None:
        client = registry_client(typed.registry)
        try:
            self.sides = [_SideDecoder(client, s) for s in typed.sides]
        except RegistryError as exc:
            raise SparkSourceError(str(exc)) from None
        self.permissive = typed.mode == "PERMISSIVE"
        self.schema = pa.schema([pa.field(f.name, to_arrow_type(f.dataType, timezone="UTC"), True)
                                 for f in typed.spark_schema(base).fields])

    def decode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        topics, partitions, offsets = batch.column("topic"), batch.column("partition"), batch.column("offset")

        def where(i: int) -> str:
            return f"topic {topics[i].as_py()} partition {partitions[i].as_py()} offset {offsets[i].as_py()}"

        columns = {name: batch.column(name) for name in batch.schema.names}
        corrupt = {}
        for side in self.sides:
            columns[side.side.side], corrupt[f"_corrupt_{side.side.side}"] = side.decode(
                batch.column(side.side.side), where, self.permissive)
        if self.permissive:
            columns.update(corrupt)
        return pa.RecordBatch.from_arrays([columns[f.name] for f in self.schema], schema=self.schema)


# -- writing --------------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class SideWrite:
    side: str
    format: str
    schema_id: int
    message: str | None = None  # Protobuf: the written message's full name


@dataclass(frozen=True, slots=True)
class TypedWrite:
    registry: RegistryOptions
    sides: tuple[SideWrite, ...]


def resolve_write(options: SchemaOptions, columns: dict[str, DataType]) -> TypedWrite:
    """The schema each typed side is written with; registers one derived from the column when asked to."""
    client = registry_client(options.registry)
    sides = []
    for side in (options.key, options.value):
        if side is None:
            continue
        column = columns.get(side.side)
        if column is None:
            if side.side == "key":
                continue
            raise SparkSourceError("the DataFrame to write needs a 'value' column")
        try:
            found = _schema_of(client, side)
        except SparkSourceError:
            if not side.auto_register or side.schema_id is not None or side.version is not None:
                raise
            text = json.dumps(spark_avro_schema(column))
            try:
                schema_id = client.register(side.subject, SchemaType.AVRO, text)
                found = client.schema_by_id(schema_id)
            except RegistryError as exc:
                raise SparkSourceError(f"{side.side}.schema.auto.register: {exc}") from None
        message = _message(side, found)
        _check_columns(side, column, found, message)
        sides.append(SideWrite(side.side, side.format, found.id, message))
    return TypedWrite(options.registry, tuple(sides))


def _check_columns(side: SideOptions, column: DataType, found: RegisteredSchema, message: str | None) -> None:
    """Struct fields the schema does not have would be dropped silently: refuse them before any task runs."""
    if not isinstance(column, StructType):
        if isinstance(found.parsed, ProtobufSchema):
            raise SparkSourceError(f"column '{side.side}' must be a struct to be written as the Protobuf message "
                                   f"{message!r}, not {column.simpleString()}")
        return
    if isinstance(found.parsed, ProtobufSchema):
        try:
            known = set(message_class(found.parsed, message).DESCRIPTOR.fields_by_name)
        except PayloadError as exc:
            raise SparkSourceError(f"{side.side}.format=protobuf: {exc}") from None
        extra = [f.name for f in column.fields if f.name not in known]
        if extra:
            raise SparkSourceError(f"column '{side.side}' has field(s) {extra} that the Protobuf message {message!r} "
                                   f"(schema id {found.id} of subject {side.subject!r}) does not have")
        return
    raw = found.parsed.raw
    if isinstance(found.parsed, AvroSchema) and isinstance(raw, dict) and raw.get("type") == "record":
        known = {f["name"] for f in raw["fields"]}
    elif isinstance(found.parsed, JsonSchema) and isinstance(raw, dict) and isinstance(raw.get("properties"), dict) \
            and raw.get("additionalProperties") is False:
        known = set(raw["properties"])
    else:
        return
    extra = [f.name for f in column.fields if f.name not in known]
    if extra:
        raise SparkSourceError(f"column '{side.side}' has field(s) {extra} that schema id {found.id} of subject "
                               f"{side.subject!r} does not have")


def _plain(value: Any) -> Any:
    """Arrow's Python values as fastavro takes them: maps (lists of pairs) become dicts."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        if value and all(isinstance(x, tuple) and len(x) == 2 for x in value):
            return {k: _plain(v) for k, v in value}
        return [_plain(x) for x in value]
    return value


def _json_ready(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_ready(x) for x in value]
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


class BatchEncoder:
    """Replaces typed ``key``/``value`` columns of the sink's batches with framed payloads (one per task)."""

    def __init__(self, typed: TypedWrite) -> None:
        client = registry_client(typed.registry)
        try:
            self.sides = [(s, client.schema_by_id(s.schema_id).parsed) for s in typed.sides]
        except RegistryError as exc:
            raise SparkSourceError(str(exc)) from None
        self.protobuf: dict[str, tuple[type[Message], list[int]]] = {}
        self.avro_convert = {s.side: avro_write_convert(schema) for s, schema in self.sides
                             if isinstance(schema, AvroSchema)}

    def encode(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        names = batch.schema.names
        arrays = dict(zip(names, batch.columns, strict=True))
        for side, schema in self.sides:
            if side.side not in arrays:
                continue
            out: list[bytes | None] = []
            for i, value in enumerate(arrays[side.side].to_pylist()):
                if value is None:
                    out.append(None)
                    continue
                try:
                    if isinstance(schema, AvroSchema):
                        convert = self.avro_convert.get(side.side)
                        plain = _plain(value)
                        payload = avro_encode_native(schema, plain if convert is None else convert(plain))
                    elif isinstance(schema, JsonSchema):
                        payload = json_encode(schema, _json_ready(_plain(value)))
                    else:
                        out.append(self._protobuf(side, schema, _plain(value)))
                        continue
                except PayloadError as exc:
                    raise SparkSourceError(f"row {i} of the batch: its {side.side} does not fit schema id "
                                           f"{side.schema_id}: {exc}") from None
                out.append(frame(side.schema_id, payload))
            arrays[side.side] = pa.array(out, type=pa.binary())
        return pa.RecordBatch.from_arrays(list(arrays.values()), names=names)

    def _protobuf(self, side: SideWrite, schema: ProtobufSchema, value: Any) -> bytes:
        """One framed record of the side's message: fields set by name, then the message indexes."""
        found = self.protobuf.get(side.side)
        if found is None:
            found = self.protobuf[side.side] = (message_class(schema, side.message),
                                                message_indexes(schema, side.message or ""))
        cls, indexes = found
        if not isinstance(value, dict):
            raise PayloadError(f"expected a struct, got {type(value).__name__}")
        message = cls()
        fill_message(message, value)
        try:
            payload = message.SerializeToString(deterministic=True)
        except EncodeError:
            raise PayloadError(f"required fields missing: {', '.join(message.FindInitializationErrors())}") from None
        return frame(side.schema_id, payload, indexes)
