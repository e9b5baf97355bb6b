"""The table of Kafka APIs this broker serves, filled by the handler modules.

Each handler module registers its APIs with ``@api(key, min, max)``; ApiVersions
advertises exactly this table, so what we claim and what we serve cannot drift.
The version range is the intersection of what ``kio`` decodes and what the
handler implements. The floors are Apache Kafka 4.0's (KIP-896), pinned by
``tests/dataplane/server/test_api_versions.py``. One deliberate exception, also Kafka 4.0's (KAFKA-18659):
Produce is advertised from v0 although v0-2 are not served, because librdkafka before 2.10 sends compressed
batches only to a broker whose Produce range includes v0 (it silently sends them uncompressed otherwise).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dataplane.protocol.messages import Request

if TYPE_CHECKING:
    from dataplane.security.sasl import Mechanism
    from dataplane.server.owners import Owners


class SaslSession:
    """One connection's SASL state (KIP-152). Owned by its ``Connection``; changed by the SASL handlers.

    ``required`` on a SASL listener: until ``principal`` is set only ApiVersions,
    SaslHandshake and SaslAuthenticate are served. ``failed`` tells the
    connection to close once the failure's response is sent, as Kafka does.
    ``stored`` is what the login was checked against (``Credentials.stored``):
    when a security refresh no longer has it, the connection is closed.
    ``expires_at`` is set when the mechanism gave the session a lifetime
    (OAUTHBEARER: the token's expiry); the client must re-authenticate
    (a new SaslHandshake + SaslAuthenticate, same principal) before it.
    ``raw_tokens`` after a SaslHandshake v0, until the exchange completes: the client's frames are bare SASL
    tokens, not requests, and the broker's tokens go back as bare frames too.
    """

    __slots__ = ("close", "expires_at", "failed", "mechanism", "principal", "raw_tokens", "required", "server",
                 "stored", "username")

    def __init__(self, required: bool) -> None:
        self.required = required
        self.mechanism: str | None = None
        self.server: Mechanism | None = None
        self.principal: str | None = None
        self.username: str | None = None
        self.stored: tuple[object, str] | None = None
        self.failed = False
        self.close: Callable[[], None] | None = None  # set by the connection: ends it (its credential went)
        # KIP-368: when the session ends (time.monotonic()); past it only a re-authentication is served.
        self.expires_at: float | None = None
        self.raw_tokens = False


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Who sent a request and over what: every handler gets one (the authorizer reads ``principal``).

    Built once per connection by the connection that reads the requests.
    """

    principal: str  # "User:ANONYMOUS" until the listener authenticates its clients
    client_id: str
    peer: str  # "host:port" of the client
    listener: str  # the listener's name, e.g. "PLAINTEXT"
    session: SaslSession | None = field(default=None, compare=False)  # the connection's SASL state

    @property
    def client_host(self) -> str:
        return self.peer.rpartition(":")[0] or self.peer


ANONYMOUS = "User:ANONYMOUS"
Handler = Callable[["Owners", Request, RequestContext], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    advertised_min: int  # what ApiVersions claims; below min_version only for a client's sake (KAFKA-18659)

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


@dataclass(frozen=True, slots=True)
class Later:
    """A handler's answer whose work is done but whose response is not ready (acks=all awaiting the ISR).

    The connection moves on to the next request and sends this response when it
    completes, still in request order: a producer's pipelined batches are appended
    in order and replicate together instead of one round trip each.
    """

    response: Coroutine[Any, Any, Any]


REGISTRY: dict[int, Api] = {}


def api(key: int, name: str, min_version: int, max_version: int, *,
        advertised_min: int | None = None) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        if key in REGISTRY:
            raise RuntimeError(f"api key {key} registered twice")
        REGISTRY[key] = Api(key, name, min_version, max_version, handler,
                            min_version if advertised_min is None else advertised_min)
        return handler
    return register


def api_version_entries() -> list[dict[str, int]]:
    return [{"api_key": a.key, "min_version": a.advertised_min, "max_version": a.max_version}
            for a in sorted(REGISTRY.values(), key=lambda a: a.key)]


def api_name(key: int) -> str:
    found = REGISTRY.get(key)
    return found.name if found else f"api{key}"
