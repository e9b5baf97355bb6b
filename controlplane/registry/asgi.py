"""The Schema Registry's hot paths on the server's event loop, in front of Django (decision 0031).

Serializers call three paths per message type, again and again: ``GET /schemas/ids/{id}``, and a registration
(``POST /subjects/{s}/versions``) or lookup (``POST /subjects/{s}``) of a schema the subject already has. Here
they are answered without Django's middleware and thread: the caller's access and the schema by id come from
the per-process caches (``access``, ``cache``); a registration or lookup answer is remembered for the
registry's current generation (one Redis GET per request checks it), else it is one query on a worker thread.
Anything else -- a cache that cannot answer, a role too low, a schema not registered yet, any request that
would be an error, a browser's request (``Origin``: CORS is Django's), a ``format`` asked for, a caller with
per-subject ACLs (a service account's key: the views check them) -- goes on to Django unchanged, with the body it
sent, so every answer and error stays the views' own.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl

from django.db import DatabaseError, close_old_connections

from controlplane.registry import cache, selectors
from controlplane.registry.access import (
    RegistryAccess,
    cached_access_entry,
    refresh_registry_access,
    registry_access,
)
from controlplane.registry.errors import RegistryError
from controlplane.registry.views import CONTENT_TYPE, JSON_TYPES
from controlplane.tenancy.models import Role
from controlplane.tenancy.services import role_at_least

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

PATH = re.compile(r"^/schema-registry/(?P<cluster_id>[^/]+)/(?:schemas/ids/(?P<schema_id>[0-9]{1,10})"
                  r"|subjects/(?P<subject>[^/]+)(?P<versions>/versions)?)/?$")
MAX_BODY_BYTES = 1 << 20  # a larger body goes to Django (and its own limits)
HEADERS = [(b"content-type", CONTENT_TYPE.encode()), (b"x-content-type-options", b"nosniff"),
           (b"x-frame-options", b"DENY"), (b"referrer-policy", b"same-origin"),
           (b"cross-origin-opener-policy", b"same-origin")]


def _header(scope: Scope, name: bytes) -> str:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return ""


def _flag(scope: Scope, name: str) -> bool:
    """Django's ``request.GET.get(name, "false").lower() == "true"`` (the last value wins, as in a QueryDict)."""
    values = [v for k, v in parse_qsl(bytes(scope.get("query_string", b"")).decode("latin-1"), keep_blank_values=True)
              if k == name]
    return (values[-1] if values else "false").lower() == "true"


class Replay:
    """The request body read so far, given again to Django (then the rest of the stream, if any)."""

    def __init__(self, receive: Receive) -> None:
        self._receive = receive
        self.body = b""
        self.complete = False
        self._replayed = False

    async def read(self, limit: int) -> bool:
        """Read the body; False when it is longer than ``limit`` (what was read is kept for the replay)."""
        while not self.complete:
            message = await self._receive()
            if message["type"] != "http.request":
                return False
            self.body += message.get("body", b"")
            self.complete = not message.get("more_body", False)
            if len(self.body) > limit:
                return False
        return True

    async def __call__(self) -> Message:
        if not self._replayed:
            self._replayed = True
            return {"type": "http.request", "body": self.body, "more_body": not self.complete}
        return await self._receive()


def _on_thread(work: Callable[[], Any]) -> Any:
    """Database work off the event loop, with Django's connection hygiene around it."""
    close_old_connections()
    try:
        return work()
    finally:
        close_old_connections()


# An entry used in the last REFRESH_AHEAD seconds of its life is read again in the background (one read per
# entry at a time), so a busy key or schema never expires under load: no burst of requests all missing at once.
# The bounds stay: an entry is never served longer than its lifetime after the read that made it.
REFRESH_AHEAD = 0.5
_refreshing: set[Any] = set()
_tasks: set[asyncio.Future[Any]] = set()


def _refresh_ahead(key: Any, expires: float, work: Callable[[], Any],
                   after: Callable[[], Awaitable[None]] | None = None) -> None:
    """Run ``work`` on a thread (or the coroutine function ``after`` on the loop) when the entry is about to
    expire and no refresh of it is under way."""
    if expires - time.monotonic() > REFRESH_AHEAD or key in _refreshing:
        return
    _refreshing.add(key)

    async def run() -> None:
        try:
            if after is not None:
                await after()
            else:
                await asyncio.to_thread(_on_thread, work)
        except (RegistryError, DatabaseError):
            pass  # a refusal forgot the entry (refresh_registry_access); a store error: it expires as usual
        finally:
            _refreshing.discard(key)

    task = asyncio.ensure_future(run())
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


# Misses in flight, by what they compute: requests that miss the same entry while it is being read share that
# one read instead of queueing one thread each. When a busy server's caches had all expired (after a quiet
# second or two), every request of the first milliseconds missed and sent the same query to the thread pool,
# and the loop waited behind hundreds of them; now there is one read per key. A shared read began after the
# joining request's own generation read, or is keyed by that generation, so it answers as its own read would.
_inflight: dict[tuple[Any, ...], asyncio.Future[Any]] = {}


async def _shared(key: tuple[Any, ...], work: Callable[[], Any]) -> Any:
    """``work()`` on a worker thread, or the result (or exception) of the same ``key``'s run already under way."""
    running = _inflight.get(key)
    if running is not None:
        return await asyncio.shield(running)
    future: asyncio.Future[Any] = asyncio.ensure_future(asyncio.to_thread(_on_thread, work))
    _inflight[key] = future
    try:
        return await asyncio.shield(future)
    finally:
        if future.done() and _inflight.get(key) is future:
            del _inflight[key]
        elif not future.done():  # this request was cancelled: the read goes on for the others, then is dropped
            future.add_done_callback(lambda done: _inflight.pop(key, None) if _inflight.get(key) is done else None)


