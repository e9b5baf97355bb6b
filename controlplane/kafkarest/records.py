"""Produce requests and delivery reports of the v3 records API, as pure functions over JSON values.

A request names each key and value with a ``type`` -- BINARY (base64 ``data``), JSON (any JSON value,
written compactly) or STRING (UTF-8) -- and may set the partition, headers (base64 values) and a
timestamp. A key or value with a schema (``type`` AVRO, JSONSCHEMA or PROTOBUF with ``schema``, or
``schema_id``, ``schema_version``, ``subject``, or no ``type`` at all) needs the cluster's registry, which a
pure parse cannot reach: such a record is parsed into a :class:`SchemaRecord` whose key or value is a
:class:`SchemaSpec`, and ``kafkarest.schemas`` resolves and encodes it (docs/decisions/0028). Only the
Python parser makes them: the compiled one declines every spec that is not ``{"type", "data"}``, so the
usual record's path has no schema check at all.
"""

from __future__ import annotations

import binascii
import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from controlplane.kafkarest import fastjson
from controlplane.kafkarest._parse import parse_plain
from controlplane.kafkarest._split import NestingTooDeep, ObjectSplitter
from controlplane.kafkarest.errors import BAD_REQUEST, INVALID_PAYLOAD, PRODUCE_BATCH_INVALID, RestError

PLAIN_TYPES = ("BINARY", "JSON", "STRING")
SCHEMA_TYPES = ("AVRO", "JSONSCHEMA", "PROTOBUF")
MAX_BATCH_ENTRIES = 1000  # the REST Proxy allows 10; a larger batch is what makes REST produce fast
MAX_BATCH_ID_LENGTH = 80
_PLAIN = {kind: kind for kind in PLAIN_TYPES}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MILLISECOND = timedelta(milliseconds=1)
_SCHEMA_FIELDS = frozenset(("schema_id", "schema_version", "schema", "subject", "subject_name_strategy"))
SUBJECT_NAME_STRATEGIES = ("TOPIC_NAME", "RECORD_NAME", "TOPIC_RECORD_NAME")


@dataclass(frozen=True, slots=True)
class SchemaInfo:
    """How a schema'd key or value was written, for its delivery report (Confluent's ``ProduceResponseData``):
    hashable, so reports of one schema share their dicts (``_size_of``)."""

    type: str  # AVRO, JSONSCHEMA or PROTOBUF
    subject: str | None
    schema_id: int
    schema_version: int | None


class ProduceRecord(NamedTuple):
    """One record of a produce request, parsed. Immutable; a NamedTuple rather than a frozen dataclass because
    it is made for every record produced and a frozen dataclass's ``__init__`` (a ``object.__setattr__`` per
    field) cost four times as much."""

    partition: int | None
    key: bytes | None
    value: bytes | None
    key_type: str | SchemaInfo | None
    value_type: str | SchemaInfo | None
    headers: list[tuple[str, bytes | None]]
    timestamp_ms: int | None


@dataclass(frozen=True, slots=True)
class SchemaSpec:
    """A key or value to be written with a registered schema, as the request chose it (Confluent's
    ``ProduceRequestData``): ``type`` with ``schema`` (the text, registered if new), ``schema_id``,
    ``schema_version``, or none of them (the subject's latest); ``subject`` or ``subject_name_strategy`` names
    the subject. ``type`` None with nothing else set is the bare ``{"data": ...}``."""

    type: str | None
    subject: str | None
    strategy: str | None
    schema_id: int | None
    schema_version: int | None
    schema: str | None
    data: Any

    @property
    def bare(self) -> bool:
        return self.type is None and self.subject is None and self.strategy is None and self.schema_id is None \
            and self.schema_version is None


class SchemaRecord(NamedTuple):
    """A record with a schema'd key or value: a ProduceRecord whose key or value is still a SchemaSpec."""

    partition: int | None
    key: bytes | SchemaSpec | None
    value: bytes | SchemaSpec | None
    key_type: str | None
    value_type: str | None
    headers: list[tuple[str, bytes | None]]
    timestamp_ms: int | None


