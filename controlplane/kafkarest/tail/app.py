"""The tail's ASGI application: refuse at the upgrade, then run one subscription per connection.

Runs on the ASGI server's event loop, one invocation per connection. The upgrade is refused with an
HTTP status and a Confluent-style JSON body (``{"error_code", "message"}``) before the WebSocket is
accepted: 403 for a browser ``Origin`` that is not allowed, 401 without valid credentials, 404 for a
cluster the caller cannot see (unknown or another tenant's: the same answer) or a topic that does not
exist, 503 when the cluster does not answer. After the upgrade, failures are an ``error`` frame and a
close code (:class:`~controlplane.kafkarest.tail.protocol.Close`); so is a revocation of the credentials the
tail was opened with (4401, from :mod:`controlplane.kafkarest.revocation`'s thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from channels.db import database_sync_to_async
from django.conf import settings

from controlplane.kafkarest.access import (
    ClusterAccess,
    audit_refusal,
    caller_for_authorization,
    caller_for_user,
    cluster_access,
)
from controlplane.kafkarest.errors import BROKER_NOT_AVAILABLE, FORBIDDEN, KAFKA_AUTHORIZATION, RestError
from controlplane.kafkarest.produce import engine
from controlplane.kafkarest.revocation import watcher
from controlplane.kafkarest.tail.fetcher import FetcherRegistry, registry
from controlplane.kafkarest.tail.filters import compile_filter
from controlplane.kafkarest.tail.origin import origin_allowed
from controlplane.kafkarest.tail.protocol import (
    Close,
    ProtocolError,
    error_frame,
    parse_message,
    parse_subscribe,
    pong_frame,
)
from controlplane.kafkarest.tail.session import Limits, TailSession
from controlplane.tenancy.models import Role

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

SUBSCRIBE_SECONDS = 30.0  # before subscribing, a client silent this long is closed (a ping or stats resets it)
CLOSE_SECONDS = 30.0  # time a final error frame and close may wait for a slow client to read


class Disconnected(Exception):
    """The client went away."""


async def tail_app(scope: Scope, receive: Receive, send: Send) -> None:
    """ASGI entry point for ``/ws/clusters/{cluster_id}/topics/{topic}/tail``."""
    if (await receive())["type"] != "websocket.connect":
        return
    kwargs = scope["url_route"]["kwargs"]
    try:
        access = await _admit(scope, kwargs["cluster_id"], kwargs["topic"])
    except RestError as refusal:
        if refusal.error_code != KAFKA_AUTHORIZATION:
            await _refuse(scope, send, refusal)
            return
        # The cluster's ACLs refused the caller's principal: said as the tail says every broker refusal,
        # an error frame and a close, so clients handle it in one place.
        await send({"type": "websocket.accept"})
        await _denied(send, refusal)
        return
    await send({"type": "websocket.accept"})
    connection = Connection(access, kwargs["topic"], receive, send, registry)
    # Revoking the credentials it was opened with (or removing its session's user from the tenant) ends it.
    hold = watcher.hold(access.credential, connection.revoke) if access.credential is not None else None
    try:
        await connection.serve()
    finally:
        if hold is not None:
            hold.release()


async def _denied(send: Send, refusal: RestError) -> None:
    with contextlib.suppress(OSError):
        await send({"type": "websocket.send", "text": error_frame("not_authorized", refusal.message, None)})
        await send({"type": "websocket.close", "code": int(Close.FORBIDDEN), "reason": "not_authorized"})


def _headers(scope: Scope) -> dict[str, str]:
    return {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers", [])}


async def _admit(scope: Scope, cluster_id: str, topic: str) -> ClusterAccess:
    """The caller's access to the cluster if this upgrade may proceed, else the RestError to refuse it with."""
    headers = _headers(scope)
    if not origin_allowed(headers.get("origin"), headers.get("host"), settings.SLUICE_WS_ALLOWED_ORIGINS):
        raise RestError(FORBIDDEN, f"Origin {headers.get('origin')} is not allowed to open a tail.")
    authorization = headers.get("authorization")
    if authorization:
        caller = await database_sync_to_async(caller_for_authorization)(authorization)
    else:
        caller = await database_sync_to_async(caller_for_user)(scope.get("user"))
    access: ClusterAccess = await database_sync_to_async(cluster_access)(caller, cluster_id, role=Role.VIEWER,
                                                                         surface="ws")
    if not access.bootstrap:
        raise RestError(BROKER_NOT_AVAILABLE, "The cluster has no running brokers yet.")
    # The REST producer's metadata cache answers "does the topic exist, for this principal" cheaply (a metadata
    # read needs no producer id, so a principal that may only read is answered too).
    try:
        await engine.open_topic(access, topic)
    except RestError as refusal:
        await database_sync_to_async(audit_refusal)(access, refusal, surface="ws", topic=topic)
        raise
    return access


