"""A small client for a Schema Registry's REST API (Confluent's), for Spark tasks and tools outside Django.

Only what reading and writing typed records needs: a schema by id (cached: ids are immutable), a subject's
latest or given version, and registering a schema. Speaks HTTP through the standard library's
``urllib.request`` so Spark executors need nothing beyond the ``dataplane`` package; every call has a
timeout, and every failure is a ``RegistryError`` whose message says what was asked and what the registry
answered (401 → the key, 404 → the subject, version or id).

``StaticSchemas`` answers the same reads from schemas handed over up front (a subject's versions and their
ids), for a process that must not reach the registry: the report runner gets what its run may read this way
(decision 0034).
"""

from __future__ import annotations

import base64
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any, Protocol

from dataplane.schemas import Reference, SchemaError, SchemaType, parse_schema
from dataplane.schemas.compatibility import AnySchema

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
TIMEOUT = 30.0
_MAX_REFERENCE_DEPTH = 32


class RegistryError(RuntimeError):
    """The registry could not answer (unreachable, refused the key, does not know the subject or id)."""

    def __init__(self, message: str, *, status: int | None = None, error_code: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class RegisteredSchema:
    """A schema as the registry holds it, parsed (``parsed``) with its references resolved."""

    id: int
    schema_type: SchemaType
    text: str
    parsed: AnySchema
    subject: str | None = None
    version: int | None = None


class SchemaLookup(Protocol):
    """What typed reads and writes ask of a registry: ``RegistryClient`` over HTTP, ``StaticSchemas`` inline."""

    def schema_by_id(self, schema_id: int) -> RegisteredSchema: ...

    def version(self, subject: str, version: int | str = "latest") -> RegisteredSchema: ...

    def register(self, subject: str, schema_type: SchemaType, text: str) -> int: ...


class RegistryClient:
    """``RegistryClient(url, key, secret)``; thread-safe, schemas by id cached for the client's life."""

    def __init__(self, url: str, key: str | None = None, secret: str | None = None, *,
                 timeout: float = TIMEOUT) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._auth = None if key is None else "Basic " + base64.b64encode(f"{key}:{secret or ''}".encode()).decode()
        self._by_id: dict[int, RegisteredSchema] = {}
        self._lock = threading.Lock()

    # -- HTTP ------------------------------------------------------------------------------------------------

    def _call(self, method: str, path: str, body: Any = None, *, what: str) -> Any:
        headers = {"Accept": CONTENT_TYPE}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = CONTENT_TYPE
        if self._auth is not None:
            headers["Authorization"] = self._auth
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise _http_error(exc, what, self.url) from None
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RegistryError(f"schema registry at {self.url} is unreachable ({reason}) while {what}") from None
        except ValueError as exc:
            raise RegistryError(f"schema registry at {self.url} answered with invalid JSON while {what}: {exc}") \
                from None

    # -- reads -----------------------------------------------------------------------------------------------

    def schema_by_id(self, schema_id: int) -> RegisteredSchema:
        """The schema with this id (from the cache after the first call)."""
        with self._lock:
            found = self._by_id.get(schema_id)
        if found is not None:
            return found
        body = self._call("GET", f"/schemas/ids/{schema_id}", what=f"looking up schema id {schema_id}")
        found = self._parse(body, schema_id=schema_id)
        with self._lock:
            self._by_id[schema_id] = found
        return found

    def version(self, subject: str, version: int | str = "latest") -> RegisteredSchema:
        """A subject's version (``"latest"`` by default), with its id."""
        quoted = urllib.parse.quote(subject, safe="")
        body = self._call("GET", f"/subjects/{quoted}/versions/{version}",
                          what=f"looking up version {version} of subject {subject!r}")
        found = self._parse(body, schema_id=int(body["id"]), subject=subject, version=int(body["version"]))
        with self._lock:
            self._by_id.setdefault(found.id, found)
        return found

    def latest(self, subject: str) -> RegisteredSchema:
        return self.version(subject, "latest")

    # -- writes ----------------------------------------------------------------------------------------------

    def register(self, subject: str, schema_type: SchemaType, text: str) -> int:
        """Register ``text`` under ``subject`` (an existing identical schema keeps its id); its id."""
        quoted = urllib.parse.quote(subject, safe="")
        body = self._call("POST", f"/subjects/{quoted}/versions", {"schema": text, "schemaType": str(schema_type)},
                          what=f"registering a schema under subject {subject!r}")
        return int(body["id"])

    # -- parsing ---------------------------------------------------------------------------------------------

    def _parse(self, body: dict[str, Any], *, schema_id: int, subject: str | None = None,
               version: int | None = None) -> RegisteredSchema:
        schema_type = SchemaType(body.get("schemaType") or "AVRO")
        references = [Reference(r["name"], r["subject"], int(r["version"])) for r in body.get("references") or []]
        resolved: dict[str, str] = {}
        self._resolve(references, resolved, depth=0)
        try:
            parsed = parse_schema(schema_type, body["schema"], references, resolved)
        except SchemaError as exc:
            raise RegistryError(f"schema id {schema_id} from {self.url} does not parse: {exc}") from None
        return RegisteredSchema(schema_id, schema_type, body["schema"], parsed, subject, version)

    def _resolve(self, references: list[Reference], resolved: dict[str, str], *, depth: int) -> None:
        """Every (transitively) referenced schema's text by reference name, as ``parse_schema`` wants them."""
        if depth > _MAX_REFERENCE_DEPTH:
            raise RegistryError("schema references nest too deeply (a cycle?)")
        for ref in references:
            if ref.name in resolved:
                continue
            quoted = urllib.parse.quote(ref.subject, safe="")
            body = self._call("GET", f"/subjects/{quoted}/versions/{ref.version}",
                              what=f"resolving reference {ref.name!r} ({ref.subject} version {ref.version})")
            resolved[ref.name] = body["schema"]
            nested = [Reference(r["name"], r["subject"], int(r["version"])) for r in body.get("references") or []]
            self._resolve(nested, resolved, depth=depth + 1)


class StaticSchemas:
    """A registry's answers given up front: ``{"schemas": {"<id>": {"schemaType", "schema", "references"?}},
    "subjects": {"<subject>": {"<version>": id}}, "source"?: "what they are"}`` (referenced subjects' versions
    included; ``source`` names them in errors). Read-only; an id
    or version it was not given is a 404 ``RegistryError``, as the registry would answer one it does not have.
    Thread-safe (immutable after construction; parses are cached under a lock)."""

    def __init__(self, text: str, *, source: str = "the schemas given inline") -> None:
        try:
            data = json.loads(text)
            self._schemas: dict[int, dict[str, Any]] = {int(k): v for k, v in data["schemas"].items()}
            self._subjects: dict[str, dict[int, int]] = {
                subject: {int(v): int(i) for v, i in versions.items()}
                for subject, versions in data["subjects"].items()}
            source = str(data.get("source") or source)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise RegistryError(f"{source} are not {{\"schemas\": {{...}}, \"subjects\": {{...}}}}: {exc}") from None
        self.source = source
        self._parsed: dict[int, RegisteredSchema] = {}
        self._lock = threading.Lock()

    def _missing(self, what: str) -> RegistryError:
        return RegistryError(f"{what} is not among {self.source}", status=404, error_code=40403)

    def schema_by_id(self, schema_id: int) -> RegisteredSchema:
        with self._lock:
            found = self._parsed.get(schema_id)
        if found is not None:
            return found
        body = self._schemas.get(schema_id)
        if body is None:
            raise self._missing(f"schema id {schema_id}")
        schema_type = SchemaType(body.get("schemaType") or "AVRO")
        references = [Reference(r["name"], r["subject"], int(r["version"])) for r in body.get("references") or []]
        resolved: dict[str, str] = {}
        self._resolve(references, resolved, depth=0)
        try:
            parsed = parse_schema(schema_type, body["schema"], references, resolved)
        except SchemaError as exc:
            raise RegistryError(f"schema id {schema_id} of {self.source} does not parse: {exc}") from None
        found = RegisteredSchema(schema_id, schema_type, body["schema"], parsed)
        with self._lock:
            self._parsed[schema_id] = found
        return found

    def version(self, subject: str, version: int | str = "latest") -> RegisteredSchema:
        versions = self._subjects.get(subject)
        if not versions:
            raise self._missing(f"subject {subject!r}")
        number = max(versions) if version in ("latest", -1) else int(version)
        if number not in versions:
            raise self._missing(f"version {version} of subject {subject!r}")
        found = self.schema_by_id(versions[number])
        return RegisteredSchema(found.id, found.schema_type, found.text, found.parsed, subject, number)

    def register(self, subject: str, schema_type: SchemaType, text: str) -> int:
        raise RegistryError(f"{self.source} are read-only: nothing can be registered under {subject!r}")

    def _resolve(self, references: list[Reference], resolved: dict[str, str], *, depth: int) -> None:
        if depth > _MAX_REFERENCE_DEPTH:
            raise RegistryError("schema references nest too deeply (a cycle?)")
        for ref in references:
            if ref.name in resolved:
                continue
            schema_id = self._subjects.get(ref.subject, {}).get(ref.version)
            body = self._schemas.get(schema_id) if schema_id is not None else None
            if body is None:
                raise self._missing(f"reference {ref.name!r} ({ref.subject} version {ref.version})")
            resolved[ref.name] = body["schema"]
            nested = [Reference(r["name"], r["subject"], int(r["version"])) for r in body.get("references") or []]
            self._resolve(nested, resolved, depth=depth + 1)


def _http_error(exc: urllib.error.HTTPError, what: str, url: str) -> RegistryError:
    try:
        body = json.loads(exc.read() or b"{}")
    except ValueError:
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    code = body.get("error_code") if isinstance(body, dict) else None
    if exc.code == 401:
        text = f"schema registry at {url} refused the credentials (401) while {what}: check the registry's " \
               "API key and secret (schema.registry.basic.auth.user.info)"
    elif exc.code == 403:
        text = f"schema registry at {url}: the API key may not do this (403) while {what}"
    elif exc.code == 404:
        text = f"schema registry at {url}: not found while {what}: {message or 'no such resource'}"
    else:
        text = f"schema registry at {url} answered {exc.code} while {what}: {message or exc.reason}"
    return RegistryError(text, status=exc.code, error_code=code if isinstance(code, int) else None)
