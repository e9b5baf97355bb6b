"""Schema'd keys and values of the REST Proxy, written and read through the cluster's registry (decision 0028).

Which schema a key or value is written with follows Confluent's REST Proxy (``SchemaManagerImpl``): a
``schema_id`` (the subject, from ``subject`` or the subject name strategy, must hold it), a ``schema_version``
of the subject, a ``schema`` text (looked up under the subject, registered there when new: the registry's own
service, so compatibility, mode and audit apply), or else the subject's latest schema. The subject is
``subject`` when given, else the strategy's: ``<topic>-key``/``<topic>-value`` (TOPIC_NAME, the default),
the record's full name (RECORD_NAME) or ``<topic>-<record name>`` (TOPIC_RECORD_NAME).

Errors are Confluent's: a schema spec the registry cannot serve is 42207 ("Error serializing message. ..."),
one whose text does not parse or whose version does not exist is 400, data that does not fit its schema is
400, a v2 request with keys or values but no schema 42201/42202, and a schema of another format than the
request's 42205.

Everything here may read the database: it runs on a request thread or, for the ASGI paths, on a worker
thread (:func:`resolver_for`), never on the event loop -- except :func:`cached_by_id`, which answers a v2
request's schema ids from the per-process caches alone (decision 0031). A request resolves each distinct spec
once (:class:`SchemaResolver`); schemas by id are cached per process by ``registry.serde``.
"""

from __future__ import annotations

import asyncio
from typing import Any, NamedTuple

from django.db import close_old_connections

from controlplane.clusters.models import Cluster
from controlplane.core.actors import Actor
from controlplane.kafkarest import fastjson
from controlplane.kafkarest.access import ClusterAccess
from controlplane.kafkarest.errors import (
    BAD_REQUEST,
    FORBIDDEN,
    KAFKA_ERROR,
    RestError,
)
from controlplane.kafkarest.records import ProduceRecord, SchemaInfo, SchemaRecord, SchemaSpec
from controlplane.registry import cache as registry_cache
from controlplane.registry import selectors as registry_selectors
from controlplane.registry import serde
from controlplane.registry import services as registry_services
from controlplane.registry.errors import RegistryError
from controlplane.registry.permissions import SubjectAcls, denied_message, subject_acls
from controlplane.registry.selectors import LATEST
from controlplane.tenancy.models import Role
from dataplane.schemas import AnySchema, AvroSchema, JsonSchema, ProtobufSchema, SchemaType, wire
from dataplane.security.acl import AclOperation

KEY_SCHEMA_MISSING = 42201
VALUE_SCHEMA_MISSING = 42202
INVALID_SCHEMA = 42205
SERIALIZATION = 42207

# The REST Proxy's format names (v3 ``type``; v2 media types lower-cased) and the registry's schema types.
FORMAT_TYPES = {"AVRO": SchemaType.AVRO, "JSONSCHEMA": SchemaType.JSON, "PROTOBUF": SchemaType.PROTOBUF}
TYPE_FORMATS = {schema_type: name for name, schema_type in FORMAT_TYPES.items()}


class Resolved(NamedTuple):
    """The schema a key or value is written with, and how its delivery report names it."""

    writer: serde.WriterSchema
    subject: str
    version: int | None

    def info(self, is_key: bool) -> SchemaInfo:
        # As Confluent's ProduceAction: the value's report names its subject, the key's does not.
        return SchemaInfo(TYPE_FORMATS[self.writer.schema_type], None if is_key else self.subject,
                          self.writer.schema_id, self.version)


def _serialization_error(message: str, exc: RegistryError | None = None) -> RestError:
    if exc is not None and exc.error_code == 40301:
        return RestError(FORBIDDEN, message)
    detail = f": {exc.message}" if exc is not None else ""
    return RestError(SERIALIZATION, f"Error serializing message. {message}{detail}")


