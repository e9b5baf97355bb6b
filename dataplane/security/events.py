"""Counting a broker's security failures (SASL failures, ACL denials) for the control plane's audit trail, and
its successful SASL logins by credential username (an API key id) for the key's ``last_used_at``.

A flood must cost neither memory nor the metadata store much: events are counted per (kind, principal,
detail, host) in a dict of at most ``MAX_KEYS`` keys per interval; past that, a principal's further
events go into one "(more)" key, and past twice that into one for everybody. ``drain`` hands the counts
over and starts a new interval; the broker writes them to the metadata store every few seconds.

Logins are kept apart, one entry per username (at most ``MAX_LOGINS`` per interval; more are dropped until the
next one), so a flood of failures never crowds out the record of who logged in. They travel as events of kind
``SASL_OK`` with the username as ``detail`` (no principal or host: the control plane needs only which key).

Owned by the ``Broker``; ``sasl_failed``/``denied``/``authenticated`` are called on its event loop, ``drain`` too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

SASL_FAILED = "sasl_failed"
ACL_DENIED = "acl_denied"
SASL_OK = "sasl_ok"
MAX_KEYS = 500
MAX_LOGINS = 10_000
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

    def __init__(self, max_keys: int = MAX_KEYS, max_logins: int = MAX_LOGINS) -> None:
        self._max_keys = max_keys
        self._max_logins = max_logins
        self._counts: dict[tuple[str, str, str, str], list[float]] = {}  # key -> [count, first, last]
        self._logins: dict[str, list[float]] = {}  # username -> [count, first, last]

    def authenticated(self, username: str) -> None:
        """A successful SASL login with a stored credential (SCRAM or PLAIN) named ``username``."""
        now = time.time()
        entry = self._logins.get(username)
        if entry is None:
            if len(self._logins) >= self._max_logins:
                return
            entry = self._logins[username] = [0, now, now]
        entry[0] += 1
        entry[2] = now

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
        return len(self._counts) + len(self._logins)

    def drain(self) -> list[SecurityEvent]:
        counts, self._counts = self._counts, {}
        logins, self._logins = self._logins, {}
        return [*(SecurityEvent(kind, principal, detail, host, int(c), first, last)
                  for (kind, principal, detail, host), (c, first, last) in counts.items()),
                *(SecurityEvent(SASL_OK, "", username, "", int(c), first, last)
                  for username, (c, first, last) in logins.items())]
