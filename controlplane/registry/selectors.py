"""Reads of a cluster's registry: subjects, versions, schemas by id, configs, modes and compatibility tests.

A registry nobody has written to has no row yet; reads answer as an empty registry with the defaults.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet, Subquery

from controlplane.clusters.models import Cluster
from controlplane.registry import cache, errors
from controlplane.registry.errors import RegistryError
from controlplane.registry.models import DEFAULT_COMPATIBILITY, Mode, Registry, Schema, SubjectConfig, SubjectVersion
from dataplane.schemas import (
    AnySchema,
    CompatibilityLevel,
    ProtobufSchema,
    Reference,
    SchemaError,
    SchemaType,
    check,
    parse_schema,
    serialized_descriptor,
)

LATEST = -1
MAX_VERSION = 2**31 - 1


def parse_version(text: str) -> int:
    """A version path segment: a number in [1, 2^31-1], or ``latest``/``-1`` (:data:`LATEST`); else 42202."""
    if text == "latest":
        return LATEST
    try:
        version = int(text)
    except ValueError:
        raise errors.invalid_version(text) from None
    if version == LATEST or 1 <= version <= MAX_VERSION:
        return version
    raise errors.invalid_version(text)


def parse_level(value: Any) -> CompatibilityLevel:
    try:
        return CompatibilityLevel(str(value).upper())
    except ValueError:
        raise errors.invalid_compatibility() from None


def parse_mode(value: Any) -> Mode:
    try:
        return Mode(str(value).upper())
    except ValueError:
        raise errors.invalid_mode() from None


def registry_of(cluster: Cluster) -> Registry | None:
    return Registry.objects.filter(cluster=cluster).first()


def subject_versions(registry: Registry | None, subject: str, *, deleted: bool = False) -> QuerySet[SubjectVersion]:
    """The subject's versions, oldest first, soft-deleted ones only when ``deleted``."""
    if registry is None:
        return SubjectVersion.objects.none()
    rows = SubjectVersion.objects.filter(registry=registry, subject=subject).select_related("schema")
    return (rows if deleted else rows.filter(deleted=False)).order_by("version")


def subject_list(cluster: Cluster, *, deleted: bool, prefix: str) -> list[str]:
    registry = registry_of(cluster)
    if registry is None:
        return []
    rows = SubjectVersion.objects.filter(registry=registry, subject__startswith=prefix)
    if not deleted:
        rows = rows.filter(deleted=False)
    return sorted(set(rows.values_list("subject", flat=True)))


def version_list(cluster: Cluster, subject: str, *, deleted: bool) -> list[int]:
    versions = [row.version for row in subject_versions(registry_of(cluster), subject, deleted=deleted)]
    if not versions:
        raise errors.subject_not_found(subject)
    return versions


def version_get(cluster: Cluster, subject: str, version: int, *, deleted: bool = False) -> SubjectVersion:
    """One version (``LATEST``: the newest live one); 40401 when the subject has none, 40402 when not this one."""
    rows = list(subject_versions(registry_of(cluster), subject, deleted=deleted))
    if not rows:
        raise errors.subject_not_found(subject)
    if version == LATEST:
        live = [row for row in rows if not row.deleted] or rows
        return live[-1]
    found = next((row for row in rows if row.version == version), None)
    if found is None:
        raise errors.version_not_found(version)
    return found


def version_body(row: SubjectVersion, fmt: str | None = None) -> dict[str, Any]:
    """Confluent's version answer: ``schemaType`` omitted for AVRO, ``references`` only when there are some."""
    return {"subject": row.subject, "version": row.version, "id": row.schema.schema_id,
            **schema_fields(row.schema, fmt)}


