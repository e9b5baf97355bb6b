"""v2 consumer-instance services: validate what a client asks, then run it where the instance lives.

Views authenticate and resolve the cluster; these functions check the request's shape with Confluent's
error codes and hand the operation to :data:`~controlplane.kafkarest.v2.routing.router`.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from typing import Any

from django.conf import settings

from controlplane.kafkarest.access import ClusterAccess
from controlplane.kafkarest.errors import BAD_REQUEST, INVALID_CONSUMER_CONFIG, INVALID_PAYLOAD, RestError
from controlplane.kafkarest.records import parse_timestamp
from controlplane.kafkarest.v2.consumers import FORMATS, InstanceConfig, InstanceKey
from controlplane.kafkarest.v2.routing import router

NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,200}\Z")
SCHEMA_FORMATS = ("avro", "jsonschema", "protobuf")
MAX_FETCH_MIN_BYTES = 10_000_000  # as Confluent's fetch.min.bytes
MAX_REQUEST_TIMEOUT_MS = 30_000  # a read holds a request (and a forwarded wait) at most this long


def _config_error(message: str) -> RestError:
    return RestError(INVALID_CONSUMER_CONFIG, f"Invalid consumer configuration: {message}")


def _payload_error(message: str) -> RestError:
    return RestError(INVALID_PAYLOAD, f"Payload error. {message}")


def _shape_error(message: str) -> RestError:
    """A body that does not map onto the request's type (Confluent's proxy: Jackson's mapping error, a 400)."""
    return RestError(BAD_REQUEST, message)


def _int_setting(body: dict[str, Any], name: str, low: int, high: int, default: int) -> int:
    value = body.get(name)
    if value is None:
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise _config_error(f"{name} must be an integer.") from None
    if isinstance(value, bool) or not low <= number <= high:
        raise _config_error(f"{name} must be between {low} and {high}.")
    return number


def parse_instance_config(body: dict[str, Any]) -> tuple[str, InstanceConfig]:
    """The instance name and configuration of a create request (Confluent's CreateConsumerInstanceRequest)."""
    name = body.get("id") or body.get("name") or f"rest-consumer-{uuid.uuid4()}"
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise _config_error("name must be 1-200 letters, digits, '.', '_' or '-'.")
    fmt = body.get("format") or "binary"
    if not isinstance(fmt, str) or fmt.lower() not in (*FORMATS, *SCHEMA_FORMATS):
        raise _config_error("Invalid format type.")
    reset = body.get("auto.offset.reset")
    if reset is not None and reset not in ("earliest", "latest", "none", "smallest", "largest"):
        raise _config_error("auto.offset.reset must be earliest, latest or none.")
    if reset is not None:
        reset = {"smallest": "earliest", "largest": "latest", "none": "error"}.get(reset, reset)
    commit = body.get("auto.commit.enable")
    if commit is not None and str(commit).lower() not in ("true", "false"):
        raise _config_error("auto.commit.enable must be true or false.")
    return name, InstanceConfig(
        format=fmt.lower(), auto_offset_reset=reset,
        auto_commit_enable=None if commit is None else str(commit).lower() == "true",
        fetch_min_bytes=_int_setting(body, "fetch.min.bytes", -1, MAX_FETCH_MIN_BYTES, -1),
        request_timeout_ms=_int_setting(body, "consumer.request.timeout.ms", 0, MAX_REQUEST_TIMEOUT_MS,
                                        settings.KAFKAREST_CONSUMER_REQUEST_TIMEOUT_MS),
        instance_timeout_ms=_int_setting(body, "consumer.instance.timeout.ms", 100, 24 * 3600 * 1000,
                                         settings.KAFKAREST_CONSUMER_INSTANCE_TIMEOUT_MS),
    )


