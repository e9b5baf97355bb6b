"""Kafka's client quotas as pure rules: entities, keys and their validation, which entity's quota applies to a
client, DescribeClientQuotas filters, and the windowed rate and throttle-time arithmetic.

The rules follow Kafka (KIP-13 byte rates, KIP-55 user and client-id entities with defaults, KIP-124 request
percentage, KIP-219 throttle-then-mute, KIP-546 the admin APIs, KIP-612 ``connection_creation_rate`` on IPs),
so a tool written for Kafka's ``kafka-configs --entity-type users`` finds the same behaviour here.
Nothing here does I/O or keeps a clock: callers pass ``now`` (seconds, monotonic).
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONNECTION_CREATION_RATE = "connection_creation_rate"
# Sluice's own key (Kafka has only the broker-wide max.connections.per.ip): at most this many open connections per
# principal, so one runaway client of an API key cannot take every file descriptor of a shared broker.
MAX_CONNECTIONS = "max_connections"

# key -> (Kafka's type: integral or not); user and client-id entities take these, ip entities only the IP keys.
CLIENT_KEYS: Mapping[str, bool] = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True, REQUEST_PERCENTAGE: False,
                                   MAX_CONNECTIONS: True}
IP_KEYS: Mapping[str, bool] = {CONNECTION_CREATION_RATE: True}
MAX_LONG = float(2**63 - 1)

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

# An entity: sorted (entity type, name) pairs; name None is the type's default ("<default>" in Kafka's tools).
Entity = tuple[tuple[str, str | None], ...]


class InvalidQuota(ValueError):
    """A request Kafka answers with INVALID_REQUEST (or UNSUPPORTED_VERSION when ``unknown_type``)."""

    def __init__(self, message: str, *, unknown_type: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.unknown_type = unknown_type


def entity(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """A checked entity, as Kafka's ClientQuotaControlManager checks one: known types, each once, ip alone."""
    found: dict[str, str | None] = {}
    for kind, name in pairs:
        if kind not in ENTITY_TYPES:
            raise InvalidQuota(f"Unhandled client quota entity type: {kind}")
        if kind in found:
            raise InvalidQuota(f"Invalid empty or duplicate entity type {kind} in the client quota entity")
        if name == "":
            raise InvalidQuota(f"Invalid empty {kind} name in the client quota entity (use null for the default)")
        found[kind] = name
    if not found:
        raise InvalidQuota("Invalid empty client quota entity")
    if IP in found:
        if len(found) > 1:
            raise InvalidQuota("Invalid quota entity combination, IP entity should not be combined with user or "
                               "clientId entity.")
        address = found[IP]
        if address is not None:
            try:
                ipaddress.ip_address(address)
            except ValueError:
                raise InvalidQuota(f"{address} is not a valid IP or resolvable host.") from None
    return tuple(sorted(found.items()))


def check_value(kind: Entity, key: str, value: float) -> None:
    """Kafka's validateQuotaKeyValue: a key the entity takes, a positive value, integral for integral keys."""
    keys = IP_KEYS if any(t == IP for t, _ in kind) else CLIENT_KEYS
    integral = keys.get(key)
    if integral is None:
        raise InvalidQuota(f"Invalid configuration key {key}")
    if not math.isfinite(value) or value <= 0:
        raise InvalidQuota(f"Quota {key} must be greater than 0, not {value}")
    if integral:
        if value > MAX_LONG:
            raise InvalidQuota(f"Proposed value for {key} is too large for a LONG.")
        if value != math.floor(value):
            raise InvalidQuota(f"Proposed value for {key} is not an integer: {value}")


def render(kind: Entity) -> str:
    """``user=alice,client-id=<default>`` for logs and messages."""
    return ",".join(f"{t}={'<default>' if n is None else n}" for t, n in kind)


# ---------------------------------------------------------------------------------------------------- describe


