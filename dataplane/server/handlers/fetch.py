"""Fetch: long poll, whole batches, record data never copied into Python objects."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.protocol.build import build
from dataplane.protocol.errors import KafkaError
from dataplane.protocol.messages import Deferred, Request
from dataplane.server.apis import api
from dataplane.server.broker import ZERO, wire

if TYPE_CHECKING:
    from dataplane.server.broker import Broker


@api(1, "Fetch", 4, 12)  # v13+ names topics by id
async def fetch(broker: Broker, request: Request) -> Any:
    body = request.body
    deadline = time.monotonic() + body.max_wait.total_seconds()
    while True:
        # An append that lands while _fetch_once reads (it awaits threads) must not be slept through.
        seen = broker.append_count
        responses, total = await _fetch_once(broker, body)
        remaining = deadline - time.monotonic()
        if total >= body.min_bytes or remaining <= 0 or broker.stopping:
            break
        if broker.append_count != seen:
            continue
        async with broker.appended:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(broker.appended.wait(), remaining)
    return build(load_response_schema(1, request.api_version), {
        "throttle_time": ZERO, "error_code": WireError.none, "session_id": 0, "responses": responses})


async def _fetch_once(broker: Broker, body: Any) -> tuple[list[dict[str, Any]], int]:
    """One pass over the partitions asked for. Followers (replica id set) read to the log end and report
    their progress; consumers read below the high watermark only."""
    total = 0
    budget = body.max_bytes if body.max_bytes > 0 else 2**31 - 1
    replica = body.replica_id
    responses = []
    for topic_req in body.topics:
        partitions = []
        for part in topic_req.partitions:
            entry: dict[str, Any] = {"partition_index": part.partition, "error_code": WireError.none,
                                     "high_watermark": -1, "last_stable_offset": -1, "log_start_offset": -1,
                                     "aborted_transactions": None, "preferred_read_replica": -1, "records": None}
            try:
                _, runtime = broker.leader_runtime(topic_req.topic, part.partition,
                                                   getattr(part, "current_leader_epoch", -1))
                partition_log = runtime.log
                if replica >= 0:
                    broker.replicas.on_follower_fetch((topic_req.topic, part.partition), runtime, replica,
                                                      part.fetch_offset)
                    up_to = partition_log.log_end_offset
                else:
                    up_to = runtime.high_watermark
                high_watermark = runtime.high_watermark
                # At least one whole batch for the first partition with data, as Kafka does.
                limit = min(part.partition_max_bytes, budget) if total else part.partition_max_bytes
                length = 0
                if partition_log.log_start_offset <= part.fetch_offset and up_to <= part.fetch_offset \
                        <= partition_log.log_end_offset:
                    records: Any = b""  # nothing visible yet: skip the read (a long poll wakes here often)
                else:
                    region = await asyncio.to_thread(partition_log.read, part.fetch_offset, max(limit, 1), up_to)
                    length = region.length
                    records = Deferred(region, length) if length else b""
                total += length
                budget -= length
                # No transactions yet, so the last stable offset is the high watermark.
                entry.update(high_watermark=high_watermark, last_stable_offset=high_watermark,
                             log_start_offset=partition_log.log_start_offset, records=records)
            except KafkaError as exc:
                entry["error_code"] = wire(exc.code)
            partitions.append(entry)
        responses.append({"topic": topic_req.topic, "partitions": partitions})
    return responses, total
