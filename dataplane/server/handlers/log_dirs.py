"""DescribeLogDirs and AlterReplicaLogDirs: one log directory per broker.

A broker has one data directory (``log.dirs`` with a single entry), so
DescribeLogDirs reports that directory with the size of every replica in it and
the disk's total and usable bytes, and AlterReplicaLogDirs accepts only that
directory as a destination (nothing to move) and refuses any other with
LOG_DIR_NOT_FOUND, as a Kafka broker refuses a directory it does not have.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode as WireError

from dataplane.protocol.answers import ZERO, wire
from dataplane.protocol.build import build
from dataplane.protocol.errors import ErrorCode
from dataplane.protocol.messages import Request
from dataplane.security.acl import AclOperation
from dataplane.server.apis import RequestContext, api
from dataplane.server.owners import Owners

if TYPE_CHECKING:
    from dataplane.replication.partition import Partition


@api(35, "DescribeLogDirs", 1, 4)
async def describe_log_dirs(owners: Owners, request: Request, context: RequestContext) -> Any:
    body = request.body
    if not owners.access.allows_cluster(context, AclOperation.DESCRIBE):
        return build(load_response_schema(35, request.api_version), {
            "throttle_time": ZERO, "error_code": wire(ErrorCode.CLUSTER_AUTHORIZATION_FAILED), "results": ()})
    hosted = owners.replicas.partitions
    if body.topics is None:  # every replica this broker hosts
        wanted = sorted(hosted)
    else:
        wanted = [(t.topic, int(p)) for t in body.topics for p in t.partitions if (t.topic, int(p)) in hosted]
    topics: dict[str, list[dict[str, Any]]] = {}
    for name, index in wanted:
        topics.setdefault(name, []).append(_describe(hosted[(name, index)]))
    data_dir = owners.config.data_dir
    total, usable = await asyncio.to_thread(_disk_space, data_dir)
    result = {"error_code": WireError.none, "log_dir": str(data_dir), "total_bytes": total, "usable_bytes": usable,
              "topics": [{"name": name, "partitions": partitions} for name, partitions in topics.items()]}
    return build(load_response_schema(35, request.api_version), {
        "throttle_time": ZERO, "error_code": WireError.none, "results": [result]})


def _describe(partition: Partition) -> dict[str, Any]:
    log = partition.log
    # Kafka's offset lag of a current (not future) replica: how far its high watermark is past its log end.
    lag = max(partition.high_watermark - log.log_end_offset, 0)
    return {"partition_index": partition.index, "partition_size": log.size_in_bytes, "offset_lag": lag,
            "is_future_key": False}


def _disk_space(directory: Path) -> tuple[int, int]:
    stats = os.statvfs(directory)
    return stats.f_blocks * stats.f_frsize, stats.f_bavail * stats.f_frsize


@api(34, "AlterReplicaLogDirs", 1, 2)
async def alter_replica_log_dirs(owners: Owners, request: Request, context: RequestContext) -> Any:
    allowed = owners.access.allows_cluster(context, AclOperation.ALTER)
    own = _same_dir_key(owners.config.data_dir)
    hosted = owners.replicas.partitions
    results: dict[str, list[dict[str, Any]]] = {}
    for destination in request.body.dirs:
        same = _same_dir_key(Path(destination.path)) == own
        for topic in destination.topics:
            for index in topic.partitions:
                if not allowed:
                    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                elif not same:
                    code = ErrorCode.LOG_DIR_NOT_FOUND
                elif (topic.name, int(index)) not in hosted:
                    code = ErrorCode.REPLICA_NOT_AVAILABLE
                else:
                    code = ErrorCode.NONE  # already there: one directory per broker, nothing moves
                results.setdefault(topic.name, []).append({"partition_index": index, "error_code": wire(code)})
    return build(load_response_schema(34, request.api_version), {
        "throttle_time": ZERO, "results": [{"topic_name": name, "partitions": parts}
                                           for name, parts in results.items()]})


def _same_dir_key(path: Path) -> str:
    return os.path.normpath(os.path.abspath(path))
