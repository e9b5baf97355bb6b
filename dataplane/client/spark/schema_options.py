"""The Schema Registry options of the ``sluice`` source and sink, parsed into frozen values (pure: no I/O).

Named as Confluent's serializers and Databricks' ``from_avro(..., schemaRegistryAddress)`` name them:
``schema.registry.url``, ``schema.registry.basic.auth.user.info`` (``key:secret``; by default the
``kafka.sasl.username``/``kafka.sasl.password`` of the query, since a Sluice API key serves both),
``value.format``/``key.format`` (``avro``, ``jsonschema``, ``protobuf``; absent: binary as Spark's Kafka
source), ``<side>.schema.subject`` (default ``<topic>-<side>``, Confluent's TopicNameStrategy),
``<side>.schema.version`` (default ``latest``) or ``<side>.schema.id``, ``<side>.schema.message`` (Protobuf: the
message's full name; default the file's first message, as Confluent's deserializer), ``value.schema.auto.register``
(sink, Avro) and ``mode`` (``FAILFAST`` or ``PERMISSIVE``, as spark-avro's ``from_avro``).

``schema.registry.inline`` (internal, instead of a URL) hands the schemas over as ``StaticSchemas`` JSON: the
report runner reads typed topics this way without reaching the registry or holding its credentials.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from dataplane.client.spark.options import SparkSourceError, _bool, _int, _lower

Format = Literal["avro", "jsonschema", "protobuf"]
Side = Literal["key", "value"]
FORMATS: tuple[Format, ...] = ("avro", "jsonschema", "protobuf")
TIMEOUT_MS = 30_000


@dataclass(frozen=True, slots=True)
class RegistryOptions:
    url: str
    key: str | None
    secret: str | None
    timeout_ms: int = TIMEOUT_MS
    inline: str | None = None  # StaticSchemas JSON: no HTTP registry at all (``url`` is then empty)


@dataclass(frozen=True, slots=True)
class SideOptions:
    """How one of ``key``/``value`` is typed: its format and which schema of which subject reads or writes it."""

    side: Side
    format: Format
    subject: str
    version: int | None = None  # None: the latest (unless ``schema_id``)
    schema_id: int | None = None
    auto_register: bool = False
    message: str | None = None  # Protobuf: the message's (full) name; None: the file's first message


@dataclass(frozen=True, slots=True)
class SchemaOptions:
    registry: RegistryOptions
    key: SideOptions | None
    value: SideOptions | None
    mode: Literal["FAILFAST", "PERMISSIVE"] = "FAILFAST"


def _side(opts: dict[str, str], side: Side, topic: str | None, *, sink: bool) -> SideOptions | None:
    text = opts.get(f"{side}.format", "").strip().lower()
    if text in ("", "binary"):
        for suffix in ("schema.subject", "schema.version", "schema.id", "schema.auto.register", "schema.message"):
            if opts.get(f"{side}.{suffix}", "").strip():
                raise SparkSourceError(f"option '{side}.{suffix}' needs '{side}.format' (avro, jsonschema or protobuf)")
        return None
    if text == "json":
        text = "jsonschema"
    if text not in FORMATS:
        raise SparkSourceError(f"option '{side}.format' must be avro, jsonschema or protobuf, got {text!r}")
    fmt: Format = "avro" if text == "avro" else "jsonschema" if text == "jsonschema" else "protobuf"
    message = opts.get(f"{side}.schema.message", "").strip() or None
    if message is not None and fmt != "protobuf":
        raise SparkSourceError(f"option '{side}.schema.message' applies to '{side}.format' protobuf only")
    subject = opts.get(f"{side}.schema.subject", "").strip()
    if not subject:
        if topic is None:
            raise SparkSourceError(f"option '{side}.schema.subject' is required when the query does not name "
                                   f"exactly one topic (the default is '<topic>-{side}')")
        subject = f"{topic}-{side}"
    version_text = opts.get(f"{side}.schema.version", "").strip().lower()
    id_text = opts.get(f"{side}.schema.id", "").strip()
    if id_text and version_text:
        raise SparkSourceError(f"options '{side}.schema.version' and '{side}.schema.id' exclude each other")
    version = None if version_text in ("", "latest") else _int(f"{side}.schema.version", version_text, minimum=1)
    schema_id = _int(f"{side}.schema.id", id_text, minimum=0) if id_text else None
    auto_text = opts.get(f"{side}.schema.auto.register", "").strip()
    auto = _bool(f"{side}.schema.auto.register", auto_text) if auto_text else False
    if auto and not sink:
        raise SparkSourceError(f"option '{side}.schema.auto.register' applies to writes only")
    if auto and fmt != "avro":
        raise SparkSourceError(f"option '{side}.schema.auto.register' derives Avro schemas only; register the "
                               f"{fmt} schema of subject {subject!r} first")
    return SideOptions(side, fmt, subject, version, schema_id, auto, message)


def _registry(opts: dict[str, str]) -> RegistryOptions:
    inline = opts.get("schema.registry.inline", "").strip()
    if inline:
        if opts.get("schema.registry.url", "").strip():
            raise SparkSourceError("options 'schema.registry.url' and 'schema.registry.inline' exclude each other")
        return RegistryOptions("", None, None, inline=inline)
    url = opts.get("schema.registry.url", "").strip()
    if not url:
        raise SparkSourceError("option 'schema.registry.url' is required with 'value.format' or 'key.format'")
    if not url.startswith(("http://", "https://")):
        raise SparkSourceError(f"option 'schema.registry.url' must be an http(s) URL, got {url!r}")
    info = opts.get("schema.registry.basic.auth.user.info", "").strip()
    key: str | None
    secret: str | None
    if info:
        key, sep, secret = info.partition(":")
        if not sep or not key:
            raise SparkSourceError("option 'schema.registry.basic.auth.user.info' must be 'key:secret'")
    else:  # a Sluice API key is both the cluster's SASL/PLAIN credential and the registry's
        key = opts.get("kafka.sasl.username") or None
        secret = opts.get("kafka.sasl.password") or None
    timeout = _int("schema.registry.timeout.ms", opts.get("schema.registry.timeout.ms", str(TIMEOUT_MS)), minimum=1)
    return RegistryOptions(url, key, secret, timeout)


def parse_schema_options(options: Mapping[str, str], *, topic: str | None, sink: bool) -> SchemaOptions | None:
    """None when neither side is typed; ``topic`` is the one topic the query names (for default subjects)."""
    opts = _lower(options)
    mode = opts.get("mode", "FAILFAST").strip().upper()
    if mode not in ("FAILFAST", "PERMISSIVE"):
        raise SparkSourceError(f"option 'mode' must be FAILFAST or PERMISSIVE, got {mode!r}")
    key, value = _side(opts, "key", topic, sink=sink), _side(opts, "value", topic, sink=sink)
    if key is None and value is None:
        return None
    return SchemaOptions(_registry(opts), key, value, "PERMISSIVE" if mode == "PERMISSIVE" else "FAILFAST")
