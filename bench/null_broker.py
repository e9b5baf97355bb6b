"""A Kafka-protocol server that stores nothing: the fastest a Python broker could answer a producer.

    python bench/null_broker.py --listen 127.0.0.1:9092 [--partitions 1] [--api-versions-from HOST:PORT]

The baseline ``bench/broker.py`` divides the real broker's produce rate by. It answers

* ApiVersions: the real broker's table when ``--api-versions-from`` names one (so a client picks
  the same request versions and features as against that broker), else the four APIs below plus
  Fetch 4-12 (librdkafka writes v2 record batches only when Fetch v4+ is advertised too); only the
  four below are served, any other request closes its connection;
* Metadata: one broker, itself (node 1); every asked-for topic exists with ``--partitions`` partitions
  led by node 1 (all topics asked for so far when the request asks for all);
* InitProducerId: a fresh producer id at epoch 0;
* Produce, acks 0 / 1 / -1: no response for acks 0, otherwise success for every partition with base
  offsets that grow by the number of records in the batches (read from the batch headers) —

and drops the records. Requests are decoded and responses encoded with the dataplane's own protocol
modules (``FrameDecoder``, ``parse_request``, ``encode_response``, ``build``; kio underneath) on uvloop
like the broker, so what separates the broker from this server is everything but the protocol layer:
the log, the request loop, the handlers. Each connection is an ``asyncio.Protocol`` answering inline
from ``data_received`` (no task or coroutine per request), responses written once per read.

Run it from the Sluice tree whose protocol modules it should use (the bench sets ``PYTHONPATH``).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import signal
import struct
import sys
import uuid
from collections.abc import Callable
from typing import Any, cast

from kio.index import load_response_schema
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode

from dataplane.protocol.build import build
from dataplane.protocol.framing import FrameDecoder, RemoteProtocolError
from dataplane.protocol.messages import Chunk, Request, UnsupportedRequest, encode_response, parse_request

NODE_ID = 1
ZERO = datetime.timedelta(0)
NO_AUTHORIZED_OPERATIONS = -(2**31)
# api key: (min version, max version) served by default, as the broker serves them (and kio decodes them).
APIS = {0: (3, 9), 3: (0, 12), 18: (0, 4), 22: (0, 5)}
FETCH = {1: (4, 12)}  # advertised by default, never served: see the module docstring
_BATCH = struct.Struct(">qi")  # base offset, batch length
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT = 23  # base offset 8, length 4, leader epoch 4, magic 1, crc 4, attributes 2


def record_count(records: bytes | None) -> int:
    """Records in a run of v2 batches: the sum of each header's last offset delta + 1."""
    if not records:
        return 0
    count = pos = 0
    end = len(records)
    while pos + 61 <= end:  # a v2 batch header is 61 bytes
        _, length = _BATCH.unpack_from(records, pos)
        count += _LAST_OFFSET_DELTA.unpack_from(records, pos + _LAST_OFFSET_DELTA_AT)[0] + 1
        pos += 12 + length
    return count


