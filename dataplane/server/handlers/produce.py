"""Produce: appends and acks (the partition's log checks producers' sequences, epochs and transactions)."""

from __future__ import annotations

import contextlib
import datetime
from typing import TYPE_CHECKING, Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.protocol.answers import ZERO, wire
from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode, InvalidRecordError, KafkaError, UnsupportedCompressionTypeError
from dataplane.protocol.messages import Request
from dataplane.protocol.records import HEADER_SIZE, BatchHeader, uses_zstd
from dataplane.security.acl import AclOperation, ResourceType
from dataplane.server.apis import Later, RequestContext, api
from dataplane.server.leader_hints import LeaderHints
from dataplane.server.owners import Owners

if TYPE_CHECKING:
    from dataplane.replication.partition import Partition

VALID_ACKS = (-1, 0, 1)
ZSTD_PRODUCE_VERSION = 7


# v10: leader discovery (KIP-951); v11-12 change only transactional produce. Advertised from v0 as Kafka 4.0 does
# (KAFKA-18659: librdkafka < 2.10 compresses only for such a broker); a v0-2 request closes the connection, as there.
@api(0, "Produce", 3, 12, advertised_min=0)
async def produce(owners: Owners, request: Request, context: RequestContext) -> Any:
    """Append every partition's batches, then (acks=all) wait for all of them to reach the ISR together."""
    body = request.body
    timeout = max(body.timeout.total_seconds(), 0.0)
    results = []
    hints = LeaderHints(owners.metadata)
    waits: list[tuple[dict[str, Any], Partition, int]] = []
    access = owners.access
    transactional_id = getattr(body, "transactional_id", None)
    refused_all = None
    if transactional_id is not None and not access.allows(context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                          transactional_id):
        refused_all = KafkaError("Transactional id authorization failed.",
                                 code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    for topic_data in body.topic_data:
        refused = refused_all
        if refused is None and not access.allows(context, AclOperation.WRITE, ResourceType.TOPIC, topic_data.name):
            refused = KafkaError(f"Not authorized to write to topic {topic_data.name}.",
                                 code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        if refused is None:
            with contextlib.suppress(KafkaError):  # an invalid name is answered per partition below
                await owners.admin.topic_or_autocreate(topic_data.name,
                                                 may_create=owners.access.may_create_topic(context, topic_data.name))
        partitions = []
        for part in topic_data.partition_data:
            entry: dict[str, Any] = {"index": part.index, "error_code": WireError.none, "base_offset": -1,
                                     "log_append_time": None, "log_start_offset": -1, "record_errors": (),
                                     "error_message": None}
            try:
                if refused is not None:
                    raise refused
                if body.acks not in VALID_ACKS:
                    raise KafkaError(f"acks must be -1, 0 or 1, not {body.acks}", code=ErrorCode.INVALID_REQUIRED_ACKS)
                partition = owners.replicas.leader_partition(topic_data.name, part.index)
                if not part.records:
                    raise KafkaError("no records", code=ErrorCode.INVALID_RECORD)
                if request.api_version < ZSTD_PRODUCE_VERSION and uses_zstd(part.records):
                    raise UnsupportedCompressionTypeError(
                        f"zstd-compressed batches need Produce v{ZSTD_PRODUCE_VERSION} or later (KIP-110)")
                if transactional_id is not None:
                    await _verify_transactional(owners, transactional_id, topic_data.name, part.index, partition,
                                                part.records)
                # A retried idempotent batch comes back with its original offsets and nothing written.
                info = await partition.append_as_leader(part.records, acks_all=body.acks == -1)
                entry.update(base_offset=info.first_offset, log_start_offset=info.log_start_offset)
                if info.log_append_time >= 0:
                    entry["log_append_time"] = datetime.datetime.fromtimestamp(info.log_append_time / 1000,
                                                                               tz=datetime.UTC)
                if body.acks == -1:
                    waits.append((entry, partition, info.last_offset + 1))
            except KafkaError as exc:
                entry.update(error_code=wire(exc.code), error_message=str(exc))
                leader = hints.for_error(topic_data.name, part.index, exc.code)
                if leader is not None:
                    entry["current_leader"] = leader
                if isinstance(exc, InvalidRecordError) and exc.record_errors:
                    entry["record_errors"] = [{"batch_index": i, "batch_index_error_message": message}
                                              for i, message in exc.record_errors]
            partitions.append(entry)
        results.append({"name": topic_data.name, "partition_responses": partitions})
    if body.acks == 0:
        return None
    schema = load_response_schema(0, request.api_version)
    if not waits:
        return build(schema, {"responses": results, "throttle_time": ZERO, "node_endpoints": hints.node_endpoints()})

    async def replicated() -> Any:
        outcomes = await owners.replicas.wait_for_acks([(p, end) for _, p, end in waits], timeout)
        for (entry, _, _), outcome in zip(waits, outcomes, strict=True):
            if outcome is not None:
                entry.update(error_code=wire(outcome.code), error_message=str(outcome))
        return build(schema, {"responses": results, "throttle_time": ZERO, "node_endpoints": hints.node_endpoints()})
    return Later(replicated())


# The coordinator could not answer (moving, loading, busy, unreachable): the write may well be valid, so the
# producer is told to retry; NOT_ENOUGH_REPLICAS is the code every client retries on Produce (Kafka maps these so).
_VERIFY_RETRIABLE = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR,
                               ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS,
                               ErrorCode.REQUEST_TIMED_OUT})


async def _verify_transactional(owners: Owners, transactional_id: str, topic: str, index: int,
                                partition: Partition, records: bytes) -> None:
    """KIP-890 part 1: a producer's first transactional batch in a partition is accepted only if its coordinator
    has the partition in the open transaction (INVALID_TXN_STATE otherwise, as Kafka answers; a fenced producer
    gets INVALID_PRODUCER_EPOCH; a coordinator that could not answer, a retriable NOT_ENOUGH_REPLICAS)."""
    if len(records) < HEADER_SIZE:
        return  # the log refuses it as a corrupt batch
    header = BatchHeader.parse(records)
    if not header.is_transactional or partition.log.in_transaction(header.producer_id):
        return
    code = await owners.coordinator_host.verify_in_transaction(transactional_id, header.producer_id,
                                                               header.producer_epoch, (topic, index))
    if code == ErrorCode.NONE:
        return
    if code in _VERIFY_RETRIABLE:
        raise KafkaError(f"the transaction coordinator of {transactional_id!r} could not confirm {topic}-{index} "
                         f"({code.name}); retry", code=ErrorCode.NOT_ENOUGH_REPLICAS)
    raise KafkaError(f"partition {topic}-{index} is not in the open transaction of {transactional_id!r} "
                     f"({code.name})", code=ErrorCode.INVALID_PRODUCER_EPOCH
                     if code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH)
                     else ErrorCode.INVALID_TXN_STATE)
