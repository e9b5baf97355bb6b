"""A cuttable TCP proxy: the network-partition knob of the chaos tests.

Every link we want to break (client -> broker, replica fetcher -> leader,
broker -> Postgres) is routed through a ``Proxy``; ``cut()`` severs it and
``heal()`` restores it. One thread runs a ``selectors`` loop over non-blocking
sockets, so many connections forward with low latency, and every socket
mutation happens on that thread: ``cut()`` / ``heal()`` / ``stop()`` post a
command and wait until the loop has executed it, which is what makes them
synchronous (no byte is forwarded on an old connection once ``cut()`` returns).
"""

from __future__ import annotations

import contextlib
import errno
import selectors
import socket
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from types import TracebackType
from typing import Self

_CHUNK = 64 * 1024
_HIGH_WATER = 1024 * 1024  # stop reading a side while this much is queued for the other
_COMMAND_TIMEOUT = 10.0


def _reset(sock: socket.socket) -> None:
    """Close with RST (SO_LINGER 0): the peer fails fast instead of seeing a polite FIN, and no TIME_WAIT."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@dataclass(eq=False)
class _Flow:
    """One direction of a forwarded connection: bytes read from ``src`` queued for ``dst``."""

    src: socket.socket
    dst: socket.socket
    chunks: deque[tuple[float, bytes]] = field(default_factory=deque)  # (due monotonic time, data)
    buffered: int = 0
    eof: bool = False  # src sent FIN
    shut: bool = False  # FIN passed on to dst


@dataclass(eq=False)
class _Conn:
    client: socket.socket
    upstream: socket.socket
    up: _Flow
    down: _Flow
    connecting: bool = True
    closed: bool = False

    def flows(self) -> tuple[_Flow, _Flow]:
        return self.up, self.down


class Proxy:
    """Forward ``127.0.0.1:port`` to ``target_host:target_port`` until cut.

    ``delay_ms`` adds latency to each forwarded chunk (may be changed at any time).
    """

    def __init__(self, target_host: str, target_port: int, listen_port: int = 0, *,
                 unix_path: str | None = None) -> None:
        """``unix_path``: forward to this Unix socket instead (an embedded Postgres listens on one)."""
        self.target = (target_host, target_port)
        self.unix_path = unix_path
        self.listen_port = listen_port
        self.delay_ms = 0
        self._cut = False
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._selector: selectors.BaseSelector | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._commands: deque[tuple[str, threading.Event]] = deque()
        self._commands_lock = threading.Lock()
        self._conns: set[_Conn] = set()
        self._interest: dict[socket.socket, int] = {}
        self._running = False

    # -- public API ---------------------------------------------------------

    @property
    def port(self) -> int:
        if self._listener is None:
            raise RuntimeError("proxy not started")
        return int(self._listener.getsockname()[1])

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def is_cut(self) -> bool:
        return self._cut

    @property
    def connection_count(self) -> int:
        """Open forwarded connections (for tests and diagnostics)."""
        return len(self._conns)

    def start(self) -> Self:
        """Bind now (so ``port`` is known on return) and forward on a daemon thread."""
        if self._thread is not None:
            raise RuntimeError("proxy already started")
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.listen_port))
        listener.listen(512)
        listener.setblocking(False)
        self._listener = listener
        self._selector = selectors.DefaultSelector()
        self._selector.register(listener, selectors.EVENT_READ, None)
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._running = True
        self._thread = threading.Thread(target=self._loop, name=f"chaos-proxy:{self.port}", daemon=True)
        self._thread.start()
        return self

    def cut(self) -> None:
        """Reset every forwarded connection and refuse new ones until ``heal()``."""
        self._command("cut")

    def heal(self) -> None:
        """Forward new connections again (connections reset by ``cut()`` stay dead)."""
        self._command("heal")

    def stop(self) -> None:
        """Close every connection and the listener, and join the thread."""
        thread = self._thread
        if thread is None or not thread.is_alive():
            self._close_control()
            return
        self._command("stop")
        thread.join(_COMMAND_TIMEOUT)
        if thread.is_alive():
            raise RuntimeError("proxy thread did not stop")
        self._close_control()

    def __enter__(self) -> Self:
        return self.start() if self._thread is None else self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- control plumbing ---------------------------------------------------

    def _command(self, name: str) -> None:
        thread = self._thread
        if thread is None or not thread.is_alive():
            self._apply_flag(name)
            return
        done = threading.Event()
        with self._commands_lock:
            self._commands.append((name, done))
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        if not done.wait(_COMMAND_TIMEOUT):
            raise RuntimeError(f"proxy loop did not execute {name!r}")

    def _apply_flag(self, name: str) -> None:
        if name == "cut":
            self._cut = True
        elif name == "heal":
            self._cut = False

    def _close_control(self) -> None:
        for sock in (self._wake_r, self._wake_w):
            sock.close()

    def _run_commands(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while self._wake_r.recv(4096):
                pass
        while True:
            with self._commands_lock:
                if not self._commands:
                    return
                name, done = self._commands.popleft()
            self._apply_flag(name)
            if name in ("cut", "stop"):
                for conn in list(self._conns):
                    self._close(conn)
            if name == "stop":
                self._running = False
            done.set()

    # -- the loop -----------------------------------------------------------

    def _loop(self) -> None:
        assert self._selector is not None and self._listener is not None
        try:
            while self._running:
                for key, mask in self._selector.select(self._timeout()):
                    if key.fileobj is self._wake_r:
                        continue  # commands run below, after this batch
                    if key.fileobj is self._listener:
                        self._accept()
                    elif not key.data.closed:
                        self._on_event(key.data, key.fileobj, mask)  # type: ignore[arg-type]
                self._run_commands()
                self._flush_due()
        finally:
            for conn in list(self._conns):
                self._close(conn)
            self._selector.close()
            self._listener.close()
            # Release anyone still waiting on a command posted after the loop ended.
            with self._commands_lock:
                while self._commands:
                    self._commands.popleft()[1].set()

    def _timeout(self) -> float | None:
        """Sleep until the earliest delayed chunk is due, or indefinitely (due chunks wait on EVENT_WRITE)."""
        now = time.monotonic()
        due = [flow.chunks[0][0] for conn in self._conns for flow in conn.flows()
               if flow.chunks and flow.chunks[0][0] > now]
        return min(due) - now if due else None

    def _accept(self) -> None:
        assert self._listener is not None and self._selector is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            if self._cut:
                _reset(client)
                continue
            client.setblocking(False)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            upstream = socket.socket(socket.AF_UNIX if self.unix_path else socket.AF_INET, socket.SOCK_STREAM)
            upstream.setblocking(False)
            if not self.unix_path:
                upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            err = upstream.connect_ex(self.unix_path or self.target)
            if err not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK):
                _reset(client)
                upstream.close()
                continue
            conn = _Conn(client, upstream, _Flow(client, upstream), _Flow(upstream, client), connecting=err != 0)
            self._conns.add(conn)
            self._update(conn)

    def _on_event(self, conn: _Conn, sock: socket.socket, mask: int) -> None:
        try:
            if conn.connecting and sock is conn.upstream:
                if not mask & selectors.EVENT_WRITE:
                    return
                if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    self._close(conn)
                    return
                conn.connecting = False
            elif mask & selectors.EVENT_READ:
                self._read(conn, conn.up if sock is conn.client else conn.down)
            if not conn.closed and mask & selectors.EVENT_WRITE:
                self._write(conn.down if sock is conn.client else conn.up)
        except OSError:
            self._close(conn)
            return
        self._finish_or_update(conn)

    def _read(self, conn: _Conn, flow: _Flow) -> None:
        try:
            data = flow.src.recv(_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        if data:
            due = time.monotonic() + self.delay_ms / 1000 if self.delay_ms > 0 else 0.0
            flow.chunks.append((due, data))
            flow.buffered += len(data)
        else:
            flow.eof = True
        if not conn.connecting:
            self._write(flow)  # opportunistic: most chunks go straight through without another select round

    def _write(self, flow: _Flow) -> None:
        now = time.monotonic()
        while flow.chunks and flow.chunks[0][0] <= now:
            due, data = flow.chunks[0]
            try:
                sent = flow.dst.send(data)
            except (BlockingIOError, InterruptedError):
                return
            flow.buffered -= sent
            if sent < len(data):
                flow.chunks[0] = (due, data[sent:])
                return
            flow.chunks.popleft()
        if flow.eof and not flow.chunks and not flow.shut:
            flow.shut = True
            with contextlib.suppress(OSError):
                flow.dst.shutdown(socket.SHUT_WR)

    def _flush_due(self) -> None:
        """Send delayed chunks whose time has come."""
        for conn in list(self._conns):
            if conn.closed or conn.connecting:
                continue
            try:
                for flow in conn.flows():
                    self._write(flow)
            except OSError:
                self._close(conn)
                continue
            self._finish_or_update(conn)

    def _finish_or_update(self, conn: _Conn) -> None:
        if conn.closed:
            return
        if conn.up.shut and conn.down.shut:
            self._close(conn, graceful=True)
        else:
            self._update(conn)

    def _update(self, conn: _Conn) -> None:
        """Recompute which events each socket of ``conn`` waits for."""
        assert self._selector is not None
        now = time.monotonic()
        for sock, inbound, outbound in ((conn.client, conn.up, conn.down), (conn.upstream, conn.down, conn.up)):
            events = 0
            if conn.connecting:
                events = selectors.EVENT_WRITE if sock is conn.upstream else 0
            else:
                if not inbound.eof and inbound.buffered < _HIGH_WATER:
                    events |= selectors.EVENT_READ
                if outbound.chunks and outbound.chunks[0][0] <= now:
                    events |= selectors.EVENT_WRITE
            if events != self._interest.get(sock):
                self._interest[sock] = events
                if events:
                    try:
                        self._selector.modify(sock, events, conn)
                    except KeyError:
                        self._selector.register(sock, events, conn)
                else:
                    with contextlib.suppress(KeyError):
                        self._selector.unregister(sock)

    def _close(self, conn: _Conn, graceful: bool = False) -> None:
        if conn.closed:
            return
        conn.closed = True
        self._conns.discard(conn)
        assert self._selector is not None
        for sock in (conn.client, conn.upstream):
            if self._interest.pop(sock, 0):
                with contextlib.suppress(KeyError, ValueError, OSError):
                    self._selector.unregister(sock)
            if graceful:
                sock.close()
            else:
                _reset(sock)
