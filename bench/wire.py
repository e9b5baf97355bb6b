"""Blocking socket helpers for the benchmarks around the project's one client codec (``dataplane.protocol.client``).

Requests are encoded and responses decoded there (kio's schemas, the request header
its version needs); this module only moves frames over a socket.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dataplane.protocol import client
from dataplane.protocol.framing import SIZE


def encode_request(request: Any, version: int, correlation_id: int, client_id: str = "bench") -> bytes:
    """A framed request: size, the request header its schema names, the body."""
    return client.encode_request(request, correlation_id, client_id, version)


def decode_response(api_key: int, version: int, payload: bytes) -> tuple[int, Any]:
    """(correlation id, response entity) from a frame's payload (without the size prefix)."""
    response = client.decode_response(payload, api_key, version)
    return response.correlation_id, response.body


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
