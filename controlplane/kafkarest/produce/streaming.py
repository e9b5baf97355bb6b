"""REST produce served in front of Django (``kafkarest.asgi`` routes here), so records are produced as they arrive.

Django reads a whole request body before it calls a view; a streaming producer (one chunked request,
records sent over minutes, each delivery report expected back as soon as its record is acknowledged)
needs the body read as it comes. So ``POST /kafka/v3/clusters/{id}/topics/{t}/records`` with an API key
is served here, and so are ``records:batch`` and v2 produce (no DRF work per request: the hot paths of REST
produce); everything else (and a browser session's produce, which needs Django's CSRF check) goes on to
Django, where the DRF views serve the same contract through ``produce.services`` -- the same engine
(``produce.engine``), here on the server's event loop.

One body of N concatenated JSON records gets N reports, in order. A body holding one record (with a
Content-Length) is answered as a plain response whose HTTP status is the report's; anything else is a
200 whose chunked body streams the reports, each with its own ``error_code``. At most
``MAX_PIECES_IN_FLIGHT`` pieces of a streamed body wait for acknowledgement: past that the body is not
read, so a fast client is slowed by TCP instead of growing the server's memory.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from django.db import DatabaseError, close_old_connections

from controlplane.core import ratelimit
from controlplane.kafkarest import errors, fastjson, schemas
from controlplane.kafkarest.accept import V2_OFFERS, V3_OFFERS, check_accept
from controlplane.kafkarest.access import (
    Caller,
    ClusterAccess,
    audit_refusal,
    cached_access_expires,
    cached_cluster_access,
    caller_for_authorization,
    cluster_access,
    refresh_cluster_access,
)
from controlplane.kafkarest.errors import RestError
from controlplane.kafkarest.produce import engine
from controlplane.kafkarest.produce.engine import MAX_BODY_BYTES, MAX_RECORD_BYTES, Produced, batch_response
from controlplane.kafkarest.records import ConcatenatedJson, parse_batch
from controlplane.kafkarest.v2 import produce as v2_produce
from controlplane.tenancy.models import Role
from dataplane.client.producer import AsyncProducer

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

MAX_PIECES_IN_FLIGHT = 256  # pieces of a streamed body (each up to uvicorn's 64 KiB read) awaiting reports
JSON_HEADERS = [(b"content-type", b"application/json")]
V2_HEADERS = [(b"content-type", b"application/vnd.kafka.v2+json")]


def header(scope: Scope, name: bytes) -> str:
    for key, value in scope["headers"]:
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return ""


def _encode(body: dict[str, Any]) -> bytes:
    return fastjson.dumps(body)


async def _respond(send: Send, status: int, body: dict[str, Any],
                   headers: list[tuple[bytes, bytes]] = JSON_HEADERS) -> None:
    data = _encode(body)
    await send({"type": "http.response.start", "status": status,
                "headers": [*headers, (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})


async def _refuse(send: Send, error: RestError, headers: list[tuple[bytes, bytes]] = JSON_HEADERS) -> None:
    if error.retry_after is not None:
        headers = [*headers, (b"retry-after", str(error.retry_after).encode())]
    await _respond(send, error.status, error.body(), headers)


def _within_rate_limit(caller: Caller) -> None:
    """The REST Proxy's request budget of the caller's API key (as on the DRF paths: one budget for both)."""
    refusal = ratelimit.hit(ratelimit.KAFKA, f"key:{caller.api_key_id}" if caller.api_key_id else caller.principal)
    if refusal is not None:
        raise RestError(errors.RATE_LIMITED, refusal.message, retry_after=refusal.retry_after)


# An access used in the last REFRESH_AHEAD seconds of its life is resolved again in the background (one thread at
# a time per key and cluster), so a busy key's entry never expires under load: without it, every request in
# flight when it expired resolved it again on a thread of its own, and the loop waited for them. The bound stays:
# an entry is never served longer than CACHE_SECONDS after the read that made it.
REFRESH_AHEAD = 0.5
_refreshing: set[tuple[str, str]] = set()
_refreshes: set[asyncio.Future[None]] = set()


def _cached_access(authorization: str, cluster_id: str) -> ClusterAccess | None:
    """The caller's access to the cluster, answered on the event loop when it is cached (2 s) and there is no rate
    limit to count in Redis; None: resolve it on a thread. A thread hop per request queues behind the loop and
    the pool's other work, so it mostly adds latency, not CPU."""
    if ratelimit.limited(ratelimit.KAFKA):
        return None
    access = cached_cluster_access(authorization, cluster_id, Role.MEMBER)
    if access is not None and (authorization, cluster_id) not in _refreshing \
            and cached_access_expires(authorization, cluster_id) - time.monotonic() < REFRESH_AHEAD:
        _refresh_ahead(authorization, cluster_id)
    return access