def consumer_create(*, access: ClusterAccess, group: str, body: Any) -> str:
    """Create a consumer instance in this process (which becomes its owner); its instance id."""
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise _shape_error("The body must be a JSON object.")
    name, config = parse_instance_config(body)
    config = dataclasses.replace(config, cluster_pk=access.cluster_pk)
    router.create(InstanceKey(access.kafka_cluster_id, group, name), access.client_config(), config, access.principal,
                  access.credential)
    return name


def consumer_call(*, access: ClusterAccess, group: str, instance: str, op: str, **args: Any) -> Any:
    """Run one operation on an instance, wherever it lives (40403 when it does not)."""
    return router.call(InstanceKey(access.kafka_cluster_id, group, instance), op, args, access.principal)


# ---------------------------------------------------------------------------------------------- bodies


def _list(body: Any, field: str, *, required: bool = True) -> list[Any]:
    if body is not None and not isinstance(body, dict):
        raise _shape_error("The body must be a JSON object.")
    value = body.get(field) if isinstance(body, dict) else None
    if value is None:
        if not required:
            return []
        raise _payload_error(f"'{field}' is required.")
    if not isinstance(value, list):
        raise _shape_error(f"'{field}' must be a list.")
    return value


def _partition_entry(entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str) or not entry["topic"]:
        raise _payload_error("each partition needs a 'topic' name.")
    partition = entry.get("partition")
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        raise _payload_error("each partition needs a non-negative integer 'partition'.")
    return {"topic": entry["topic"], "partition": partition}


def _offset(entry: Any, field: str = "offset") -> int:
    value = entry.get(field) if isinstance(entry, dict) else None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise _payload_error(f"each entry needs a non-negative integer '{field}'.")
    return value


def _metadata(entry: dict[str, Any]) -> str | None:
    metadata = entry.get("metadata")
    if metadata is not None and not isinstance(metadata, str):
        raise _payload_error("'metadata' must be a string.")
    return metadata


def parse_partitions(body: Any) -> list[dict[str, Any]]:
    """``{"partitions": [{"topic", "partition"}]}``."""
    return [_partition_entry(p) for p in _list(body, "partitions")]


def parse_subscription(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise _shape_error("The body must be a JSON object.")
    topics, pattern = body.get("topics"), body.get("topic_pattern")
    if topics is not None and (not isinstance(topics, list) or not all(isinstance(t, str) and t for t in topics)):
        raise _payload_error("'topics' must be a list of topic names.")
    if pattern is not None and (not isinstance(pattern, str) or not pattern):
        raise _payload_error("'topic_pattern' must be a regular expression.")
    if bool(topics) == bool(pattern):
        raise _payload_error("give either 'topics' or 'topic_pattern'.")
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise _payload_error(f"'topic_pattern' is not a valid regular expression: {exc}.") from exc
    return {"topics": topics or None, "topic_pattern": pattern or None}


def parse_seek(body: Any) -> dict[str, Any]:
    offsets = [{**_partition_entry(o), "offset": _offset(o), "metadata": _metadata(o)}
               for o in _list(body, "offsets", required=False)]
    timestamps = []
    for entry in _list(body, "timestamps", required=False):
        moment = parse_timestamp(entry.get("timestamp") if isinstance(entry, dict) else None)
        if moment is None:
            raise _payload_error("each timestamps entry needs an ISO 8601 'timestamp'.")
        timestamps.append({**_partition_entry(entry), "timestamp_ms": moment, "metadata": _metadata(entry)})
    if not offsets and not timestamps:
        raise _payload_error("give 'offsets' or 'timestamps'.")
    return {"offsets": offsets, "timestamps": timestamps}


def parse_commit(body: Any) -> list[dict[str, Any]] | None:
    """The offsets to commit, or None for "everything returned so far" (an empty or absent body)."""
    if body is None or body == {} or (isinstance(body, dict) and body.get("offsets") is None):
        return None
    return [{**_partition_entry(o), "offset": _offset(o), "metadata": _metadata(o)} for o in _list(body, "offsets")]
