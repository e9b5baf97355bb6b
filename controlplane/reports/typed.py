"""Typed keys and values in SQL reports: the registry subjects a report reads, checked and handed to the runner.

The sandboxed runner holds no secrets and cannot reach the registry, so the worker (which has the database)
resolves everything a run may decode before it starts: each typed side's reader version, and every version of
its subject (soft-deleted ones too: records written with them are still in the topic) with the schemas they
reference, by id. They go to the runner as the ``sluice`` source's internal ``schema.registry.inline`` option;
a record whose id is not among them is not the subject's, and fails the run (``FAILFAST``) or reads as null
(``PERMISSIVE``). The report's owner must be allowed to read each subject, at save time and again at run time
(a revoked ACL stops the next run), by the rules of the registry's own API (decision 0034).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from controlplane.clusters.models import Cluster
from controlplane.registry.models import Schema, SubjectVersion
from controlplane.registry.permissions import principal_may_read
from controlplane.registry.selectors import parsed_of, registry_of, subject_versions
from controlplane.reports import kinds
from dataplane.schemas import ProtobufSchema, SchemaError, SchemaType
from dataplane.schemas.protobuf_codec import resolve_message
from dataplane.schemas.wire import PayloadError

_EXPECTED = {"avro": SchemaType.AVRO, "jsonschema": SchemaType.JSON, "protobuf": SchemaType.PROTOBUF}
_MAX_REFERENCE_DEPTH = 32


class SubjectProblem(Exception):
    """A typed side the report may not read: ``field`` names the parameter (``params.value_subject``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class SideRead:
    side: str
    format: str
    subject: str
    reader: SubjectVersion


def _reader(cluster: Cluster, principal: str, params: dict[str, Any], side: str, topic: str) -> SideRead:
    """The version ``side`` of ``topic`` is read as; the owner's permission is asked first, so a subject it
    may not read is not confirmed to exist."""
    fmt = params[f"{side}_format"]
    subject = kinds.subject_of(params, side, topic)
    field = f"params.{side}_subject" if params.get(f"{side}_subject") else f"params.{side}_format"
    if not principal:
        raise SubjectProblem(field, "The report has no owner to read the schema registry as; recreate it.")
    if not principal_may_read(cluster, principal, subject):
        raise SubjectProblem(field, f"The report's owner ({principal}) may not read subject '{subject}' in the "
                                    "cluster's schema registry: a service account needs an ACL on it (resource "
                                    "type SUBJECT, operation READ).")
    live = list(subject_versions(registry_of(cluster), subject))
    if not live:
        default = f"'{topic}-{side}' is topic '{topic}''s default; name another with params.{side}_subject"
        raise SubjectProblem(field, f"Subject '{subject}' is not in cluster '{cluster.name}''s schema registry "
                                    f"({default}).")
    wanted = params.get(f"{side}_version")
    reader = live[-1] if wanted is None else next((row for row in live if row.version == wanted), None)
    if reader is None:
        raise SubjectProblem(f"params.{side}_version", f"Subject '{subject}' has no version {wanted} (it has "
                                                      f"{', '.join(str(row.version) for row in live)}).")
    if reader.schema.schema_type != _EXPECTED[fmt]:
        raise SubjectProblem(f"params.{side}_format", f"params.{side}_format is {fmt}, but subject '{subject}' "
                                                      f"version {reader.version} is a {reader.schema.schema_type} "
                                                      "schema.")
    if fmt == "protobuf":
        _check_message(params, side, subject, reader)
    return SideRead(side, fmt, subject, reader)


def _check_message(params: dict[str, Any], side: str, subject: str, reader: SubjectVersion) -> None:
    """The Protobuf message a side reads must be in the reader's schema: refused at save time, not at the run."""
    field = f"params.{side}_message" if params.get(f"{side}_message") else f"params.{side}_format"
    try:
        parsed = parsed_of(reader.schema)
        if not isinstance(parsed, ProtobufSchema):
            raise PayloadError("not a Protobuf schema")
        resolve_message(parsed, params.get(f"{side}_message"))
    except (PayloadError, SchemaError) as exc:
        raise SubjectProblem(field, f"Subject '{subject}' version {reader.version}: {exc}.") from None


def typed_check(*, cluster: Cluster, principal: str, params: dict[str, Any]) -> None:
    """``SubjectProblem`` for the first typed side of a SQL report's topics that cannot be read."""
    for topic in params["topics"]:
        for side in kinds.typed_sides(params):
            _reader(cluster, principal, params, side, topic)


def _add(schemas: dict[str, Any], subjects: dict[str, dict[str, int]], row: SubjectVersion, depth: int = 0) -> None:
    """``row`` and (transitively) the subject versions its schema references, into the inline JSON's maps."""
    if depth > _MAX_REFERENCE_DEPTH:
        return
    subjects.setdefault(row.subject, {})[str(row.version)] = row.schema.schema_id
    schema: Schema = row.schema
    key = str(schema.schema_id)
    if key in schemas:
        return
    schemas[key] = {"schemaType": schema.schema_type, "schema": schema.text, "references": schema.references}
    for ref in schema.references:
        found = subject_versions(row.registry, str(ref["subject"]), deleted=True).filter(
            version=int(ref["version"])).first()
        if found is not None:
            _add(schemas, subjects, found, depth + 1)


def typed_options(*, cluster: Cluster, principal: str, params: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Per topic of a typed SQL report, the ``sluice`` source options that read it typed from inline schemas
    (the reader version pinned now); ``SubjectProblem`` when a side cannot be read."""
    sides = kinds.typed_sides(params)
    if not sides:
        return {}
    registry = registry_of(cluster)
    out: dict[str, dict[str, str]] = {}
    for topic in params["topics"]:
        schemas: dict[str, Any] = {}
        subjects: dict[str, dict[str, int]] = {}
        options = {"mode": str(params.get("mode") or "FAILFAST")}
        names = []
        for side in sides:
            read = _reader(cluster, principal, params, side, topic)
            for row in subject_versions(registry, read.subject, deleted=True):
                _add(schemas, subjects, row)
            names.append(read.subject)
            options.update({f"{side}.format": read.format, f"{side}.schema.subject": read.subject,
                            f"{side}.schema.version": str(read.reader.version)})
            if params.get(f"{side}_message"):
                options[f"{side}.schema.message"] = str(params[f"{side}_message"])
        source = "the schemas of subject " + " and ".join(f"'{n}'" for n in names) + " (every version)"
        options["schema.registry.inline"] = json.dumps({"schemas": schemas, "subjects": subjects, "source": source},
                                                       separators=(",", ":"))
        out[topic] = options
    return out