def _refresh_ahead(authorization: str, cluster_id: str) -> None:
    key = (authorization, cluster_id)
    _refreshing.add(key)

    def work() -> None:
        close_old_connections()
        try:
            refresh_cluster_access(authorization, cluster_id)
        finally:
            close_old_connections()

    async def run() -> None:
        try:
            await asyncio.to_thread(work)
        except DatabaseError:
            pass  # the entry expires as usual, and the next request resolves it (and says what is wrong)
        finally:
            _refreshing.discard(key)

    task = asyncio.ensure_future(run())
    _refreshes.add(task)
    task.add_done_callback(_refreshes.discard)


def _resolve(authorization: str, cluster_id: str | None, root_refusal: str = "") -> ClusterAccess:
    """Caller and cluster checks on a thread (they may read the database and count the rate limit in Redis)."""
    close_old_connections()
    try:
        caller = caller_for_authorization(authorization)
        _within_rate_limit(caller)
        if cluster_id is None:
            cluster_id = caller.cluster_scope
            if cluster_id is None:
                raise RestError(errors.BAD_REQUEST, root_refusal)
        return cluster_access(caller, cluster_id, role=Role.MEMBER)
    finally:
        close_old_connections()


async def _producer(authorization: str, cluster_id: str | None, topic: str,
                    root_refusal: str = "") -> tuple[AsyncProducer, ClusterAccess, int]:
    """The cluster's producer for the caller, and the topic's partition count; RestError when the caller, the
    cluster or the topic is refused (a topic refusal is audited, as on the DRF paths)."""
    access = _cached_access(authorization, cluster_id) if cluster_id is not None else None
    if access is None:
        access = await asyncio.to_thread(_resolve, authorization, cluster_id, root_refusal)
    try:
        producer, count = await engine.open_topic(access, topic)
    except RestError as refusal:
        await asyncio.to_thread(_audit, access, refusal, topic)
        raise
    return producer, access, count


def _audit(access: ClusterAccess, refusal: RestError, topic: str) -> None:
    close_old_connections()
    try:
        audit_refusal(access, refusal, surface="rest", topic=topic)
    finally:
        close_old_connections()


async def _audit_denied(access: ClusterAccess, produced: Produced) -> None:
    """A request whose records the cluster's ACLs refused is audited once (as on the DRF paths); no thread hop
    otherwise."""
    denied = produced.denied()
    if denied is not None:
        await asyncio.to_thread(_audit, access, denied, produced.topic)


async def _prepare(scope: Scope, send: Send, authorization: str, cluster_id: str,
                   topic: str) -> tuple[AsyncProducer, ClusterAccess, str] | None:
    """Request checks shared by both paths; None once an error response has been sent."""
    try:
        check_accept(header(scope, b"accept") or None, V3_OFFERS)
        if not header(scope, b"content-type").startswith("application/json"):
            raise RestError(errors.UNSUPPORTED_MEDIA_TYPE, "Content-Type must be application/json.")
        length = header(scope, b"content-length")
        if length and int(length) > MAX_BODY_BYTES:
            raise RestError(errors.PAYLOAD_TOO_LARGE,
                            f"Request body larger than {MAX_BODY_BYTES} bytes: stream it (chunked) instead.")
        producer, access, _ = await _producer(authorization, cluster_id, topic)
    except (RestError, ValueError) as exc:
        error = exc if isinstance(exc, RestError) else RestError(errors.BAD_REQUEST, "Bad Content-Length.")
        await _refuse(send, error)
        return None
    return producer, access, length