class SchemaPending(Exception):
    """Raised by the Python parser for a record that needs the registry: its callers catch it where they catch
    RestError, so the usual record pays no check for it."""

    def __init__(self, record: SchemaRecord) -> None:
        super().__init__("a record with a schema")
        self.record = record


def b64decode(data: str) -> bytes:
    """Strict base64 (only the alphabet and correct padding), as ``base64.b64decode(validate=True)`` but without
    its regular expression: binascii's strict mode checks the same in C."""
    return binascii.a2b_base64(data, strict_mode=True)


def _payload_error(message: str) -> RestError:
    return RestError(INVALID_PAYLOAD, f"Payload error. {message}")


def _optional(spec: dict[str, Any], name: str, kind: type, what: str) -> Any:
    value = spec.get(name)
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise RestError(BAD_REQUEST, f"{what}.{name} must be {'an integer' if kind is int else 'a string'}.")
    return value


def _schema_spec(spec: dict[str, Any], upper: str | None, what: str) -> SchemaSpec:
    """A spec with a schema, checked as Confluent's ``ProduceRequestData`` builder checks it (400 each)."""
    subject = _optional(spec, "subject", str, what)
    strategy = _optional(spec, "subject_name_strategy", str, what)
    schema_id = _optional(spec, "schema_id", int, what)
    version = _optional(spec, "schema_version", int, what)
    schema = _optional(spec, "schema", str, what)
    if strategy is not None:
        strategy = strategy.upper()
        if strategy not in SUBJECT_NAME_STRATEGIES:
            raise RestError(BAD_REQUEST, f"{what}.subject_name_strategy must be one of "
                                         f"{', '.join(SUBJECT_NAME_STRATEGIES)}.")
    if strategy is not None and subject is not None:
        raise RestError(BAD_REQUEST, f"{what}: only one of 'subject_name_strategy' or 'subject' can be used.")
    if sum(x is not None for x in (schema_id, version, schema)) > 1:
        raise RestError(BAD_REQUEST, f"{what}: only one of 'schema_id', 'schema_version' or 'schema' can be used.")
    if upper is not None and upper in SCHEMA_TYPES:
        if schema_id is not None or version is not None:
            field = "schema_id" if schema_id is not None else "schema_version"
            raise RestError(BAD_REQUEST, f"{what}: '{field}' cannot be used with 'type': the schema's own type "
                                         "is used.")
        if schema is None:
            raise RestError(BAD_REQUEST, f"{what}: 'type={upper}' needs 'schema' (the schema text); to use a "
                                         "registered schema, send 'schema_id' or 'schema_version' without 'type'.")
    elif upper is not None:  # a plain type with schema fields
        extra = next(k for k in ("subject_name_strategy", "subject", "schema_id", "schema_version", "schema")
                     if spec.get(k) is not None)
        raise RestError(BAD_REQUEST, f"{what}: 'type={upper}' cannot be used with '{extra}'.")
    elif schema is not None:
        raise RestError(BAD_REQUEST, f"{what}: 'schema' needs 'type' (AVRO, JSONSCHEMA or PROTOBUF).")
    if "data" not in spec:
        raise _payload_error(f"{what}.data is required.")
    return SchemaSpec(upper, subject, strategy, schema_id, version, schema, spec["data"])