async def _refuse(scope: Scope, send: Send, refusal: RestError) -> None:
    if "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008})  # servers without the extension answer 403
        return
    headers = [(b"content-type", b"application/json")]
    if refusal.status == 401:
        headers.append((b"www-authenticate", b'Basic realm="sluice"'))
    await send({"type": "websocket.http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "websocket.http.response.body", "body": json.dumps(refusal.body()).encode()})


class Connection:
    """One accepted tail connection; owned by its ``tail_app`` call, on the event loop."""

    def __init__(self, access: ClusterAccess, topic: str, receive: Receive, send: Send,
                 fetchers: FetcherRegistry) -> None:
        self.access, self.cluster_id, self.topic = access, access.kafka_cluster_id, topic
        self._receive, self._asgi_send = receive, send
        self.fetchers = fetchers
        self.limits = Limits(settings.SLUICE_TAIL_BUFFER_BYTES, settings.SLUICE_TAIL_BYTES_PER_SECOND)
        self.session: TailSession | None = None
        self._loop = asyncio.get_running_loop()
        self._revoked: asyncio.Future[ProtocolError] = self._loop.create_future()

    def revoke(self, reason: str) -> None:
        """End the tail because its credentials stopped working (any thread: the revocation watcher's)."""
        with contextlib.suppress(RuntimeError):  # the loop is gone: so is the connection
            self._loop.call_soon_threadsafe(self._end_revoked, reason)

    def _end_revoked(self, reason: str) -> None:
        if not self._revoked.done():
            self._revoked.set_result(ProtocolError("credentials_revoked", reason, Close.UNAUTHORIZED))

    async def send(self, text: str) -> None:
        try:
            await self._asgi_send({"type": "websocket.send", "text": text})
        except OSError as exc:  # uvicorn's ClientDisconnected
            raise Disconnected from exc

    async def _next_message(self, idle_seconds: float | None = None) -> dict[str, Any]:
        """The next client message, answering pings and stats requests on the way."""
        while True:
            try:
                event = await asyncio.wait_for(self._receive(), idle_seconds)
            except TimeoutError:
                raise ProtocolError("subscribe_timeout", f"Subscribe (or ping) within {SUBSCRIBE_SECONDS:.0f} s.",
                                    Close.SUBSCRIBE_TIMEOUT) from None
            if event["type"] == "websocket.disconnect":
                raise Disconnected
            message = parse_message(event.get("text"))
            if message["type"] == "ping":
                await self.send(pong_frame(message))
            elif message["type"] == "stats":
                stats = self.fetchers.stats(self.cluster_id, self.topic, self.limits.buffer_bytes)
                await self.send(json.dumps({"type": "stats", "topic": self.topic, **stats.snapshot()}))
            else:
                return message

    async def serve(self) -> None:
        try:
            await self._until_revoked()
        except Disconnected:
            pass
        except ProtocolError as error:
            if error.code == "not_authorized":  # the cluster's ACLs refused the read
                await database_sync_to_async(audit_refusal)(
                    self.access, RestError(KAFKA_AUTHORIZATION, error.message), surface="ws", topic=self.topic)
            await self._close_with(error)
        except Exception:
            await self._close_with(ProtocolError("internal_error", "The tail failed.", Close.INTERNAL))
            raise

    async def _until_revoked(self) -> None:
        """Serve the tail; a revocation cancels it and raises its ProtocolError (an error frame, then 4401)."""
        serving = asyncio.ensure_future(self._serve())
        either: list[asyncio.Future[Any]] = [serving, self._revoked]
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not serving.done():
                serving.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await serving
        if not serving.cancelled():  # it ended first (or together with the revocation): as it ended
            serving.result()
            return
        raise self._revoked.result()

    async def _serve(self) -> None:
        message = await self._next_message(SUBSCRIBE_SECONDS)
        if message["type"] != "subscribe":
            raise ProtocolError("invalid_message", f"Expected a subscribe message, got {message['type']!r}.")
        subscription = parse_subscribe(message)
        limits = self.limits
        if subscription.max_bytes_per_second is not None:
            limits = Limits(limits.buffer_bytes, min(limits.bytes_per_second, subscription.max_bytes_per_second))
        self.session = TailSession(access=self.access, topic=self.topic,
                                   subscription=subscription, record_filter=compile_filter(subscription.filter),
                                   send=self.send, limits=limits, registry=self.fetchers)
        tailing = asyncio.create_task(self.session.run())
        listening = asyncio.create_task(self._listen())
        try:
            done, _ = await asyncio.wait({tailing, listening}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
            await self._close(Close.DONE, "done")
        finally:
            for task in (tailing, listening):
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task

    async def _listen(self) -> None:
        """After subscribing, the client may only ping or ask for stats."""
        message = await self._next_message()
        if message["type"] == "subscribe":
            raise ProtocolError("already_subscribed", "One subscription per connection: open another one.")
        raise ProtocolError("invalid_message", f"Unknown message type {message['type']!r}.")

    async def _close(self, code: int, reason: str) -> None:
        with contextlib.suppress(OSError):
            await self._asgi_send({"type": "websocket.close", "code": code, "reason": reason})

    async def _close_with(self, error: ProtocolError) -> None:
        cursor = self.session.cursor if self.session is not None and self.session.cursor else None

        async def tell() -> None:
            await self.send(error_frame(error.code, error.message, cursor))
            await self._close(int(error.close), error.code)

        with contextlib.suppress(Disconnected, TimeoutError):
            await asyncio.wait_for(tell(), CLOSE_SECONDS)
