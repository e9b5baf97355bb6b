"""What a connection may hold before it has authenticated, and how many such connections there may be.

Until a client has proved who it is, the broker owes it little: on a SASL listener an unauthenticated
connection may send frames of at most ``sasl.server.max.receive.size`` bytes (Kafka's 512 KiB; SASL messages are
small), not ``socket.request.max.bytes`` (100 MiB), so a stranger cannot make the broker buffer a large request.
At most ``max.unauthenticated.connections`` may be open at once, each for at most ``sasl.server.authn.timeout.ms``,
so strangers together hold a bounded amount of memory for a bounded time. The bare SASL token frames that follow a
SaslHandshake v0 are frames like any other here: the same size limit, the same deadline.
``max.connections.per.ip`` (Kafka's) caps every connection from one address, authenticated or not.

The decisions are pure functions (``refusal``, ``frame_limit``); ``Admission`` keeps the counts they read. Owned by
the ``Broker``; used on its event loop only.
"""

from __future__ import annotations

from dataclasses import dataclass

SASL_SERVER_MAX_RECEIVE_SIZE = 512 * 1024  # Kafka's default
MAX_UNAUTHENTICATED_CONNECTIONS = 1000
SASL_SERVER_AUTHN_TIMEOUT_MS = 10_000


@dataclass(frozen=True, slots=True)
class AdmissionLimits:
    max_unauthenticated: int = MAX_UNAUTHENTICATED_CONNECTIONS
    max_per_ip: int = 0  # 0: no cap (Kafka's default is unlimited too)


def refusal(limits: AdmissionLimits, host: str, *, from_ip: int, unauthenticated: int,
            authenticates: bool) -> str | None:
    """Why a new connection from ``host`` is refused at accept (None: it is admitted), given what is open now:
    ``from_ip`` connections from that host and ``unauthenticated`` connections not yet authenticated.
    ``authenticates``: it arrived on a SASL listener, so it starts unauthenticated."""
    if limits.max_per_ip and from_ip >= limits.max_per_ip:
        return (f"too many connections from {host}: {from_ip} open, at most {limits.max_per_ip} allowed "
                f"(max.connections.per.ip)")
    if authenticates and unauthenticated >= limits.max_unauthenticated:
        return (f"too many unauthenticated connections: {unauthenticated} open, at most "
                f"{limits.max_unauthenticated} allowed (max.unauthenticated.connections)")
    return None


def frame_limit(*, authenticated: bool, max_request_bytes: int, max_receive_size: int) -> int:
    """The largest frame a connection reads: ``sasl.server.max.receive.size`` until it has authenticated (never
    above ``socket.request.max.bytes``), then ``socket.request.max.bytes``."""
    return max_request_bytes if authenticated else min(max_receive_size, max_request_bytes)


class Ticket:
    """An admitted connection, handed back to ``Admission`` when it authenticates and when it closes."""

    __slots__ = ("closed", "host", "unauthenticated")

    def __init__(self, host: str, unauthenticated: bool) -> None:
        self.host = host
        self.unauthenticated = unauthenticated
        self.closed = False


class Admission:
    """Open connections per client address and those not yet authenticated, against ``AdmissionLimits``."""

    def __init__(self, limits: AdmissionLimits) -> None:
        self.limits = limits
        self.unauthenticated = 0
        self._by_ip: dict[str, int] = {}

    def open(self, host: str, *, authenticates: bool) -> Ticket | str:
        """Count a new connection: its ticket, or why it is refused (then nothing is counted)."""
        why = refusal(self.limits, host, from_ip=self._by_ip.get(host, 0), unauthenticated=self.unauthenticated,
                      authenticates=authenticates)
        if why is not None:
            return why
        self._by_ip[host] = self._by_ip.get(host, 0) + 1
        if authenticates:
            self.unauthenticated += 1
        return Ticket(host, authenticates)

    def authenticated(self, ticket: Ticket) -> None:
        """The connection has logged in: it no longer counts as unauthenticated (idempotent)."""
        if ticket.unauthenticated and not ticket.closed:
            ticket.unauthenticated = False
            self.unauthenticated -= 1

    def close(self, ticket: Ticket) -> None:
        """The connection has ended (idempotent)."""
        if ticket.closed:
            return
        self.authenticated(ticket)
        ticket.closed = True
        left = self._by_ip.get(ticket.host, 0) - 1
        if left > 0:
            self._by_ip[ticket.host] = left
        else:
            self._by_ip.pop(ticket.host, None)

    def from_ip(self, host: str) -> int:
        return self._by_ip.get(host, 0)
