"""TLS for a client connection without giving up the socket: ``ssl.SSLObject`` over two ``ssl.MemoryBIO``s.

The connection (``server.connection``) owns a raw non-blocking socket so that Fetch record data can go out
with ``os.sendfile``; an ``ssl.SSLSocket`` or an asyncio transport would take the socket away. Sans-IO TLS
keeps it: ciphertext read from the socket is fed in here and comes back as plaintext, plaintext to send is
encrypted here and the connection writes the ciphertext itself. Nothing in this module touches a socket.

The contexts it is built from are ``dataplane.security.tls``'s.
"""

from __future__ import annotations

import contextlib
import ssl

from dataplane.protocol.framing import RemoteProtocolError

READ_BYTES = 64 * 1024  # plaintext per SSLObject.read call (a TLS record carries at most 16 KiB)
RECORD_HEADER = 5  # content type, protocol version, length


class TlsError(RemoteProtocolError):
    """The peer's TLS is unusable (a failed handshake, plaintext on a TLS port, a torn stream): close it."""


class TlsSession:
    """The server side of one connection's TLS: ciphertext in, plaintext out, and the reverse.

    Owned by one ``Connection`` and used only from its event loop. Whatever the session wants sent (its
    handshake messages, alerts, encrypted responses) waits in ``outgoing`` until the connection takes it
    with ``ciphertext()``; ciphertext must leave in the order it was taken (TLS records are numbered).
    """

    __slots__ = ("_header", "_incoming", "_outgoing", "_record_left", "_tls", "closed", "established")

    def __init__(self, context: ssl.SSLContext) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self.established = False  # the handshake has completed
        self.closed = False  # the peer sent close_notify
        # Where the peer's ciphertext stands in TLS's record framing (a 5-byte header: type, version, length),
        # so an end of stream inside a record can be told from one between records.
        self._header = b""
        self._record_left = 0

    def receive(self, data: bytes) -> bytes:
        """Feed ciphertext read from the socket; the plaintext it completes (often b'': a partial record, or
        handshake messages only). Raises TlsError when the peer's bytes are not TLS we accept. Anything after
        the peer's close_notify is ignored."""
        if self.closed:
            return b""
        self._incoming.write(data)
        self._follow_records(data)
        try:
            if not self.established:
                try:
                    self._tls.do_handshake()
                except ssl.SSLWantReadError:
                    return b""
                self.established = True
            return self._read()
        except ssl.SSLError as exc:
            raise TlsError(_describe(exc)) from None

    def end_of_stream(self) -> str | None:
        """The socket reached EOF: why that is wrong (no close_notify; mid-record), or None for a clean close."""
        if self.closed:
            return None
        if not self.established:
            return "the client closed the connection during the TLS handshake"
        if self._record_left or self._header:
            return "the TLS stream was torn: it ended inside a record"
        return None  # Kafka clients close TCP without close_notify; between records that loses nothing

    def encrypt(self, data: bytes | bytearray | memoryview) -> bytes:
        """``data`` as TLS records, together with anything else waiting to be sent (in order).

        After the peer's close_notify (answered with ours) nothing more can be sent: a response still on its way
        to a client that closed is dropped, as a write to a closed socket would be, not reported as a TLS failure.
        """
        if data and not self.closed:
            try:
                self._tls.write(data)
            except ssl.SSLError as exc:
                raise TlsError(_describe(exc)) from None
        return self._outgoing.read()

    def ciphertext(self) -> bytes:
        """What the session has to send of its own (handshake messages, alerts, session tickets)."""
        return self._outgoing.read()

    @property
    def has_ciphertext(self) -> bool:
        return self._outgoing.pending > 0

    def _follow_records(self, data: bytes) -> None:
        position, end = 0, len(data)
        while position < end:
            if self._record_left:
                step = min(self._record_left, end - position)
                self._record_left -= step
                position += step
                continue
            take = RECORD_HEADER - len(self._header)
            self._header += data[position:position + take]
            position += take
            if len(self._header) == RECORD_HEADER:
                self._record_left = int.from_bytes(self._header[3:5], "big")
                self._header = b""

    def _read(self) -> bytes:
        chunks: list[bytes] = []
        while True:
            try:
                chunk = self._tls.read(READ_BYTES)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                chunk = b""
            if not chunk:  # the peer's close_notify: answer with ours, which waits in ``outgoing``
                self.closed = True
                with contextlib.suppress(ssl.SSLError):
                    self._tls.unwrap()
                break
            chunks.append(chunk)
        return b"".join(chunks)


def _describe(exc: ssl.SSLError) -> str:
    reason = exc.reason or exc.strerror or str(exc)
    if reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "RECORD_LAYER_FAILURE", "PACKET_LENGTH_TOO_LONG"):
        return f"not a TLS client (plaintext on a TLS listener?): {reason}"
    return f"TLS failed: {reason}"
