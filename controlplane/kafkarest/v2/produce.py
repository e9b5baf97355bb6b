"""v2 produce: records in an embedded format (binary: base64; json: any JSON value; avro, jsonschema, protobuf:
the format's JSON, written with a registered schema), one offset report each.

The format comes from the request's Content-Type, as in Confluent's REST Proxy. A schema'd request names its
key and value schemas once (``key_schema``/``value_schema`` text, registered under ``<topic>-key`` and
``<topic>-value`` when new, or ``key_schema_id``/``value_schema_id``); its records are framed in the
registry's wire format in one pass (:func:`encode_with`, each schema's encoder prepared once by
``registry.serde``), and the answer carries the two ids. The schemas are resolved by ``kafkarest.schemas``: on
a thread, as it may read the database, or for ids this process has cached, on the event loop with no database
(:func:`cached_schemas`, decision 0031). Any record that does not fit its schema refuses the whole request, as
Confluent's.

Records go through REST produce's one engine (``kafkarest.produce``: ``produce.streaming`` for API keys,
``produce.services`` from the DRF view), so a v2 record is partitioned and acknowledged exactly like a v3 or a
Kafka-client one.

A body that is not JSON, or not the request's shape, is a 400 (as Confluent's); no records, 422; a bad value,
42206 -- each refuses the whole request. A record the cluster refuses gets its own ``error_code`` and ``error``
in the answer, the others are still written.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass
from typing import Any, NamedTuple

from django.db import close_old_connections

from controlplane.kafkarest import fastjson, schemas
from controlplane.kafkarest.access import ClusterAccess
from controlplane.kafkarest.errors import (
    BAD_REQUEST,
    INVALID_PAYLOAD,
    PARTITION_NOT_FOUND,
    UNPROCESSABLE_ENTITY,
    UNSUPPORTED_MEDIA_TYPE,
    RestError,
)
from controlplane.kafkarest.produce import services
from controlplane.kafkarest.produce.engine import Delivered, Outcome, Produced
from controlplane.kafkarest.records import ProduceRecord, b64decode
from dataplane.schemas import wire

ROOT_REFUSAL = ("Root paths need an API key scoped to one cluster: this key reaches every cluster of its tenant, "
                "so the path does not say which one you mean. Create a scoped key (POST /api/v1/tenants/{slug}/"
                "api-keys with \"cluster\": the cluster's id), or use /kafka/v2/clusters/{cluster_id}/... .")
BINARY = "application/vnd.kafka.binary.v2+json"
JSON = "application/vnd.kafka.json.v2+json"
SCHEMA_FORMATS = {"application/vnd.kafka.avro.v2+json": "avro",
                  "application/vnd.kafka.jsonschema.v2+json": "jsonschema",
                  "application/vnd.kafka.protobuf.v2+json": "protobuf"}
SCHEMA_TYPES = frozenset(SCHEMA_FORMATS.values())
_SCHEMA_FIELDS = ("key_schema", "key_schema_id", "value_schema", "value_schema_id")


class V2Record(NamedTuple):
    """One record of a request (a NamedTuple: one is made per record, and a frozen dataclass's ``__init__``
    cost four times as much)."""

    key: Any  # bytes (binary, json) or, before ``encode_schema_records``, the schema'd format's JSON
    value: Any
    partition: int | None


@dataclass(frozen=True, slots=True)
class V2Request:
    """A parsed produce request: its records, and for a schema'd format the schemas it names."""

    records: list[V2Record]
    key_schema: str | None = None
    key_schema_id: int | None = None
    value_schema: str | None = None
    value_schema_id: int | None = None
    key_id: int | None = None  # the ids the records were framed with, for the answer
    value_id: int | None = None


def _payload_error(message: str) -> RestError:
    return RestError(INVALID_PAYLOAD, f"Payload error. {message}")