async def _access(authorization: str, cluster_id: str) -> RegistryAccess | None:
    """The caller's access from the cache, else resolved on a thread; None on a refusal (Django answers it), and
    for a caller whose access carries per-subject ACLs (``acls``, a service account's): the views check those."""
    entry = cached_access_entry(authorization, cluster_id)
    access = entry[1] if entry is not None else None
    if entry is not None:
        _refresh_ahead(("access", id(entry)), entry[0],
                       lambda: refresh_registry_access(authorization, cluster_id))
    if access is None and authorization:
        try:
            access = await _shared(("access", authorization, cluster_id),
                                   lambda: registry_access(authorization, cluster_id))
        except (RegistryError, DatabaseError):
            return None
    return access if access is not None and getattr(access, "acls", None) is None else None


def _answer_refresh(key: tuple[Any, ...], registry_pk: int, work: Callable[[], Any]) -> Callable[[], Awaitable[None]]:
    """Read a remembered answer again, as a request would: the generation first, then the database."""
    async def refresh() -> None:
        generation = await cache.generation(registry_pk)
        answer = await asyncio.to_thread(_on_thread, work)
        if generation is None or answer is None:
            cache.forget_answer(key)
        else:
            cache.remember_answer(key, generation, answer)
    return refresh


async def _respond(send: Send, payload: Any) -> None:
    data = json.dumps(payload).encode()  # as the views render it
    await send({"type": "http.response.start", "status": 200,
                "headers": [*HEADERS, (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


def _schema(access: RegistryAccess, schema_id: int) -> cache.CachedSchema | None:
    registry_pk = cache.registry_pk(access.cluster.pk)
    return cache.schema_by_id(registry_pk, schema_id) if registry_pk is not None else None


class RegistryHttp:
    """HTTP entry point: the registry's hot paths here, everything else to ``app``."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/schema-registry/") \
                and scope["method"] in ("GET", "POST") and (match := PATH.match(scope["path"])) \
                and not _header(scope, b"origin") and b"format=" not in bytes(scope.get("query_string", b"")):
            replay = Replay(receive)  # Django gets the body again if it was read here
            try:
                if await self._serve(scope, replay, send, match):
                    return
            except DatabaseError:
                pass  # Django says it (its 50001 store error)
            receive = replay
        await self.app(scope, receive, send)

    async def _serve(self, scope: Scope, replay: Replay, send: Send, match: re.Match[str]) -> bool:
        """True when answered here."""
        if scope["method"] == "GET" and match["schema_id"]:
            access = await _access(_header(scope, b"authorization"), match["cluster_id"])
            if access is None:
                return False
            schema_id = int(match["schema_id"])
            pk = cache.peek_registry_pk(access.cluster.pk)
            entry = cache.peek_schema_entry(pk, schema_id) if pk is not None else None
            schema = entry[1] if entry is not None else None
            if entry is not None and pk is not None:
                registry = pk
                _refresh_ahead(("schema", pk, schema_id), entry[0], lambda: cache.refresh_schema(registry, schema_id))
            if schema is None:
                found = access
                schema = await _shared(("schema", access.cluster.pk, schema_id), lambda: _schema(found, schema_id))
            if schema is None:
                return False  # 40403, from the view
            await _respond(send, selectors.schema_fields(schema))
            return True
        if scope["method"] != "POST" or not match["subject"]:
            return False
        content_type = _header(scope, b"content-type").split(";", 1)[0].strip().lower()
        if content_type not in JSON_TYPES:
            return False
        access = await _access(_header(scope, b"authorization"), match["cluster_id"])
        if access is None or not role_at_least(access.role, Role.MEMBER if match["versions"] else Role.VIEWER):
            return False
        if not await replay.read(MAX_BODY_BYTES):
            return False
        try:
            body = json.loads(replay.body or b"null")
        except (ValueError, UnicodeDecodeError, RecursionError):
            return False
        subject, normalize, deleted = match["subject"], _flag(scope, "normalize"), _flag(scope, "deleted")
        # The answer of this generation of the registry, when remembered: no database at all.
        registry_pk = cache.peek_registry_pk(access.cluster.pk)
        new = selectors.plain_candidate(body, normalize) if registry_pk is not None else None
        cluster = access.cluster

        def work() -> Any:
            if match["versions"]:
                found = selectors.registered_id(cluster, subject, body, normalize=normalize)
                return None if found is None else {"id": found}
            return selectors.lookup_found(cluster, subject, body, normalize=normalize, deleted=deleted)

        key: tuple[Any, ...] | None = None
        generation: int | None = None
        if registry_pk is not None and new is not None:
            key = (bool(match["versions"]), registry_pk, subject, new.fingerprint, deleted)
            generation = await cache.generation(registry_pk)
            entry = cache.peek_answer_entry(key, generation) if generation is not None else None
            if entry is not None:
                _refresh_ahead(("answer", key), entry[0], lambda: None, after=_answer_refresh(key, registry_pk, work))
                await _respond(send, entry[1])
                return True
        if key is not None and generation is not None:  # one read per answer and generation (see _inflight)
            answer = await _shared(("answer", generation, *key), work)
        else:
            answer = await asyncio.to_thread(_on_thread, work)
        if answer is None:
            return False
        if key is not None and generation is not None:
            cache.remember_answer(key, generation, answer)
        await _respond(send, answer)
        return True
