"""A connection from this broker to another one: the asyncio transport around ``protocol.client.ClientCodec``.

Replica fetchers use it for OffsetForLeaderEpoch and Fetch. One request is in
flight at a time (a fetcher waits for each answer before its next request), so
correlation ids only guard against a confused peer. It stays here rather than in
``dataplane.protocol``, which is sans-IO and never touches a socket.
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

from kio.schema.errors import ErrorCode as WireError
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from dataplane.protocol.client import ClientCodec, Response, expects_response
from dataplane.protocol.framing import DEFAULT_MAX_FRAME_BYTES, SIZE, FrameTooLarge, RemoteProtocolError
from dataplane.security.sasl import PLAIN, ClientCredentials
from dataplane.security.scram import ScramClient, ScramError

# The stream's buffer may hold a whole fetch response: with asyncio's default (64 KiB) the transport is
# paused and resumed dozens of times per multi-MiB response, each a round of loop wake-ups.
STREAM_LIMIT = 16 << 20


class PeerError(ConnectionError):
    """The peer is unreachable, closed the connection, timed out or answered nonsense."""


class PeerConnection:
    """One connection to another broker. Owned by a replica fetcher; used from its task, one call at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self._reader, self._writer = reader, writer
        self._codec = ClientCodec(client_id)

    @classmethod
    async def open(cls, host: str, port: int, client_id: str, timeout: float, *,
                   tls: ssl.SSLContext | None = None) -> PeerConnection:
        """Connect (over TLS with ``tls``, the peer's certificate checked against ``host``)."""
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(host, port, limit=STREAM_LIMIT, ssl=tls,
                                        server_hostname=host if tls is not None else None), timeout)
        except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError: a certificate the peer refused
            raise PeerError(f"cannot connect to {host}:{port}: {exc}") from exc
        return cls(reader, writer, client_id)

    async def call(self, request: Any, api_version: int, timeout: float) -> Any:
        """Send a kio request entity and return the decoded response entity (None for a produce with acks=0).

        Any failure closes the connection: after a timeout or a bad frame the
        byte stream cannot be trusted to line up with requests again.
        """
        if self._writer.is_closing():
            raise PeerError("connection to peer is closed")
        _, data = self._codec.send(request, api_version)
        try:
            self._writer.write(data)
            await asyncio.wait_for(self._writer.drain(), timeout)
            if not expects_response(request):
                return None
            return (await asyncio.wait_for(self._read_response(), timeout)).body
        except RemoteProtocolError as exc:
            self.close()
            raise PeerError(f"bad response from peer: {exc}") from exc
        except (OSError, TimeoutError, RuntimeError, asyncio.IncompleteReadError) as exc:  # uvloop: RuntimeError
            self.close()
            raise PeerError(f"request to peer failed: {exc!r}") from exc

    async def authenticate(self, credentials: ClientCredentials, timeout: float) -> None:
        """SaslHandshake v1 then SaslAuthenticate (KIP-152); raises PeerError when refused.

        SCRAM's PBKDF2 runs in a worker thread: it is the client's half of the
        cost, and a reconnecting fetcher must not stall the broker's loop.
        """
        answer = await self.call(SaslHandshakeRequest(mechanism=credentials.mechanism), 1, timeout)
        if answer.error_code != WireError.none:
            raise PeerError(f"SASL handshake refused: {answer.error_code.name} (offered {answer.mechanisms})")
        try:
            if credentials.mechanism == PLAIN:
                token = f"\0{credentials.username}\0{credentials.password}".encode()
                await self._sasl_step(token, timeout)
                return
            client = ScramClient(credentials.mechanism, credentials.username, credentials.password)
            server_first = await self._sasl_step(client.first(), timeout)
            final = await asyncio.to_thread(client.final, server_first)
            client.verify(await self._sasl_step(final, timeout))
        except ScramError as exc:
            self.close()
            raise PeerError(f"SASL authentication failed: {exc}") from exc

    async def _sasl_step(self, token: bytes, timeout: float) -> bytes:
        answer = await self.call(SaslAuthenticateRequest(auth_bytes=token), 2, timeout)
        if answer.error_code != WireError.none:
            self.close()
            raise PeerError(f"SASL authentication failed: {answer.error_message}")
        return bytes(answer.auth_bytes)

    async def _read_response(self) -> Response:
        """One frame, read whole: its payload is copied once out of the stream's buffer."""
        (size,) = SIZE.unpack(await self._reader.readexactly(SIZE.size))
        if size < 0:
            raise RemoteProtocolError(f"negative frame size {size}")
        if size > DEFAULT_MAX_FRAME_BYTES:
            raise FrameTooLarge(size, DEFAULT_MAX_FRAME_BYTES)
        return self._codec.receive_frame(await self._reader.readexactly(size))

    def close(self) -> None:
        self._writer.close()
