"""A connection from this broker to another one: requests encoded, responses decoded by ``kio``.

Replica fetchers use it for OffsetForLeaderEpoch and Fetch. One request is in
flight at a time (a fetcher waits for each answer before its next request), so
correlation ids only guard against a confused peer.
"""

from __future__ import annotations

import asyncio
import io
import itertools
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer

from dataplane.protocol.framing import SIZE, FrameDecoder, RemoteProtocolError


class PeerError(ConnectionError):
    """The peer is unreachable, closed the connection, timed out or answered nonsense."""


class PeerConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, client_id: str) -> None:
        self._reader, self._writer = reader, writer
        self._client_id = client_id
        self._correlation = itertools.count(1)
        self._decoder = FrameDecoder()

    @classmethod
    async def open(cls, host: str, port: int, client_id: str, timeout: float) -> PeerConnection:
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except (OSError, TimeoutError) as exc:
            raise PeerError(f"cannot connect to {host}:{port}: {exc}") from exc
        return cls(reader, writer, client_id)

    async def call(self, request: Any, api_version: int, timeout: float) -> Any:
        """Send a kio request entity and return the decoded response entity."""
        header_schema = request.__header_schema__
        correlation_id = next(self._correlation)
        buffer = io.BytesIO()
        entity_writer(header_schema)(buffer, header_schema(
            request_api_key=request.__api_key__, request_api_version=api_version,
            correlation_id=correlation_id, client_id=self._client_id))
        entity_writer(type(request))(buffer, request)
        payload = buffer.getvalue()
        if self._writer.is_closing():
            raise PeerError("connection to peer is closed")
        try:
            self._writer.write(SIZE.pack(len(payload)) + payload)
            await asyncio.wait_for(self._writer.drain(), timeout)
            frame = await asyncio.wait_for(self._read_frame(), timeout)
        except (OSError, TimeoutError, RuntimeError, asyncio.IncompleteReadError) as exc:  # uvloop: RuntimeError
            self.close()
            raise PeerError(f"request to peer failed: {exc!r}") from exc
        response_schema = load_response_schema(request.__api_key__, api_version)
        try:
            header, offset = entity_reader(response_schema.__header_schema__)(frame, 0)
            body, _ = entity_reader(response_schema)(frame, offset)
        except Exception as exc:  # a decoder error of any kind: the peer is not speaking our protocol
            self.close()
            raise PeerError(f"undecodable response from peer: {exc!r}") from exc
        if header.correlation_id != correlation_id:
            self.close()
            raise PeerError(f"correlation id {header.correlation_id} does not match {correlation_id}")
        return body

    async def _read_frame(self) -> bytes:
        while True:
            chunk = await self._reader.read(1 << 20)
            if not chunk:
                raise asyncio.IncompleteReadError(b"", None)
            try:
                frames = self._decoder.feed(chunk)
            except RemoteProtocolError as exc:
                raise OSError(str(exc)) from exc
            if frames:
                return frames[0]

    def close(self) -> None:
        self._writer.close()