def record_name(parsed: AnySchema) -> str | None:
    """The schema's record name, as Confluent's ``ParsedSchema.name()``: an Avro named type's full name, a
    JSON Schema's ``title``, a Protobuf file's first message."""
    if isinstance(parsed, AvroSchema):
        raw = parsed.raw
        if isinstance(raw, dict) and isinstance(raw.get("name"), str):
            name, namespace = raw["name"], raw.get("namespace")
            return name if "." in name or not namespace else f"{namespace}.{name}"
        return None
    if isinstance(parsed, JsonSchema):
        title = parsed.raw.get("title") if isinstance(parsed.raw, dict) else None
        return title if isinstance(title, str) else None
    if isinstance(parsed, ProtobufSchema):
        return next(iter(parsed.messages), None)
    return None


def subject_name(topic: str, is_key: bool, strategy: str | None, parsed: AnySchema | None) -> str:
    """The subject a strategy names (TOPIC_NAME when none is given); 400 when it needs a record name it lacks."""
    if strategy in (None, "TOPIC_NAME"):
        return f"{topic}-{'key' if is_key else 'value'}"
    if parsed is None:
        default = "" if strategy is None else f"={strategy}"
        raise RestError(BAD_REQUEST, f"Cannot use schema_subject_strategy{default} without schema_id or schema.")
    name = record_name(parsed)
    if name is None:
        raise RestError(BAD_REQUEST, f"Cannot use subject_name_strategy={strategy}: the schema has no record "
                                     "name (an Avro named type, a JSON Schema title or a Protobuf message).")
    return name if strategy == "RECORD_NAME" else f"{topic}-{name}"


def _actor(access: ClusterAccess) -> Actor:
    """Who registers a schema sent with a record: the REST caller (its Kafka principal names it)."""
    from django.contrib.auth import get_user_model  # noqa: PLC0415 - only when a schema is registered

    from controlplane.tenancy.models import ServiceAccount  # noqa: PLC0415

    _, _, ident = access.principal.partition(":")
    kind, _, pk = ident.partition("-")
    if kind == "sa":
        account = ServiceAccount.objects.filter(pk=pk).first()
        return Actor("service_account", pk, account.name if account else access.principal)
    user = get_user_model().objects.filter(pk=pk).first()
    return Actor("user", pk, user.get_username() if user else access.principal)