def schema_fields(schema: Schema | cache.CachedSchema, fmt: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if schema.schema_type != SchemaType.AVRO:
        body["schemaType"] = schema.schema_type
    if schema.references:
        body["references"] = list(schema.references)
    body["schema"] = schema_text(schema, fmt) if isinstance(schema, Schema) else schema.text  # cached: fmt None
    return body


def schema_text(schema: Schema, fmt: str | None) -> str:
    """The stored text, or in Confluent's ``format=serialized`` a Protobuf schema's base64 descriptor (what its
    Python and Go deserializers ask for). Other formats are the stored text, as Confluent answers them."""
    if fmt == "serialized" and schema.schema_type == SchemaType.PROTOBUF:
        parsed = parsed_of(schema)
        try:
            return serialized_descriptor(parsed) if isinstance(parsed, ProtobufSchema) else schema.text
        except SchemaError as exc:
            raise RegistryError(errors.INVALID_SCHEMA, exc.message) from exc
    return schema.text


def schema_get(cluster: Cluster, schema_id: int) -> Schema:
    registry = registry_of(cluster)
    schema = Schema.objects.filter(registry=registry, schema_id=schema_id).first() if registry else None
    if schema is None:
        raise errors.schema_not_found(schema_id)
    return schema


def schema_versions(cluster: Cluster, schema_id: int, *, deleted: bool) -> list[SubjectVersion]:
    schema = schema_get(cluster, schema_id)
    rows = schema.versions.all() if deleted else schema.versions.filter(deleted=False)
    return list(rows.order_by("subject", "version"))


def referenced_by(registry: Registry | None, subject: str, version: int) -> list[int]:
    """Ids of the schemas whose references name ``subject`` at ``version`` (and are still registered)."""
    if registry is None:
        return []
    wanted = [{"subject": subject, "version": version}]
    rows = (Schema.objects.filter(registry=registry, references__contains=wanted, versions__deleted=False)
            .values_list("schema_id", flat=True).distinct())
    return sorted(rows)


# -- parsing, with references looked up in the registry -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Candidate:
    """A schema from a request, parsed, with the text and fingerprint that identify it in the registry."""

    parsed: AnySchema
    text: str
    references: list[dict[str, Any]]
    fingerprint: str


def fingerprint(schema_type: str, text: str, references: Sequence[dict[str, Any]]) -> str:
    payload = json.dumps([schema_type, text, list(references)], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()


def _references(raw: Any) -> list[Reference]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise RegistryError(errors.INVALID_SCHEMA, "Invalid schema: references must be a list")
    refs: list[Reference] = []
    for item in raw:
        try:
            refs.append(Reference(str(item["name"]), str(item["subject"]), int(item["version"])))
        except (KeyError, TypeError, ValueError):
            raise RegistryError(errors.INVALID_SCHEMA,
                                "Invalid schema: a reference needs name, subject and version") from None
    return refs


def _resolve(registry: Registry | None, refs: Iterable[Reference], into: dict[str, str],
             pinned: list[Reference]) -> None:
    """Add every (transitively) referenced name → text to ``into``; ``pinned`` gets each top-level reference with
    its version fixed (``-1`` = the latest at registration time, as Confluent stores it)."""
    for ref in refs:
        rows = list(subject_versions(registry, ref.subject))
        row = rows[-1] if rows and ref.version == LATEST else next((r for r in rows if r.version == ref.version), None)
        if row is None:
            raise RegistryError(errors.INVALID_SCHEMA, f"Invalid schema: reference {ref.name!r} to subject "
                                                       f"'{ref.subject}' version {ref.version} not found")
        pinned.append(Reference(ref.name, ref.subject, row.version))
        if ref.name in into:
            continue
        into[ref.name] = row.schema.text
        _resolve(registry, _references(row.schema.references), into, [])


def candidate(registry: Registry | None, body: Any, *, normalize: bool) -> Candidate:
    """Parse a request's ``schema``/``schemaType``/``references``; 42201 with the parser's reason when invalid."""
    if not isinstance(body, dict):
        raise RegistryError(errors.INVALID_SCHEMA, "Invalid schema: the request body must be a JSON object")
    text = body.get("schema")
    if not isinstance(text, str) or not text.strip():
        raise RegistryError(errors.INVALID_SCHEMA, "Empty schema")
    try:
        schema_type = SchemaType.from_request(body.get("schemaType"))
        refs = _references(body.get("references"))
        if not refs:  # the common case, and a pure function of the request: parsed once per process
            hit = cache.parsed_candidate(schema_type, text, normalize, fingerprint)
            return Candidate(hit.parsed, hit.text, [], hit.fingerprint)
        resolved: dict[str, str] = {}
        pinned: list[Reference] = []
        _resolve(registry, refs, resolved, pinned)
        parsed = parse_schema(schema_type, text, pinned, resolved)
    except SchemaError as exc:
        raise RegistryError(errors.INVALID_SCHEMA, exc.message) from exc
    stored = parsed.normalized() if normalize else parsed.canonical()
    references = [{"name": r.name, "subject": r.subject, "version": r.version} for r in pinned]
    return Candidate(parsed, stored, references, fingerprint(schema_type.value, stored, references))


def plain_candidate(body: Any, normalize: bool) -> Candidate | None:
    """The body's schema when it names no references and parses; None otherwise (the full path says why)."""
    if not isinstance(body, dict) or body.get("references"):
        return None
    try:
        return candidate(None, body, normalize=normalize)
    except (RegistryError, RecursionError):
        return None


def registered_id(cluster: Cluster, subject: str, body: Any, *, normalize: bool) -> int | None:
    """The id registering ``body`` under ``subject`` answers without writing anything: the subject has this schema
    live, is not read-only and no ``id`` is asked for. None for anything else (``services.schema_register``
    decides, under the registry's lock). One query, no lock: the read sees one committed state of the registry."""
    if not isinstance(body, dict) or body.get("id") is not None:
        return None
    registry_pk = cache.registry_pk(cluster.pk)
    new = plain_candidate(body, normalize) if registry_pk is not None else None
    if registry_pk is None or new is None:
        return None
    subject_mode = SubjectConfig.objects.filter(registry_id=registry_pk, subject=subject).values("mode")[:1]
    row = (SubjectVersion.objects.filter(registry_id=registry_pk, subject=subject, deleted=False,
                                         schema__fingerprint=new.fingerprint)
           .annotate(subject_mode=Subquery(subject_mode))
           .values_list("schema__schema_id", "registry__mode", "subject_mode").first())
    if row is None or (row[2] or row[1]) == Mode.READONLY:
        return None
    return int(row[0])


def lookup_found(cluster: Cluster, subject: str, body: Any, *, normalize: bool, deleted: bool) -> dict[str, Any] | None:
    """The answer of a lookup (``POST /subjects/{s}``) that finds ``body``'s schema: its newest version under
    ``subject`` (soft-deleted ones too when ``deleted``); None when not found (the view says why)."""
    registry_pk = cache.registry_pk(cluster.pk)
    new = plain_candidate(body, normalize) if registry_pk is not None else None
    if registry_pk is None or new is None:
        return None
    rows = SubjectVersion.objects.filter(registry_id=registry_pk, subject=subject, schema__fingerprint=new.fingerprint)
    row = (rows if deleted else rows.filter(deleted=False)).select_related("schema").order_by("-version").first()
    return version_body(row) if row is not None else None


def same_version(rows: Sequence[SubjectVersion], new: Candidate, *, normalize: bool) -> SubjectVersion | None:
    """The newest of ``rows`` that holds ``new``: the same stored form, or under ``normalize`` the same normalized
    form (Confluent normalizes both sides, so a schema registered plainly is found by a normalizing client)."""
    found = next((row for row in reversed(rows) if row.schema.fingerprint == new.fingerprint), None)
    if found is not None or not normalize:
        return found
    return next((row for row in reversed(rows)
                 if row.schema.schema_type == new.parsed.schema_type and row.schema.references == new.references
                 and parsed_of(row.schema).normalized() == new.text), None)


def parsed_of(schema: Schema) -> AnySchema:
    """A stored schema parsed again (its references resolved from the registry), for compatibility checks."""
    resolved: dict[str, str] = {}
    pinned: list[Reference] = []
    _resolve(schema.registry, _references(schema.references), resolved, pinned)
    return parse_schema(SchemaType(schema.schema_type), schema.text, pinned, resolved)


def subject_config(registry: Registry | None, subject: str) -> SubjectConfig | None:
    return SubjectConfig.objects.filter(registry=registry, subject=subject).first() if registry else None


def compatibility_level(registry: Registry | None, subject: str) -> CompatibilityLevel:
    """The subject's own level, else the registry's, else Confluent's default (BACKWARD)."""
    config = subject_config(registry, subject)
    if config is not None and config.compatibility:
        return CompatibilityLevel(config.compatibility)
    return CompatibilityLevel(registry.compatibility if registry else DEFAULT_COMPATIBILITY)


def effective_mode(registry: Registry | None, subject: str) -> str:
    config = subject_config(registry, subject)
    if config is not None and config.mode:
        return config.mode
    return registry.mode if registry else Mode.READWRITE.value


def compatibility_test(cluster: Cluster, subject: str, version: int | None, body: Any, *,
                       normalize: bool = False) -> list[str]:
    """Why the request's schema may not follow ``version`` of ``subject`` (``None``: every version the level
    compares with); empty when it may. A subject with no versions accepts anything when asked about ``latest``."""
    registry = registry_of(cluster)
    new = candidate(registry, body, normalize=normalize)
    level = compatibility_level(registry, subject)
    rows = list(subject_versions(registry, subject))
    if version is None or (version == LATEST and not rows):
        against = rows
    else:
        against = [version_get(cluster, subject, version)]
        level = CompatibilityLevel(level.value.replace("_TRANSITIVE", ""))
    return check(new.parsed, [parsed_of(row.schema) for row in against], level)
