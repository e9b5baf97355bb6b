"""A Kafka record as the tail shows it: decoded once, shared by every viewer that receives it.

Keys, values and header values are sent as UTF-8 text when they decode as UTF-8, else as base64; the
``key_encoding``/``value_encoding``/``encoding`` fields say which (``"utf-8"`` or ``"base64"``, ``null``
for a null key or value). A key or value in Confluent's wire format that the cluster's Schema Registry decodes
(:mod:`~controlplane.kafkarest.tail.schemas`) is sent as its JSON text instead, with encoding ``"schema"`` and
``key_schema_id``/``value_schema_id`` (and ``_schema_type``) beside it; one that does not decode is shown as
above. A record's fields are decoded on the thread that fetched it, and a fetched batch
is rendered to JSON there in one call (:func:`render`); a record's own JSON (when a viewer keeps only some of
a batch, or filters) and its filter document (with the JSON-parsed key and value) are built lazily, on the
event loop, the first time they are needed.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, Message

from controlplane.kafkarest import fastjson
from controlplane.registry.serde import Decoded

Decoder = Callable[[bytes], Decoded | None]
SCHEMA = "schema"  # the encoding of a key or value decoded with its registry schema

OVERHEAD_BYTES = 200  # what a record costs beyond its key, value and headers (objects, JSON framing)
_FIELDS_BYTES = 180  # a record's JSON beyond its key, value and header texts: names, numbers, punctuation


def _text(data: bytes | None) -> tuple[str | None, str | None]:
    if data is None:
        return None, None
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(data).decode("ascii"), "base64"


def _bytes(data: str | bytes | None) -> bytes | None:
    return data.encode() if isinstance(data, str) else data


def _json(text: str | None, encoding: str | None) -> Any:
    if text is None or encoding not in ("utf-8", SCHEMA) or not text.strip():
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _schemaed(fields: dict[str, Any], part: str, data: bytes, decode: Decoder) -> int:
    """Put ``part`` (key or value) decoded with its schema into ``fields`` when it decodes; the size it adds."""
    decoded = decode(data)
    if decoded is None:
        return 0
    try:
        text = fastjson.dumps(decoded.value).decode()
    except (TypeError, ValueError):  # a value JSON cannot carry (none of the codecs make one today): shown as it is
        return 0
    before = len(fields[part] or "")
    fields[part], fields[f"{part}_encoding"] = text, SCHEMA
    fields[f"{part}_schema_id"], fields[f"{part}_schema_type"] = decoded.schema_id, str(decoded.schema_type)
    return len(text) - before + 60


class Record:
    """One record as the tail shows it. ``fields`` is its JSON object (never changed after construction); the
    JSON text is made only when asked for (:attr:`json`), because records are usually rendered many at a time
    (:func:`render`). The lazily built JSON and filter document are only touched by the event loop."""

    __slots__ = ("_document", "_json", "fields", "offset", "partition", "size")

    def __init__(self, partition: int, offset: int, timestamp_ms: int, timestamp_type: str, key: bytes | None,
                 value: bytes | None, headers: list[tuple[str, bytes | None]], decode: Decoder | None = None) -> None:
        # Runs for every record a tail reads (hundreds of thousands a second): the common cases inline.
        self.partition = partition
        self.offset = offset
        key_text, key_encoding = (None, None) if key is None else _text(key)
        if value is None:
            value_text = value_encoding = None
        else:
            try:
                value_text, value_encoding = value.decode(), "utf-8"
            except UnicodeDecodeError:
                value_text, value_encoding = _text(value)
        size = _FIELDS_BYTES + OVERHEAD_BYTES + len(key_text or "") + len(value_text or "")
        rendered: list[dict[str, Any]] = []
        for name, data in headers:
            text, encoding = _text(data)
            rendered.append({"key": name, "value": text, "encoding": encoding})
            size += len(name) + len(text or "") + 40
        self.fields: dict[str, Any] = {
            "partition": partition, "offset": offset, "timestamp": timestamp_ms, "timestamp_type": timestamp_type,
            "key": key_text, "key_encoding": key_encoding,
            "value": value_text, "value_encoding": value_encoding, "headers": rendered,
        }
        # Framed records start with a zero byte, which UTF-8 text almost never does: one byte test otherwise.
        if decode is not None:
            if key and key[0] == 0:
                size += _schemaed(self.fields, "key", key, decode)
            if value and value[0] == 0:
                size += _schemaed(self.fields, "value", value, decode)
        # An estimate (the JSON is not made yet): escapes can make the JSON longer. Frames and buffers count the
        # rendered bytes where they have them (flow.item).
        self.size = size
        self._json: bytes | None = None
        self._document: dict[str, Any] | None = None

    @classmethod
    def from_message(cls, message: Message, decode: Decoder | None = None) -> Record:
        kind, timestamp = message.timestamp()
        raw: Any = message.headers()
        headers = [(str(name), _bytes(data)) for name, data in raw] if raw else []
        key: Any = message.key()
        value: Any = message.value()
        return cls(message.partition() or 0, message.offset() or 0, timestamp,
                   "log_append" if kind == TIMESTAMP_LOG_APPEND_TIME else "create",
                   key if key is None or isinstance(key, bytes) else _bytes(key),
                   value if value is None or isinstance(value, bytes) else _bytes(value), headers, decode)

    @property
    def json(self) -> bytes:
        """This record's UTF-8 JSON, made once (the same bytes :func:`render` writes for it)."""
        if self._json is None:
            self._json = fastjson.dumps(self.fields)
        return self._json

    def document(self) -> dict[str, Any]:
        """What a filter sees (see :mod:`controlplane.kafkarest.tail.filters`)."""
        if self._document is None:
            f = self.fields
            self._document = {
                "partition": self.partition, "offset": self.offset, "timestamp": f["timestamp"],
                "key": f["key"], "value": f["value"],
                "key_json": _json(f["key"], f["key_encoding"]), "value_json": _json(f["value"], f["value_encoding"]),
                "key_schema_id": f.get("key_schema_id"), "value_schema_id": f.get("value_schema_id"),
                "headers": {h["key"]: h["value"] for h in f["headers"]},
            }
        return self._document


def render(records: Sequence[Record]) -> bytes:
    """The records' JSON joined by commas (a frame's ``records`` array without its brackets), in one call.

    One ``orjson.dumps`` of the list costs a small fraction of one call per record (measured: 0.14 against
    2.4 us a record), which was most of what the tail spent per record.
    """
    if not records:
        return b""
    return fastjson.dumps([r.fields for r in records])[1:-1]