async def produce_batch(scope: Scope, receive: Receive, send: Send, authorization: str, cluster_id: str,
                        topic: str) -> None:
    """``records:batch``: every entry produced at once, then a 207 with successes and failures by id."""
    prepared = await _prepare(scope, send, authorization, cluster_id, topic)
    if prepared is None:
        return
    producer, access, _ = prepared
    try:
        raw = await _read_body(receive)
    except RestError as exc:
        await _refuse(send, exc)
        return
    if raw is None:
        return
    try:
        try:
            body = fastjson.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise RestError(errors.BAD_REQUEST, f"Malformed JSON: {exc}") from exc
        entries = parse_batch(body)
    except RestError as exc:
        await _refuse(send, exc)
        return
    produced = await engine.produce(producer, topic, [record for _, record in entries],
                                    schemas.resolver_for(access, topic))
    await produced.wait()
    await _audit_denied(access, produced)
    await _respond(send, 207, batch_response(produced, [entry_id for entry_id, _ in entries],
                                             access.kafka_cluster_id))


async def produce_v2(scope: Scope, receive: Receive, send: Send, authorization: str, cluster_id: str | None,
                     topic: str, partition_text: str | None) -> None:
    """v2 produce (``POST /topics/{t}[/partitions/{p}]``): the same contract as ``v2.views.TopicView.post``."""
    try:
        # The cluster first: another tenant's is a 404 whatever else is wrong with the request.
        producer, access, count = await _producer(authorization, cluster_id, topic, v2_produce.ROOT_REFUSAL)
        check_accept(header(scope, b"accept") or None, V2_OFFERS)
        fmt = v2_produce.produce_format(header(scope, b"content-type"))
        length = header(scope, b"content-length")
        if length and int(length) > MAX_BODY_BYTES:
            raise RestError(errors.PAYLOAD_TOO_LARGE, f"Request body larger than {MAX_BODY_BYTES} bytes.")
        partition = None
        if partition_text is not None:
            if not partition_text.isdigit() or len(partition_text) > 9 or int(partition_text) >= count:
                raise RestError(errors.PARTITION_NOT_FOUND, "Partition not found.")
            partition = int(partition_text)
        raw = await _read_body(receive)
        if raw is None:
            return
        request = v2_produce.parse_request(fmt, raw)
        if fmt in v2_produce.SCHEMA_TYPES:
            request = await _encode_v2(access, topic, fmt, request)
    except (RestError, ValueError) as exc:
        error = exc if isinstance(exc, RestError) else RestError(errors.BAD_REQUEST, "Bad Content-Length.")
        await _refuse(send, error, V2_HEADERS)
        return
    produced = await engine.produce(producer, topic,
                                    [v2_produce.as_produce_record(record, partition) for record in request.records])
    await produced.wait()
    await _audit_denied(access, produced)
    await _respond(send, 200, v2_produce.produce_response(produced, request), V2_HEADERS)


# An Avro v2 request with at most this many records is encoded on the event loop when its schemas are cached
# (a few microseconds a record with the prepared encoder: less than the hop to a thread and back, which also
# holds the GIL against the loop); a larger one on a thread, so that one request never holds the loop for long.
# JSON Schema and Protobuf records stay on a thread: validating one costs tens of microseconds.
MAX_LOOP_RECORDS = 1000