def produce_format(content_type: str | None) -> str:
    """``binary``, ``json``, ``avro``, ``jsonschema`` or ``protobuf`` from the request's Content-Type; 415 for
    anything else."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media == BINARY:
        return "binary"
    if media == JSON:
        return "json"
    if media in SCHEMA_FORMATS:
        return SCHEMA_FORMATS[media]
    raise RestError(UNSUPPORTED_MEDIA_TYPE, f"Unsupported Content-Type {media or '(none)'!r}: send {BINARY}, "
                                            f"{JSON} or {', '.join(SCHEMA_FORMATS)}.")


def _data(fmt: str, value: Any, what: str) -> Any:
    if value is None:
        return None
    if fmt in ("avro", "jsonschema", "protobuf"):
        return value  # encoded with its schema by encode_schema_records
    if fmt == "json":
        return fastjson.dumps(value)
    if not isinstance(value, str):
        raise _payload_error(f"{what} must be a base64 string for the binary format.")
    try:
        return b64decode(value)
    except (binascii.Error, ValueError) as exc:
        raise _payload_error(f"{what} is not valid base64.") from exc


def _schema_field(body: dict[str, Any], name: str) -> Any:
    value = body.get(name)
    kind = int if name.endswith("_id") else str
    if value is not None and (not isinstance(value, kind) or isinstance(value, bool)):
        raise RestError(BAD_REQUEST, f"{name} must be {'an integer' if kind is int else 'a string'}.")
    return value


def parse_request(fmt: str, raw: bytes) -> V2Request:
    """A ``ProduceRequest`` body: ``{"records": [{"key", "value", "partition"}]}`` and, for a schema'd format,
    the schema fields; 42206 when malformed."""
    try:
        body = fastjson.loads(raw)
    except fastjson.Refused as exc:
        raise _payload_error(f"the body is refused: {exc}.") from exc
    except (ValueError, UnicodeDecodeError) as exc:
        # As Confluent's proxy answers a JSON parse error: 400, error_code 400.
        raise RestError(BAD_REQUEST, f"The body is not valid JSON: {exc}.") from exc
    if not isinstance(body, dict) or not isinstance(body.get("records") or [], list):
        raise RestError(BAD_REQUEST, "The body must be an object with a 'records' list.")
    if not body.get("records"):
        # Confluent's ProduceRequest declares records @NotEmpty: a constraint violation, 422 with error_code 422.
        raise RestError(UNPROCESSABLE_ENTITY, "records must not be empty")
    fields: dict[str, Any] = {}
    if fmt in ("avro", "jsonschema", "protobuf"):  # the others ignore them, as Confluent's binary/json requests
        fields = {name: _schema_field(body, name) for name in _SCHEMA_FIELDS}
        for side in ("key", "value"):
            if fields[f"{side}_schema"] is not None and fields[f"{side}_schema_id"] is not None:
                raise RestError(BAD_REQUEST, f"Unsupported argument: send {side}_schema or {side}_schema_id, "
                                             "not both.")
    records = []
    schema_data = fmt in SCHEMA_TYPES  # keys and values stay JSON until encode_schema_records
    for index, record in enumerate(body["records"]):
        if type(record) is not dict:
            raise RestError(BAD_REQUEST, f"records[{index}] must be an object.")
        partition = record.get("partition")
        if partition is not None and (type(partition) is not int or partition < 0):  # (a bool is no int here)
            raise _payload_error(f"records[{index}].partition must be a non-negative integer.")
        if schema_data:
            records.append(V2Record(record.get("key"), record.get("value"), partition))
        else:
            records.append(V2Record(_data(fmt, record.get("key"), f"records[{index}].key"),
                                    _data(fmt, record.get("value"), f"records[{index}].value"), partition))
    return V2Request(records, **fields)


def parse_records(fmt: str, raw: bytes) -> list[V2Record]:
    """The records of a binary or json request (see :func:`parse_request`)."""
    return parse_request(fmt, raw).records


def encode_schema_records(access: ClusterAccess, topic: str, fmt: str, request: V2Request) -> V2Request:
    """A schema'd request's records framed with its schemas (AbstractProduceAction.produceWithSchema): the
    key and value schemas resolved once, then every record encoded; the first failure refuses the request.
    Reads the database (a request thread, or a worker thread of the ASGI path)."""
    schema_type = schemas.FORMAT_TYPES[fmt.upper()]
    resolver = schemas.SchemaResolver(access, topic)

    def schema_of(text: str | None, schema_id: int | None, is_key: bool) -> schemas.Resolved | None:
        if schema_id is not None:
            return resolver.by_id(schema_id, is_key, fmt=fmt)
        if text is not None:
            return resolver.by_text(schema_type, text, is_key)
        return None

    key_schema = schema_of(request.key_schema, request.key_schema_id, True)
    value_schema = schema_of(request.value_schema, request.value_schema_id, False)
    return encode_with(key_schema, value_schema, request)


async def cached_schemas(access: ClusterAccess, topic: str, fmt: str,
                         request: V2Request) -> tuple[schemas.Resolved | None, schemas.Resolved | None] | None:
    """The key and value schemas a request names by id (or not at all), from this process's caches with no
    database (``schemas.cached_by_id``): for the event loop. None when either is not cached, or is named by text
    (then :func:`encode_schema_records` on a thread, which says anything that is wrong)."""
    if request.key_schema is not None or request.value_schema is not None:
        return None
    found: list[schemas.Resolved | None] = []
    for schema_id, is_key in ((request.key_schema_id, True), (request.value_schema_id, False)):
        resolved = None
        if schema_id is not None:
            resolved = await schemas.cached_by_id(access, topic, schema_id, is_key, fmt)
            if resolved is None:
                return None
        found.append(resolved)
    return found[0], found[1]


def encode_with(key_schema: schemas.Resolved | None, value_schema: schemas.Resolved | None,
                request: V2Request) -> V2Request:
    """Every record's key and value framed with the request's schemas, in one pass; the first record that has a
    key or value without a schema, or one that does not fit its schema, refuses the whole request (nothing is
    written), as Confluent's."""
    records = []
    for index, (key, value, partition) in enumerate(request.records):
        if key is not None:
            key = _framed(key_schema, key, index, True)
        if value is not None:
            value = _framed(value_schema, value, index, False)
        records.append(V2Record(key, value, partition))
    return V2Request(records, key_id=key_schema.writer.schema_id if key_schema else None,
                     value_id=value_schema.writer.schema_id if value_schema else None)