def _data(spec: Any, what: str) -> tuple[str | None, bytes | SchemaSpec | None]:
    if spec is None:
        return None, None
    if not isinstance(spec, dict):
        raise _payload_error(f"{what} must be an object with 'type' and 'data'.")
    kind = spec.get("type")
    if kind is None:  # no type: a registered schema (or JSON when the topic's subject has none)
        return None, _schema_spec(spec, None, what)
    # The usual spelling is looked up (no upper() per record); anything else is normalised the slow way.
    upper = _PLAIN.get(kind) if isinstance(kind, str) else None
    if upper is None:
        if not isinstance(kind, str):
            raise _payload_error(f"{what}.type must be a string.")
        upper = kind.upper()
    if upper in SCHEMA_TYPES or (not _SCHEMA_FIELDS.isdisjoint(spec)
                                 and any(spec.get(k) is not None for k in _SCHEMA_FIELDS)):
        return None, _schema_spec(spec, upper, what)
    if upper not in PLAIN_TYPES:
        raise _payload_error(f"{what}.type must be one of BINARY, JSON, STRING, AVRO, JSONSCHEMA, PROTOBUF, "
                             f"not {upper!r}.")
    if "data" not in spec:
        raise _payload_error(f"{what}.data is required.")
    data = spec["data"]
    if upper == "JSON":
        try:
            return upper, fastjson.dumps(data)
        except UnicodeEncodeError as exc:  # a lone surrogate: refused by the parsers, but not every body was parsed
            raise _payload_error(f"{what}.data is not valid Unicode: {exc.reason}.") from exc
    if data is None:
        return upper, None
    if not isinstance(data, str):
        raise _payload_error(f"{what}.data must be a string for type {upper}.")
    if upper == "STRING":
        try:
            return upper, data.encode()
        except UnicodeEncodeError as exc:  # a lone surrogate ("\ud800"), which JSON can spell but UTF-8 cannot
            raise _payload_error(f"{what}.data is not valid Unicode: {exc.reason}.") from exc
    try:
        return upper, b64decode(data)
    except (binascii.Error, ValueError) as exc:
        raise _payload_error(f"{what}.data is not valid base64.") from exc


def _headers(headers: Any) -> list[tuple[str, bytes | None]]:
    if headers is None:
        return []
    if not isinstance(headers, list):
        raise _payload_error("headers must be a list of {name, value}.")
    out: list[tuple[str, bytes | None]] = []
    for header in headers:
        if not isinstance(header, dict) or not isinstance(header.get("name"), str):
            raise _payload_error("each header needs a string 'name'.")
        try:
            header["name"].encode()  # sent as UTF-8
        except UnicodeEncodeError as exc:
            raise _payload_error(f"header {header['name']!r}: the name is not valid Unicode: {exc.reason}.") from exc
        value = header.get("value")
        if value is None:
            out.append((header["name"], None))
            continue
        if not isinstance(value, str):
            raise _payload_error(f"header {header['name']!r}: value must be base64 or null.")
        try:
            out.append((header["name"], b64decode(value)))
        except (binascii.Error, ValueError) as exc:
            raise _payload_error(f"header {header['name']!r}: value is not valid base64.") from exc
    return out


def parse_timestamp(value: Any) -> int | None:
    """An ISO 8601 date-time as epoch milliseconds (naive means UTC). One before the epoch is refused, as Kafka's
    producer refuses a negative timestamp (year 0001 was accepted, and reported back as no timestamp at all);
    ``datetime`` bounds the other end at year 9999, well within a Kafka timestamp."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise _payload_error("timestamp must be an ISO 8601 date-time string.")
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise _payload_error(f"timestamp {value!r} is not an ISO 8601 date-time.") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    ms = (moment - _EPOCH) // _MILLISECOND  # exact, where the float of ``timestamp()`` may round
    if ms < 0:
        raise _payload_error(f"timestamp {value!r} is before 1970-01-01T00:00:00Z: Kafka timestamps are "
                             "milliseconds since the epoch, never negative.")
    return ms


def format_timestamp(ms: int | None) -> str | None:
    if ms is None or ms < 0:
        return None
    return _format_ms(ms)


@functools.lru_cache(maxsize=4096)
def _format_ms(ms: int) -> str | None:
    """Cached: the records of a batch share a few milliseconds, and a datetime per report was 10% of a batch.
    Exact (a float of seconds lost the last millisecond by year 9999); None past what ``datetime`` can show."""
    try:
        moment = _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_produce_request(body: Any) -> ProduceRecord:
    """One ProduceRequest object; RestError 42206 (400 for a malformed schema spec) when it is not valid, and
    SchemaPending for a record with a schema."""
    record = parse_plain(body)  # the usual record, parsed in C
    return record if record is not None else parse_any_produce_request(body)


def parse_any_produce_request(body: Any) -> ProduceRecord:
    """``parse_produce_request`` of any body, in Python: every unusual record and every error is parsed here,
    and ``parse_plain``'s results must be what this returns. A record with a schema raises SchemaPending."""
    if type(body) is SchemaRecord:  # parsed already (a records:batch entry), handed on again
        raise SchemaPending(body)
    if not isinstance(body, dict):
        raise _payload_error("each record must be a JSON object.")
    partition = body.get("partition_id")
    if partition is not None and (not isinstance(partition, int) or isinstance(partition, bool) or partition < 0):
        raise _payload_error("partition_id must be a non-negative integer.")
    key_type, key = _data(body.get("key"), "key")
    value_type, value = _data(body.get("value"), "value")
    # Absent headers and timestamp (the usual record) cost no call each.
    headers = body.get("headers")
    timestamp = body.get("timestamp")
    parsed_headers = [] if headers is None else _headers(headers)
    stamp = None if timestamp is None else parse_timestamp(timestamp)
    if isinstance(key, SchemaSpec) or isinstance(value, SchemaSpec):
        raise SchemaPending(SchemaRecord(partition, key, value, key_type, value_type, parsed_headers, stamp))
    return ProduceRecord(partition, key, value, key_type, value_type, parsed_headers, stamp)