class SchemaResolver:
    """The schemas one request's keys and values are written with: each distinct spec resolved once. Owned by
    one request, on one thread."""

    def __init__(self, access: ClusterAccess, topic: str) -> None:
        self.access = access
        self.topic = topic
        self._cluster: Cluster | None = None
        self._ref: Cluster | None = None
        self._acls: SubjectAcls | None = None
        self._resolved: dict[tuple[Any, ...], Resolved | RestError | None] = {}

    def require_subject(self, operation: AclOperation, subject: str) -> None:
        """The registry's own rule (``registry.permissions``): a service account's key also needs an ACL on the
        subject it reads (READ) or registers in (WRITE); people act with their role alone."""
        if not self.access.principal.startswith("User:sa-"):
            return
        if self._acls is None:
            self._acls = subject_acls(self.ref, self.access.principal)
        if not self._acls.allows(operation, subject):
            raise RestError(FORBIDDEN, denied_message(self.access.principal, operation, subject))

    @property
    def ref(self) -> Cluster:
        """The cluster as reads need it: its key only (no query)."""
        if self._ref is None:
            self._ref = Cluster(pk=self.access.cluster_pk)
        return self._ref

    @property
    def cluster(self) -> Cluster:
        """The cluster's row with its tenant, for a registration (its audit row)."""
        if self._cluster is None:
            self._cluster = Cluster.objects.select_related("tenant").get(pk=self.access.cluster_pk)
        return self._cluster

    def resolve(self, spec: SchemaSpec, is_key: bool) -> Resolved | None:
        """The schema ``spec`` names; None for a bare ``{"data"}`` whose topic subject has no schema (JSON)."""
        key = (spec.type, spec.subject, spec.strategy, spec.schema_id, spec.schema_version, spec.schema, is_key)
        if key not in self._resolved:
            try:
                self._resolved[key] = self._lookup(spec, is_key)
            except RestError as exc:
                self._resolved[key] = exc
        found = self._resolved[key]
        if isinstance(found, RestError):
            raise found
        return found

    def _lookup(self, spec: SchemaSpec, is_key: bool) -> Resolved | None:
        if spec.schema_id is not None:
            return self.by_id(spec.schema_id, is_key, subject=spec.subject, strategy=spec.strategy)
        if spec.schema_version is not None:
            return self._by_version(spec, is_key)
        if spec.schema is not None:
            assert spec.type is not None
            return self.by_text(FORMAT_TYPES[spec.type], spec.schema, is_key, subject=spec.subject,
                                strategy=spec.strategy)
        return self._latest(spec, is_key)

    def by_id(self, schema_id: int, is_key: bool, *, subject: str | None = None, strategy: str | None = None,
              fmt: str | None = None) -> Resolved:
        """Schema ``schema_id``; ``fmt`` (a v2 request's format) must be its type (42205 otherwise)."""
        try:
            writer = serde.writer_schema(self.ref, schema_id)
        except RegistryError as exc:
            raise _serialization_error(f"Error when fetching schema by id. schemaId = {schema_id}", exc) from exc
        found = TYPE_FORMATS[writer.schema_type]
        if fmt is not None and found != fmt.upper():
            raise RestError(INVALID_SCHEMA, f"Invalid schema: schema {schema_id} is a {found} schema; this "
                                            f"request's format is {fmt} (send it as "
                                            f"application/vnd.kafka.{found.lower()}.v2+json).")
        subject = subject or subject_name(self.topic, is_key, strategy, writer.parsed)
        self.require_subject(AclOperation.READ, subject)
        return Resolved(writer, subject, self._version_of(subject, schema_id))

    def _version_of(self, subject: str, schema_id: int) -> int:
        """The subject's version holding the schema; 42207 when the subject does not hold it (as Confluent's
        ``getVersion`` lookup)."""
        registry_pk = registry_cache.registry_pk(self.access.cluster_pk)
        generation = registry_cache.generation_now(registry_pk) if registry_pk is not None else None
        key = _version_key(registry_pk, subject, schema_id)
        found = registry_cache.peek_answer(key, generation) if generation is not None else None
        if found is None:
            rows = registry_selectors.subject_versions(registry_selectors.registry_of(self.ref), subject)
            found = next((row.version for row in rows if row.schema.schema_id == schema_id), None)
            if found is not None and generation is not None:
                registry_cache.remember_answer(key, generation, found)
        if found is None:
            raise _serialization_error(f"Error when fetching schema version. subject = {subject}, schema id = "
                                       f"{schema_id}: the subject does not hold this schema; register it there "
                                       "first, or name the subject that does")
        return found

    def _by_version(self, spec: SchemaSpec, is_key: bool) -> Resolved:
        assert spec.schema_version is not None
        subject = spec.subject or subject_name(self.topic, is_key, spec.strategy, None)
        self.require_subject(AclOperation.READ, subject)
        version = LATEST if spec.schema_version == -1 else spec.schema_version
        try:
            writer = serde.subject_schema(self.ref, subject, version)
            number = registry_selectors.version_get(self.ref, subject, version).version
        except RegistryError as exc:
            raise RestError(BAD_REQUEST, f"Schema does not exist for subject: {subject}, version: "
                                         f"{spec.schema_version}") from exc
        return Resolved(writer, subject, number)

    def by_text(self, schema_type: SchemaType, text: str, is_key: bool, *, subject: str | None = None,
                strategy: str | None = None) -> Resolved:
        """A schema sent as text: the id it has under the subject (looked up with no lock or write: the usual
        case, a producer that sends its schema with every request), registered there when it is new."""
        fmt = TYPE_FORMATS[schema_type]
        registry = registry_selectors.registry_of(self.cluster)
        body = {"schema": text, "schemaType": schema_type.value}
        try:
            new = registry_selectors.candidate(registry, body, normalize=False)
        except RegistryError as exc:
            raise RestError(BAD_REQUEST, f"Error parsing schema with format = {fmt}: {exc.message}") from exc
        subject = subject or subject_name(self.topic, is_key, strategy, new.parsed)
        self.require_subject(AclOperation.READ, subject)
        rows = registry_selectors.subject_versions(registry, subject) if registry is not None else []
        found = next((row for row in rows if row.schema.fingerprint == new.fingerprint), None)
        if found is not None:
            return Resolved(serde.writer_schema(self.cluster, found.schema.schema_id), subject, found.version)
        self.access.require(Role.MEMBER)  # registering is a member's act, as on the registry's own API
        self.require_subject(AclOperation.WRITE, subject)
        try:
            schema_id = registry_services.schema_register(cluster=self.cluster, actor=_actor(self.access),
                                                          subject=subject, body=body)
        except RegistryError as exc:
            raise _serialization_error(f"Error when registering schema. format = {fmt}, subject = {subject}",
                                       exc) from exc
        return Resolved(serde.writer_schema(self.cluster, schema_id), subject, self._version_of(subject, schema_id))

    def _latest(self, spec: SchemaSpec, is_key: bool) -> Resolved | None:
        subject = spec.subject or subject_name(self.topic, is_key, spec.strategy, None)
        if not spec.bare:
            self.require_subject(AclOperation.READ, subject)
        try:
            row = registry_selectors.version_get(self.ref, subject, LATEST)
        except RegistryError as exc:
            if spec.bare and exc.error_code == 40401:
                return None  # no schema for the topic: the data is JSON, as before the registry existed
            raise _serialization_error(f"Error when fetching latest schema version. subject = {subject}",
                                       exc) from exc
        if spec.bare:  # the topic has a schema: using it is a read of its subject
            self.require_subject(AclOperation.READ, subject)
        return Resolved(serde.writer_schema(self.ref, row.schema.schema_id), subject, row.version)


