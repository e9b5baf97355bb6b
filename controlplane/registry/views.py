"""Confluent's Schema Registry REST API under ``/schema-registry/{kafka_cluster_id}/``: thin views.

Each view authenticates the caller (an API key or the console's session), checks the tenant role, parses the
request, calls one service or selector and renders Confluent's JSON (``application/vnd.schemaregistry.v1+json``);
every failure is Confluent's ``{"error_code", "message"}`` body.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from controlplane.registry import errors, selectors, services
from controlplane.registry.access import RegistryAccess, request_access
from controlplane.registry.errors import RegistryError
from controlplane.registry.models import Schema
from controlplane.registry.permissions import GLOBAL, denied_message
from controlplane.registry.selectors import parse_level, parse_mode, parse_version
from controlplane.tenancy.models import Role
from dataplane.schemas import SchemaType
from dataplane.security.acl import AclOperation

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
JSON_TYPES = ("application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json", "application/json",
              "application/octet-stream", "")


class Text(str):
    """A ``/schema`` answer: the schema text itself, not JSON-encoded again (Confluent's raw schema endpoints)."""


def _flag(request: HttpRequest, name: str) -> bool:
    return request.GET.get(name, "false").lower() == "true"


def _body(request: HttpRequest) -> Any:
    content_type = request.content_type or ""
    if content_type not in JSON_TYPES:
        raise RegistryError(errors.UNSUPPORTED_MEDIA_TYPE, f"HTTP 415 Unsupported Media Type: {content_type}")
    try:
        raw = request.body
    except RequestDataTooBig:
        raise RegistryError(errors.PAYLOAD_TOO_LARGE, f"Request body too large: a registry request takes at most "
                                                      f"{settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes") from None
    try:
        return json.loads(raw or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise RegistryError(errors.BAD_REQUEST, f"Unrecognized JSON: {exc}") from exc
    except RecursionError:
        raise RegistryError(errors.BAD_REQUEST, "Unrecognized JSON: it nests too deeply") from None


def _respond(status: int, payload: Any) -> HttpResponse:
    text = payload if isinstance(payload, Text) else json.dumps(payload)
    return HttpResponse(text, status=status, content_type=CONTENT_TYPE)


@method_decorator(csrf_exempt, name="dispatch")
class RegistryView(View):
    """The base: ``roles`` maps an HTTP method to the tenant role it needs, ``operations`` to the ACL operation a
    service account needs on the path's subject (or, for a write of the registry-wide config and mode, on every
    subject); handlers return the JSON payload."""

    roles: dict[str, str] = {}
    operations: dict[str, AclOperation] = {}

    def dispatch(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        kafka_cluster_id = kwargs.pop("kafka_cluster_id")
        try:
            access = request_access(request, kafka_cluster_id)
            method = (request.method or "GET").lower()
            handler: Callable[..., Any] | None = getattr(self, method, None) if method.upper() in self.roles else None
            if handler is None:
                raise RegistryError(errors.METHOD_NOT_ALLOWED, "HTTP 405 Method Not Allowed")
            access.require(self.roles[method.upper()])
            operation = self.operations.get(method.upper())
            subject = kwargs.get("subject")
            if operation is not None and (subject is not None or method != "get"):
                access.require_subject(operation, GLOBAL if subject is None else subject)
            return _respond(200, handler(request, access, **kwargs))
        except RegistryError as exc:
            return _respond(exc.status, exc.body())
        except DatabaseError:
            log.exception("schema registry store error")
            return _respond(500, {"error_code": errors.STORE_ERROR, "message": "Error in the backend data store"})


class RootView(RegistryView):
    roles = {"GET": Role.VIEWER}

    def get(self, request: HttpRequest, access: RegistryAccess) -> Any:
        return {}


class SubjectsView(RegistryView):
    roles = {"GET": Role.VIEWER}

    def get(self, request: HttpRequest, access: RegistryAccess) -> Any:
        subjects = selectors.subject_list(access.cluster, deleted=_flag(request, "deleted"),
                                          prefix=request.GET.get("subjectPrefix", ""))
        return [subject for subject in subjects if access.may(AclOperation.READ, subject)]


class SubjectView(RegistryView):
    """``POST``: is this schema registered under the subject (lookup); ``DELETE``: the subject's versions."""

    roles = {"POST": Role.VIEWER, "DELETE": Role.MEMBER}
    operations = {"POST": AclOperation.READ, "DELETE": AclOperation.DELETE}

    def post(self, request: HttpRequest, access: RegistryAccess, subject: str) -> Any:
        body = _body(request)
        deleted = _flag(request, "deleted")
        rows = list(selectors.subject_versions(selectors.registry_of(access.cluster), subject, deleted=deleted))
        if not rows:
            raise errors.subject_not_found(subject)
        normalize = _flag(request, "normalize")
        new = selectors.candidate(selectors.registry_of(access.cluster), body, normalize=normalize)
        found = selectors.same_version(rows, new, normalize=normalize)
        if found is None:
            raise RegistryError(errors.SCHEMA_NOT_FOUND, "Schema not found")
        return selectors.version_body(found, request.GET.get("format"))

    def delete(self, request: HttpRequest, access: RegistryAccess, subject: str) -> Any:
        permanent = _flag(request, "permanent")
        if permanent:
            access.require(Role.ADMIN)
        return services.subject_delete(cluster=access.cluster, actor=access.actor, subject=subject,
                                       permanent=permanent)


class VersionsView(RegistryView):
    roles = {"GET": Role.VIEWER, "POST": Role.MEMBER}
    operations = {"GET": AclOperation.READ, "POST": AclOperation.WRITE}

    def get(self, request: HttpRequest, access: RegistryAccess, subject: str) -> Any:
        return selectors.version_list(access.cluster, subject, deleted=_flag(request, "deleted"))

    def post(self, request: HttpRequest, access: RegistryAccess, subject: str) -> Any:
        body, normalize = _body(request), _flag(request, "normalize")
        known = selectors.registered_id(access.cluster, subject, body, normalize=normalize)
        if known is not None:  # already registered: no lock, no write
            return {"id": known}
        schema_id = services.schema_register(cluster=access.cluster, actor=access.actor, subject=subject,
                                             body=body, normalize=normalize)
        return {"id": schema_id}


class VersionView(RegistryView):
    roles = {"GET": Role.VIEWER, "DELETE": Role.MEMBER}
    operations = {"GET": AclOperation.READ, "DELETE": AclOperation.DELETE}

    def get(self, request: HttpRequest, access: RegistryAccess, subject: str, version: str) -> Any:
        row = selectors.version_get(access.cluster, subject, parse_version(version), deleted=_flag(request, "deleted"))
        return selectors.version_body(row, request.GET.get("format"))

    def delete(self, request: HttpRequest, access: RegistryAccess, subject: str, version: str) -> Any:
        number = parse_version(version)
        permanent = _flag(request, "permanent")
        if permanent:
            access.require(Role.ADMIN)
        return services.subject_version_delete(cluster=access.cluster, actor=access.actor, subject=subject,
                                               version=number, permanent=permanent)


class VersionSchemaView(RegistryView):
    roles = {"GET": Role.VIEWER}
    operations = {"GET": AclOperation.READ}

    def get(self, request: HttpRequest, access: RegistryAccess, subject: str, version: str) -> Any:
        row = selectors.version_get(access.cluster, subject, parse_version(version), deleted=_flag(request, "deleted"))
        return Text(row.schema.text)


class ReferencedByView(RegistryView):
    roles = {"GET": Role.VIEWER}
    operations = {"GET": AclOperation.READ}

    def get(self, request: HttpRequest, access: RegistryAccess, subject: str, version: str) -> Any:
        row = selectors.version_get(access.cluster, subject, parse_version(version))
        return selectors.referenced_by(row.registry, subject, row.version)


def _schema_id(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise errors.schema_not_found(text) from None


def _readable_schema(access: RegistryAccess, schema_id: str) -> Schema:
    """A schema by id, for a caller that may read at least one subject using it (Confluent's SCHEMA_READ)."""
    schema = selectors.schema_get(access.cluster, _schema_id(schema_id))
    if access.acls is not None:
        subjects = sorted({row.subject for row in schema.versions.all()})
        if not access.may_any(AclOperation.READ, subjects):
            raise RegistryError(errors.FORBIDDEN, denied_message(access.acls.principal, AclOperation.READ,
                                                                 subjects[0] if subjects else GLOBAL))
    return schema


class SchemaByIdView(RegistryView):
    roles = {"GET": Role.VIEWER}

    def get(self, request: HttpRequest, access: RegistryAccess, schema_id: str) -> Any:
        return selectors.schema_fields(_readable_schema(access, schema_id), request.GET.get("format"))


class SchemaTextByIdView(RegistryView):
    roles = {"GET": Role.VIEWER}

    def get(self, request: HttpRequest, access: RegistryAccess, schema_id: str) -> Any:
        return Text(_readable_schema(access, schema_id).text)


class SchemaVersionsView(RegistryView):
    roles = {"GET": Role.VIEWER}

    def get(self, request: HttpRequest, access: RegistryAccess, schema_id: str) -> Any:
        rows = selectors.schema_versions(access.cluster, _schema_id(schema_id), deleted=_flag(request, "deleted"))
        return [{"subject": row.subject, "version": row.version} for row in rows
                if access.may(AclOperation.READ, row.subject)]


class SchemaSubjectsView(RegistryView):
    roles = {"GET": Role.VIEWER}

    def get(self, request: HttpRequest, access: RegistryAccess, schema_id: str) -> Any:
        rows = selectors.schema_versions(access.cluster, _schema_id(schema_id), deleted=_flag(request, "deleted"))
        return sorted({row.subject for row in rows if access.may(AclOperation.READ, row.subject)})


class SchemaTypesView(RegistryView):
    roles = {"GET": Role.VIEWER}

    def get(self, request: HttpRequest, access: RegistryAccess) -> Any:
        return [SchemaType.JSON.value, SchemaType.PROTOBUF.value, SchemaType.AVRO.value]


class CompatibilityView(RegistryView):
    """May this schema follow a version (or, with no version in the path, the versions the level compares)?"""

    roles = {"POST": Role.MEMBER}
    operations = {"POST": AclOperation.READ}

    def post(self, request: HttpRequest, access: RegistryAccess, subject: str, version: str | None = None) -> Any:
        number = parse_version(version) if version is not None else None
        problems = selectors.compatibility_test(access.cluster, subject, number, _body(request),
                                                normalize=_flag(request, "normalize"))
        answer: dict[str, Any] = {"is_compatible": not problems}
        if _flag(request, "verbose"):
            answer["messages"] = problems
        return answer


_CONFIG_OPERATIONS = {"GET": AclOperation.DESCRIBE_CONFIGS, "PUT": AclOperation.ALTER_CONFIGS,
                      "DELETE": AclOperation.ALTER_CONFIGS}


class ConfigView(RegistryView):
    roles = {"GET": Role.VIEWER, "PUT": Role.ADMIN, "DELETE": Role.ADMIN}
    operations = _CONFIG_OPERATIONS

    def get(self, request: HttpRequest, access: RegistryAccess, subject: str | None = None) -> Any:
        registry = selectors.registry_of(access.cluster)
        if subject is not None:
            config = selectors.subject_config(registry, subject)
            if config is not None and config.compatibility:
                return {"compatibilityLevel": config.compatibility}
            if not _flag(request, "defaultToGlobal"):
                raise RegistryError(errors.SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
                                    f"Subject '{subject}' does not have subject-level compatibility configured")
        return {"compatibilityLevel": selectors.compatibility_level(registry, "") if registry is None
                else registry.compatibility}

    def put(self, request: HttpRequest, access: RegistryAccess, subject: str | None = None) -> Any:
        body = _body(request)
        level = parse_level(body.get("compatibility") if isinstance(body, dict) else None)
        services.registry_config_set(cluster=access.cluster, actor=access.actor, subject=subject, level=level)
        return {"compatibility": level.value}

    def delete(self, request: HttpRequest, access: RegistryAccess, subject: str | None = None) -> Any:
        previous = services.registry_config_delete(cluster=access.cluster, actor=access.actor, subject=subject)
        return {"compatibilityLevel": previous}


class ModeView(RegistryView):
    roles = {"GET": Role.VIEWER, "PUT": Role.ADMIN, "DELETE": Role.ADMIN}
    operations = _CONFIG_OPERATIONS

    def get(self, request: HttpRequest, access: RegistryAccess, subject: str | None = None) -> Any:
        registry = selectors.registry_of(access.cluster)
        if subject is not None:
            config = selectors.subject_config(registry, subject)
            if config is not None and config.mode:
                return {"mode": config.mode}
            if not _flag(request, "defaultToGlobal"):
                raise RegistryError(errors.SUBJECT_MODE_NOT_CONFIGURED,
                                    f"Subject '{subject}' does not have subject-level mode configured")
        return {"mode": selectors.effective_mode(registry, "") if subject is None or registry is None
                else registry.mode}

    def put(self, request: HttpRequest, access: RegistryAccess, subject: str | None = None) -> Any:
        body = _body(request)
        mode = parse_mode(body.get("mode") if isinstance(body, dict) else None)
        services.registry_mode_set(cluster=access.cluster, actor=access.actor, subject=subject, mode=mode,
                                   force=_flag(request, "force"))
        return {"mode": mode.value}

    def delete(self, request: HttpRequest, access: RegistryAccess, subject: str | None = None) -> Any:
        if subject is None:
            raise RegistryError(errors.METHOD_NOT_ALLOWED, "HTTP 405 Method Not Allowed")
        return {"mode": services.registry_mode_delete(cluster=access.cluster, actor=access.actor, subject=subject)}


class ContextsView(RegistryView):
    """Schema contexts: a registry here has only Confluent's default context, ``.``."""

    roles = {"GET": Role.VIEWER}

    def get(self, request: HttpRequest, access: RegistryAccess) -> Any:
        return ["."]


class NotFoundView(RegistryView):
    """Any other path under a registry: Confluent's 404 body, after the same authentication (no hints)."""

    roles = {"GET": Role.VIEWER, "POST": Role.VIEWER, "PUT": Role.VIEWER, "DELETE": Role.VIEWER}

    def _missing(self, request: HttpRequest, access: RegistryAccess, rest: str = "") -> Any:
        raise RegistryError(errors.NOT_FOUND, "HTTP 404 Not Found")

    get = post = put = delete = _missing