def as_record(value: Any) -> tuple[ProduceRecord | None, Any]:
    """A request's record as parsed (a ProduceRecord, a RestError already found for it, or a body to parse):
    (the record, None) or (None, the RestError that takes its place, or the SchemaRecord still to encode)."""
    if isinstance(value, ProduceRecord):
        return value, None
    if isinstance(value, RestError):
        return None, value
    try:
        return parse_produce_request(value), None
    except RestError as exc:
        return None, exc
    except SchemaPending as pending:
        return None, pending.record


def parse_batch(body: Any) -> list[tuple[str, ProduceRecord | SchemaRecord | RestError]]:
    """A ProduceBatchRequest: each entry's id with its record, or the error that entry has.

    The batch as a whole is refused (42208) when it is empty, too long, or its ids are missing or repeated.
    """
    if not isinstance(body, dict) or not isinstance(body.get("entries"), list):
        raise RestError(PRODUCE_BATCH_INVALID, "Batch must be an object with an 'entries' list.")
    entries = body["entries"]
    if not entries:
        raise RestError(PRODUCE_BATCH_INVALID, "Empty batch.")
    if len(entries) > MAX_BATCH_ENTRIES:
        raise RestError(PRODUCE_BATCH_INVALID, f"Too many entries: at most {MAX_BATCH_ENTRIES} in one batch.")
    ids: list[str] = []
    out: list[tuple[str, ProduceRecord | SchemaRecord | RestError]] = []
    for entry in entries:
        entry_id = entry.get("id") if isinstance(entry, dict) else None
        if not isinstance(entry_id, str) or not 1 <= len(entry_id) <= MAX_BATCH_ID_LENGTH:
            raise RestError(PRODUCE_BATCH_INVALID,
                            f"Batch entry identifier is not valid: each 'id' is a string of 1-{MAX_BATCH_ID_LENGTH}.")
        ids.append(entry_id)
        try:
            out.append((entry_id, parse_produce_request(entry)))  # it reads its own fields only, never "id"
        except RestError as exc:
            out.append((entry_id, exc))
        except SchemaPending as pending:
            out.append((entry_id, pending.record))
    if len(set(ids)) != len(ids):
        raise RestError(PRODUCE_BATCH_INVALID, "Batch entry IDs are not distinct.")
    return out


def _size(kind: str | SchemaInfo | None, data: bytes | None) -> dict[str, Any] | None:
    if kind is None:
        return None
    return _size_of(kind, 0 if data is None else len(data))


@functools.lru_cache(maxsize=1024)
def _size_of(kind: str | SchemaInfo, size: int) -> dict[str, Any]:
    """Shared by every report with the same type and size (records of a batch mostly are): reports are only
    serialised, never changed, so one dict serves them all. A schema'd one says which schema wrote it, as
    Confluent's ``ProduceResponseData`` does (``subject`` where known)."""
    if isinstance(kind, str):
        return {"type": kind, "size": size}
    report: dict[str, Any] = {"type": kind.type}
    if kind.subject is not None:
        report["subject"] = kind.subject
    report["schema_id"] = kind.schema_id
    if kind.schema_version is not None:
        report["schema_version"] = kind.schema_version
    report["size"] = size
    return report


