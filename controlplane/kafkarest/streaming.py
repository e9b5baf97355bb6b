"""The v3 records endpoint as a raw ASGI app, so records are produced as they arrive.

Django reads a whole request body before it calls a view; a streaming producer (one chunked request,
records sent over minutes, each delivery report expected back as soon as its record is acknowledged)
needs the body read as it comes. So ``POST /kafka/v3/clusters/{id}/topics/{t}/records`` with an API key
is served here, in front of Django, and so are ``records:batch`` and v2 produce (no DRF work per
request: the hot paths of REST produce); everything else (and a browser session's produce, which needs
Django's CSRF check) goes on to Django, where ``v3.views.RecordsView`` serves the same contract.

One body of N concatenated JSON records gets N reports, in order. A body holding one record (with a
Content-Length) is answered as a plain response whose HTTP status is the report's; anything else is a
200 whose chunked body streams the reports, each with its own ``error_code``. At most
``MAX_PIECES_IN_FLIGHT`` pieces of a streamed body wait for acknowledgement: past that the body is not
read, so a fast client is slowed by TCP instead of growing the server's memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import unquote

from django.db import close_old_connections

from controlplane.core import ratelimit
from controlplane.kafkarest import errors, fastjson
from controlplane.kafkarest.access import (
    Caller,
    audit_refusal,
    cached_cluster_access,
    caller_for_authorization,
    cluster_access,
)
from controlplane.kafkarest.errors import RestError
from controlplane.kafkarest.produce import PENDING, AsyncOutcomes, batch_response
from controlplane.kafkarest.producer import ClusterProducer, pool
from controlplane.kafkarest.records import ConcatenatedJson, ProduceRecord, parse_batch
from controlplane.kafkarest.v2 import produce as v2_produce
from controlplane.tenancy.models import Role

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

# v2 produce, under the cluster prefix or at the root for a key scoped to one cluster.
V2_PRODUCE_PATH = re.compile(r"^(?:/kafka/v2/clusters/(?P<cluster_id>[^/]+))?/topics/(?P<topic>[^/]+)"
                             r"(?:/partitions/(?P<partition>[^/]+))?/?$")
RECORDS_PATH = re.compile(
    r"^/kafka/v3/clusters/(?P<cluster_id>[^/]+)/topics/(?P<topic>[^/]+)/records(?P<batch>:batch)?/?$")
MAX_BODY_BYTES = 64 * 1024 * 1024  # a non-streaming body; a chunked stream has no total limit
MAX_RECORD_BYTES = 8 * 1024 * 1024
MAX_PIECES_IN_FLIGHT = 256  # pieces of a streamed body (each up to uvicorn's 64 KiB read) awaiting reports
JSON_HEADERS = [(b"content-type", b"application/json")]
V2_HEADERS = [(b"content-type", b"application/vnd.kafka.v2+json")]


class RestProxyHttp:
    """HTTP entry point: the streaming records path here, everything else to ``django_app``."""

    def __init__(self, django_app: Callable[..., Awaitable[None]]) -> None:
        self.django_app = django_app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            match = RECORDS_PATH.match(scope["path"])
            authorization = _header(scope, b"authorization")
            if match and authorization:
                serve = produce_batch if match["batch"] else produce_records
                await serve(scope, receive, send, authorization, match["cluster_id"], unquote(match["topic"]))
                return
            v2 = V2_PRODUCE_PATH.match(scope["path"])
            if v2 and authorization:
                await produce_v2(scope, receive, send, authorization, v2["cluster_id"], unquote(v2["topic"]),
                                 v2["partition"])
                return
        await self.django_app(scope, receive, send)


def _header(scope: Scope, name: bytes) -> str:
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


def _resolved(authorization: str, cluster_id: str, topic: str) -> tuple[ClusterProducer, str, int] | None:
    """What :func:`_resolve` finds -- the producer, the Kafka cluster id and the partition count -- answered on
    the event loop when every part is cached: the caller and its cluster (2 s), the producer, the topic's partition
    count (10 s), and no rate limit to count in Redis. None: resolve on a thread, as before. A thread hop per
    request queues behind the loop and the pool's other work, so it mostly adds latency, not CPU."""
    if ratelimit.limited(ratelimit.KAFKA):
        return None
    access = cached_cluster_access(authorization, cluster_id, Role.MEMBER)
    if access is None:
        return None
    producer = pool.cached(access)
    count = producer.cached_partition_count(topic) if producer is not None else None
    return None if producer is None or count is None else (producer, access.kafka_cluster_id, count)


