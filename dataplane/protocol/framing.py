"""Kafka's TCP framing, sans-IO: a 4-byte big-endian size, then that many bytes.

The decoder checks a frame's announced size against the connection's limit
(``socket.request.max.bytes``; ``sasl.server.max.receive.size`` until a SASL
client has authenticated) *before* buffering it, so a peer cannot make the
broker allocate memory by lying about a length. The limit may change between
two frames (``max_frame_bytes``); ``frames`` checks each frame's size only when
the caller asks for that frame, so a request handled before it can raise the
limit for the frames that follow it in the same chunk (a login, then a large
request).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

SIZE = struct.Struct(">i")
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes
# Pieces of a frame smaller than this are copied into one buffer rather than kept as views of the chunks they
# came in: a peer trickling a frame a byte per segment would otherwise cost ~200 bytes of views per byte.
COALESCE_BELOW = 16 * 1024


class RemoteProtocolError(Exception):
    """The peer sent bytes that break the protocol; close that connection, nothing else."""


class FrameTooLarge(RemoteProtocolError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class FrameDecoder:
    """Turns a byte stream into complete frames (payloads without the size prefix).

    Single-threaded; one instance per connection. Frames come back as ``bytes``
    (immutable), which is what the schema readers require. Each payload byte is
    copied once: a frame inside one received chunk is sliced out of it, and a
    frame spread over several is kept as views of those chunks and joined when
    complete (no growing buffer re-copied as a multi-MiB produce or fetch arrives).
    Small pieces (under ``COALESCE_BELOW``) are copied into a buffer instead, so what a
    partial frame holds stays within a small constant of its bytes however it is cut up.
    ``feed`` takes ``bytes`` (immutable), so the views stay valid.
    """

    __slots__ = ("_have", "_head", "_max_frame_bytes", "_parts", "_wanted")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._max_frame_bytes = max_frame_bytes
        self._head = bytearray()  # a size prefix received in pieces
        self._wanted = -1  # size of the frame being collected, -1 while reading a size
        self._parts: list[memoryview | bytearray] = []  # the frame's bytes received so far
        self._have = 0

    @property
    def buffered(self) -> int:
        return len(self._head) + self._have

    @property
    def max_frame_bytes(self) -> int:
        return self._max_frame_bytes

    @max_frame_bytes.setter
    def max_frame_bytes(self, limit: int) -> None:
        """Applies to frames whose size has not been read yet (one being collected was checked already)."""
        self._max_frame_bytes = limit

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return every frame they complete, in order."""
        return list(self.frames(data))

    def frames(self, data: bytes) -> Iterator[bytes]:
        """Add received bytes; yield every frame they complete, in order, checking each frame's size against
        the limit in force when the caller asks for it. Iterate to the end before the next call."""
        view = memoryview(data)
        pos, end = 0, len(view)
        while pos < end or self._wanted == 0:
            if self._wanted < 0:
                if not self._head and end - pos >= SIZE.size:
                    (size,) = SIZE.unpack_from(view, pos)
                    pos += SIZE.size
                else:
                    take = min(SIZE.size - len(self._head), end - pos)
                    self._head += view[pos : pos + take]
                    pos += take
                    if len(self._head) < SIZE.size:
                        break
                    (size,) = SIZE.unpack(self._head)
                    self._head.clear()
                if size < 0:
                    raise RemoteProtocolError(f"negative frame size {size}")
                if size > self._max_frame_bytes:
                    raise FrameTooLarge(size, self._max_frame_bytes)
                self._wanted = size
            take = min(self._wanted - self._have, end - pos)
            if not self._parts and take == self._wanted:
                whole = bytes(view[pos : pos + take])  # the whole frame is in this chunk
            else:
                self._collect(view[pos : pos + take])
                if self._have < self._wanted:
                    break
                whole = b"".join(self._parts)
                self._parts, self._have = [], 0
            pos += take
            self._wanted = -1
            yield whole

    def _collect(self, piece: memoryview) -> None:
        if len(piece) >= COALESCE_BELOW:
            self._parts.append(piece)
        elif self._parts and isinstance(self._parts[-1], bytearray):
            self._parts[-1] += piece
        else:
            self._parts.append(bytearray(piece))
        self._have += len(piece)


def frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload
