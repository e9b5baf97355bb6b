"""Failed-login throttles: per client address, and per (username, client address).

Never per username alone: a budget anyone can spend on an account lets a stranger lock its owner out (twenty
wrong passwords from anywhere and the right one is refused everywhere). Keyed on (username, address), guessing
one account is slowed at each address, and the owner, elsewhere, still gets in; the per-address budget bounds
what one address tries over all accounts.

Only failures count. Each attempt takes a slot up front, atomically (a Redis sorted set of attempt timestamps,
trimmed to the window and counted in one Lua call), so concurrent guesses cannot all slip through while their
passwords are checked; the view gives the slot back when the attempt was not a wrong password (a success, a
malformed body, a refusal by the other throttle). A refused attempt takes no slot, so hammering a throttled key
does not prolong its wait. The window slides (no reset at a minute boundary to burst through).
"""

from __future__ import annotations

import functools
import hashlib
import time
import uuid
from typing import Any, cast

import redis
from django.conf import settings
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

# KEYS[1]: the sorted set; ARGV: now (ms), window (ms), limit, member. Returns {1} when a slot was taken, else
# {0, ms until the oldest attempt leaves the window}.
_TAKE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1] - ARGV[2])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, tonumber(oldest[2]) + tonumber(ARGV[2]) - tonumber(ARGV[1])}
end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1}
"""

_SLOTS = "_login_throttle_slots"  # on the request: (key, member) of each slot taken


@functools.lru_cache(maxsize=4)
def _redis(url: str) -> redis.Redis:
    return redis.Redis.from_url(url)


@functools.lru_cache(maxsize=4)
def _take_script(url: str) -> Any:
    return _redis(url).register_script(_TAKE)


def _rate(scope: str) -> tuple[int, int]:
    """(attempts, window in ms) from DEFAULT_THROTTLE_RATES, read per call so settings overrides apply."""
    rates = cast(dict[str, str], settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"])
    text = rates[scope]
    count, period = text.split("/")
    return int(count), {"s": 1, "m": 60, "h": 3600, "d": 86400}[period[0]] * 1000


class LoginFailureThrottle(BaseThrottle):
    """Base: failed logins per ``ident``; subclasses name the scope and what the ident is."""

    scope = ""

    def ident(self, request: Request) -> str | None:
        raise NotImplementedError

    def allow_request(self, request: Request, view: Any) -> bool:
        ident = self.ident(request)
        if ident is None:
            return True
        limit, window_ms = _rate(self.scope)
        key = f"sluice:login:{self.scope}:{hashlib.sha256(ident.encode()).hexdigest()}"
        member = uuid.uuid4().hex
        answer = _take_script(settings.REDIS_URL)(keys=[key], args=[int(time.time() * 1000), window_ms, limit, member])
        if int(answer[0]) == 1:
            slots: list[tuple[str, str]] = getattr(request, _SLOTS, [])
            slots.append((key, member))
            setattr(request, _SLOTS, slots)
            self._wait = None
            return True
        self._wait = max(1, -(-int(answer[1]) // 1000))
        return False

    def wait(self) -> float | None:
        return getattr(self, "_wait", None)


class LoginAddressThrottle(LoginFailureThrottle):
    """Failed logins from one client address, whatever account they name (DRF's address, see NUM_PROXIES)."""

    scope = "login"

    def ident(self, request: Request) -> str | None:
        return self.get_ident(request)


class LoginUserAddressThrottle(LoginFailureThrottle):
    """Failed logins for one username from one client address."""

    scope = "login_user"

    def ident(self, request: Request) -> str | None:
        username = request.data.get("username") if hasattr(request.data, "get") else None
        if not isinstance(username, str) or not username:
            return None
        return f"{username.strip().lower()}\n{self.get_ident(request)}"


def forgive(request: Request) -> None:
    """Give back the slots this request took: it was not a wrong password."""
    slots: list[tuple[str, str]] = getattr(request, _SLOTS, [])
    if slots:
        client = _redis(settings.REDIS_URL)
        for key, member in slots:
            client.zrem(key, member)
        setattr(request, _SLOTS, [])
