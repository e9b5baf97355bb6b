"""Malformed frames over a real socket: that connection closes with a log line, the broker lives on."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.broker import BrokerProcess, logged_broker

MAX_REQUEST = 65536


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = logged_broker(Path(tmp_path_factory.mktemp("bad-input")),
                            extra_args=["--socket-request-max-bytes", str(MAX_REQUEST)])
    process.start()
    try:
        yield process
    finally:
        process.stop()


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def api_versions_v0(correlation_id: int) -> bytes:
    return frame(struct.pack(">hhih", 18, 0, correlation_id, 3) + b"cli")


def read_frame(sock: socket.socket) -> bytes:
    """One response frame, or b'' when the broker closed the connection."""
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
        chunk = sock.recv(65536)
        if not chunk:
            return b""
        data += chunk
    return data


def header(api_key: int, version: int, flexible_body: bool = False) -> bytes:
    head = struct.pack(">hhih", api_key, version, 9, 3) + b"cli"
    return head + (b"\x00" if flexible_body else b"")


BAD_FRAMES = {
    "truncated header": (frame(struct.pack(">hh", 3, 0)), "shorter than any request header"),
    "truncated body": (frame(header(3, 0) + b"\x00\x00"), "malformed request api_key=3"),
    # Produce v3: records announced as 2**31 - 1 bytes inside a 40-byte frame.
    "lying length": (frame(header(0, 3) + struct.pack(">hhii", -1, -1, 1000, 1) + struct.pack(">h", 1) + b"t"
                           + struct.pack(">iii", 1, 0, 2**31 - 1)), "exceeds the"),
    "huge array count": (frame(header(3, 0) + struct.pack(">i", 2**31 - 1)), "array of 2147483647"),
    "huge compact count": (frame(header(3, 12, True) + b"\xff\xff\xff\xff\x0f"), "cannot fit"),
    "unknown tagged field": (frame(header(18, 3, True) + b"\x02kp\x021" + b"\x01\x63\x01x"),
                             "malformed request api_key=18 v3"),
    "wrong api version": (frame(header(0, 99)), "api key 0 v99 is not served here"),
    "unknown api key": (frame(header(9999, 0)), "api key 9999 v0 is not served here"),
    "just above socket.request.max.bytes": (struct.pack(">i", MAX_REQUEST + 1) + b"\x00" * 64,
                                            f"frame of {MAX_REQUEST + 1} bytes exceeds the limit"),
    "negative size": (struct.pack(">i", -1), "negative frame size -1"),
}


@pytest.mark.parametrize("case", list(BAD_FRAMES))
def test_bad_frame_closes_that_connection_only(broker: BrokerProcess, case: str) -> None:
    data, reason = BAD_FRAMES[case]
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as bystander, \
            socket.create_connection(("127.0.0.1", broker.port), timeout=10) as culprit:
        bystander.sendall(api_versions_v0(1))
        assert read_frame(bystander)
        logged_before = len(broker.lines)
        culprit.sendall(data)
        assert read_frame(culprit) == b""  # closed without an answer
        line = broker.wait_for("closing connection from", timeout=10, after=logged_before)
        assert reason in line
        bystander.sendall(api_versions_v0(2))
        answer = read_frame(bystander)
        assert struct.unpack_from(">ih", answer, 4) == (2, 0)  # correlation id, error code NONE


def test_a_frame_at_the_limit_is_read(broker: BrokerProcess) -> None:
    """The limit is inclusive, as Kafka's is: a request of exactly max bytes is read and answered
    (the padding after its last field is ignored, as Kafka's parser ignores trailing bytes)."""
    payload = header(18, 0) + b"\x00" * (MAX_REQUEST - len(header(18, 0)))
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(frame(payload))
        assert read_frame(sock)


def test_client_that_hangs_up_mid_frame_is_not_an_error(broker: BrokerProcess) -> None:
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", 100) + b"\x00\x03")
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(api_versions_v0(3))
        assert read_frame(sock)
    assert "Traceback" not in broker.output()
