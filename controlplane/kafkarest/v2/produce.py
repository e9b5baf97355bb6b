"""v2 produce: records in an embedded format (binary: base64; json: any JSON value), one offset report each.

The format comes from the request's Content-Type, as in Confluent's REST Proxy. Records go through REST
produce's one engine (``kafkarest.produce``: ``produce.streaming`` for API keys, ``produce.services`` from the
DRF view), so a v2 record is partitioned and acknowledged exactly like a v3 or a Kafka-client one.

A body that is not JSON, or not the request's shape, is a 400 (as Confluent's); no records, 422; a bad value,
42206 -- each refuses the whole request. A record the cluster refuses gets its own ``error_code`` and ``error``
in the answer, the others are still written.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass
from typing import Any

from controlplane.kafkarest import fastjson
from controlplane.kafkarest.access import ClusterAccess
from controlplane.kafkarest.errors import (
    BAD_REQUEST,
    INVALID_PAYLOAD,
    PARTITION_NOT_FOUND,
    UNPROCESSABLE_ENTITY,
    UNSUPPORTED_MEDIA_TYPE,
    UNSUPPORTED_SCHEMA,
    RestError,
)
from controlplane.kafkarest.produce import services
from controlplane.kafkarest.produce.engine import Delivered, Outcome, Produced
from controlplane.kafkarest.records import ProduceRecord, b64decode

ROOT_REFUSAL = ("Root paths need an API key scoped to one cluster: this key reaches every cluster of its tenant, "
                "so the path does not say which one you mean. Create a scoped key (POST /api/v1/tenants/{slug}/"
                "api-keys with \"cluster\": the cluster's id), or use /kafka/v2/clusters/{cluster_id}/... .")
BINARY = "application/vnd.kafka.binary.v2+json"
JSON = "application/vnd.kafka.json.v2+json"
SCHEMA_TYPES = ("application/vnd.kafka.avro.v2+json", "application/vnd.kafka.jsonschema.v2+json",
                "application/vnd.kafka.protobuf.v2+json")


@dataclass(frozen=True, slots=True)
class V2Record:
    key: bytes | None
    value: bytes | None
    partition: int | None


def _payload_error(message: str) -> RestError:
    return RestError(INVALID_PAYLOAD, f"Payload error. {message}")


def produce_format(content_type: str | None) -> str:
    """``binary`` or ``json`` from the request's Content-Type; 415 for anything else."""
    media = (content_type or "").split(";")[0].strip().lower()
    if media == BINARY:
        return "binary"
    if media == JSON:
        return "json"
    if media in SCHEMA_TYPES:
        raise RestError(UNSUPPORTED_SCHEMA, "Schema-based formats need a schema registry, which this service "
                                            f"does not run; send {BINARY} or {JSON}.")
    raise RestError(UNSUPPORTED_MEDIA_TYPE, f"Unsupported Content-Type {media or '(none)'!r}: send {BINARY} or "
                                            f"{JSON}.")


def _data(fmt: str, value: Any, what: str) -> bytes | None:
    if value is None:
        return None
    if fmt == "json":
        return fastjson.dumps(value)
    if not isinstance(value, str):
        raise _payload_error(f"{what} must be a base64 string for the binary format.")
    try:
        return b64decode(value)
    except (binascii.Error, ValueError) as exc:
        raise _payload_error(f"{what} is not valid base64.") from exc


def parse_records(fmt: str, raw: bytes) -> list[V2Record]:
    """A ``ProduceRequest`` body: ``{"records": [{"key", "value", "partition"}]}``; 42206 when malformed."""
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
    if body.get("key_schema") is not None or body.get("value_schema") is not None \
            or body.get("key_schema_id") is not None or body.get("value_schema_id") is not None:
        raise RestError(UNSUPPORTED_SCHEMA, "Schemas need a schema registry, which this service does not run.")
    records = []
    for index, record in enumerate(body["records"]):
        if not isinstance(record, dict):
            raise RestError(BAD_REQUEST, f"records[{index}] must be an object.")
        partition = record.get("partition")
        if partition is not None and (not isinstance(partition, int) or isinstance(partition, bool) or partition < 0):
            raise _payload_error(f"records[{index}].partition must be a non-negative integer.")
        records.append(V2Record(_data(fmt, record.get("key"), f"records[{index}].key"),
                                _data(fmt, record.get("value"), f"records[{index}].value"), partition))
    return records


def _offset(outcome: Outcome) -> dict[str, Any]:
    if isinstance(outcome, Delivered):
        return {"partition": outcome.partition, "offset": outcome.offset, "error_code": None, "error": None}
    return {"partition": None, "offset": None, "error_code": outcome.error_code, "error": outcome.message}


def produce_response(outcomes: Produced) -> dict[str, Any]:
    return {"offsets": [_offset(outcomes.outcome(i)) for i in range(len(outcomes))], "key_schema_id": None,
            "value_schema_id": None}


def as_produce_record(record: V2Record, partition: int | None) -> ProduceRecord:
    return ProduceRecord(partition=record.partition if record.partition is not None else partition, key=record.key,
                         value=record.value, key_type=None, value_type=None, headers=[], timestamp_ms=None)


def produce_records(*, access: ClusterAccess, topic: str, fmt: str, raw: bytes,
                    partition: int | None = None) -> dict[str, Any]:
    """Produce every record of a v2 request and report where each landed (``ProduceResponse``)."""
    count = services.check_topic(access, topic)
    if partition is not None and not 0 <= partition < count:
        raise RestError(PARTITION_NOT_FOUND, "Partition not found.")
    records = [as_produce_record(record, partition) for record in parse_records(fmt, raw)]
    return produce_response(services.produce_values(access, topic, records))
