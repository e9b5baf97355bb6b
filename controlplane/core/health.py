"""Liveness of each part the control plane depends on, checked for real."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis
from django.conf import settings
from django.db import connection

from controlplane.core.tasks import ping


@dataclass(frozen=True, slots=True)
class PartHealth:
    name: str
    ok: bool
    latency_ms: float
    detail: str


def _timed(name: str, check: Callable[[], str]) -> PartHealth:
    started = time.monotonic()
    try:
        detail = check()
        ok = True
    except Exception as exc:  # any failure of a part is reported, not raised
        detail, ok = f"{type(exc).__name__}: {exc}", False
    return PartHealth(name, ok, round((time.monotonic() - started) * 1000, 2), detail)


def _postgres() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT version()")
        row = cursor.fetchone()
    return str(row[0]).split(" on ")[0] if row else "unknown"


def _redis() -> str:
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.ping()
        return "redis " + str(client.info("server").get("redis_version", "?"))
    finally:
        client.close()


def _celery() -> str:
    token = secrets.token_hex(8)
    result = ping.apply_async(args=[token])
    try:
        answer = result.get(timeout=settings.HEALTH_CELERY_TIMEOUT_SECONDS)
    finally:
        result.forget()
    if answer != token:
        raise RuntimeError("worker answered with the wrong token")
    return "task round trip ok"


def health_check() -> list[PartHealth]:
    return [_timed("postgres", _postgres), _timed("redis", _redis), _timed("celery", _celery)]
