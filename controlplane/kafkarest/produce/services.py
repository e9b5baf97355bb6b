"""REST produce for synchronous callers (the DRF views): the same engine, checks and answers as the ASGI paths.

Each function runs the whole request (topic check, send, wait) as one coroutine on ``produce.loop`` and blocks
the calling thread for its answer, at most ``REQUEST_SECONDS``. The checks they share with ``produce.streaming``
are here, so the two cannot drift: the topic read with the same deadline and the same refusals (40401, 40301,
50302), a record not acknowledged is 50003, and a refusal by the cluster's ACLs is audited once per request.
"""

from __future__ import annotations

from typing import Any

from rest_framework.request import Request

from controlplane.kafkarest import errors, schemas
from controlplane.kafkarest.access import ClusterAccess, audit_refusal
from controlplane.kafkarest.errors import RestError
from controlplane.kafkarest.produce import engine
from controlplane.kafkarest.produce.engine import Produced
from controlplane.kafkarest.produce.loop import produce_loop
from controlplane.kafkarest.records import parse_batch

# The topic read, then the producer's delivery wait, and a margin: past it the request thread gives up (50003).
REQUEST_SECONDS = engine.METADATA_WAIT_SECONDS + engine.DELIVERY_WAIT_SECONDS + 5.0


def read_body(request: Request) -> bytes:
    """The request's whole body, within the ASGI paths' ``MAX_BODY_BYTES`` (413 with 413 past it, as there; not
    Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE``, which answered a console record over 2.5 MB with an HTML 400)."""
    django_request = request._request
    try:
        length = int(django_request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise RestError(errors.BAD_REQUEST, "Bad Content-Length.") from None
    if length > engine.MAX_BODY_BYTES:
        raise RestError(errors.PAYLOAD_TOO_LARGE, f"Request body larger than {engine.MAX_BODY_BYTES} bytes.")
    if hasattr(django_request, "_body"):  # read already (a parser or a middleware)
        return django_request.body
    body: bytes = django_request.read(engine.MAX_BODY_BYTES + 1)  # a stream read: no DATA_UPLOAD check
    if len(body) > engine.MAX_BODY_BYTES:
        raise RestError(errors.PAYLOAD_TOO_LARGE, f"Request body larger than {engine.MAX_BODY_BYTES} bytes.")
    return body


def audit_denied(access: ClusterAccess, produced: Produced) -> None:
    """One audit event for a request the cluster's ACLs refused records of (any thread that may use the ORM)."""
    denied = produced.denied()
    if denied is not None:
        audit_refusal(access, denied, surface="rest", topic=produced.topic)


def check_topic(access: ClusterAccess, topic: str) -> int:
    """The topic's partition count, or its RestError (audited) -- before a body is read, as the ASGI paths."""
    try:
        _, count = produce_loop.run(engine.open_topic(access, topic), REQUEST_SECONDS)
    except RestError as refusal:
        audit_refusal(access, refusal, surface="rest", topic=topic)
        raise
    return count


def _produce(access: ClusterAccess, topic: str, values: list[Any]) -> Produced:
    async def produce() -> Produced:
        producer, _ = await engine.open_topic(access, topic)
        produced = await engine.produce(producer, topic, values, schemas.resolver_for(access, topic))
        await produced.wait()
        return produced

    try:
        produced = produce_loop.run(produce(), REQUEST_SECONDS)
    except RestError as refusal:
        audit_refusal(access, refusal, surface="rest", topic=topic)
        raise
    audit_denied(access, produced)
    return produced


def produce_records(access: ClusterAccess, topic: str, values: list[Any]) -> list[dict[str, Any]]:
    """v3 ``records``: request bodies (or their RestErrors) produced; their delivery reports, in order."""
    if not values:
        raise RestError(errors.INVALID_PAYLOAD, "Payload error. The body holds no record.")
    produced = _produce(access, topic, values)
    return [produced.report(index, access.kafka_cluster_id) for index in range(len(produced))]


def produce_batch(access: ClusterAccess, topic: str, body: Any) -> dict[str, Any]:
    """v3 ``records:batch``: every entry produced, then reported as a success or a failure by id."""
    entries = parse_batch(body)
    produced = _produce(access, topic, [record for _, record in entries])
    return engine.batch_response(produced, [entry_id for entry_id, _ in entries], access.kafka_cluster_id)


def produce_values(access: ClusterAccess, topic: str, values: list[Any]) -> Produced:
    """Already parsed records (v2's) produced; their outcomes."""
    return _produce(access, topic, values)
