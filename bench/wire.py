"""A raw Kafka-protocol client in a few functions: kio entities to frames and back, one blocking call.

Only ``kio`` is imported (no Sluice code), so the null broker can use this whichever tree it runs from.
"""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer

SIZE = struct.Struct(">i")


def encode_request(request: Any, version: int, correlation_id: int, client_id: str = "bench") -> bytes:
    """A framed request: size, the request header its schema names, the body."""
    header = type(request).__header_schema__
    buffer = io.BytesIO()
    entity_writer(header)(buffer, header(request_api_key=request.__api_key__, request_api_version=version,
                                         correlation_id=correlation_id, client_id=client_id))
    entity_writer(type(request))(buffer, request)
    return SIZE.pack(buffer.tell()) + buffer.getvalue()


def decode_response(api_key: int, version: int, payload: bytes) -> tuple[int, Any]:
    """(correlation id, response entity) from a frame's payload (without the size prefix)."""
    schema = load_response_schema(api_key, version)
    header, offset = entity_reader(schema.__header_schema__)(payload, 0)
    body, _ = entity_reader(schema)(payload, offset)
    return int(header.correlation_id), body


def read_frame(sock: socket.socket) -> bytes:
    size = SIZE.unpack(_exactly(sock, SIZE.size))[0]
    return _exactly(sock, size)


def _exactly(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def call(address: tuple[str, int], request: Any, version: int, timeout: float = 30) -> Any:
    """One request on a fresh connection; the decoded response."""
    with socket.create_connection(address, timeout=timeout) as sock:
        sock.sendall(encode_request(request, version, 1))
        correlation_id, body = decode_response(request.__api_key__, version, read_frame(sock))
    if correlation_id != 1:
        raise ConnectionError(f"answer to correlation id {correlation_id}, expected 1")
    return body
