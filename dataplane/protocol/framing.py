"""Kafka's TCP framing, sans-IO: a 4-byte big-endian size, then that many bytes.

The decoder checks a frame's announced size against the connection limit
(``socket.request.max.bytes``) *before* buffering it, so a peer cannot make the
broker allocate memory by lying about a length.
"""

from __future__ import annotations

import struct

SIZE = struct.Struct(">i")
DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024  # Kafka's socket.request.max.bytes


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
    (immutable), which is what the schema readers require.
    """

    __slots__ = ("_buffer", "_max_frame_bytes", "_wanted")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buffer = bytearray()
        self._max_frame_bytes = max_frame_bytes
        self._wanted = -1  # size of the frame being collected, -1 while reading a size

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        """Add received bytes; return every frame they complete, in order."""
        self._buffer += data
        frames: list[bytes] = []
        while True:
            if self._wanted < 0:
                if len(self._buffer) < SIZE.size:
                    return frames
                (size,) = SIZE.unpack_from(self._buffer)
                if size < 0:
                    raise RemoteProtocolError(f"negative frame size {size}")
                if size > self._max_frame_bytes:
                    raise FrameTooLarge(size, self._max_frame_bytes)
                del self._buffer[: SIZE.size]
                self._wanted = size
            if len(self._buffer) < self._wanted:
                return frames
            frames.append(bytes(self._buffer[: self._wanted]))
            del self._buffer[: self._wanted]
            self._wanted = -1


def frame(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload
