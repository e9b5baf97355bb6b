"""Counting a broker's security failures (SASL failures, ACL denials) for the control plane's audit trail.

A flood must cost neither memory nor the metadata store much: events are counted per (kind, principal,
detail, host) in a dict of at most ``MAX_KEYS`` keys per interval; past that, a principal's further
events go into one "(more)" key, and past twice that into one for everybody. ``drain`` hands the counts
over and starts a new interval; the broker writes them to the metadata store every few seconds.

Owned by the ``Broker``; ``sasl_failed``/``denied`` are called on its event loop, ``drain`` too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

SASL_FAILED = "sasl_failed"
ACL_DENIED = "acl_denied"
MAX_KEYS = 500
MORE = "(more)"


@dataclass(frozen=True, slots=True)
class SecurityEvent:
    kind: str
    principal: str
    detail: str
    host: str
    count: int
    first_at: float  # epoch seconds
    last_at: float


class SecurityEventCounter:
    """See the module docstring."""

    def __init__(self, max_keys: int = MAX_KEYS) -> None:
        self._max_keys = max_keys
        self._counts: dict[tuple[str, str, str, str], list[float]] = {}  # key -> [count, first, last]

    def sasl_failed(self, username: str | None, mechanism: str, host: str) -> None:
        self._add(SASL_FAILED, f"User:{username}" if username else "unknown", mechanism, host)

    def denied(self, principal: str, operation: str, resource_type: str, name: str, host: str) -> None:
        self._add(ACL_DENIED, principal, f"{operation} {resource_type} {name}"[:500], host)

    def _add(self, kind: str, principal: str, detail: str, host: str) -> None:
        now = time.time()
        key = (kind, principal[:300], detail, host)
        entry = self._counts.get(key)
        if entry is None:
            if len(self._counts) >= 2 * self._max_keys:
                key = (kind, "*", MORE, "*")
            elif len(self._counts) >= self._max_keys:
                key = (kind, principal[:300], MORE, "*")
            entry = self._counts.get(key)
            if entry is None:
                entry = self._counts[key] = [0, now, now]
        entry[0] += 1
        entry[2] = now

    def __len__(self) -> int:
        return len(self._counts)

    def drain(self) -> list[SecurityEvent]:
        counts, self._counts = self._counts, {}
        return [SecurityEvent(kind, principal, detail, host, int(c), first, last)
                for (kind, principal, detail, host), (c, first, last) in counts.items()]