def _resolve(authorization: str, cluster_id: str, topic: str) -> tuple[ClusterProducer, str]:
    """Caller, cluster and topic checks (a thread: they may read the database or the cluster's metadata)."""
    close_old_connections()
    try:
        caller = caller_for_authorization(authorization)
        _within_rate_limit(caller)
        access = cluster_access(caller, cluster_id, role=Role.MEMBER)
        producer = pool.get(access)
        try:
            producer.partition_count(topic)
        except RestError as exc:
            audit_refusal(access, exc, surface="rest", topic=topic)
            raise
        return producer, access.kafka_cluster_id
    finally:
        close_old_connections()


async def _add_all(outcomes: AsyncOutcomes, producer: ClusterProducer, topic: str, values: list[Any]) -> None:
    """Parse and queue records without blocking the loop: one loop over them, no ``await`` per record; a
    partition count not cached yet (needed to check a ``partition_id``) is read once, on a thread, first."""
    if not producer.knows(topic) and any((isinstance(v, dict) and v.get("partition_id") is not None)
                                         or (isinstance(v, ProduceRecord) and v.partition is not None)
                                         for v in values):
        await asyncio.to_thread(_partition_count, producer, topic)
    for value in values:
        outcomes.add(producer, topic, value)


def _partition_count(producer: ClusterProducer, topic: str) -> None:
    with contextlib.suppress(RestError):  # the record's own slot reports it
        producer.partition_count(topic)


async def _prepare(scope: Scope, send: Send, authorization: str, cluster_id: str,
                   topic: str) -> tuple[ClusterProducer, str, str] | None:
    """Request checks shared by both paths; None once an error response has been sent."""
    try:
        if not _header(scope, b"content-type").startswith("application/json"):
            raise RestError(errors.UNSUPPORTED_MEDIA_TYPE, "Content-Type must be application/json.")
        length = _header(scope, b"content-length")
        if length and int(length) > MAX_BODY_BYTES:
            raise RestError(errors.PAYLOAD_TOO_LARGE,
                            f"Request body larger than {MAX_BODY_BYTES} bytes: stream it (chunked) instead.")
        fast = _resolved(authorization, cluster_id, topic)
        if fast is not None:
            producer, kafka_cluster_id, _ = fast
        else:
            producer, kafka_cluster_id = await asyncio.to_thread(_resolve, authorization, cluster_id, topic)
    except (RestError, ValueError) as exc:
        error = exc if isinstance(exc, RestError) else RestError(errors.BAD_REQUEST, "Bad Content-Length.")
        await _refuse(send, error)
        return None
    return producer, kafka_cluster_id, length


async def produce_batch(scope: Scope, receive: Receive, send: Send, authorization: str, cluster_id: str,
                        topic: str) -> None:
    """``records:batch``: every entry produced at once, then a 207 with successes and failures by id."""
    prepared = await _prepare(scope, send, authorization, cluster_id, topic)
    if prepared is None:
        return
    producer, kafka_cluster_id, _ = prepared
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
    outcomes = AsyncOutcomes(asyncio.get_running_loop())
    await _add_all(outcomes, producer, topic, [record for _, record in entries])
    await outcomes.all_ready()
    await _respond(send, 207, batch_response(outcomes, [entry_id for entry_id, _ in entries], kafka_cluster_id,
                                             topic))


def _resolve_v2(authorization: str, cluster_id: str | None, topic: str) -> tuple[ClusterProducer, int]:
    close_old_connections()
    try:
        caller = caller_for_authorization(authorization)
        _within_rate_limit(caller)
        if cluster_id is None:
            cluster_id = caller.cluster_scope
            if cluster_id is None:
                raise RestError(errors.BAD_REQUEST, v2_produce.ROOT_REFUSAL)
        access = cluster_access(caller, cluster_id, role=Role.MEMBER)
        producer = pool.get(access)
        try:
            return producer, producer.partition_count(topic)
        except RestError as exc:
            audit_refusal(access, exc, surface="rest", topic=topic)
            raise
    finally:
        close_old_connections()


