"""The broker's client quota enforcement: rates per quota scope, throttle times, connection counts.

Kafka's way (KIP-13/55/124/219, with KIP-599's token bucket): every Produce records its request bytes, every
consumer Fetch its response bytes, every request its handling time, against the quota of the scope the client's
quota entity names (a user's quota is shared by all of its clients; a default user quota gives each user its
own). Over the bound, the response
carries ``throttle_time_ms`` and is sent at once, and the connection reads nothing more from that client until
the throttle time has passed (the channel is muted), so a client that ignores the hint is held anyway.

Owned by the ``Broker``; used on its event loop only. ``update`` swaps the quota snapshot whole.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dataplane.security.quotas import (
    CONSUMER_BYTE_RATE,
    MAX_CONNECTIONS,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    Entity,
    QuotaConfig,
    Rate,
    TokenBucket,
    Window,
    user_name,
)

log = logging.getLogger(__name__)

PRODUCE_KEY, FETCH_KEY = 0, 1
MAX_TRACKED = 10_000  # scopes with a live rate; idle ones are dropped past this


def is_replica_fetch(api_key: int, body: Any) -> bool:
    """A follower's Fetch (replica id set; v15+ carry it in ``replica_state``): never held by client quotas."""
    if api_key != FETCH_KEY:
        return False
    replica = body.replica_state.replica_id if hasattr(body, "replica_state") else getattr(body, "replica_id", -1)
    return int(replica) >= 0


@dataclass(frozen=True, slots=True)
class ConnectionSlot:
    """A counted connection, handed back to ``connection_closed``: its principal's scope and, when it logged in
    with a SASL credential, that credential's."""

    scope: str
    credential: str | None = None


class QuotaManager:
    def __init__(self, window: Window, max_connections_per_principal: int = 0,
                 max_connections_per_credential: int = 0) -> None:
        self.window = window
        self.max_connections_per_principal = max_connections_per_principal
        self.max_connections_per_credential = max_connections_per_credential
        self.config = QuotaConfig()
        self.version = -1
        self._buckets: dict[tuple[str, tuple[str, str]], TokenBucket] = {}
        self._ip_rates: dict[str, Rate] = {}
        self._connections: dict[str, int] = {}
        self._credentials: dict[str, int] = {}  # open connections per SASL username (an API key id)

    def update(self, version: int, quotas: Mapping[Entity, Mapping[str, float]]) -> None:
        self.config = QuotaConfig(quotas)
        self.version = version

    # ------------------------------------------------------------------ rates

    def _bucket(self, key: str, scope: tuple[str, str], now: float) -> TokenBucket:
        found = self._buckets.get((key, scope))
        if found is None:
            if len(self._buckets) >= MAX_TRACKED:
                self._buckets = {k: b for k, b in self._buckets.items() if not b.idle(now)}
            found = self._buckets[(key, scope)] = TokenBucket(self.window)
        return found

    def record(self, key: str, principal: str, client_id: str, value: float, now: float | None = None) -> float:
        """Record ``value`` against the client's quota on ``key``; the throttle time in seconds (0: within it)."""
        if not self.config:
            return 0.0
        applied = self.config.applied(key, principal, client_id)
        if applied is None:
            return 0.0
        now = time.monotonic() if now is None else now
        return self._bucket(key, applied.scope, now).record(value, applied.bound, now)

    def record_request(self, api_key: int, principal: str, client_id: str, *, request_bytes: int,
                       response_bytes: int, seconds: float, replica_fetch: bool = False) -> float:
        """Everything one request counts for, as Kafka records it; the longest throttle it earned.

        Fetch's handling time is not counted against ``request_percentage``: a long poll waits without working.
        Followers are never throttled by client quotas (Kafka has separate replication quotas for them).
        """
        if not self.config or replica_fetch:
            return 0.0
        now = time.monotonic()
        throttle = 0.0
        if api_key == PRODUCE_KEY:
            throttle = self.record(PRODUCER_BYTE_RATE, principal, client_id, request_bytes, now)
        elif api_key == FETCH_KEY:
            throttle = self.record(CONSUMER_BYTE_RATE, principal, client_id, response_bytes, now)
        if api_key != FETCH_KEY:
            # request_percentage is a share of one handler thread: 100 = one whole thread's time.
            throttle = max(throttle, self.record(REQUEST_PERCENTAGE, principal, client_id, seconds * 100, now))
        return throttle

    def fetch_bytes_bound(self, principal: str, client_id: str) -> int | None:
        """At most one sample window's worth of the consumer's quota per Fetch response (at least one batch is
        always sent), so one response cannot earn a throttle longer than the window and the rate stays even."""
        if not self.config:
            return None
        applied = self.config.applied(CONSUMER_BYTE_RATE, principal, client_id)
        if applied is None:
            return None
        return max(1, int(applied.bound * self.window.size))

    # ------------------------------------------------------------------ connections

    def accept_ip(self, address: str) -> bool:
        """KIP-612: a new connection from ``address`` within its ``connection_creation_rate`` (recorded if so)."""
        if not self.config:
            return True
        bound = self.config.ip_rate(address)
        if bound is None:
            return True
        now = time.monotonic()
        rate = self._ip_rates.get(address)
        if rate is None:
            if len(self._ip_rates) >= MAX_TRACKED:
                self._ip_rates = {k: r for k, r in self._ip_rates.items() if not r.idle(now)}
            rate = self._ip_rates[address] = Rate(self.window)
        if rate.measure(now) + 1 / rate.elapsed(now) > bound:
            return False  # refused connections are not counted, so a client that backs off gets back in
        rate.record(1, now)
        return True

    def connection_limit(self, principal: str, client_id: str) -> int:
        applied = self.config.applied(MAX_CONNECTIONS, principal, client_id) if self.config else None
        return int(applied.bound) if applied is not None else self.max_connections_per_principal

    def connection_opened(self, principal: str, client_id: str,
                          credential: str | None = None) -> ConnectionSlot | str:
        """Count a connection of ``principal`` (logged in as ``credential``, when SASL): a slot to give back at
        close, or why it is refused. The principal's cap and the credential's both apply: a service account's
        keys share its cap, and each key has its own under it."""
        scope = user_name(principal)
        limit = self.connection_limit(principal, client_id)
        open_now = self._connections.get(scope, 0)
        if limit and open_now >= limit:
            return (f"Too many connections for principal {principal}: {open_now} open, at most {limit} allowed "
                    f"(max_connections quota)")
        if credential is not None:
            per_credential = self._credentials.get(credential, 0)
            cap = self.max_connections_per_credential
            if cap and per_credential >= cap:
                return (f"Too many connections for credential {credential}: {per_credential} open, at most {cap} "
                        f"allowed (max.connections.per.credential)")
            self._credentials[credential] = per_credential + 1
        self._connections[scope] = open_now + 1
        return ConnectionSlot(scope, credential)

    def connection_closed(self, slot: ConnectionSlot) -> None:
        _release(self._connections, slot.scope)
        if slot.credential is not None:
            _release(self._credentials, slot.credential)

    def open_connections(self, principal: str) -> int:
        return self._connections.get(user_name(principal), 0)


def _release(counts: dict[str, int], key: str) -> None:
    left = counts.get(key, 0) - 1
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)