@dataclass(frozen=True, slots=True)
class QuotaFilter:
    """DescribeClientQuotas' components: exact names (None = the default) and types that must be present."""

    exact: Mapping[str, str | None] = field(default_factory=dict)
    present: frozenset[str] = frozenset()
    strict: bool = False

    @classmethod
    def checked(cls, components: Iterable[tuple[str, int, str | None]], strict: bool) -> QuotaFilter:
        """Kafka's validation of the filter (ClientQuotasImage.describe), with its error messages."""
        exact: dict[str, str | None] = {}
        present: set[str] = set()
        for kind, match_type, match in components:
            if kind in exact or kind in present:
                raise InvalidQuota(f"Entity type {kind} cannot appear more than once in the filter.")
            if kind not in ENTITY_TYPES:
                raise InvalidQuota(f"Unknown entity type {kind}", unknown_type=True)
            if match_type == MATCH_EXACT:
                if match is None:
                    raise InvalidQuota("Request specified MATCH_TYPE_EXACT, but set match string to null.")
                exact[kind] = match
            elif match_type == MATCH_DEFAULT:
                if match is not None:
                    raise InvalidQuota("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
                exact[kind] = None
            elif match_type == MATCH_SPECIFIED:
                if match is not None:
                    raise InvalidQuota("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
                present.add(kind)
            else:
                raise InvalidQuota(f"Unknown match type {match_type}")
        named = set(exact) | present
        if IP in named and named & {USER, CLIENT_ID}:
            raise InvalidQuota("Invalid entity filter component combination. IP filter component should not be "
                               "used with user or clientId filter component.")
        return cls(exact, frozenset(present), strict)

    def matches(self, kind: Entity) -> bool:
        names = dict(kind)
        if self.strict and len(names) != len(self.exact) + len(self.present):
            return False
        if any(t not in names or names[t] != n for t, n in self.exact.items()):
            return False
        return all(t in names for t in self.present)


# ---------------------------------------------------------------------------------------------------- resolution


def user_name(principal: str) -> str:
    """The user entity's name for a principal: ``User:alice`` -> ``alice`` (Kafka's sanitized user)."""
    return principal.partition(":")[2] if ":" in principal else principal


@dataclass(frozen=True, slots=True)
class Applied:
    """The quota a client is held to for one key, and the scope whose clients share it.

    ``scope`` is Kafka's metric tags (user, client-id): a quota set on a user is shared by all of that user's
    clients (client-id ""), a default user quota gives each user a quota of its own, and so on.
    """

    bound: float
    scope: tuple[str, str]


class QuotaConfig:
    """One snapshot of the cluster's quotas, with Kafka's precedence for a (user, client-id).

    Immutable once built; shared by the broker's connections on its event loop and swapped whole on change.
    """

    # Kafka's order (KIP-55), most specific first: (user part, client part); "name" = the client's own,
    # "default" = the type's default entity, None = the type is not part of the entity.
    _ORDER = (("name", "name"), ("name", "default"), ("name", None), ("default", "name"),
              ("default", "default"), ("default", None), (None, "name"), (None, "default"))

    def __init__(self, quotas: Mapping[Entity, Mapping[str, float]] | None = None) -> None:
        self.quotas: dict[Entity, dict[str, float]] = {k: dict(v) for k, v in (quotas or {}).items() if v}
        self._cache: dict[tuple[str, str, str], Applied | None] = {}

    def __bool__(self) -> bool:
        return bool(self.quotas)

    def describe(self, wanted: QuotaFilter) -> list[tuple[Entity, dict[str, float]]]:
        return [(k, v) for k, v in sorted(self.quotas.items(), key=lambda kv: render(kv[0])) if wanted.matches(k)]

    def applied(self, key: str, principal: str, client_id: str) -> Applied | None:
        """The quota on ``key`` for this client and the scope sharing it, or None when no entity sets one."""
        cache_key = (key, principal, client_id)
        if cache_key in self._cache:
            return self._cache[cache_key]
        user = user_name(principal)
        found: Applied | None = None
        for user_part, client_part in self._ORDER:
            pairs: list[tuple[str, str | None]] = []
            if user_part is not None:
                pairs.append((USER, user if user_part == "name" else None))
            if client_part is not None:
                pairs.append((CLIENT_ID, client_id if client_part == "name" else None))
            value = self.quotas.get(tuple(sorted(pairs)), {}).get(key)
            if value is not None:
                found = Applied(value, (user if user_part else "", client_id if client_part else ""))
                break
        if len(self._cache) > 100_000:
            self._cache.clear()
        self._cache[cache_key] = found
        return found

    def ip_rate(self, address: str) -> float | None:
        """``connection_creation_rate`` for an IP: its own entity, else the default IP entity."""
        for name in (address, None):
            value = self.quotas.get(((IP, name),), {}).get(CONNECTION_CREATION_RATE)
            if value is not None:
                return value
        return None


def altered(current: Mapping[Entity, Mapping[str, float]], kind: Entity,
            ops: Sequence[tuple[str, float, bool]]) -> dict[str, float]:
    """An entity's quotas after AlterClientQuotas' ops (key, value, remove), each checked first."""
    values = dict(current.get(kind, {}))
    for key, value, remove in ops:
        if remove:
            keys = IP_KEYS if any(t == IP for t, _ in kind) else CLIENT_KEYS
            if key not in keys:
                raise InvalidQuota(f"Invalid configuration key {key}")
            values.pop(key, None)
        else:
            check_value(kind, key, value)
            values[key] = float(value)
    return values


# ---------------------------------------------------------------------------------------------------- rates


@dataclass(frozen=True, slots=True)
class Window:
    """``quota.window.num`` samples of ``quota.window.size.seconds`` each (Kafka: 11 x 1 s)."""

    samples: int = 11
    size: float = 1.0

    @property
    def max_throttle(self) -> float:
        """Kafka bounds a throttle by the whole window (KIP-219)."""
        return self.samples * self.size


class Rate:
    """Kafka's ``Rate`` over a ``SampledStat``: the total of the live samples divided by the time they span,
    counted as at least ``samples - 1`` whole windows so a fresh client's first bytes are not a huge rate.

    Owned by the quota manager of one broker; used on its event loop only.
    """

    __slots__ = ("_samples", "window")

    def __init__(self, window: Window) -> None:
        self.window = window
        self._samples: list[list[float]] = []  # [window start, total], oldest first

    def record(self, value: float, now: float) -> None:
        self._purge(now)
        if not self._samples or now - self._samples[-1][0] >= self.window.size:
            self._samples.append([now, 0.0])
        self._samples[-1][1] += value

    def _purge(self, now: float) -> None:
        horizon = self.window.samples * self.window.size
        while self._samples and now - self._samples[0][0] >= horizon:  # Kafka's SampledStat.purgeObsoleteSamples
            self._samples.pop(0)
        del self._samples[:max(0, len(self._samples) - self.window.samples)]

    def elapsed(self, now: float) -> float:
        """Kafka's ``Rate.windowSize``: the span measured, but never under ``samples - 1`` full windows."""
        self._purge(now)
        total = now - self._samples[0][0] if self._samples else 0.0
        full = int(total / self.window.size)
        minimum = self.window.samples - 1
        if full < minimum:
            total += (minimum - full) * self.window.size
        return total

    def measure(self, now: float) -> float:
        span = self.elapsed(now)
        return sum(s[1] for s in self._samples) / span if span > 0 else 0.0

    def idle(self, now: float) -> bool:
        self._purge(now)
        return not self._samples


class TokenBucket:
    """KIP-599's token bucket, which Kafka brought in because a windowed ``Rate`` lets a client burst: a quota
    earns ``bound`` tokens a second up to a whole window's worth (``bound x samples x size``), each request
    spends its bytes (or handler time), and a client in debt stays away until the debt is paid.

    We hold byte rates and request time with it rather than with ``Rate`` (which Kafka still uses there): with
    ``Rate`` a producer at 10x its quota was let through in bursts -- 2.0 MB, then 0.13 MB, then 2.0 MB in
    successive seconds against a 1 MB/s quota -- because the burst's sample kept the window's average at the
    quota until it expired, all at once. The bucket gives the same average with throttles of one request each.

    Owned by the quota manager of one broker; used on its event loop only.
    """

    __slots__ = ("_last", "_tokens", "window")

    def __init__(self, window: Window) -> None:
        self.window = window
        self._tokens: float | None = None
        self._last = 0.0

    def record(self, value: float, bound: float, now: float) -> float:
        """Spend ``value``; the throttle in seconds (0 while the bucket is not in debt), at most the window."""
        burst = bound * self.window.max_throttle
        if self._tokens is None:
            self._tokens = burst
        else:
            self._tokens = min(burst, self._tokens + max(0.0, now - self._last) * bound)
        self._last = now
        self._tokens -= value
        if self._tokens >= 0:
            return 0.0
        return min(-self._tokens / bound, self.window.max_throttle)

    def idle(self, now: float) -> bool:
        """Refilled by now whatever its quota (a debt is at most a window long, refilling takes one more)."""
        return now - self._last > 2 * self.window.max_throttle


def throttle_seconds(rate: Rate, bound: float, now: float) -> float:
    """Kafka's ``ClientQuotaManager.throttleTime``: how long the client must stay away so that its rate over the
    window comes back to the bound -- (rate - bound) / bound x window, at most the whole window."""
    value = rate.measure(now)
    if value <= bound:
        return 0.0
    return min((value - bound) / bound * rate.elapsed(now), rate.window.max_throttle)
