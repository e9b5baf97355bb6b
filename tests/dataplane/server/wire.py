"""A minimal blocking Kafka-protocol client for tests that need exact requests.

Requests are encoded and responses decoded by kafka-python's protocol classes,
so the broker is checked against an independent codec. That is on purpose: the
broker and ``dataplane.protocol.client`` (used by ``tests/support/wire.py``) read
and write with the same kio schemas, so a schema misread would be shared by both
sides and pass unseen. Do not move these tests onto the broker's own codec.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse


class WireClient:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv_exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def call(self, request: Any, response_class: Any, version: int) -> Any:
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="wire-test")
        self.sock.sendall(bytes(request.encode(header=True, framed=True)))
        size = struct.unpack(">i", self._recv_exactly(4))[0]
        payload = struct.pack(">i", size) + self._recv_exactly(size)
        return response_class.decode(payload, version=version, header=True, framed=True)

    def init_producer_id(self) -> tuple[int, int]:
        response = self.call(InitProducerIdRequest[4](transactional_id=None, transaction_timeout_ms=60000,
                                                      producer_id=-1, producer_epoch=-1),
                             InitProducerIdResponse, 4)
        assert response.error_code == 0, response
        return response.producer_id, response.producer_epoch

    def produce(self, topic: str, partition: int, records: bytes, acks: int = -1) -> tuple[int, int]:
        """(error code, base offset) of one partition's produce."""
        request = ProduceRequest[9](transactional_id=None, acks=acks, timeout_ms=30000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=records)])])
        response = self.call(request, ProduceResponse, 9)
        part = response.responses[0].partition_responses[0]
        return part.error_code, part.base_offset
