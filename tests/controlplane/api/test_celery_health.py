"""The Celery round trip through a real worker process, and /healthz built on it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def celery_worker_queue() -> Iterator[str]:
    """A real `celery worker` on a queue of its own, stopped by pid afterwards."""
    from controlplane.celery_app import app

    queue = f"test-{uuid.uuid4().hex[:10]}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "controlplane.celery_app", "worker", "--pool", "solo",
         "--queues", queue, "--hostname", f"{queue}@%h", "--loglevel", "WARNING", "--without-gossip",
         "--without-mingle", "--without-heartbeat"],
        cwd=ROOT, env={**os.environ, "CELERY_DEFAULT_QUEUE": queue}, start_new_session=True)
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    try:
        yield queue
    finally:
        app.conf.task_default_queue = previous
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_task_round_trip_through_a_real_worker(celery_worker_queue: str) -> None:
    from controlplane.core.tasks import ping

    # get() blocks on the result in Redis: the worker must really have run it.
    assert ping.apply_async(args=["hello"]).get(timeout=60) == "hello"


@pytest.mark.django_db
def test_healthz_reports_every_part(celery_worker_queue: str, settings: object) -> None:
    from rest_framework.test import APIClient

    settings.HEALTH_CELERY_TIMEOUT_SECONDS = 60  # type: ignore[attr-defined]
    from controlplane.core.tasks import ping

    ping.apply_async(args=["warm-up"]).get(timeout=60)  # the worker is up once it answers
    response = APIClient().get("/healthz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ok"
    assert set(body["parts"]) == {"postgres", "redis", "celery"}
    assert all(part["ok"] for part in body["parts"].values())


@pytest.mark.django_db
def test_healthz_is_503_when_no_worker_answers(settings: object) -> None:
    from rest_framework.test import APIClient

    from controlplane.celery_app import app

    settings.HEALTH_CELERY_TIMEOUT_SECONDS = 0.5  # type: ignore[attr-defined]
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = f"nobody-listens-{uuid.uuid4().hex[:8]}"
    try:
        response = APIClient().get("/healthz")
    finally:
        app.conf.task_default_queue = previous
    body = response.json()
    assert response.status_code == 503
    assert body["parts"]["postgres"]["ok"] and body["parts"]["redis"]["ok"]
    assert not body["parts"]["celery"]["ok"]
