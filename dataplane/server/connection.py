"""Client connections over plain non-blocking sockets: frames in, responses out in request order.

Requests on a connection are handled one at a time, in order, which keeps
responses in request order even for a long-polling Fetch; frames that arrived
together are decoded in one pass. One exception to "one at a time": a handler
may return ``Later`` (acks=all produce waiting for the ISR) — its work is done,
so the next request is handled while its response waits, and responses still
leave in request order (at most ``MAX_PIPELINED`` waiting per connection).

There is no asyncio transport: the connection owns its socket so that Fetch
record data can move from the segment file to the socket with ``os.sendfile``
(uvloop does not implement ``loop.sendfile``) or with ``pread`` into a reused
buffer, as the ``fetch_transfer`` setting says. Either way the record bytes
never become Python objects.

On an SSL or SASL_SSL listener the connection keeps its socket and runs TLS in memory (``server.tls``):
what it reads is decrypted before framing, what it sends is encrypted first, and Fetch record data is read
with ``pread`` into the reused buffer and encrypted (``sendfile`` would send the file's plaintext). A failed
handshake, a plaintext client or a torn stream closes that connection with a log line, like any bad frame.

Until a client on a SASL listener has authenticated, what it can make the broker hold is bounded
(``server.admission``): its frames are at most ``sasl.server.max.receive.size`` (a larger one closes the connection
before anything is buffered, as Kafka's InvalidReceiveException does), it must log in within
``sasl.server.authn.timeout.ms``, and a connection beyond ``max.unauthenticated.connections`` (or from an address at
``max.connections.per.ip``) is closed at accept. After a SaslHandshake v0 the frames until the login completes are
bare SASL tokens, not requests (``_raw_token``); they are read under the same limit and deadline.

Client quotas (``server.quotas``) are applied here, where a request's size, its response's size and its
handling time are known: a throttled response carries ``throttle_time_ms`` and goes out at once, and then the
connection reads nothing from that client until the throttle has passed (KIP-219's muted channel).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import datetime
import errno
import logging
import os
import socket
import ssl
import time
from typing import TYPE_CHECKING, Any

from kio.index import load_response_schema
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode as WireError

from dataplane.protocol.build import build
from dataplane.protocol.framing import SIZE, FrameDecoder, FrameTooLarge, RemoteProtocolError
from dataplane.protocol.messages import (
    API_VERSIONS_KEY,
    Chunk,
    Deferred,
    UnsupportedRequest,
    encode_response,
    parse_request,
)
from dataplane.server.admission import Ticket, frame_limit
from dataplane.server.apis import ANONYMOUS, REGISTRY, Later, RequestContext, SaslSession, api_name, api_version_entries
from dataplane.server.handlers.sasl import exchange
from dataplane.server.metrics import response_error
from dataplane.server.quotas import FETCH_KEY, ConnectionSlot, is_replica_fetch
from dataplane.server.tls import TlsError, TlsSession
from dataplane.storage import FileRegion

if TYPE_CHECKING:
    from dataplane.server.broker import Broker

log = logging.getLogger(__name__)

RECV_BYTES = 256 * 1024
# A response with a top-level array longer than this (Metadata or DescribeConfigs of thousands of topics) is
# encoded on a worker thread: encoding it takes hundreds of milliseconds of Python, and on the event loop every
# other connection's requests would wait that long. The thread still needs the GIL, but the loop gets it back
# every switch interval (5 ms), so small requests go on being answered meanwhile.
ENCODE_OFF_LOOP_ENTRIES = 200
MAX_PIPELINED = 16  # responses waiting on one connection before it stops reading
COPY_BUFFER_BYTES = 1024 * 1024
_RETRY = (BlockingIOError, InterruptedError)
SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY = 17, 36
FAILED_AUTHENTICATION_LINGER_SECONDS = 0.1  # Kafka's connection.failed.authentication.delay.ms default
BEFORE_AUTHENTICATION = frozenset({API_VERSIONS_KEY, SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY})
TLS_HANDSHAKE_SECONDS = 10.0  # a TLS client that has not finished its handshake by then is cut off


def unsupported_api_versions() -> ApiVersionsResponseV0:
    """KIP-511: a v0 body listing what we support, so the client can retry with a version we know."""
    return build(ApiVersionsResponseV0, {"error_code": WireError.unsupported_version,
                                         "api_keys": api_version_entries()})


class Listener:
    """Accepts connections and serves each on its own task; ``close`` stops accepting.

    Owned by ``server.app``; runs on the broker's event loop.
    """

    def __init__(self, broker: Broker, host: str, port: int, backlog: int = 1024, *,
                 security_protocol: str = "PLAINTEXT", tls: ssl.SSLContext | None = None) -> None:
        self.broker = broker
        self.security_protocol = security_protocol  # SASL_*: connections authenticate first
        self.tls = tls  # SSL and SASL_SSL: every connection speaks TLS with this context
        self.sock = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET,
                                         backlog=backlog)
        self.sock.setblocking(False)
        self.connections: dict[asyncio.Task[None], Connection] = {}
        self._accepting: asyncio.Task[None] | None = None

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.sock.getsockname()[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._accepting = asyncio.get_running_loop().create_task(self._accept_loop(), name="accept")

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, _ = await loop.sock_accept(self.sock)
            except OSError as exc:  # EMFILE and friends: keep serving the clients we have
                log.warning("accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            connection = Connection(self.broker, sock, self.security_protocol, self.tls)
            task = loop.create_task(connection.serve())
            self.connections[task] = connection
            task.add_done_callback(self._forget)

    def _forget(self, task: asyncio.Task[None]) -> None:
        self.connections.pop(task, None)

    async def close(self, grace: float) -> None:
        """Stop accepting; give connections ``grace`` seconds to answer the request in hand, then cut them.

        A connection between requests is closed at once; one in the middle of a
        request reads nothing more once ``broker.stopping`` is set.
        """
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
        self.sock.close()
        for task, connection in list(self.connections.items()):
            if not connection.busy:
                task.cancel()
        pending = list(self.connections)
        if pending:
            _, still = await asyncio.wait(pending, timeout=grace)
            for task in still:
                task.cancel()
            if still:
                await asyncio.wait(still, timeout=1)


class Connection:
    """One client: its socket, its frame decoder, and how it sends record data.

    Owned by its ``Listener``; its reading task and its sender task run on the broker's event loop.
    """

    def __init__(self, broker: Broker, sock: socket.socket, listener: str = "PLAINTEXT",
                 tls: ssl.SSLContext | None = None) -> None:
        self.broker = broker
        self.sock = sock
        self.fd = sock.fileno()
        self.loop = asyncio.get_running_loop()
        self.peer = _peer(sock)
        self.session = SaslSession(required=listener.startswith("SASL_"))
        self.session.close = self._revoke
        self.revoked = False
        self._task: asyncio.Task[Any] | None = None
        # The client id follows each request; the principal follows SASL authentication.
        self.context = RequestContext(ANONYMOUS, "", self.peer, listener, self.session)
        config = broker.config
        self.decoder = FrameDecoder(frame_limit(authenticated=not self.session.required,
                                                max_request_bytes=config.max_request_bytes,
                                                max_receive_size=config.sasl_server_max_receive_size))
        self._ticket: Ticket | None = None  # this connection, counted by the broker's Admission
        self._authn_deadline: asyncio.TimerHandle | None = None
        self.authn_timed_out = False
        self.tls = TlsSession(tls) if tls is not None else None
        # TLS encrypts in user space, so record data cannot go from the file to the socket without us.
        self.use_sendfile = broker.config.fetch_transfer == "sendfile" and self.tls is None
        self._tls_write = asyncio.Lock()  # TLS: ciphertext leaves in the order it was made
        self._copy_buffer: bytearray | None = None
        self.busy = False
        # Responses not sent yet, in request order: (response future, correlation id, api key, start, size).
        self._waiting: collections.deque[tuple[asyncio.Future[Any], int, int, float, int]] = collections.deque()
        self._sender: asyncio.Task[None] | None = None
        self._sent = asyncio.Event()
        self._slot: ConnectionSlot | None = None  # this connection, counted against its principal's cap
        self._muted_until = 0.0  # monotonic time until which a throttled client's requests are not read
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def serve(self) -> None:
        metrics = self.broker.metrics
        metrics.connection_opened()
        self._task = asyncio.current_task()
        try:
            if not self._admit():
                return
            if self.session.required:
                self._authn_deadline = self.loop.call_later(self.broker.config.sasl_server_authn_timeout_ms / 1000,
                                                            self._authn_expired)
            while not self.broker.stopping:
                await self._unmuted()
                data = await self._receive()
                if not data:
                    return
                self.busy = True
                for payload in self.decoder.frames(data):
                    await self._unmuted()
                    await self._handle(payload)
                self.busy = bool(self._waiting)
            if self._sender is not None:
                await self._sender  # stopping: answer what was accepted
        except (ConnectionError, TimeoutError):
            pass  # the client went away
        except FrameTooLarge as exc:
            if self._ticket is not None and self._ticket.unauthenticated:
                log.warning("closing connection from %s: frame of %d bytes before SASL authentication exceeds "
                            "sasl.server.max.receive.size (%d bytes)", self.peer, exc.size, exc.limit)
            else:
                log.warning("closing connection from %s: %s", self.peer, exc)
        except RemoteProtocolError as exc:
            log.warning("closing connection from %s: %s", self.peer, exc)
            if isinstance(exc, TlsError):
                self._send_alert()
        except asyncio.CancelledError:
            if self.authn_timed_out:
                log.warning("closing connection from %s: not authenticated within %d ms (sasl.server.authn.timeout.ms)",
                            self.peer, self.broker.config.sasl_server_authn_timeout_ms)
            elif self.revoked:
                log.info("closed connection from %s: its credential was revoked", self.peer)
            else:
                log.info("closing connection from %s: broker shutting down", self.peer)
        except Exception:
            log.exception("closing connection from %s after an internal error", self.peer)
        finally:
            if self._sender is not None and not self._sender.done():
                self._sender.cancel()
            if self._authn_deadline is not None:
                self._authn_deadline.cancel()
            if self._ticket is not None:
                self.broker.admission.close(self._ticket)
            if self._slot is not None:
                self.broker.quotas.connection_closed(self._slot)
            metrics.connection_closed()
            self.broker.forget(self.session)
            self.sock.close()

    async def _receive(self) -> bytes:
        """The next bytes of the request stream (b'' at its end): as read, or decrypted on a TLS listener."""
        tls = self.tls
        if tls is None:
            return await self.loop.sock_recv(self.sock, RECV_BYTES)
        while True:
            if tls.established:
                data = await self.loop.sock_recv(self.sock, RECV_BYTES)
            else:
                try:
                    data = await asyncio.wait_for(self.loop.sock_recv(self.sock, RECV_BYTES), TLS_HANDSHAKE_SECONDS)
                except TimeoutError:
                    raise TlsError(f"no TLS handshake within {TLS_HANDSHAKE_SECONDS:g} s") from None
            if not data:
                problem = tls.end_of_stream()
                if problem is not None:
                    log.warning("closing connection from %s: %s", self.peer, problem)
                return b""
            plaintext = tls.receive(data)
            if tls.has_ciphertext:  # handshake messages, session tickets
                async with self._tls_write:
                    await self._send_raw(memoryview(tls.ciphertext()))
            if plaintext or tls.closed:
                return plaintext

    def _send_alert(self) -> None:
        """Best effort: the TLS alert saying why, so the client reports it rather than a reset."""
        if self.tls is not None and self.tls.has_ciphertext:
            with contextlib.suppress(OSError):
                self.sock.send(self.tls.ciphertext())

    def _authn_expired(self) -> None:
        """``sasl.server.authn.timeout.ms`` has passed: end the connection unless it has logged in by now."""
        if self.session.principal is None and self._task is not None and not self._task.done():
            self.authn_timed_out = True
            self._task.cancel()

    def _authenticated(self) -> None:
        """The first login completed: the connection may send full-size requests and no longer counts (or is
        timed) as unauthenticated."""
        config = self.broker.config
        self.decoder.max_frame_bytes = frame_limit(authenticated=True, max_request_bytes=config.max_request_bytes,
                                                   max_receive_size=config.sasl_server_max_receive_size)
        if self._authn_deadline is not None:
            self._authn_deadline.cancel()
            self._authn_deadline = None
        if self._ticket is not None:
            self.broker.admission.authenticated(self._ticket)

    def _logged_in(self) -> str | None:
        """After a SASL step: when it completed a login, the connection takes its principal, unless that principal
        has all the connections it may have (then why)."""
        session = self.session
        if session.principal is None or session.principal == self.context.principal:
            return None
        refusal = self._count(session.principal, self._key_credential(session))
        if refusal is None:
            self.context = dataclasses.replace(self.context, principal=session.principal)
            self._authenticated()
        return refusal

    async def _raw_token(self, token: bytes) -> None:
        """A bare SASL token after SaslHandshake v0 (no request header): its answer goes back as a bare frame. The
        frame was read under the pre-authentication size limit and the login deadline, like any request before
        authentication. A failure cannot be answered in this framing, so the connection just ends, as in Kafka."""
        outcome = exchange(self.broker.owners, self.context, token)
        refusal = outcome.message if outcome.error is not None else self._logged_in()
        if refusal is not None:
            self.session.principal = None
            self.session.failed = True
            log.warning("closing connection from %s: SASL %s login (handshake v0) failed: %s", self.peer,
                        self.session.mechanism, refusal)
            await self._linger()
            raise ConnectionAbortedError("SASL authentication failed")
        await self.send([SIZE.pack(len(outcome.auth_bytes)), bytes(outcome.auth_bytes)])

    def _revoke(self) -> None:
        """End this connection now: the credential it authenticated with is gone (called on the event loop)."""
        self.revoked = True
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def _handle(self, payload: bytes) -> None:
        if self.session.raw_tokens:
            await self._raw_token(payload)
            return
        started = time.perf_counter()
        parsed = parse_request(payload)
        served = REGISTRY.get(parsed.api_key)
        if isinstance(parsed, UnsupportedRequest) or served is None or not served.supports(parsed.api_version):
            if parsed.api_key != API_VERSIONS_KEY:
                raise RemoteProtocolError(f"api key {parsed.api_key} v{parsed.api_version} is not served here")
            chunks = encode_response(parsed.correlation_id, unsupported_api_versions())
            await self.send(chunks)
            error = int(WireError.unsupported_version)
        else:
            session = self.session
            if session.required and session.principal is None and parsed.api_key not in BEFORE_AUTHENTICATION:
                # Kafka's SaslServerAuthenticator closes such a connection too.
                raise RemoteProtocolError(f"unexpected {api_name(parsed.api_key)} request from an "
                                          f"unauthenticated client on a SASL listener")
            if session.expires_at is not None and parsed.api_key not in BEFORE_AUTHENTICATION \
                    and time.monotonic() >= session.expires_at:
                # KIP-368: a session past its lifetime that did not re-authenticate is closed, as Kafka does.
                raise RemoteProtocolError(f"{api_name(parsed.api_key)} after the SASL session of "
                                          f"{session.principal} expired; re-authentication was required")
            if (parsed.client_id or "") != self.context.client_id:
                self.context = dataclasses.replace(self.context, client_id=parsed.client_id or "")
            response = await self.broker.handle(parsed, self.context)
            refusal = self._logged_in()
            if refusal is not None:
                response = self._refuse_login(parsed.api_version, refusal)
            response = self._throttled(parsed, response, SIZE.size + len(payload), started)
            if isinstance(response, Later) or self._waiting:
                await self._queue(response, parsed.correlation_id, parsed.api_key, started, SIZE.size + len(payload))
                return
            if response is None:
                chunks = []
            elif _large(response):
                chunks = await asyncio.to_thread(encode_response, parsed.correlation_id, response)
            else:
                chunks = encode_response(parsed.correlation_id, response)
            if chunks:
                await self.send(chunks)
            error = response_error(response)
            if session.failed:  # the failure's answer is out; the connection is over (Kafka's rule)
                self.broker.metrics.observe_request(parsed.api_key, error, time.perf_counter() - started,
                                                    SIZE.size + len(payload), sum(map(len, chunks)))
                await self._linger()
                raise ConnectionAbortedError("SASL authentication failed")
        self.broker.metrics.observe_request(parsed.api_key, error, time.perf_counter() - started,
                                            SIZE.size + len(payload), sum(map(len, chunks)))

    # ------------------------------------------------------------------ quotas

    def _admit(self) -> bool:
        """A new connection within its address's cap, the cap on unauthenticated connections (SASL listeners), its
        IP's creation rate and, unauthenticated, within ANONYMOUS's cap."""
        quotas = self.broker.quotas
        host = self.context.client_host
        ticket = self.broker.admission.open(host, authenticates=self.session.required)
        if isinstance(ticket, str):
            log.warning("closing connection from %s: %s", self.peer, ticket)
            return False
        self._ticket = ticket
        if not quotas.accept_ip(host):
            log.warning("closing connection from %s: connection_creation_rate quota of %s exceeded", self.peer, host)
            return False
        if not self.session.required:
            refusal = self._count(ANONYMOUS)
            if refusal is not None:
                log.warning("closing connection from %s: %s", self.peer, refusal)
                return False
        return True

    def _count(self, principal: str, credential: str | None = None) -> str | None:
        """Count this connection against ``principal``'s connection cap (and its SASL credential's); why not,
        when one is full."""
        slot = self.broker.quotas.connection_opened(principal, self.context.client_id, credential)
        if isinstance(slot, str):
            return slot
        self._slot = slot
        return None

    def _key_credential(self, session: SaslSession) -> str | None:
        """The SASL username a per-credential cap counts: a PLAIN or SCRAM login (an API key's id), never the
        brokers' own internal user nor an OAUTHBEARER token (the control plane's, already one per principal)."""
        if session.mechanism == "OAUTHBEARER" or session.username == self.broker.config.inter_broker_username:
            return None
        return session.username

    def _refuse_login(self, version: int, message: str) -> Any:
        """A completed SASL login whose principal has all the connections it may have: the client is told why
        (as a SaslAuthenticate error, which every client reports with its message) and the connection ends."""
        self.session.principal = None
        self.session.failed = True
        return build(load_response_schema(SASL_AUTHENTICATE_KEY, version), {
            "error_code": WireError.policy_violation, "error_message": message, "auth_bytes": b"",
            "session_lifetime": datetime.timedelta(0)})

    def _throttled(self, parsed: Any, response: Any, request_bytes: int, started: float) -> Any:
        """Record the request against the client's quotas; over one, the response carries the throttle time and
        the channel is muted for it (KIP-219: answer at once, then read nothing until the throttle ends)."""
        quotas = self.broker.quotas
        if not quotas.config:
            return response
        response_bytes = 0
        if parsed.api_key == FETCH_KEY and response is not None and not isinstance(response, Later):
            # The record data is what a consumer quota is about; counting it from the response's values
            # spares encoding the response twice (the rest of a response is tens of bytes a partition).
            response_bytes = sum(len(part.records or b"") for topic in response.responses
                                 for part in topic.partitions)
        seconds = quotas.record_request(parsed.api_key, self.context.principal, self.context.client_id,
                                        request_bytes=request_bytes, response_bytes=response_bytes,
                                        seconds=time.perf_counter() - started,
                                        replica_fetch=is_replica_fetch(parsed.api_key, parsed.body))
        if seconds <= 0:
            return response
        self._muted_until = max(self._muted_until, time.monotonic() + seconds)
        delay = datetime.timedelta(milliseconds=round(seconds * 1000))
        if isinstance(response, Later):
            return Later(_with_throttle_later(response.response, delay))
        return _with_throttle(response, delay)

    async def _unmuted(self) -> None:
        wait = self._muted_until - time.monotonic()
        if wait > 0 and not self.broker.stopping:
            await asyncio.sleep(wait)

    async def _linger(self) -> None:
        """Wait (briefly) for the client to close first, as Kafka delays closing after a failed authentication
        (``connection.failed.authentication.delay.ms``): a client that sees the close before it has read the
        failure's answer (kafka-python) reports a lost connection instead of the reason."""
        async def drain() -> None:
            while await self.loop.sock_recv(self.sock, RECV_BYTES):
                pass
        with contextlib.suppress(OSError, TimeoutError):
            await asyncio.wait_for(drain(), FAILED_AUTHENTICATION_LINGER_SECONDS)

    async def _queue(self, response: Any, correlation_id: int, api_key: int, started: float, size: int) -> None:
        """Send ``response`` after those before it; wait here while too many are outstanding."""
        if isinstance(response, Later):
            future: asyncio.Future[Any] = asyncio.ensure_future(response.response)
        else:
            future = self.loop.create_future()
            future.set_result(response)
        self._waiting.append((future, correlation_id, api_key, started, size))
        if self._sender is None or self._sender.done():
            self._sender = self.loop.create_task(self._send_waiting())
        while len(self._waiting) >= MAX_PIPELINED:
            self._sent.clear()
            await self._sent.wait()
            if self._sender.done():
                self._sender.result()  # a send failed: end this connection the same way

    async def _send_waiting(self) -> None:
        try:
            while self._waiting:
                future, correlation_id, api_key, started, size = self._waiting[0]
                response = await future
                chunks = [] if response is None else encode_response(correlation_id, response)
                if chunks:
                    await self.send(chunks)
                self._waiting.popleft()
                self.broker.metrics.observe_request(api_key, response_error(response), time.perf_counter() - started,
                                                    size, sum(map(len, chunks)))
                self._sent.set()
        except BaseException:
            for future, *_ in self._waiting:
                future.cancel()
            self._sent.set()
            raise

    # ------------------------------------------------------------------ writing

    async def send(self, chunks: list[Chunk]) -> None:
        """Send a response: runs of plain chunks with one sendmsg, file regions per ``fetch_transfer``."""
        run: list[bytes | memoryview] = []
        for chunk in chunks:
            if isinstance(chunk, Deferred):
                if run:
                    await self._send_buffers(run)
                    run = []
                region = chunk.source
                assert isinstance(region, FileRegion)
                await self._send_region(region)
            elif chunk:
                run.append(chunk)
        if run:
            await self._send_buffers(run)

    async def _send_buffers(self, buffers: list[bytes | memoryview]) -> None:
        # One join (a copy in C) beats a memoryview and an iovec per chunk: a large answer -- DescribeConfigs of a
        # thousand topics -- is hundreds of thousands of small chunks, and wrapping each cost more than the work.
        data = buffers[0] if len(buffers) == 1 else b"".join(buffers)
        if self.tls is not None:
            async with self._tls_write:
                await self._send_raw(memoryview(self.tls.encrypt(data)))
            return
        await self._send_raw(memoryview(data))

    async def _send_raw(self, view: memoryview) -> None:
        while view:
            try:
                sent = self.sock.send(view)
            except _RETRY:
                await self._writable()
                continue
            view = view[sent:]

    async def _send_region(self, region: FileRegion) -> None:
        position, end = region.position, region.position + region.length
        if self.use_sendfile:
            while position < end:
                try:
                    sent = os.sendfile(self.fd, region.fd, position, end - position)
                except _RETRY:
                    await self._writable()
                    continue
                if sent == 0:  # the file got shorter (truncation): the length prefix is already out
                    raise ConnectionError("file region shrank while being sent")
                position += sent
            return
        if self._copy_buffer is None:
            self._copy_buffer = bytearray(COPY_BUFFER_BYTES)
        view = memoryview(self._copy_buffer)
        while position < end:
            got = os.preadv(region.fd, [view[: min(len(view), end - position)]], position)
            if got == 0:
                raise ConnectionError("file region shrank while being sent")
            await self._send_buffers([view[:got]])
            position += got

    async def _writable(self) -> None:
        waiter = self.loop.create_future()

        def ready() -> None:
            if not waiter.done():
                waiter.set_result(None)

        self.loop.add_writer(self.fd, ready)
        try:
            await waiter
        finally:
            self.loop.remove_writer(self.fd)


def _with_throttle(response: Any, delay: datetime.timedelta) -> Any:
    if response is None or not hasattr(response, "throttle_time"):
        return response
    return dataclasses.replace(response, throttle_time=delay)


async def _with_throttle_later(response: Any, delay: datetime.timedelta) -> Any:
    return _with_throttle(await response, delay)


def _peer(sock: socket.socket) -> str:
    try:
        host, port = sock.getpeername()[:2]
        return f"{host}:{port}"
    except OSError as exc:
        return f"<{errno.errorcode.get(exc.errno or 0, 'unknown')}>"


def _large(response: Any) -> bool:
    """Whether the response has a top-level array longer than ``ENCODE_OFF_LOOP_ENTRIES`` (kio entities are
    dataclasses; the check reads only their top-level fields)."""
    return any(isinstance(value, tuple) and len(value) > ENCODE_OFF_LOOP_ENTRIES
               for value in (getattr(response, f.name) for f in dataclasses.fields(response)))