async def produce_v2(scope: Scope, receive: Receive, send: Send, authorization: str, cluster_id: str | None,
                     topic: str, partition_text: str | None) -> None:
    """v2 produce (``POST /topics/{t}[/partitions/{p}]``): the same contract as ``v2.views.TopicView.post``."""
    try:
        # The cluster first: another tenant's is a 404 whatever else is wrong with the request.
        fast = _resolved(authorization, cluster_id, topic) if cluster_id is not None else None
        if fast is not None:
            producer, _, count = fast
        else:
            producer, count = await asyncio.to_thread(_resolve_v2, authorization, cluster_id, topic)
        fmt = v2_produce.produce_format(_header(scope, b"content-type"))
        length = _header(scope, b"content-length")
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
        records = v2_produce.parse_records(fmt, raw)
    except (RestError, ValueError) as exc:
        error = exc if isinstance(exc, RestError) else RestError(errors.BAD_REQUEST, "Bad Content-Length.")
        await _refuse(send, error, V2_HEADERS)
        return
    outcomes = AsyncOutcomes(asyncio.get_running_loop())
    await _add_all(outcomes, producer, topic, [v2_produce.as_produce_record(record, partition) for record in records])
    await outcomes.all_ready()
    await _respond(send, 200, v2_produce.produce_response(outcomes), V2_HEADERS)


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
    producer, kafka_cluster_id, length = prepared
    decoder = ConcatenatedJson(MAX_RECORD_BYTES)
    if length:
        await _whole_body(receive, send, decoder, producer, kafka_cluster_id, topic)
    else:
        await _stream(receive, send, decoder, producer, kafka_cluster_id, topic)


async def _whole_body(receive: Receive, send: Send, decoder: ConcatenatedJson, producer: ClusterProducer,
                      cluster_id: str, topic: str) -> None:
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
    outcomes = AsyncOutcomes(asyncio.get_running_loop())
    await _add_all(outcomes, producer, topic, values)
    if len(values) == 1:
        await outcomes.ready(0)
        body = outcomes.report(0, cluster_id, topic)
        await _respond(send, errors.http_status(body["error_code"]), body)
        return
    queue: asyncio.Queue[AsyncOutcomes | None] = asyncio.Queue()
    queue.put_nowait(outcomes)
    queue.put_nowait(None)
    await _write_reports(send, queue, cluster_id, topic)


async def _write_reports(send: Send, queue: asyncio.Queue[AsyncOutcomes | None], cluster_id: str,
                         topic: str) -> None:
    """Reports in request order, each sent as soon as its record (and every one before it) is acknowledged."""
    await send({"type": "http.response.start", "status": 200, "headers": JSON_HEADERS})
    while (outcomes := await queue.get()) is not None:
        lines: list[bytes] = []
        for index in range(len(outcomes)):
            if not lines or outcomes.results[index] is PENDING:
                if lines:
                    await send({"type": "http.response.body", "body": b"".join(lines), "more_body": True})
                    lines = []
                await outcomes.ready(index)
            lines.append(_encode(outcomes.report(index, cluster_id, topic)) + b"\n")
        if lines:
            await send({"type": "http.response.body", "body": b"".join(lines), "more_body": True})
    await send({"type": "http.response.body", "body": b""})


async def _stream(receive: Receive, send: Send, decoder: ConcatenatedJson, producer: ClusterProducer,
                  cluster_id: str, topic: str) -> None:
    """A chunked request: each piece of body that arrives becomes a group of records queued at once."""
    queue: asyncio.Queue[AsyncOutcomes | None] = asyncio.Queue(MAX_PIECES_IN_FLIGHT)
    writer = asyncio.create_task(_write_reports(send, queue, cluster_id, topic))
    loop = asyncio.get_running_loop()
    try:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                writer.cancel()
                return
            outcomes = AsyncOutcomes(loop)
            values: list[Any] = []
            try:
                values.extend(decoder.feed(message.get("body", b"")))
                if not message.get("more_body"):
                    decoder.finish()
            except RestError as exc:  # the stream cannot be split any further: report it and end
                values.append(exc)
                message = {"more_body": False}
            await _add_all(outcomes, producer, topic, values)
            if len(outcomes):
                await queue.put(outcomes)
            if not message.get("more_body"):
                break
        await queue.put(None)
        await writer
    except BaseException:
        writer.cancel()
        raise