def delivery_report(cluster_id: str, topic: str, record: ProduceRecord, partition: int, offset: int,
                    timestamp_ms: int | None) -> dict[str, Any]:
    return {"error_code": 200, "cluster_id": cluster_id, "topic_name": topic, "partition_id": partition,
            "offset": offset, "timestamp": format_timestamp(timestamp_ms),
            "key": _size(record.key_type, record.key), "value": _size(record.value_type, record.value)}


def batch_success(entry_id: str, cluster_id: str, topic: str, record: ProduceRecord, partition: int, offset: int,
                  timestamp_ms: int | None) -> dict[str, Any]:
    """A ``records:batch`` success: the delivery report without ``error_code``, after the entry's ``id``."""
    return {"id": entry_id, "cluster_id": cluster_id, "topic_name": topic, "partition_id": partition,
            "offset": offset, "timestamp": format_timestamp(timestamp_ms),
            "key": _size(record.key_type, record.key), "value": _size(record.value_type, record.value)}


class ConcatenatedJson:
    """Splits a byte stream of concatenated JSON objects (whitespace between them optional) into values.

    Feed it chunks as they arrive: each complete top-level object is yielded as soon as its closing brace is
    in, so a streaming client gets its report before it sends the next record. The bytes are never decoded as
    a whole: a compiled scan (``_split.ObjectSplitter``) finds where each object ends and has orjson parse it,
    half the cost of decoding to ``str`` and parsing with the standard library; only an object orjson refuses
    or could misread (a long integer) is parsed by the standard library, for its value and its error message.
    A malformed object, or one that is not UTF-8, yields a RestError in its place and the stream goes on with
    the next one (bad UTF-8 in a record used to end the whole stream, decoded with it). At most one incomplete
    object is buffered, up to ``max_value_bytes``; the scan resumes where it stopped when more arrives. An object
    the standard library reads is held to what orjson refuses (``fastjson.careful_loads``), and one nested
    deeper than ``fastjson``'s bound is refused unparsed. Owned by one request.
    """

    def __init__(self, max_value_bytes: int) -> None:
        self._buffer = b""  # an incomplete object (or character, between objects) kept for the next chunk
        self._splitter = ObjectSplitter()
        self._max = max_value_bytes

    def feed(self, chunk: bytes) -> Iterator[Any]:
        data = self._buffer + chunk if self._buffer else bytes(chunk)
        values, position, status = self._splitter.split(data)
        self._buffer = data[position:] if status == 0 else b""
        for value in values:
            yield value if type(value) is dict else _careful(value)
        if status:
            self._not_an_object(data, position)
        elif len(self._buffer) > self._max:
            raise RestError(INVALID_PAYLOAD, "Payload error. A record exceeds the size limit.")

    def finish(self) -> Iterator[Any]:
        """Values left at the end of the body; a truncated last object is an error."""
        if self._buffer:
            raise _payload_error("the body ends inside a JSON object.")
        return iter(())

    def _not_an_object(self, data: bytes, position: int) -> None:
        """Between objects, a byte that does not open one: the stream ends, with the message it had when the
        body was decoded whole (a character cut off by the chunk's end waits for the rest of it)."""
        if data[position] >= 0x80:
            head = data[position:position + 4]
            try:
                head.decode()
            except UnicodeDecodeError as exc:
                if exc.start == 0 and exc.reason == "unexpected end of data" and position + 4 >= len(data):
                    self._buffer = head
                    return
                if exc.start == 0:
                    raise _payload_error("the body is not UTF-8.") from exc
        raise _payload_error("each record must be a JSON object.")


def _careful(data: bytes | NestingTooDeep) -> Any:
    """An object orjson refused or could misread, parsed by the standard library as ``fastjson.loads`` would
    (or the splitter's refusal of one nested too deep, which is not parsed at all)."""
    try:
        if isinstance(data, NestingTooDeep):
            raise fastjson.Refused(str(data))
        return fastjson.careful_loads(data)
    except UnicodeDecodeError:
        return _payload_error("a record is not valid JSON: it is not UTF-8.")
    except json.JSONDecodeError as exc:
        return _payload_error(f"a record is not valid JSON: {exc.msg}.")
    except fastjson.Refused as exc:
        return _payload_error(f"a record is refused: {exc}.")
