"""The REST Proxy's per-process access cache (``kafkarest.access._TtlCache``): a refresh ahead of expiry never
brings back what a revocation cleared while it was reading, and a refused caller is forgotten."""

from __future__ import annotations

import time

from controlplane.kafkarest.access import _TtlCache


def test_refresh_replaces_the_entry_and_extends_its_life() -> None:
    cache = _TtlCache(2.0)
    assert cache.get("k", lambda: "old") == "old"
    first = cache.expires("k")
    assert cache.refresh("k", lambda: "new") == "new"
    assert cache.peek("k") == "new" and cache.expires("k") >= first
    assert cache.expires("absent") == 0.0


def test_a_clear_during_a_refresh_wins() -> None:
    cache = _TtlCache(2.0)
    cache.get("k", lambda: "granted")

    def read_while_revoked() -> str:
        cache.clear()  # a published revocation lands while the refresh reads the database
        return "granted"

    cache.refresh("k", read_while_revoked)
    assert cache.peek("k") != "granted" and cache.expires("k") == 0.0


def test_forget_drops_one_entry() -> None:
    cache = _TtlCache(2.0)
    cache.get("a", lambda: 1)
    cache.get("b", lambda: 2)
    cache.forget("a")
    assert cache.expires("a") == 0.0 and cache.peek("b") == 2 and cache.expires("b") > time.monotonic()
