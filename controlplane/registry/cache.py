"""Per-process caches of what the registry's hot reads need again and again (decision 0031).

* :func:`schema_by_id`: a schema by (registry, id). A schema row never changes once made; it only disappears
  when a hard delete leaves it unused (or, in IMPORT mode, its freed id is given to a new schema). So an entry
  lives :data:`SCHEMA_SECONDS` at most, and a hard delete in this process drops its registry's entries when the
  transaction commits (:func:`forget_registry`): here it 404s at once, in other web processes within
  :data:`SCHEMA_SECONDS` -- the bound the REST Proxy already accepts for a revoked key. Misses are not cached,
  so a schema registered in another process is found at once.
* :func:`registry_pk`: the cluster's registry row id (made on first write, then fixed until the cluster goes).
* :func:`parsed_candidate`: a request's schema (type, text, no references) parsed to its canonical or
  normalised form and fingerprint; a pure function of its arguments, so an LRU of them.
* :func:`peek_answer` / :func:`remember_answer`: answers of register-existing and lookup, which depend on the
  registry's mutable state, valid for one *generation* of the registry: a counter in Redis that every write
  service bumps when its transaction commits (``services._locked``), before its HTTP answer leaves. A request
  reads the generation first (:func:`generation`), so any request that starts after a write has returned sees
  the new generation and misses: the same answers as without the cache. Redis unreachable: no cached answers
  (the database answers); a bump that fails is bounded by :data:`ANSWER_SECONDS`.

Other apps reuse :func:`schema_by_id` (e.g. a serializer that needs a writer's schema by id).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import redis
import redis.asyncio
from django.conf import settings

from controlplane.registry.models import Registry, Schema
from dataplane.schemas import AnySchema, SchemaType, parse_schema

log = logging.getLogger(__name__)

SCHEMA_SECONDS = 2.0
ANSWER_SECONDS = 2.0
MAX_ENTRIES = 20_000


@dataclass(frozen=True, slots=True)
class CachedSchema:
    """What a schema-by-id answer needs; immutable, so it may be shared across threads."""

    schema_id: int
    schema_type: str
    text: str
    references: tuple[dict[str, Any], ...]


_schemas: dict[tuple[int, int], tuple[float, CachedSchema]] = {}
_registries: dict[Any, int] = {}
_lock = threading.Lock()


def peek_schema_entry(registry_pk: int, schema_id: int) -> tuple[float, CachedSchema] | None:
    """(when it expires, the cached schema) while fresh, or None; never reads the database (for the event loop)."""
    hit = _schemas.get((registry_pk, schema_id))  # a dict read is atomic: no lock
    return hit if hit is not None and hit[0] > time.monotonic() else None


def peek_schema(registry_pk: int, schema_id: int) -> CachedSchema | None:
    entry = peek_schema_entry(registry_pk, schema_id)
    return entry[1] if entry is not None else None


def schema_by_id(registry_pk: int, schema_id: int) -> CachedSchema | None:
    """Schema ``schema_id`` of registry ``registry_pk`` (cached), or None when it has none."""
    cached = peek_schema(registry_pk, schema_id)
    return cached if cached is not None else refresh_schema(registry_pk, schema_id)


def refresh_schema(registry_pk: int, schema_id: int) -> CachedSchema | None:
    """Read the schema again and remember it (or forget it when it is gone)."""
    row = (Schema.objects.filter(registry_id=registry_pk, schema_id=schema_id)
           .values_list("schema_type", "text", "references").first())
    if row is None:
        with _lock:
            _schemas.pop((registry_pk, schema_id), None)
        return None
    made = CachedSchema(schema_id, row[0], row[1], tuple(row[2] or ()))
    with _lock:
        if len(_schemas) >= MAX_ENTRIES:
            _schemas.clear()
        _schemas[(registry_pk, schema_id)] = (time.monotonic() + SCHEMA_SECONDS, made)
    return made


def peek_registry_pk(cluster_pk: Any) -> int | None:
    return _registries.get(cluster_pk)


def registry_pk(cluster_pk: Any) -> int | None:
    """The cluster's registry row id, or None while it has none (not cached: the first write makes it)."""
    known = _registries.get(cluster_pk)
    if known is not None:
        return known
    found = Registry.objects.filter(cluster_id=cluster_pk).values_list("pk", flat=True).first()
    if found is not None:
        with _lock:
            if len(_registries) >= MAX_ENTRIES:
                _registries.clear()
            _registries[cluster_pk] = int(found)
    return found


def forget_registry(registry_pk: int) -> None:
    """Drop the registry's cached schemas (after a hard delete commits)."""
    with _lock:
        for key in [key for key in _schemas if key[0] == registry_pk]:
            del _schemas[key]


def clear() -> None:
    with _lock:
        _schemas.clear()
        _registries.clear()
        _answers.clear()
    parsed_candidate.cache_clear()


