"""Ending this process's WebSocket tails and v2 consumer instances whose credentials stopped working.

A tail or a consumer instance is authorized once, when it is opened, and may then live for hours. Each one
takes a :class:`Hold` on the credential it was opened with (``ClusterAccess.credential``). The services that
end credentials (``controlplane.tenancy.services``: a key revoked, a member removed, a service account
deleted) publish a :class:`~controlplane.tenancy.revocation.Revocation` over Redis pub/sub once they commit;
every web process with holds listens, forgets its cached callers (so REST requests with those credentials
fail at once, not after the caches' 2 s) and calls the matching holds' ``on_revoked``. Pub/sub does not keep
messages for a process that was not subscribed at that instant, so the same thread also sweeps: every
``SLUICE_REVOCATION_SWEEP_SECONDS`` and after every (re)subscription it asks the database which held
credentials no longer work (two queries, whatever the number of holds).

A connection admitted with credentials cached just before a revocation can take its hold after the message
was handled; the watcher keeps the revocations of the last ``RECENT_SECONDS`` (longer than the caches) and
checks each new hold against them.

Ownership: the module-level :data:`watcher` belongs to the process. Holds are taken and released from any
thread (the event loop for tails, request threads for instances); one daemon thread, started with the first
hold, listens and sweeps, and calls ``on_revoked`` -- which must therefore be thread-safe and quick.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from django.conf import settings
from django.db import connections

from controlplane.kafkarest.access import CACHE_SECONDS, clear_caches
from controlplane.tenancy.revocation import CHANNEL, Credential, Revocation, credentials_revoked

log = logging.getLogger(__name__)

RECENT_SECONDS = 5 * CACHE_SECONDS
LISTEN_SECONDS = 1.0  # the longest the thread waits for a message before looking at the sweep clock
RETRY_SECONDS = 1.0
SWEPT_REASON = "The credentials this connection was opened with no longer work (revoked, or their owner removed)."


class Hold:
    """A live connection's claim on its credential; ``release`` it when the connection ends."""

    __slots__ = ("_watcher", "credential", "on_revoked")

    def __init__(self, credential: Credential, on_revoked: Callable[[str], None], watcher: Watcher) -> None:
        self.credential = credential
        self.on_revoked = on_revoked  # called at most once, with the reason to tell the client
        self._watcher = watcher

    def release(self) -> None:
        self._watcher.release(self)


class Watcher:
    """The process's holds, and the thread that ends them; see the module docstring."""

    def __init__(self, *, listen: bool = True) -> None:
        self._listen_enabled = listen  # False: no thread; the caller drives apply and sweep (tests)
        self._holds: set[Hold] = set()
        self._recent: collections.deque[tuple[float, Revocation]] = collections.deque()
        self._lock = threading.Lock()
        self._pid = 0
        self._stopping = threading.Event()

    # ------------------------------------------------------------------ any thread

    def hold(self, credential: Credential, on_revoked: Callable[[str], None]) -> Hold:
        """Register a connection opened with ``credential``; ``on_revoked(reason)`` ends it (from another thread,
        or from this call when the credential was revoked a moment ago)."""
        self._start()
        made = Hold(credential, on_revoked, self)
        now = time.monotonic()
        with self._lock:
            while self._recent and self._recent[0][0] < now - RECENT_SECONDS:
                self._recent.popleft()
            revoked = next((r for _, r in self._recent if r.matches(credential)), None)
            if revoked is None:
                self._holds.add(made)
        if revoked is not None:
            self._end(made, revoked.reason)
        return made

    def release(self, hold: Hold) -> None:
        with self._lock:
            self._holds.discard(hold)

    def held(self) -> int:
        with self._lock:
            return len(self._holds)

    # ------------------------------------------------------------------ the watcher's thread (or a test)

    def apply(self, revocation: Revocation) -> int:
        """End the holds ``revocation`` matches; how many."""
        clear_caches()
        with self._lock:
            self._recent.append((time.monotonic(), revocation))
            ended = [h for h in self._holds if revocation.matches(h.credential)]
            self._holds.difference_update(ended)
        for hold in ended:
            self._end(hold, revocation.reason)
        return len(ended)

    def sweep(self) -> int:
        """End the holds whose credentials the database says no longer work; how many."""
        with self._lock:
            credentials = {h.credential for h in self._holds}
        if not credentials:
            return 0
        try:
            revoked = credentials_revoked(credentials)
        finally:
            connections.close_all()  # this thread's connections only: back to the pool between sweeps
        if not revoked:
            return 0
        clear_caches()
        with self._lock:
            ended = [h for h in self._holds if h.credential in revoked]
            self._holds.difference_update(ended)
        for hold in ended:
            self._end(hold, SWEPT_REASON)
        return len(ended)

    @staticmethod
    def _end(hold: Hold, reason: str) -> None:
        try:
            hold.on_revoked(reason)
        except Exception:
            log.exception("ending a connection whose credentials were revoked")

    def _start(self) -> None:
        if not self._listen_enabled:
            return
        with self._lock:
            if self._pid == os.getpid():
                return
            self._pid = os.getpid()  # (again, in a forked child: the parent's thread did not come along)
            self._holds, self._recent = set(), collections.deque()
        threading.Thread(target=self._run, name="revocation-watcher", daemon=True).start()

    def _run(self) -> None:
        period = float(settings.SLUICE_REVOCATION_SWEEP_SECONDS)
        while not self._stopping.is_set():
            try:
                self._listen(period)
            except redis.RedisError as exc:  # Redis restarting or gone: an operational state, not a bug
                log.warning("revocations: Redis failed (%s); subscribing again in %g s", exc, RETRY_SECONDS)
                self._stopping.wait(RETRY_SECONDS)
            except Exception:
                log.exception("revocations: the watcher failed; starting again")
                self._stopping.wait(RETRY_SECONDS)

    def _listen(self, period: float) -> None:
        client = redis.Redis.from_url(settings.REDIS_URL, health_check_interval=30)
        pubsub = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
        try:
            pubsub.subscribe(CHANNEL)
            self.sweep()  # whatever was published while this process was not subscribed
            next_sweep = time.monotonic() + period
            while not self._stopping.is_set():
                message: dict[str, Any] | None = pubsub.get_message(timeout=LISTEN_SECONDS)
                if message is not None and message.get("type") == "message":
                    try:
                        revocation = Revocation.from_json(message["data"])
                    except ValueError:
                        log.warning("revocations: ignored a malformed message %r", message["data"][:200])
                    else:
                        self.apply(revocation)
                if time.monotonic() >= next_sweep:
                    self.sweep()
                    next_sweep = time.monotonic() + period
        finally:
            pubsub.close()
            client.close()


watcher = Watcher()
