"""A blocking Kafka-protocol client for tests: kio requests over one socket, through the broker's own client codec.

For requests no client library sends, and for pipelining (send several, then
read the answers). ``dataplane.protocol.client.ClientCodec`` does the framing,
numbering and decoding; this is only the socket. The independent check of the
broker, with kafka-python's codec, is ``tests/dataplane/server/wire.py``.
"""

from __future__ import annotations

import collections
import socket
import ssl
import struct
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeRequestV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from dataplane.protocol.client import ClientCodec, Response, expects_response
from dataplane.security.scram import ScramClient


class KafkaWire:
    def __init__(self, port: int, *, host: str = "127.0.0.1", client_id: str = "wire-test", timeout: float = 30,
                 first_correlation_id: int = 1, tls: ssl.SSLContext | None = None) -> None:
        sock = socket.create_connection((host, port), timeout=timeout)
        self.sock = sock if tls is None else tls.wrap_socket(sock, server_hostname=host)
        self.codec = ClientCodec(client_id, first_correlation_id=first_correlation_id)
        self._received: collections.deque[Response] = collections.deque()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> KafkaWire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, *requests: Any) -> list[int]:
        """Write kio requests in one go (pipelined); their correlation ids."""
        sent = [self.codec.send(request) for request in requests]
        self.sock.sendall(b"".join(data for _, data in sent))
        return [correlation_id for correlation_id, _ in sent]

    def receive(self, count: int = 1) -> list[Response]:
        """The next ``count`` responses, each checked against its request."""
        while len(self._received) < count:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            self._received.extend(self.codec.receive(chunk))
        return [self._received.popleft() for _ in range(count)]

    def call(self, request: Any, api_version: int | None = None) -> Any:
        """Send one kio request; its decoded response entity (None for a produce with acks=0).

        ``api_version`` is only checked against the request's kio class.
        """
        _, data = self.codec.send(request, api_version)
        self.sock.sendall(data)
        if not expects_response(request):
            return None
        [response] = self.receive()
        return response.body


    def authenticate(self, mechanism: str, username: str, password: str, *, handshake_version: int = 1) -> None:
        """SaslHandshake v1 + SaslAuthenticate (KIP-152); raises PermissionError with the broker's message.

        ``handshake_version=0``: SaslHandshake v0, then the tokens as bare frames (KIP-43); a refusal is the
        connection closing (ConnectionError), as that framing has no error answer."""
        handshake_type = SaslHandshakeRequestV0 if handshake_version == 0 else SaslHandshakeRequest
        handshake = self.call(handshake_type(mechanism=mechanism))
        if handshake.error_code != ErrorCode.none:
            raise PermissionError(f"handshake: {handshake.error_code.name}")

        def step(token: bytes) -> bytes:
            if handshake_version == 0:
                return self.raw_token(token)
            answer = self.call(SaslAuthenticateRequest(auth_bytes=token))
            if answer.error_code != ErrorCode.none:
                raise PermissionError(f"{answer.error_code.name}: {answer.error_message}")
            return bytes(answer.auth_bytes)
        if mechanism == "PLAIN":
            step(f"\0{username}\0{password}".encode())
            return
        client = ScramClient(mechanism, username, password)
        client.verify(step(client.final(step(client.first()))))


    def raw_token(self, token: bytes) -> bytes:
        """Send a bare SASL token frame (after SaslHandshake v0) and read the broker's bare answer."""
        self.sock.sendall(struct.pack(">i", len(token)) + token)
        size = struct.unpack(">i", self._read_exactly(4))[0]
        return self._read_exactly(size)

    def _read_exactly(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            data += chunk
        return data

    def authenticate_token(self, token: str) -> int:
        """SASL/OAUTHBEARER with ``token``: the session lifetime (ms) the broker gave; PermissionError if refused."""
        from dataplane.security.oauthbearer import client_message

        handshake = self.call(SaslHandshakeRequest(mechanism="OAUTHBEARER"))
        if handshake.error_code != ErrorCode.none:
            raise PermissionError(f"handshake: {handshake.error_code.name}")
        answer = self.call(SaslAuthenticateRequest(auth_bytes=client_message(token)))
        if answer.error_code != ErrorCode.none:
            raise PermissionError(f"{answer.error_code.name}: {answer.error_message}")
        return int(answer.session_lifetime.total_seconds() * 1000)


def call(port: int, request: Any, api_version: int | None = None, client_id: str = "wire-test") -> Any:
    """One request on a fresh connection: its decoded response entity."""
    with KafkaWire(port, client_id=client_id) as wire:
        return wire.call(request, api_version)