@dataclass(frozen=True, slots=True)
class Parsed:
    parsed: AnySchema
    text: str  # canonical (or, normalised) form: what the registry stores
    fingerprint: str


@lru_cache(maxsize=2048)
def parsed_candidate(schema_type: SchemaType, text: str, normalize: bool,
                     fingerprint: Callable[[str, str, list[dict[str, Any]]], str]) -> Parsed:
    """A schema with no references, parsed, with its ``fingerprint(type, stored text, [])``; SchemaError (not
    cached) when it is invalid."""
    parsed = parse_schema(schema_type, text, [], {})
    stored = parsed.normalized() if normalize else parsed.canonical()
    return Parsed(parsed, stored, fingerprint(schema_type.value, stored, []))


# -- answers that depend on the registry's mutable state, per generation --------------------------------------------

_answers: dict[tuple[Any, ...], tuple[float, int, Any]] = {}
_sync_client: redis.Redis | None = None
_async_clients: dict[int, redis.asyncio.Redis] = {}  # one per event loop (uvicorn runs one per process)


def _generation_key(registry_pk: int) -> str:
    return f"sluice:registry:{registry_pk}:generation"


def bump_generation(registry_pk: int) -> None:
    """A write to the registry committed: every cached answer of it is stale (call after commit)."""
    global _sync_client
    try:
        if _sync_client is None:
            _sync_client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        _sync_client.incr(_generation_key(registry_pk))
    except redis.RedisError as exc:
        log.warning("registry %s: could not bump its generation (%s); cached answers end within %g s",
                    registry_pk, exc, ANSWER_SECONDS)


def generation_now(registry_pk: int) -> int | None:
    """:func:`generation` for a worker thread: one blocking GET, read after this call began; None when Redis
    cannot say."""
    global _sync_client
    try:
        if _sync_client is None:
            _sync_client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        return int(_sync_client.get(_generation_key(registry_pk)) or 0)
    except (redis.RedisError, ValueError):
        return None


class _GenerationReads:
    """One registry's generation reads on one event loop, shared: the requests that arrive while a GET is on its
    way wait for the next GET, sent once that one returns, and all take its answer. Each request thus sees a
    value read after it arrived (what one GET of its own would see), at one round trip per batch, not per
    request."""

    def __init__(self, client: redis.asyncio.Redis, key: str) -> None:
        self.client, self.key = client, key
        self.waiting: asyncio.Future[int | None] | None = None
        self.busy = False

    async def read(self) -> int | None:
        if self.waiting is None:
            self.waiting = asyncio.get_running_loop().create_future()
            if not self.busy:
                self.busy = True
                _background(asyncio.ensure_future(self._run()))
        return await asyncio.shield(self.waiting)

    async def _run(self) -> None:
        try:
            while self.waiting is not None:
                batch, self.waiting = self.waiting, None
                try:
                    value = await self.client.get(self.key)
                    batch.set_result(int(value or 0))
                except (redis.RedisError, OSError, ValueError):
                    batch.set_result(None)
        finally:
            self.busy = False


_reads: dict[tuple[int, int], _GenerationReads] = {}
_running: set[asyncio.Future[None]] = set()


def _background(task: asyncio.Future[None]) -> None:
    _running.add(task)
    task.add_done_callback(_running.discard)


async def generation(registry_pk: int) -> int | None:
    """The registry's current generation, read after this call began; None when Redis cannot say (then no
    remembered answer may be used)."""
    loop_id = id(asyncio.get_running_loop())
    reads = _reads.get((loop_id, registry_pk))
    if reads is None:
        client = _async_clients.get(loop_id)
        if client is None:
            client = _async_clients[loop_id] = redis.asyncio.Redis.from_url(
                settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
        if len(_reads) >= MAX_ENTRIES:
            _reads.clear()
        reads = _reads[(loop_id, registry_pk)] = _GenerationReads(client, _generation_key(registry_pk))
    return await reads.read()


def peek_answer_entry(key: tuple[Any, ...], generation_now: int) -> tuple[float, Any] | None:
    """(when it expires, the answer remembered for ``key`` in this generation) while fresh, or None."""
    hit = _answers.get(key)
    return (hit[0], hit[2]) if hit is not None and hit[1] == generation_now and hit[0] > time.monotonic() else None


def peek_answer(key: tuple[Any, ...], generation_now: int) -> Any:
    entry = peek_answer_entry(key, generation_now)
    return entry[1] if entry is not None else None


def forget_answer(key: tuple[Any, ...]) -> None:
    with _lock:
        _answers.pop(key, None)


def remember_answer(key: tuple[Any, ...], generation_then: int, answer: Any) -> None:
    """Remember ``answer``, computed after ``generation_then`` was read (a write since then bumped it)."""
    with _lock:
        if len(_answers) >= MAX_ENTRIES:
            _answers.clear()
        _answers[key] = (time.monotonic() + ANSWER_SECONDS, generation_then, answer)
