"""Before authentication a SASL broker holds little: small frames, few connections, a short time (real brokers).

Each hostile test ends with a normal client authenticating and producing, which is the point: bad input closes
the connections that sent it and nothing else.
"""

from __future__ import annotations

import os
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeRequestV0

from dataplane.cluster.migrations import migrate
from dataplane.cluster.security_store import SecurityStore
from dataplane.cluster.store import MetadataStore
from dataplane.security.sasl import plain_hash
from tests.support.broker import BrokerProcess
from tests.support.polling import wait_until
from tests.support.wire import KafkaWire

pytestmark = pytest.mark.xdist_group("security")

KIB, MIB = 1024, 1024 * 1024
MAX_RECEIVE = 512 * KIB  # sasl.server.max.receive.size's default
USER, SECRET = "alice", "alice-secret"
QUIET: dict[str, Any] = {"log_level": 0, "logger": lambda *args: None}


def sasl_broker(root: Path, **settings: int) -> BrokerProcess:
    """A SASL_PLAINTEXT broker (authorizer off) that knows alice's PLAIN credential, with ``settings`` added."""
    broker = BrokerProcess(root / "data", f"test-{uuid.uuid4().hex[:12]}")
    config = root / "broker.toml"
    config.write_text('listeners = "SASL_PLAINTEXT://127.0.0.1:0"\n'
                      'inter.broker.sasl.username = "broker"\n'
                      'inter.broker.sasl.password = "broker-secret"\n'
                      + "".join(f'"{name}" = {value}\n' for name, value in settings.items()))
    broker.extra_args = ["--config", str(config)]
    url = os.environ["DATABASE_URL"]
    migrate(url, "sluice_meta")
    with psycopg.connect(url) as conn:
        store = MetadataStore(conn, broker.cluster_id)
        store.ensure_cluster()
        SecurityStore(store).set_plain_credential(USER, plain_hash(SECRET))
    broker.start()
    return broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = sasl_broker(tmp_path_factory.mktemp("preauth"))
    try:
        yield process
    finally:
        process.stop()


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def api_versions(size: int = 0, correlation_id: int = 7) -> bytes:
    """An ApiVersions v0 request padded to a frame of ``size`` bytes (the broker ignores trailing bytes)."""
    head = struct.pack(">hhih", 18, 0, correlation_id, 3) + b"cli"
    return frame(head + b"\x00" * max(0, size - len(head)))


def closed(sock: socket.socket, timeout: float = 10) -> bool:
    """Whether the broker closes ``sock`` within ``timeout`` (what it sends before closing is read and dropped)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except (ConnectionResetError, BrokenPipeError):
        pass
    except TimeoutError:
        return False
    return True


class Responses:
    """Response frames off a raw socket, one at a time (several may arrive in one segment)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.data = b""

    def correlation_id(self) -> int | None:
        """The next response's correlation id; None when the broker closed the connection."""
        self.sock.settimeout(10)
        while len(self.data) < 4 or len(self.data) < 4 + struct.unpack_from(">i", self.data)[0]:
            try:
                chunk = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                return None
            if not chunk:
                return None
            self.data += chunk
        size, correlation_id = struct.unpack_from(">ii", self.data)
        self.data = self.data[4 + size:]
        return int(correlation_id)


def answered(sock: socket.socket, correlation_id: int = 7) -> bool:
    """Whether the next response on ``sock`` answers ``correlation_id``."""
    return Responses(sock).correlation_id() == correlation_id


def producer(broker: BrokerProcess) -> Producer:
    return Producer({"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanism": "PLAIN", "sasl.username": USER, "sasl.password": SECRET,
                     "message.max.bytes": 2 * MIB, **QUIET})


def produces(broker: BrokerProcess, size: int = 100) -> None:
    """A normal client authenticates and produces one record of ``size`` bytes."""
    client = producer(broker)
    outcome: list[object] = []
    client.produce("preauth", b"v" * size, on_delivery=lambda err, msg: outcome.append(err))
    assert client.flush(30) == 0
    assert outcome == [None]


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


# ---------------------------------------------------------------------- frame size before and after authentication