class NullBroker:
    """Answers; remembers only topic names, next offsets and the last producer id."""

    def __init__(self, host: str, port: int, partitions: int, advertised: dict[int, tuple[int, int]]) -> None:
        self.host, self.port, self.partitions = host, port, partitions
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.next_offset: dict[tuple[str, int], int] = {}
        self.producer_id = 1000
        self.handlers: dict[int, Callable[[Request], Any]] = {
            0: self.produce, 3: self.metadata, 18: self.api_versions, 22: self.init_producer_id}
        # What is advertised of the four APIs is served: the handlers build any version kio knows.
        self.served = {k: advertised[k] for k in APIS if k in advertised}
        self.api_keys = [{"api_key": k, "min_version": lo, "max_version": hi}
                         for k, (lo, hi) in sorted(advertised.items())]

    def answer(self, payload: bytes) -> list[Chunk] | None:
        request = parse_request(payload)
        supported = self.served.get(request.api_key)
        if isinstance(request, UnsupportedRequest) or supported is None \
                or not supported[0] <= request.api_version <= supported[1]:
            if request.api_key != 18:
                raise RemoteProtocolError(f"api key {request.api_key} v{request.api_version} is not served here")
            response: Any = build(ApiVersionsResponseV0, {"error_code": ErrorCode.unsupported_version,
                                                          "api_keys": self.api_keys})
            chunks: list[Chunk] = encode_response(request.correlation_id, response)
            return chunks
        response = self.handlers[request.api_key](request)
        return None if response is None else encode_response(request.correlation_id, response)

    def api_versions(self, request: Request) -> Any:
        return build(load_response_schema(18, request.api_version), {
            "error_code": ErrorCode.none, "throttle_time": ZERO, "api_keys": self.api_keys})

    def metadata(self, request: Request) -> Any:
        topics = request.body.topics
        if topics is None or (request.api_version == 0 and not topics):
            names = sorted(self.topic_ids)
        else:
            names = [t.name for t in topics if t.name is not None]
        entries = []
        for name in names:
            topic_id = self.topic_ids.setdefault(name, uuid.uuid4())
            entries.append({
                "error_code": ErrorCode.none, "name": name, "topic_id": topic_id, "is_internal": False,
                "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS,
                "partitions": [{"error_code": ErrorCode.none, "partition_index": p, "leader_id": NODE_ID,
                                "leader_epoch": 0, "replica_nodes": (NODE_ID,), "isr_nodes": (NODE_ID,),
                                "offline_replicas": ()} for p in range(self.partitions)]})
        return build(load_response_schema(3, request.api_version), {
            "throttle_time": ZERO, "error_code": ErrorCode.none, "cluster_id": "null-broker", "controller_id": NODE_ID,
            "brokers": [{"node_id": NODE_ID, "host": self.host, "port": self.port, "rack": None}],
            "cluster_authorized_operations": NO_AUTHORIZED_OPERATIONS, "topics": entries})

    def init_producer_id(self, request: Request) -> Any:
        self.producer_id += 1
        return build(load_response_schema(22, request.api_version), {
            "throttle_time": ZERO, "error_code": ErrorCode.none, "producer_id": self.producer_id,
            "producer_epoch": 0})

    def produce(self, request: Request) -> Any:
        body = request.body
        results = []
        for topic_data in body.topic_data:
            partitions = []
            for part in topic_data.partition_data:
                key = (topic_data.name, part.index)
                base = self.next_offset.get(key, 0)
                self.next_offset[key] = base + record_count(part.records)
                partitions.append({"index": part.index, "error_code": ErrorCode.none, "base_offset": base,
                                   "log_append_time": None, "log_start_offset": 0, "record_errors": (),
                                   "error_message": None})
            results.append({"name": topic_data.name, "partition_responses": partitions})
        if body.acks == 0:
            return None
        return build(load_response_schema(0, request.api_version), {"responses": results, "throttle_time": ZERO})


class Connection(asyncio.Protocol):
    def __init__(self, broker: NullBroker) -> None:
        self.broker = broker
        self.decoder = FrameDecoder()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        out: list[Chunk] = []
        try:
            for payload in self.decoder.feed(data):
                chunks = self.broker.answer(payload)
                if chunks:
                    out += chunks
        except RemoteProtocolError as exc:
            print(f"null broker: closing a connection: {exc}", file=sys.stderr, flush=True)
            self.transport.close()
            return
        if out:
            self.transport.write(b"".join(cast(list[bytes], out)))  # no Deferred chunks here


def parse_api_versions(text: str) -> dict[int, tuple[int, int]]:
    """``key:min-max,...`` (what ``bench/common.py`` reads off the real broker) as a table."""
    table: dict[int, tuple[int, int]] = {}
    for item in text.split(","):
        key, _, versions = item.partition(":")
        low, _, high = versions.partition("-")
        table[int(key)] = (int(low), int(high))
    return table


async def serve(host: str, port: int, partitions: int, advertised: dict[int, tuple[int, int]]) -> None:
    loop = asyncio.get_running_loop()
    broker = NullBroker(host, port, partitions, advertised)
    server = await loop.create_server(lambda: Connection(broker), host, port, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    broker.port = port
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"null broker listening on {host}:{port}", flush=True)
    async with server:
        await stop.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--listen", default="127.0.0.1:0", help="host:port (port 0: any free port)")
    ap.add_argument("--partitions", type=int, default=1, help="partitions of every topic")
    ap.add_argument("--api-versions", metavar="KEY:MIN-MAX,...",
                    help="the ApiVersions table to advertise (a real broker's, read by the bench process)")
    args = ap.parse_args()
    advertised = parse_api_versions(args.api_versions) if args.api_versions else {**APIS, **FETCH}
    host, _, port = args.listen.rpartition(":")
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(host, int(port), args.partitions, advertised))


if __name__ == "__main__":
    main()
