"""The tail's wire protocol, pure: parse the client's messages, build the server's frames.

Nothing here touches a socket, Kafka or the database, so every rule is unit-testable. The protocol
itself is described in the package docstring (:mod:`controlplane.kafkarest.tail`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

MAX_FILTER_CHARS = 2000
MAX_LAST = 100_000


class Close(IntEnum):
    """WebSocket close codes after the upgrade (before it, refusals are HTTP statuses)."""

    DONE = 1000  # a bounded read ("until": "end") finished
    INTERNAL = 1011
    INVALID = 4400  # a malformed message, subscribe or filter
    UNAUTHORIZED = 4401  # the credentials the tail was opened with were revoked (or their user left the tenant)
    FORBIDDEN = 4403  # the cluster's ACLs refused the viewer's principal (Kafka TOPIC_AUTHORIZATION_FAILED)
    NOT_FOUND = 4404  # a partition that does not exist, or the topic was deleted while tailing
    SUBSCRIBE_TIMEOUT = 4408  # no subscribe message in time
    TOO_SLOW = 4429  # the viewer fell a whole buffer behind
    KAFKA_UNAVAILABLE = 4503  # the cluster stopped answering


class ProtocolError(Exception):
    """A client message the server refuses; becomes an ``error`` frame and a close."""

    def __init__(self, code: str, message: str, close: Close = Close.INVALID) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.close = close


@dataclass(frozen=True, slots=True)
class StartAt:
    """Where each partition starts: one of the five modes, with its argument."""

    mode: str  # latest | earliest | offsets | timestamp | last
    offsets: Mapping[int, int] | None = None
    timestamp_ms: int | None = None
    last: int | None = None


@dataclass(frozen=True, slots=True)
class Subscription:
    start: StartAt
    partitions: tuple[int, ...] | None  # None: every partition of the topic
    filter: str | None
    bounded: bool  # "until": "end": stop at the end offsets seen at subscribe time
    max_bytes_per_second: int | None


SUBSCRIBE_KEYS = {"type", "from", "partitions", "filter", "until", "max_bytes_per_second"}


def parse_message(text: str | None) -> dict[str, Any]:
    """A client text frame as a JSON object with a string ``type``."""
    if text is None:
        raise ProtocolError("invalid_message", "Send JSON text frames, not binary ones.")
    try:
        message = json.loads(text)
    except ValueError as exc:
        raise ProtocolError("invalid_message", f"Not JSON: {exc}.") from exc
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ProtocolError("invalid_message", 'A message is a JSON object with a "type".')
    return message


def _non_negative_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProtocolError("invalid_subscribe", f"{what} must be a non-negative integer.")
    return int(value)


def _start(value: Any) -> StartAt:
    if value in (None, "latest"):
        return StartAt("latest")
    if value == "earliest":
        return StartAt("earliest")
    if isinstance(value, dict) and len(value) == 1:
        (mode, argument), = value.items()
        if mode == "offsets":
            if not isinstance(argument, dict) or not argument:
                raise ProtocolError("invalid_subscribe", '"offsets" maps partitions to offsets: {"0": 12}.')
            offsets: dict[int, int] = {}
            for key, offset in argument.items():
                if not isinstance(key, str) or not key.isdigit():
                    raise ProtocolError("invalid_subscribe", f"Partition {key!r} is not a partition number.")
                offsets[int(key)] = _non_negative_int(offset, f"The offset of partition {key}")
            return StartAt("offsets", offsets=offsets)
        if mode == "timestamp":
            return StartAt("timestamp", timestamp_ms=_non_negative_int(argument, '"timestamp" (ms since the epoch)'))
        if mode == "last":
            last = _non_negative_int(argument, '"last"')
            if last > MAX_LAST:
                raise ProtocolError("invalid_subscribe", f'"last" is at most {MAX_LAST} records per partition.')
            return StartAt("last", last=last)
    raise ProtocolError("invalid_subscribe", '"from" is "latest", "earliest", {"offsets": {...}}, '
                                             '{"timestamp": ms} or {"last": n}.')


def parse_subscribe(message: Mapping[str, Any]) -> Subscription:
    """A ``subscribe`` message as a :class:`Subscription` (the filter is compiled elsewhere)."""
    unknown = set(message) - SUBSCRIBE_KEYS
    if unknown:
        raise ProtocolError("invalid_subscribe", f"Unknown field(s): {', '.join(sorted(unknown))}.")
    start = _start(message.get("from"))
    partitions: tuple[int, ...] | None = None
    raw = message.get("partitions")
    if raw is not None:
        if not isinstance(raw, list) or not raw:
            raise ProtocolError("invalid_subscribe", '"partitions" is a non-empty list of partition numbers.')
        partitions = tuple(sorted({_non_negative_int(p, "A partition") for p in raw}))
    if start.offsets is not None:
        if partitions is not None and set(partitions) != set(start.offsets):
            raise ProtocolError("invalid_subscribe", '"partitions" and the partitions of "offsets" differ.')
        partitions = tuple(sorted(start.offsets))
    expression = message.get("filter")
    if expression is not None and (not isinstance(expression, str) or not expression.strip()):
        raise ProtocolError("invalid_filter", '"filter" is a JMESPath expression (a non-empty string).')
    if expression is not None and len(expression) > MAX_FILTER_CHARS:
        raise ProtocolError("invalid_filter", f'"filter" is at most {MAX_FILTER_CHARS} characters.')
    until = message.get("until")
    if until not in (None, "end"):
        raise ProtocolError("invalid_subscribe", '"until" is "end" (stop at the end offsets seen now) or absent.')
    rate = message.get("max_bytes_per_second")
    if rate is not None and (_non_negative_int(rate, '"max_bytes_per_second"') == 0):
        raise ProtocolError("invalid_subscribe", '"max_bytes_per_second" must be positive.')
    return Subscription(start, partitions, expression, until == "end", rate)


# ---------------------------------------------------------------------------------------------- frames


def cursor_json(cursor: Mapping[int, int]) -> str:
    return json.dumps({str(p): cursor[p] for p in sorted(cursor)}, separators=(",", ":"))


def records_frame(records: Iterable[bytes], cursor: Mapping[int, int]) -> str:
    """Records already rendered as UTF-8 JSON (shared by every viewer), joined without re-encoding them."""
    return (b'{"type":"records","records":[' + b",".join(records) + b'],"cursor":'
            + cursor_json(cursor).encode() + b"}").decode()


def progress_frame(cursor: Mapping[int, int], skipped: int) -> str:
    return '{"type":"progress","skipped":' + str(skipped) + ',"cursor":' + cursor_json(cursor) + "}"


def done_frame(cursor: Mapping[int, int]) -> str:
    return '{"type":"done","cursor":' + cursor_json(cursor) + "}"


def subscribed_frame(topic: str, cursor: Mapping[int, int], end: Mapping[int, int] | None) -> str:
    body: dict[str, Any] = {"type": "subscribed", "topic": topic, "partitions": sorted(cursor)}
    text = json.dumps(body, separators=(",", ":"))[:-1] + ',"cursor":' + cursor_json(cursor)
    if end is not None:
        text += ',"end":' + cursor_json(end)
    return text + "}"


def error_frame(code: str, message: str, cursor: Mapping[int, int] | None = None) -> str:
    body: dict[str, Any] = {"type": "error", "code": code, "message": message}
    if cursor is not None:
        body["cursor"] = {str(p): cursor[p] for p in sorted(cursor)}
    return json.dumps(body, separators=(",", ":"))


def pong_frame(message: Mapping[str, Any]) -> str:
    body: dict[str, Any] = {"type": "pong"}
    if "id" in message:
        body["id"] = message["id"]
    return json.dumps(body, separators=(",", ":"))