def test_a_frame_above_the_limit_before_authentication_closes_the_connection(broker: BrokerProcess) -> None:
    logged = len(broker.lines)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", MAX_RECEIVE + 1) + b"\x00" * 64)
        assert closed(sock)
    line = broker.wait_for("closing connection from", timeout=10, after=logged)
    assert f"frame of {MAX_RECEIVE + 1} bytes before SASL authentication exceeds sasl.server.max.receive.size" in line
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(api_versions(MAX_RECEIVE))  # at the limit: read and answered
        assert answered(sock)
    produces(broker)


def test_a_bare_token_above_the_limit_after_handshake_v0_closes_the_connection(broker: BrokerProcess) -> None:
    """After SaslHandshake v0 the client's frames are bare SASL tokens, read under the same limit."""
    logged = len(broker.lines)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(frame(struct.pack(">hhih", 17, 0, 1, 3) + b"cli" + struct.pack(">h", 5) + b"PLAIN"))  # v0
        assert answered(sock, correlation_id=1)
        sock.sendall(struct.pack(">i", MAX_RECEIVE + 1) + b"\x00" * 64)
        assert closed(sock)
    line = broker.wait_for("closing connection from", timeout=10, after=logged)
    assert f"frame of {MAX_RECEIVE + 1} bytes before SASL authentication exceeds sasl.server.max.receive.size" in line
    produces(broker)


def test_the_same_size_after_authentication_is_read(broker: BrokerProcess) -> None:
    with KafkaWire(broker.port) as wire:
        wire.authenticate("PLAIN", USER, SECRET)
        wire.sock.sendall(api_versions(MAX_RECEIVE + 1))
        assert answered(wire.sock)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        # A large request right behind the login, in the same segment: its size is checked after the login.
        responses = Responses(sock)
        handshake = frame(struct.pack(">hhih", 17, 1, 1, 3) + b"cli" + struct.pack(">h", 5) + b"PLAIN")  # v1
        token = f"\0{USER}\0{SECRET}".encode()
        login = frame(struct.pack(">hhih", 36, 1, 2, 3) + b"cli" + struct.pack(">i", len(token)) + token)  # v1
        sock.sendall(handshake)
        assert responses.correlation_id() == 1
        sock.sendall(login + api_versions(MAX_RECEIVE + 1, correlation_id=3))
        assert (responses.correlation_id(), responses.correlation_id()) == (2, 3)
    produces(broker, size=900 * KIB)  # one produce request larger than the pre-authentication limit


def test_describe_configs_reports_the_limits(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "PLAIN", "sasl.username": USER, "sasl.password": SECRET, **QUIET})
    resource = ConfigResource(ConfigResource.Type.BROKER, "1")
    entries = admin.describe_configs([resource])[resource].result(30)
    assert {name: entries[name].value for name in ("sasl.server.max.receive.size", "max.unauthenticated.connections",
                                                   "sasl.server.authn.timeout.ms")} == {
        "sasl.server.max.receive.size": str(MAX_RECEIVE), "max.unauthenticated.connections": "1000",
        "sasl.server.authn.timeout.ms": "10000"}


# ---------------------------------------------------------------------- memory


def test_strangers_cannot_make_the_broker_hold_large_frames(broker: BrokerProcess) -> None:
    """8 unauthenticated connections declare 100 MiB frames and trickle up to 8 MiB each (64 MiB if buffered), then
    8 more send frames at the limit in small pieces, interleaved: the broker's peak RSS grows by far less."""
    assert broker.proc is not None
    pid = broker.proc.pid
    produces(broker)  # warm: the code paths a login and a produce take are loaded
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM restarts from the current RSS
    before = rss_kib(pid)

    liars = [socket.create_connection(("127.0.0.1", broker.port), timeout=10) for _ in range(8)]
    try:
        for sock in liars:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(struct.pack(">i", 100 * MIB))
        piece, open_ = b"\x00" * (64 * KIB), list(liars)
        for _ in range(8 * MIB // len(piece)):
            for sock in list(open_):
                try:
                    sock.sendall(piece)
                except (BrokenPipeError, ConnectionResetError):
                    open_.remove(sock)
            if not open_:
                break
        assert all(closed(sock) for sock in liars)
    finally:
        for sock in liars:
            sock.close()

    at_limit = [socket.create_connection(("127.0.0.1", broker.port), timeout=10) for _ in range(8)]
    try:
        requests = [api_versions(MAX_RECEIVE, correlation_id=i) for i in range(len(at_limit))]
        for sock in at_limit:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        step = 4 * KIB
        for start in range(0, len(requests[0]), step):
            for sock, request in zip(at_limit, requests, strict=True):
                sock.sendall(request[start:start + step])
        assert all(answered(sock, i) for i, sock in enumerate(at_limit))
    finally:
        for sock in at_limit:
            sock.close()

    grown = rss_kib(pid, "VmHWM") - before
    assert grown < 32 * 1024, f"peak RSS grew by {grown} KiB"
    produces(broker)


# ---------------------------------------------------------------------- how many, and for how long


def test_unauthenticated_connections_are_capped_per_broker_and_per_address(tmp_path: Path) -> None:
    process = sasl_broker(tmp_path, **{"max.unauthenticated.connections": 3, "max.connections.per.ip": 4})
    try:
        def connect(source: str) -> socket.socket:
            return socket.create_connection(("127.0.0.1", process.port), timeout=10, source_address=(source, 0))

        def refused(source: str, reason: str) -> None:
            logged = len(process.lines)
            with connect(source) as sock:
                assert closed(sock)
            assert reason in process.wait_for("closing connection from", timeout=10, after=logged)

        waiting = [connect(f"127.0.0.{2 + i}") for i in range(3)]
        for sock in waiting:  # admitted: served (ApiVersions needs no login)
            sock.sendall(api_versions())
            assert answered(sock)
        refused("127.0.0.9", "too many unauthenticated connections: 3 open, at most 3 allowed "
                             "(max.unauthenticated.connections)")
        waiting.pop().close()  # the broker counts the close once it has read it
        wait_until(lambda: _serves(process, "127.0.0.9"), "a closed unauthenticated connection still counted")
        for sock in waiting:
            sock.close()

        logged_in: list[KafkaWire] = []
        try:
            for _ in range(4):  # logged in, they no longer count as unauthenticated; the address's cap holds
                wire = KafkaWire(process.port, host="127.0.0.1")
                logged_in.append(wire)
                wire.authenticate("PLAIN", USER, SECRET)
            refused("127.0.0.1", "too many connections from 127.0.0.1: 4 open, at most 4 allowed "
                                 "(max.connections.per.ip)")
        finally:
            for wire in logged_in:
                wire.close()
        wait_until(lambda: _serves(process, "127.0.0.1"), "the address's connections were released")
        produces(process)
    finally:
        process.stop()


def _serves(process: BrokerProcess, source: str) -> bool:
    """Whether a new connection from ``source`` is admitted (answered rather than closed)."""
    with socket.create_connection(("127.0.0.1", process.port), timeout=10, source_address=(source, 0)) as sock:
        try:
            sock.sendall(api_versions())
        except (BrokenPipeError, ConnectionResetError):
            return False
        return answered(sock)




def test_a_connection_that_does_not_authenticate_in_time_is_closed(tmp_path: Path) -> None:
    process = sasl_broker(tmp_path, **{"sasl.server.authn.timeout.ms": 1000})
    try:
        logged = len(process.lines)
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", process.port), timeout=10) as idle, \
                socket.create_connection(("127.0.0.1", process.port), timeout=10) as chatty, \
                KafkaWire(process.port) as halfway:
            chatty.sendall(api_versions())  # requests that need no login do not extend the deadline
            assert answered(chatty)
            # A login begun in bare-token mode (handshake v0) and never finished is held to the same deadline.
            assert halfway.call(SaslHandshakeRequestV0(mechanism="PLAIN")).error_code == 0
            assert closed(idle) and closed(chatty) and closed(halfway.sock)
        assert time.monotonic() - started >= 1.0
        line = process.wait_for("not authenticated within", timeout=10, after=logged)
        assert "not authenticated within 1000 ms (sasl.server.authn.timeout.ms)" in line
        with KafkaWire(process.port) as wire:  # logged in before the deadline: kept past it
            with socket.create_connection(("127.0.0.1", process.port), timeout=10) as witness:
                wire.authenticate("PLAIN", USER, SECRET)
                wire.sock.sendall(api_versions())
                assert answered(wire.sock)
                assert closed(witness)  # opened before the login, closed at its deadline: the login's has passed
            wire.sock.sendall(api_versions(correlation_id=8))
            assert answered(wire.sock, correlation_id=8)
        produces(process)
    finally:
        process.stop()
