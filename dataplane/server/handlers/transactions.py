"""Transactions (KIP-98, KIP-664, KIP-890): InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
WriteTxnMarkers, TxnOffsetCommit, DescribeTransactions and ListTransactions.

The rules live in ``dataplane.coordinator.txn_state`` (and the group coordinator for transactional offsets); these
handlers check ACLs as Kafka does (WRITE on the TransactionalId; WRITE on each topic added; READ on the group for
offsets; CLUSTER_ACTION for broker-to-broker WriteTxnMarkers and verify-only AddPartitionsToTxn) and translate.
Requests older than the version that introduced PRODUCER_FENCED get INVALID_PRODUCER_EPOCH instead, as Kafka
answers them.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.coordinator.manager import OFFSETS_TOPIC, TxnCommitRequest
from dataplane.coordinator.txn_state import TxnState
from dataplane.protocol.answers import ZERO, wire
from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.messages import Request
from dataplane.security.acl import AclOperation, ResourceType
from dataplane.server.apis import RequestContext, api
from dataplane.server.owners import Owners

NO_LEADER_EPOCH = -1
_EPOCH_ZERO = datetime.datetime.fromtimestamp(0, tz=datetime.UTC)


def _ms(value: Any) -> int:
    return round(float(value.total_seconds()) * 1000)


def _fenced(code: ErrorCode, version: int, since: int) -> ErrorCode:
    """PRODUCER_FENCED for clients that know it (KIP-588), INVALID_PRODUCER_EPOCH for older ones."""
    return ErrorCode.INVALID_PRODUCER_EPOCH if code == ErrorCode.PRODUCER_FENCED and version < since else code


def _may_write_id(owners: Owners, context: RequestContext, transactional_id: str) -> bool:
    return owners.access.allows(context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


# ---------------------------------------------------------------------- InitProducerId


@api(22, "InitProducerId", 0, 5)
async def init_producer_id(owners: Owners, request: Request, context: RequestContext) -> Any:
    """Idempotent producers get a fresh id at epoch 0 (IDEMPOTENT_WRITE on the cluster, or WRITE on some topic,
    KIP-679); transactional ones go to their coordinator, which fences older instances (KIP-98, KIP-360)."""
    body, version = request.body, request.api_version
    values: dict[str, Any] = {"throttle_time": ZERO, "error_code": WireError.none, "producer_id": -1,
                              "producer_epoch": -1}
    access = owners.access
    transactional_id = body.transactional_id
    if transactional_id is not None:
        if not _may_write_id(owners, context, transactional_id):
            values["error_code"] = wire(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        elif not transactional_id:
            values["error_code"] = wire(ErrorCode.INVALID_REQUEST)
        else:
            try:
                found = await owners.transactions.init_producer_id(
                    transactional_id, timeout_ms=_ms(body.transaction_timeout),
                    producer_id=int(getattr(body, "producer_id", -1)),
                    producer_epoch=int(getattr(body, "producer_epoch", -1)))
                values.update(error_code=wire(_fenced(found.error, version, 4)), producer_id=found.producer_id,
                              producer_epoch=found.producer_epoch)
            except KafkaError as exc:
                values["error_code"] = wire(exc.code)
    elif not (access.allows_cluster(context, AclOperation.IDEMPOTENT_WRITE, audit=False)
              or access.allows_any(context, AclOperation.WRITE, ResourceType.TOPIC)):
        access.events.denied(context.principal, "IDEMPOTENT_WRITE", "CLUSTER", "kafka-cluster", context.client_host)
        values["error_code"] = wire(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    else:
        values.update(producer_id=await owners.admin.next_producer_id(), producer_epoch=0)
    return build(load_response_schema(22, version), values)


# ---------------------------------------------------------------------- AddPartitionsToTxn


async def _add_partitions(owners: Owners, context: RequestContext, version: int, transactional_id: str,
                          producer_id: int, producer_epoch: int, topics: Any, *,
                          verify_only: bool) -> list[dict[str, Any]]:
    """One transaction's topic results (every partition with its error)."""
    wanted = [(t.name, int(p)) for t in topics for p in t.partitions]
    errors: dict[tuple[str, int], ErrorCode] = {}
    if not _may_write_id(owners, context, transactional_id):
        errors = dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    else:
        refused = {}
        for topic, partition in wanted:
            if not owners.access.allows(context, AclOperation.WRITE, ResourceType.TOPIC, topic):
                refused[(topic, partition)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            else:
                found = owners.metadata.topic(topic)
                if found is None or not 0 <= partition < len(found.partitions):
                    refused[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if refused:  # nothing is added when any partition is refused, as in Kafka
            errors = {tp: refused.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in wanted}
        else:
            try:
                if verify_only:
                    errors = await owners.transactions.verify_partitions(transactional_id, producer_id,
                                                                         producer_epoch, wanted)
                else:
                    code = await owners.transactions.add_partitions(transactional_id, producer_id, producer_epoch,
                                                                    wanted)
                    errors = dict.fromkeys(wanted, _fenced(code, version, 2))
            except KafkaError as exc:
                errors = dict.fromkeys(wanted, exc.code)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition) in wanted:
        by_topic.setdefault(topic, []).append({"partition_index": partition,
                                               "partition_error_code": wire(errors[(topic, partition)])})
    return [{"name": name, "results_by_partition": parts} for name, parts in by_topic.items()]


@api(24, "AddPartitionsToTxn", 0, 5)
async def add_partitions_to_txn(owners: Owners, request: Request, context: RequestContext) -> Any:
    body, version = request.body, request.api_version
    schema = load_response_schema(24, version)
    if version <= 3:
        results = await _add_partitions(owners, context, version, body.v3_and_below_transactional_id,
                                        body.v3_and_below_producer_id, body.v3_and_below_producer_epoch,
                                        body.v3_and_below_topics, verify_only=False)
        return build(schema, {"throttle_time": ZERO, "results_by_topic_v3_and_below": results})
    # v4+: batched, sent by brokers (KIP-890 part 1's verification): cluster action.
    if not owners.access.allows_cluster(context, AclOperation.CLUSTER_ACTION):
        return build(schema, {"throttle_time": ZERO, "error_code": wire(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
                              "results_by_transaction": ()})
    transactions = []
    for txn in body.transactions:
        results = await _add_partitions(owners, context, version, txn.transactional_id, txn.producer_id,
                                        txn.producer_epoch, txn.topics, verify_only=txn.verify_only)
        transactions.append({"transactional_id": txn.transactional_id, "topic_results": results})
    return build(schema, {"throttle_time": ZERO, "error_code": WireError.none,
                          "results_by_transaction": transactions})


# ---------------------------------------------------------------------- AddOffsetsToTxn, EndTxn


@api(25, "AddOffsetsToTxn", 0, 4)
async def add_offsets_to_txn(owners: Owners, request: Request, context: RequestContext) -> Any:
    """The group's ``__consumer_offsets`` partition joins the transaction (its offsets are committed with it)."""
    body, version = request.body, request.api_version
    code = ErrorCode.NONE
    try:
        if not _may_write_id(owners, context, body.transactional_id):
            raise KafkaError("Transactional id authorization failed.",
                             code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not owners.access.allows(context, AclOperation.READ, ResourceType.GROUP, body.group_id):
            raise KafkaError("Group authorization failed.", code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        await owners.coordinator_host.ensure_offsets_topic()
        partition = owners.groups.partition_for(body.group_id)
        assert partition is not None
        code = _fenced(await owners.transactions.add_partitions(body.transactional_id, body.producer_id,
                                                                body.producer_epoch, [(OFFSETS_TOPIC, partition)]),
                       version, 2)
    except KafkaError as exc:
        code = exc.code
    return build(load_response_schema(25, version), {"throttle_time": ZERO, "error_code": wire(code)})


@api(26, "EndTxn", 0, 5)
async def end_txn(owners: Owners, request: Request, context: RequestContext) -> Any:
    """Commit or abort; v5+ (transaction version 2, KIP-890 part 2) ends with a bumped epoch, returned here."""
    body, version = request.body, request.api_version
    values: dict[str, Any] = {"throttle_time": ZERO, "error_code": WireError.none, "producer_id": -1,
                              "producer_epoch": -1}
    try:
        if not _may_write_id(owners, context, body.transactional_id):
            raise KafkaError("Transactional id authorization failed.",
                             code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        found = await owners.transactions.end_txn(body.transactional_id, body.producer_id, body.producer_epoch,
                                                  commit=body.committed, bump=version >= 5)
        values["error_code"] = wire(_fenced(found.error, version, 2))
        if version >= 5 and found.error == ErrorCode.NONE:
            values.update(producer_id=found.producer_id, producer_epoch=found.producer_epoch)
    except KafkaError as exc:
        values["error_code"] = wire(exc.code)
    return build(load_response_schema(26, version), values)


# ---------------------------------------------------------------------- WriteTxnMarkers


@api(27, "WriteTxnMarkers", 1, 1)
async def write_txn_markers(owners: Owners, request: Request, context: RequestContext) -> Any:
    """Markers from a transaction coordinator (or an administrator's abort of a hanging transaction) into
    partitions this broker leads."""
    allowed = owners.access.allows_cluster(context, AclOperation.CLUSTER_ACTION)
    results = []
    for marker in request.body.markers:
        wanted = [(t.name, int(p)) for t in marker.topics for p in t.partition_indexes]
        if allowed:
            errors = await owners.coordinator_host.write_markers_here(marker.producer_id, marker.producer_epoch,
                                                     marker.transaction_result, marker.coordinator_epoch, wanted)
        else:
            errors = dict.fromkeys(wanted, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for topic, partition in wanted:
            by_topic.setdefault(topic, []).append({"partition_index": partition,
                                                   "error_code": wire(errors[(topic, partition)])})
        results.append({"producer_id": marker.producer_id,
                        "topics": [{"name": n, "partitions": p} for n, p in by_topic.items()]})
    return build(load_response_schema(27, request.api_version), {"markers": results})


# ---------------------------------------------------------------------- TxnOffsetCommit


@api(28, "TxnOffsetCommit", 0, 5)
async def txn_offset_commit(owners: Owners, request: Request, context: RequestContext) -> Any:
    """Offsets written inside the transaction, visible once it commits (KIP-98; KIP-447's member checks v3+)."""
    body, version = request.body, request.api_version
    order = [(t.name, int(p.partition_index)) for t in body.topics for p in t.partitions]
    errors: dict[tuple[str, int], ErrorCode] = {}
    offsets: dict[tuple[str, int], tuple[int, int, str | None]] = {}
    access = owners.access
    for topic in body.topics:
        readable = access.allows(context, AclOperation.READ, ResourceType.TOPIC, topic.name)
        found = owners.metadata.topic(topic.name)
        for part in topic.partitions:
            tp = (topic.name, int(part.partition_index))
            if not readable:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif found is None or not 0 <= tp[1] < len(found.partitions):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[tp] = (part.committed_offset, getattr(part, "committed_leader_epoch", NO_LEADER_EPOCH),
                               part.committed_metadata)
    try:
        if not _may_write_id(owners, context, body.transactional_id):
            raise KafkaError("Transactional id authorization failed.",
                             code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not access.allows(context, AclOperation.READ, ResourceType.GROUP, body.group_id):
            raise KafkaError("Group authorization failed.", code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if offsets:
            committed = await owners.groups.txn_commit(TxnCommitRequest(
                body.group_id, body.producer_id, body.producer_epoch, getattr(body, "generation_id", -1),
                getattr(body, "member_id", ""), getattr(body, "group_instance_id", None), offsets))
            errors.update({tp: _fenced(code, version, 2) for tp, code in committed.items()})
    except KafkaError as exc:
        errors.update(dict.fromkeys(order, _fenced(exc.code, version, 2)))
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for topic, partition in order:
        by_topic.setdefault(topic, []).append({"partition_index": partition,
                                               "error_code": wire(errors[(topic, partition)])})
    return build(load_response_schema(28, version), {
        "throttle_time": ZERO, "topics": [{"name": n, "partitions": p} for n, p in by_topic.items()]})


# ---------------------------------------------------------------------- DescribeTransactions, ListTransactions


@api(65, "DescribeTransactions", 0, 0)
async def describe_transactions(owners: Owners, request: Request, context: RequestContext) -> Any:
    states = []
    for transactional_id in request.body.transactional_ids:
        entry: dict[str, Any] = {"error_code": WireError.none, "transactional_id": transactional_id,
                                 "transaction_state": "", "transaction_timeout": datetime.timedelta(0),
                                 "transaction_start_time": _EPOCH_ZERO, "producer_id": -1, "producer_epoch": -1,
                                 "topics": ()}
        try:
            if not owners.access.allows(context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                        transactional_id):
                raise KafkaError("Transactional id authorization failed.",
                                 code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            txn = await owners.transactions.describe(transactional_id)
            if txn is None:
                raise KafkaError(f"transactional id {transactional_id!r} is not known",
                                 code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(txn.partitions):
                by_topic.setdefault(topic, []).append(partition)
            # The wire type has no "none": a transaction that never started reads as the epoch (Kafka sends -1).
            started = datetime.datetime.fromtimestamp(max(txn.start_ms, 0) / 1000, tz=datetime.UTC)
            entry.update(transaction_state=txn.state.kafka_name,
                         transaction_timeout=datetime.timedelta(milliseconds=txn.timeout_ms),
                         transaction_start_time=started, producer_id=txn.producer_id,
                         producer_epoch=txn.producer_epoch,
                         topics=[{"topic": t, "partitions": p} for t, p in by_topic.items()])
        except KafkaError as exc:
            entry["error_code"] = wire(exc.code)
        states.append(entry)
    return build(load_response_schema(65, request.api_version), {"throttle_time": ZERO,
                                                                 "transaction_states": states})


@api(66, "ListTransactions", 0, 1)
async def list_transactions(owners: Owners, request: Request, context: RequestContext) -> Any:
    """The ids this broker coordinates that the caller may describe (KIP-664; duration filter KIP-994)."""
    body = request.body
    known = {s.kafka_name for s in TxnState}
    unknown = [s for s in body.state_filters if s not in known]
    found = owners.transactions.list_transactions(
        states=[s for s in body.state_filters if s in known] or (() if not body.state_filters else ("-",)),
        producer_ids=[int(p) for p in body.producer_id_filters],
        min_duration_ms=int(getattr(body, "duration_filter", -1)))
    visible = [t for t in found if owners.access.allows(context, AclOperation.DESCRIBE,
                                                         ResourceType.TRANSACTIONAL_ID, t.transactional_id,
                                                         audit=False)]
    return build(load_response_schema(66, request.api_version), {
        "throttle_time": ZERO, "error_code": WireError.none, "unknown_state_filters": unknown,
        "transaction_states": [{"transactional_id": t.transactional_id, "producer_id": t.producer_id,
                                "transaction_state": t.state.kafka_name} for t in visible]})
