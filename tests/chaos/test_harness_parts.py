"""The chaos harness's own parts must be trustworthy before they judge the broker."""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.checker import (
    CheckResult,
    check,
    check_disappeared,
    check_duplicates,
    check_inconsistent_offsets,
    check_lost,
    check_nonmonotonic,
    check_unexpected,
    compare_replicas,
)
from tests.chaos.history import History, Op, Outcome, Read
from tests.chaos.proxy import Proxy

GUARD = 5.0  # socket timeout: a failure guard against hangs, never used to wait for something


# -- synthetic histories ------------------------------------------------------

class Builder:
    """Terse construction of histories: each call appends one completed op, in completion order."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def _add(self, op: Op) -> Op:
        op.id = len(self.ops)
        op.start = float(op.id)
        op.end = op.start + 0.5
        self.ops.append(op)
        return op

    def send(self, value: str, partition: int = 0, offset: int | None = None, outcome: Outcome = "ok") -> Op:
        return self._add(Op("producer", "send", value, partition, outcome=outcome, offset=offset))

    def poll(self, *reads: Read, process: str = "consumer") -> Op:
        return self._add(Op(process, "poll", outcome="ok", reads=list(reads)))

    def reset(self, process: str = "consumer") -> Op:
        return self._add(Op(process, "reset", outcome="ok"))

    def read(self, *reads: Read, partition: int = 0) -> Op:
        return self._add(Op("final", "read", partition=partition, outcome="ok", reads=list(reads)))


def clean() -> Builder:
    b = Builder()
    b.send("a", 0, 0)
    b.send("b", 0, 1)
    b.send("c", 1, 0)
    b.send("d", 0, None, outcome="unknown")
    b.send("e", 0, None, outcome="failed")
    b.poll((0, 0, "a"), (1, 0, "c"))
    b.poll((0, 1, "b"))
    b.read((0, 0, "a"), (0, 1, "b"), (0, 2, "e"), partition=0)
    b.read((1, 0, "c"), partition=1)
    return b


def only_problem(result: CheckResult, prefix: str) -> None:
    assert not result.ok, result
    assert result.problems and all(p.startswith(prefix) for p in result.problems), result


def test_clean_history_passes() -> None:
    result = check(clean().ops)
    assert result.ok, result
    assert result.counts["acked"] == 3
    assert result.counts["unknown"] == 1
    assert result.counts["failed"] == 1
    assert result.counts["failed_present"] == 1  # info only
    assert result.counts["read"] == 4
    assert result.counts["lost"] == 0


def test_lost_ack_is_reported() -> None:
    b = clean()
    b.send("f", 1, 1)  # acked, never in the final read
    only_problem(check_lost(b.ops), "lost: 'f'")
    assert check(b.ops).counts["lost"] == 1


def test_ack_at_wrong_offset_is_lost() -> None:
    b = Builder()
    b.send("a", 0, 5)
    b.read((0, 0, "a"))
    only_problem(check_lost(b.ops), "lost: 'a' acked at partition 0 offset 5")


def test_unknown_and_failed_sends_may_be_missing() -> None:
    b = Builder()
    b.send("a", 0, None, outcome="unknown")
    b.send("b", 0, None, outcome="failed")
    b.read()
    assert check(b.ops).ok


def test_duplicate_is_reported() -> None:
    b = Builder()
    b.send("a", 0, 0)
    b.read((0, 0, "a"), (0, 1, "a"))
    only_problem(check_duplicates(b.ops), "duplicate: 'a'")
    assert not check(b.ops).ok


def test_offset_with_two_values_is_reported() -> None:
    b = Builder()
    b.send("a", 0, 0)
    b.send("b", 0, 0)  # two acks for one offset
    b.read((0, 0, "a"))
    only_problem(check_inconsistent_offsets(b.ops), "inconsistent offset: partition 0 offset 0")


def test_poll_disagreeing_with_final_read_is_inconsistent_and_disappeared() -> None:
    b = Builder()
    b.send("a", 0, 0)
    b.send("b", 0, None, outcome="unknown")
    b.poll((0, 0, "b"))
    b.read((0, 0, "a"))
    assert not check_inconsistent_offsets(b.ops).ok
    only_problem(check_disappeared(b.ops), "disappeared: 'b'")


def test_nonmonotonic_poll_is_reported() -> None:
    b = clean()
    b.poll((0, 0, "a"))  # consumer goes back to offset 0 without a reset
    only_problem(check_nonmonotonic(b.ops), "nonmonotonic: consumer read partition 0 offset 0")


def test_nonmonotonic_within_one_poll() -> None:
    b = Builder()
    b.send("a", 0, 0)
    b.send("b", 0, 1)
    b.poll((0, 1, "b"), (0, 0, "a"))
    b.read((0, 0, "a"), (0, 1, "b"))
    only_problem(check(b.ops), "nonmonotonic")


def test_reset_restarts_monotonic_tracking_per_process() -> None:
    b = clean()
    b.reset()
    b.poll((0, 0, "a"))
    b.poll((0, 0, "a"), process="other")  # other consumers are tracked separately
    assert check(b.ops).ok


def test_disappeared_read_is_reported() -> None:
    b = Builder()
    b.send("a", 0, 0)
    b.send("b", 0, None, outcome="unknown")
    b.poll((0, 0, "a"), (0, 1, "b"))
    b.read((0, 0, "a"))  # "b" was visible to a consumer, then truncated away
    only_problem(check(b.ops), "disappeared: 'b' polled at partition 0 offset 1")


def test_unexpected_value_is_reported() -> None:
    b = clean()
    b.ops[-1].reads.append((1, 1, "zzz"))
    only_problem(check_unexpected(b.ops), "unexpected: 'zzz'")


def test_missing_final_read_fails() -> None:
    b = Builder()
    b.send("a", 0, 0)
    assert not check(b.ops).ok


def test_compare_replicas() -> None:
    same = [(0, 4, 1, 0xAA), (5, 9, 2, 0xBB)]
    assert compare_replicas({1: same, 2: list(same), 3: list(same)}) == []
    diverged = compare_replicas({1: same, 2: [(0, 4, 1, 0xAA), (5, 9, 3, 0xCC)], 3: list(same)})
    assert len(diverged) == 1 and diverged[0].startswith("broker 2 diverges from broker 1 at batch 1"), diverged
    short = compare_replicas({1: same[:1], 2: same, 3: same})
    assert len(short) == 1 and short[0].startswith("broker 1 has 1 batches, broker 2 has 2"), short


# -- history file -------------------------------------------------------------

def test_history_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with History(path) as history:
        sent = history.invoke("p1", "send", "v1", 0)
        history.note("cut proxy broker-2")
        pending = history.invoke("p1", "send", "v2", 1)
        polled = history.invoke("c1", "poll")
        failed = history.invoke("p2", "send", "v3", 0)
        history.complete(sent, "ok", offset=7)
        history.complete(polled, "ok", reads=[(0, 7, "v1")])
        history.complete(failed, "failed", error="NOT_LEADER")
        with pytest.raises(ValueError):
            history.complete(sent, "ok", offset=8)
        ops = history.ops()
        notes = history.notes()
    assert ops[pending].pending and ops[pending].outcome == "unknown"
    end = ops[sent].end
    assert end is not None and end >= ops[sent].start
    loaded = History.load(path)
    assert loaded.ops() == ops
    assert loaded.notes() == notes and notes[0].text == "cut proxy broker-2"


def test_history_load_tolerates_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with History(path) as history:
        history.invoke("p1", "send", "v1", 0)
    with path.open("a") as f:
        f.write('{"type": "comp')
    assert len(History.load(path).ops()) == 1


def test_history_is_thread_safe(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    history = History(path)

    def worker(n: int) -> None:
        for i in range(200):
            history.complete(history.invoke(f"p{n}", "send", f"{n}-{i}", 0), "ok", offset=i)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    history.close()
    ops = History.load(path).ops()
    assert len(ops) == 800 and all(op.outcome == "ok" for op in ops)
    assert ops == history.ops()


# -- proxy --------------------------------------------------------------------

class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        try:
            while data := self.request.recv(65536):
                self.request.sendall(data)
        except OSError:
            pass  # reset by the proxy's cut()


class _EchoServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # socketserver's default of 5 resets some of twenty simultaneous connects


@pytest.fixture
def echo() -> Iterator[int]:
    server = _EchoServer(("127.0.0.1", 0), _Echo)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()
    thread.join(GUARD)


@pytest.fixture
def proxy(echo: int) -> Iterator[Proxy]:
    with Proxy("127.0.0.1", echo) as p:
        yield p


def connect(proxy: Proxy) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=GUARD)
    sock.settimeout(GUARD)
    return sock


def roundtrip(sock: socket.socket, payload: bytes) -> bytes:
    sock.sendall(payload)
    got = b""
    while len(got) < len(payload):
        chunk = sock.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def assert_refused(proxy: Proxy) -> None:
    """A new connection through a cut proxy dies at once (the reset may even beat the handshake)."""
    try:
        sock = connect(proxy)
    except ConnectionResetError:
        return
    with sock:
        assert_dead(sock)


def assert_dead(sock: socket.socket) -> None:
    """The proxy closed this connection: recv sees EOF or a reset, promptly."""
    try:
        sock.sendall(b"ping")
    except OSError:
        return
    with contextlib.suppress(ConnectionResetError):
        assert sock.recv(16) == b""


def test_proxy_forwards_cuts_and_heals(proxy: Proxy) -> None:
    assert proxy.address == f"127.0.0.1:{proxy.port}"
    with connect(proxy) as old:
        assert roundtrip(old, b"hello") == b"hello"
        proxy.cut()
        assert proxy.is_cut and proxy.connection_count == 0
        assert_dead(old)
    assert_refused(proxy)
    proxy.heal()
    assert not proxy.is_cut
    with connect(proxy) as fresh:
        assert roundtrip(fresh, b"again") == b"again"


def test_cut_also_resets_the_upstream_side() -> None:
    # A bare listener stands in for the broker so the test can watch the upstream socket.
    with socket.create_server(("127.0.0.1", 0)) as server, Proxy("127.0.0.1", server.getsockname()[1]) as proxy:
        server.settimeout(GUARD)
        with connect(proxy) as client:
            upstream, _ = server.accept()
            with upstream:
                upstream.settimeout(GUARD)
                client.sendall(b"x")
                assert upstream.recv(1) == b"x"
                proxy.cut()
                assert_dead(upstream)


def test_proxy_many_connections_and_large_payloads(proxy: Proxy) -> None:
    payload = bytes(range(256)) * 8192  # 2 MiB: exercises partial sends and backpressure
    socks = [connect(proxy) for _ in range(20)]
    errors: list[BaseException] = []

    def run(sock: socket.socket) -> None:
        try:
            assert roundtrip(sock, payload) == payload
        except BaseException as exc:  # surfaced to the test thread below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in socks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(GUARD * 2)
    for s in socks:
        s.close()
    assert not errors, errors


def test_proxy_half_close_passes_through(proxy: Proxy) -> None:
    with connect(proxy) as sock:
        sock.sendall(b"bye")
        sock.shutdown(socket.SHUT_WR)
        got = b""
        while chunk := sock.recv(16):
            got += chunk
        assert got == b"bye"  # echoed, then the server's EOF arrived through the proxy


def test_proxy_delay(proxy: Proxy) -> None:
    proxy.delay_ms = 100
    with connect(proxy) as sock:
        began = time.monotonic()
        assert roundtrip(sock, b"slow") == b"slow"
        assert time.monotonic() - began >= 0.2  # delayed once each way


def test_unreachable_target_fails_fast() -> None:
    from sluice.embedded import free_port

    with Proxy("127.0.0.1", free_port()) as proxy:
        try:
            sock = connect(proxy)
        except ConnectionResetError:
            return  # the reset can beat the handshake's completion: failing fast all the same
        with sock:
            assert_dead(sock)


def test_stop_joins_thread_and_closes_listener(echo: int) -> None:
    proxy = Proxy("127.0.0.1", echo).start()
    port = proxy.port
    with connect(proxy) as sock:
        assert roundtrip(sock, b"x") == b"x"
        proxy.stop()
        assert_dead(sock)
    assert not any(t.name == f"chaos-proxy:{port}" for t in threading.enumerate())
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=GUARD).close()


def test_cut_and_heal_before_start() -> None:
    proxy = Proxy("127.0.0.1", 1)
    proxy.cut()
    assert proxy.is_cut
    proxy.heal()
    assert not proxy.is_cut
    proxy.stop()


def test_replay_rechecks_a_history_file(tmp_path: Path) -> None:
    from tests.chaos.replay import main

    path = tmp_path / "h.jsonl"
    with History(path) as history:
        sent = history.invoke("p", "send", "v1", 0)
        history.complete(sent, "ok", offset=0)
        history.note("kill broker 2")
        final = history.invoke("final", "read")
        history.complete(final, "ok", reads=[])  # v1 acknowledged but absent: lost
    assert main([str(path)]) == 1
    assert main([str(tmp_path / "missing.jsonl")]) == 2
