"""The worker ↔ runner channel: JSON objects, one per line, over a Unix socket pair.

The worker sends ``{"op": "run", "run": id, ...}``, ``{"op": "cancel", "run": id}`` and ``{"op": "stop"}``;
the runner answers ``{"event": "ready"}`` once, then per run ``progress`` events and one ``done`` or
``failed``. A line is at most ``MAX_LINE`` bytes: a peer that sends more is a broken peer, and the channel
ends. Thread-safety: ``send`` takes a lock (task threads and watch threads share a channel); ``receive`` has
one caller, the owner's reader thread.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from typing import Any

MAX_LINE = 64 * 1024 * 1024


class ChannelClosed(Exception):
    """The other end is gone (EOF, a reset, or a line that does not decode)."""


class Channel:
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._reader = sock.makefile("rb", buffering=1 << 16)
        self._lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, separators=(",", ":")).encode() + b"\n"
        with self._lock:
            try:
                self._sock.sendall(data)
            except OSError as e:
                raise ChannelClosed(str(e)) from None

    def receive(self) -> dict[str, Any]:
        try:
            line = self._reader.readline(MAX_LINE + 1)
        except OSError as e:
            raise ChannelClosed(str(e)) from None
        if not line or not line.endswith(b"\n"):
            raise ChannelClosed("end of stream")
        try:
            message = json.loads(line)
        except ValueError:
            raise ChannelClosed("a message that is not JSON") from None
        if not isinstance(message, dict):
            raise ChannelClosed("a message that is not an object")
        return message

    def close(self) -> None:
        for close in (self._reader.close, self._sock.close):
            with contextlib.suppress(OSError):
                close()
