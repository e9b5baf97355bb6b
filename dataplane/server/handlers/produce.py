"""Produce."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from typing import TYPE_CHECKING, Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode, KafkaError
from dataplane.protocol.messages import Request
from dataplane.server.apis import api
from dataplane.server.broker import ZERO, wire

if TYPE_CHECKING:
    from dataplane.server.broker import Broker


@api(0, "Produce", 3, 9)
async def produce(broker: Broker, request: Request) -> Any:
    body = request.body
    results = []
    appended = False
    for topic_data in body.topic_data:
        with contextlib.suppress(KafkaError):  # an invalid name is answered per partition below
            await broker.topic_or_autocreate(topic_data.name)
        partitions = []
        for part in topic_data.partition_data:
            entry: dict[str, Any] = {"index": part.index, "error_code": WireError.none, "base_offset": -1,
                                     "log_append_time": None, "log_start_offset": -1, "record_errors": (),
                                     "error_message": None}
            try:
                topic, state = broker.partition_state(topic_data.name, part.index)
                if not part.records:
                    raise KafkaError("no records", code=ErrorCode.INVALID_RECORD)
                partition_log = broker.partition_log(topic, part.index)
                info = await asyncio.to_thread(partition_log.append_as_leader, part.records, state.leader_epoch)
                appended = True
                entry.update(base_offset=info.first_offset, log_start_offset=info.log_start_offset)
                if info.log_append_time >= 0:
                    entry["log_append_time"] = datetime.datetime.fromtimestamp(info.log_append_time / 1000,
                                                                               tz=datetime.UTC)
            except KafkaError as exc:
                entry.update(error_code=wire(exc.code), error_message=str(exc))
            partitions.append(entry)
        results.append({"name": topic_data.name, "partition_responses": partitions})
    if appended:
        await broker.notify_appended()
    if body.acks == 0:
        return None
    return build(load_response_schema(0, request.api_version), {"responses": results, "throttle_time": ZERO})