async def _encode_v2(access: ClusterAccess, topic: str, fmt: str,
                     request: v2_produce.V2Request) -> v2_produce.V2Request:
    """A schema'd v2 request's records framed: Avro by schemas named by id and cached in this process, here on
    the loop; anything else (a schema sent as text, one not cached, a service account's key, another format) on
    a thread, where the registry may be read."""
    if fmt == "avro" and len(request.records) <= MAX_LOOP_RECORDS:
        cached = await v2_produce.cached_schemas(access, topic, fmt, request)
        if cached is not None:
            return v2_produce.encode_with(*cached, request)
    return await asyncio.to_thread(v2_produce.encode_on_thread, access, topic, fmt, request)


async def _read_body(receive: Receive) -> bytes | None:
    """The whole body (bounded by MAX_BODY_BYTES); None when the client went away."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > MAX_BODY_BYTES:
            raise RestError(errors.PAYLOAD_TOO_LARGE, f"Request body larger than {MAX_BODY_BYTES} bytes.")
        if not message.get("more_body"):
            return b"".join(chunks)


async def produce_records(scope: Scope, receive: Receive, send: Send, authorization: str, cluster_id: str,
                          topic: str) -> None:
    prepared = await _prepare(scope, send, authorization, cluster_id, topic)
    if prepared is None:
        return
    producer, access, length = prepared
    decoder = ConcatenatedJson(MAX_RECORD_BYTES)
    if length:
        await _whole_body(receive, send, decoder, producer, access, topic)
    else:
        await _stream(receive, send, decoder, producer, access, topic)


async def _whole_body(receive: Receive, send: Send, decoder: ConcatenatedJson, producer: AsyncProducer,
                      access: ClusterAccess, topic: str) -> None:
    values: list[Any] = []
    try:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            values.extend(decoder.feed(message.get("body", b"")))
            if not message.get("more_body"):
                break
        values.extend(decoder.finish())
    except RestError as exc:
        values.append(exc)
    if not values:
        error = RestError(errors.INVALID_PAYLOAD, "Payload error. The body holds no record.")
        await _refuse(send, error)
        return
    produced = await engine.produce(producer, topic, values, schemas.resolver_for(access, topic))
    await produced.wait()
    await _audit_denied(access, produced)
    if len(values) == 1:
        body = produced.report(0, access.kafka_cluster_id)
        await _respond(send, errors.http_status(body["error_code"]), body)
        return
    queue: asyncio.Queue[Produced | None] = asyncio.Queue()
    queue.put_nowait(produced)
    queue.put_nowait(None)
    await _write_reports(send, queue, access.kafka_cluster_id)


async def _write_reports(send: Send, queue: asyncio.Queue[Produced | None], cluster_id: str) -> None:
    """Reports in request order: each piece's as soon as all of its records are acknowledged (a piece is what
    arrived of the body at once, so a client that sends a record at a time gets each report at once)."""
    await send({"type": "http.response.start", "status": 200, "headers": JSON_HEADERS})
    while (produced := await queue.get()) is not None:
        await produced.wait()
        lines = [_encode(produced.report(index, cluster_id)) + b"\n" for index in range(len(produced))]
        await send({"type": "http.response.body", "body": b"".join(lines), "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def _stream(receive: Receive, send: Send, decoder: ConcatenatedJson, producer: AsyncProducer,
                  access: ClusterAccess, topic: str) -> None:
    """A chunked request: each piece of body that arrives becomes a group of records sent at once."""
    queue: asyncio.Queue[Produced | None] = asyncio.Queue(MAX_PIECES_IN_FLIGHT)
    writer = asyncio.create_task(_write_reports(send, queue, access.kafka_cluster_id))
    resolve = schemas.resolver_for(access, topic)
    try:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                writer.cancel()
                return
            values: list[Any] = []
            try:
                values.extend(decoder.feed(message.get("body", b"")))
                if not message.get("more_body"):
                    decoder.finish()
            except RestError as exc:  # the stream cannot be split any further: report it and end
                values.append(exc)
                message = {"more_body": False}
            if values:
                await queue.put(await engine.produce(producer, topic, values, resolve))
            if not message.get("more_body"):
                break
        await queue.put(None)
        await writer
    except BaseException:
        writer.cancel()
        raise
