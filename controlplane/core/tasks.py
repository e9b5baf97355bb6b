"""Tasks of the core app."""

from __future__ import annotations

from celery import shared_task


@shared_task(name="core.ping", ignore_result=False)
def ping(token: str) -> str:
    """Echo a token: proves a worker took a task from Redis and returned a result."""
    return token