def encode(resolved: Resolved, data: Any, what: str) -> bytes | None:
    """``data`` (the format's JSON) framed with the schema; None for null, as Confluent's serializers."""
    if data is None:
        return None
    try:
        return resolved.writer.frame(data)
    except wire.PayloadError as exc:
        raise mismatch(resolved, what, exc) from exc


def mismatch(resolved: Resolved, what: str, exc: wire.PayloadError) -> RestError:
    """The refusal of a key or value (``what``) that does not fit its schema."""
    return RestError(BAD_REQUEST, f"{what} does not match schema {resolved.writer.schema_id} "
                                  f"({TYPE_FORMATS[resolved.writer.schema_type]}): {exc}")


async def cached_by_id(access: ClusterAccess, topic: str, schema_id: int, is_key: bool, fmt: str) -> Resolved | None:
    """What ``SchemaResolver.by_id`` answers for a v2 request's ``{key,value}_schema_id`` (TopicNameStrategy),
    from this process's caches alone, on the event loop: the parsed schema (``serde``) and the subject's version
    of it remembered for the registry's current generation (read from Redis, as the registry's own fast path
    does; a write to the registry since makes it a miss). None when any of it is not cached, the id is another
    format's, or the caller is a service account (its subject ACLs are read on a thread): then ``by_id`` on a
    thread answers, and says what is wrong."""
    if access.principal.startswith("User:sa-"):
        return None
    writer = serde.cached_writer_schema(access.cluster_pk, schema_id)
    registry_pk = registry_cache.peek_registry_pk(access.cluster_pk)
    if writer is None or registry_pk is None or TYPE_FORMATS[writer.schema_type] != fmt.upper():
        return None
    subject = subject_name(topic, is_key, None, writer.parsed)
    generation = await registry_cache.generation(registry_pk)
    version = registry_cache.peek_answer(_version_key(registry_pk, subject, schema_id), generation) \
        if generation is not None else None
    return Resolved(writer, subject, version) if version is not None else None


