"""Request-rate limits on the REST APIs, per API key (or browser session's user), shared by every web process.

Two budgets, from settings in the ``limits`` library's notation (``"3000/minute"``, ``"50/second;3000/minute"``;
empty: no limit): ``SLUICE_API_RATE_LIMIT`` for the management API (``/api/``) and
``SLUICE_KAFKAREST_RATE_LIMIT`` for the REST Proxy (``/kafka/``, the v2 root paths, and the ASGI fast path in
``kafkarest/produce/streaming.py``, which is outside DRF). Counting is ``limits``' sliding-window counter in
Redis: each hit is one atomic Lua call on two keys, so any number of web processes enforce one budget, not one
each. A caller over budget gets 429 with ``Retry-After`` (and Confluent's ``error_code`` 42901 on REST Proxy paths).

If Redis cannot be reached the request is let through (logged): Redis being down is the health check's to report,
and refusing every API call over it would turn a degraded service into an outage.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from limits import RateLimitItem, parse_many
from limits.storage import RedisStorage
from limits.strategies import SlidingWindowCounterRateLimiter
from redis.exceptions import RedisError
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

log = logging.getLogger(__name__)

API, KAFKA = "api", "kafka"
_SETTINGS = {API: "SLUICE_API_RATE_LIMIT", KAFKA: "SLUICE_KAFKAREST_RATE_LIMIT"}
_REST_PROXY_PATHS = ("/kafka/", "/topics", "/consumers", "/brokers")  # v2 is also served at the host's root


@dataclass(frozen=True, slots=True)
class Refusal:
    limit: str  # the budget that ran out, e.g. "3000 per 1 minute"
    retry_after: int  # whole seconds until a request would pass

    @property
    def message(self) -> str:
        return f"Too many requests: the limit is {self.limit} per API key. Retry after {self.retry_after} s."


@functools.lru_cache(maxsize=8)
def parse_limits(text: str) -> tuple[RateLimitItem, ...]:
    """The budgets a setting names; ValueError with ``limits``' reason for a bad one."""
    return tuple(parse_many(text)) if text.strip() else ()


_limiter: SlidingWindowCounterRateLimiter | None = None
_limiter_url = ""
_lock = threading.Lock()


def _get_limiter() -> SlidingWindowCounterRateLimiter:
    """One Redis-backed limiter per process (re-made if ``REDIS_URL`` changes, as tests' settings do)."""
    global _limiter, _limiter_url
    url = settings.REDIS_URL
    with _lock:
        if _limiter is None or _limiter_url != url:
            _limiter = SlidingWindowCounterRateLimiter(RedisStorage(url, key_prefix="sluice:ratelimit"))
            _limiter_url = url
        return _limiter


def limited(scope: str) -> bool:
    """Whether ``scope`` has a budget at all (when not, :func:`hit` never touches Redis)."""
    return bool(parse_limits(getattr(settings, _SETTINGS[scope])))


def hit(scope: str, identity: str) -> Refusal | None:
    """Count one request of ``identity`` (``key:<key id>`` or ``user:<pk>``) against ``scope``'s budgets."""
    items = parse_limits(getattr(settings, _SETTINGS[scope]))
    if not items:
        return None
    try:
        limiter = _get_limiter()
        for item in items:
            if not limiter.hit(item, scope, identity):
                reset, _ = limiter.get_window_stats(item, scope, identity)
                return Refusal(str(item), max(1, math.ceil(reset - time.time())))
    except (RedisError, OSError) as exc:
        log.warning("rate limit not checked (Redis unavailable?): %s", exc)
    return None


def request_identity(request: Request) -> str | None:
    """``key:<key id>`` for an API key, ``user:<pk>`` for a session; None for an anonymous request."""
    key_id = getattr(request.auth, "key_id", None)  # an ApiKey (tenancy's model: tenancy sits above core)
    if isinstance(key_id, str):
        return f"key:{key_id}"
    user: Any = request.user
    if user is not None and getattr(user, "is_authenticated", False) and getattr(user, "pk", None) is not None:
        return f"user:{user.pk}"
    return None


class RequestRateThrottle(BaseThrottle):
    """DRF's hook for the budgets above: the REST Proxy's for ``/kafka/`` and v2 root paths, else the API's."""

    def __init__(self) -> None:
        self.refusal: Refusal | None = None

    def allow_request(self, request: Request, view: Any) -> bool:
        identity = request_identity(request)
        if identity is None:
            return True  # unauthenticated: refused by the permission check, or public (health, schema, login)
        path = request.path
        scope = API if path.startswith("/api/") else KAFKA if path.startswith(_REST_PROXY_PATHS) else None
        if scope is None:
            return True  # health, schema, docs
        self.refusal = hit(scope, identity)
        if self.refusal is not None:  # raised here rather than returned, to say which budget ran out
            raise exceptions.Throttled(self.refusal.retry_after, detail=self.refusal.message)
        return True

    def wait(self) -> float | None:
        return None if self.refusal is None else float(self.refusal.retry_after)