def _framed(resolved: schemas.Resolved | None, data: Any, index: int, is_key: bool) -> bytes:
    if resolved is None:  # Confluent's SchemaRecordSerializer: data with no schema to write it with
        if is_key:
            raise RestError(schemas.KEY_SCHEMA_MISSING, "Request includes keys but does not include key schema")
        raise RestError(schemas.VALUE_SCHEMA_MISSING, "Request includes values but does not include value schema")
    try:
        return resolved.writer.frame(data)
    except wire.PayloadError as exc:
        raise schemas.mismatch(resolved, f"records[{index}].{'key' if is_key else 'value'}", exc) from exc


def encode_on_thread(access: ClusterAccess, topic: str, fmt: str, request: V2Request) -> V2Request:
    """:func:`encode_schema_records` with the database connection handled as a request's (a worker thread)."""
    close_old_connections()
    try:
        return encode_schema_records(access, topic, fmt, request)
    finally:
        close_old_connections()


def _offset(outcome: Outcome) -> dict[str, Any]:
    if isinstance(outcome, Delivered):
        return {"partition": outcome.partition, "offset": outcome.offset, "error_code": None, "error": None}
    return {"partition": None, "offset": None, "error_code": outcome.error_code, "error": outcome.message}


def produce_response(outcomes: Produced, request: V2Request | None = None) -> dict[str, Any]:
    # A delivered record's slot is its (partition, offset, timestamp) tuple: read as is, with no Delivered made.
    offsets = [{"partition": result[0], "offset": result[1], "error_code": None, "error": None}
               if type(result) is tuple else _offset(outcomes.outcome(index))
               for index, result in enumerate(outcomes.results)]
    return {"offsets": offsets, "key_schema_id": request.key_id if request else None,
            "value_schema_id": request.value_id if request else None}


def as_produce_record(record: V2Record, partition: int | None) -> ProduceRecord:
    return ProduceRecord(record.partition if record.partition is not None else partition, record.key,
                         record.value, None, None, [], None)


def produce_records(*, access: ClusterAccess, topic: str, fmt: str, raw: bytes,
                    partition: int | None = None) -> dict[str, Any]:
    """Produce every record of a v2 request and report where each landed (``ProduceResponse``)."""
    count = services.check_topic(access, topic)
    if partition is not None and not 0 <= partition < count:
        raise RestError(PARTITION_NOT_FOUND, "Partition not found.")
    request = parse_request(fmt, raw)
    if fmt in ("avro", "jsonschema", "protobuf"):
        request = encode_schema_records(access, topic, fmt, request)
    records = [as_produce_record(record, partition) for record in request.records]
    return produce_response(services.produce_values(access, topic, records), request)