def _version_key(registry_pk: int | None, subject: str, schema_id: int) -> tuple[Any, ...]:
    return ("kafkarest.version_of", registry_pk, subject, schema_id)


def _part(resolver: SchemaResolver, spec: bytes | SchemaSpec | None, kind: str | None,
          is_key: bool) -> tuple[str | SchemaInfo | None, bytes | None]:
    if not isinstance(spec, SchemaSpec):
        return kind, spec
    what = "key" if is_key else "value"
    resolved = resolver.resolve(spec, is_key)
    if resolved is None:
        try:
            return "JSON", fastjson.dumps(spec.data)
        except UnicodeEncodeError as exc:
            raise RestError(42206, f"Payload error. {what}.data is not valid Unicode: {exc.reason}.") from exc
    return resolved.info(is_key), encode(resolved, spec.data, what)


def encode_records(access: ClusterAccess, topic: str,
                   records: list[SchemaRecord]) -> list[ProduceRecord | RestError]:
    """v3 records with schema'd keys or values, encoded (each its ProduceRecord or its own error)."""
    resolver = SchemaResolver(access, topic)
    out: list[ProduceRecord | RestError] = []
    for record in records:
        try:
            key_type, key = _part(resolver, record.key, record.key_type, True)
            value_type, value = _part(resolver, record.value, record.value_type, False)
        except RestError as exc:
            out.append(exc)
            continue
        out.append(ProduceRecord(record.partition, key, value, key_type, value_type, record.headers,
                                 record.timestamp_ms))
    return out


def encode_records_db(access: ClusterAccess, topic: str,
                      records: list[SchemaRecord]) -> list[ProduceRecord | RestError]:
    """:func:`encode_records` on a thread of its own: with the database connection handled as a request's."""
    close_old_connections()
    try:
        return encode_records(access, topic, records)
    finally:
        close_old_connections()


def resolver_for(access: ClusterAccess, topic: str) -> Any:
    """The ``produce.engine.Resolver`` of a request: its schema'd records encoded on a worker thread."""
    async def resolve(records: list[SchemaRecord]) -> list[ProduceRecord | RestError]:
        return await asyncio.to_thread(encode_records_db, access, topic, records)
    return resolve


# ------------------------------------------------------------------------------------------- reading


def decode(cluster: Cluster, data: bytes, fmt: str, where: str) -> Any:
    """A framed record's key or value as its format's JSON, for a v2 consumer of format ``fmt`` (avro,
    jsonschema, protobuf). A record that is not framed, names an unknown id, is framed with another format's
    schema or does not decode is refused as Confluent's deserializer would (50002), saying which and why."""
    advice = "read it with a binary consumer instance, or seek past it"
    try:
        decoded = serde.decode(cluster, data)
    except wire.WireFormatError as exc:
        raise RestError(KAFKA_ERROR, f"Kafka error: the {where} is not in the schema registry's wire format "
                                     f"({exc}); {advice}.") from exc
    except RegistryError as exc:
        raise RestError(KAFKA_ERROR, f"Kafka error: the {where} names a schema the registry does not have "
                                     f"({exc.message}); {advice}.") from exc
    except wire.PayloadError as exc:
        raise RestError(KAFKA_ERROR, f"Kafka error: the {where} does not decode with its schema ({exc}); "
                                     f"{advice}.") from exc
    if TYPE_FORMATS[decoded.schema_type].lower() != fmt:
        raise RestError(KAFKA_ERROR, f"Kafka error: the {where} is written with a "
                                     f"{TYPE_FORMATS[decoded.schema_type]} schema (id {decoded.schema_id}), not "
                                     f"{fmt.upper()}; read it with a {TYPE_FORMATS[decoded.schema_type].lower()} "
                                     "consumer instance.")
    return decoded.value
