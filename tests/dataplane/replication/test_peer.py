"""PeerConnection against a stand-in broker speaking through the broker's own codec on a real socket."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16

from dataplane.protocol.framing import FrameDecoder
from dataplane.protocol.messages import Request, encode_response, parse_request
from dataplane.replication.peer import PeerConnection, PeerError

REQUEST = ApiVersionsRequest(client_software_name="sluice", client_software_version="1")
RESPONSE = ApiVersionsResponse(error_code=ErrorCode.none, throttle_time=datetime.timedelta(0),
                               api_keys=(ApiVersion(api_key=i16(18), min_version=i16(0), max_version=i16(4)),))

# Given the parsed request, the bytes to answer with (None: say nothing; HangUp: close the connection).
Answer = Callable[[Request], bytes | None]


class HangUp(Exception):
    pass


def reply(request: Request) -> bytes:
    return b"".join(chunk for chunk in encode_response(request.correlation_id, RESPONSE) if isinstance(chunk, bytes))


def run_against(answer: Answer, exchange: Callable[[PeerConnection], Any]) -> tuple[Any, list[Request]]:
    """Run ``exchange`` on a connection to a server that answers each request with ``answer``."""
    seen: list[Request] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder()
        try:
            while chunk := await reader.read(65536):
                for frame in decoder.feed(chunk):
                    parsed = parse_request(frame)
                    assert isinstance(parsed, Request)
                    seen.append(parsed)
                    data = answer(parsed)
                    if data is not None:
                        writer.write(data)
        except HangUp:
            pass
        writer.close()

    async def main() -> Any:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            conn = await PeerConnection.open("127.0.0.1", port, "sluice-replica-2", 5)
            try:
                return await exchange(conn)
            finally:
                conn.close()
        finally:
            server.close()

    return asyncio.run(main()), seen


def test_calls_are_answered_and_numbered() -> None:
    async def two_calls(conn: PeerConnection) -> list[Any]:
        return [await conn.call(REQUEST, 3, 5), await conn.call(REQUEST, 3, 5)]

    bodies, seen = run_against(reply, two_calls)
    assert bodies == [RESPONSE, RESPONSE]
    assert [(r.api_key, r.api_version, r.correlation_id, r.client_id) for r in seen] == [
        (18, 3, 1, "sluice-replica-2"), (18, 3, 2, "sluice-replica-2")]


@pytest.mark.parametrize(("answer", "message"), [
    (lambda r: b"".join(c for c in encode_response(r.correlation_id + 1, RESPONSE) if isinstance(c, bytes)),
     "correlation id 2, expected 1"),
    (lambda r: b"\x00\x00\x00\x02\x00\x00", "shorter than any response header"),
    (lambda r: None, "request to peer failed: TimeoutError"),
])
def test_a_bad_or_missing_answer_is_a_peer_error_and_closes_the_connection(answer: Answer, message: str) -> None:
    async def call_then_again(conn: PeerConnection) -> None:
        with pytest.raises(PeerError, match=message):
            await conn.call(REQUEST, 3, 0.5)
        with pytest.raises(PeerError, match="connection to peer is closed"):
            await conn.call(REQUEST, 3, 0.5)

    run_against(answer, call_then_again)


def test_a_peer_that_hangs_up_is_a_peer_error() -> None:
    def hang_up(request: Request) -> bytes:
        raise HangUp

    async def call(conn: PeerConnection) -> None:
        with pytest.raises(PeerError, match="request to peer failed: IncompleteReadError"):
            await conn.call(REQUEST, 3, 5)

    run_against(hang_up, call)


def test_an_unreachable_peer_is_a_peer_error() -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        with pytest.raises(PeerError, match="cannot connect"):
            await PeerConnection.open("127.0.0.1", port, "sluice-replica-2", 5)

    asyncio.run(main())
