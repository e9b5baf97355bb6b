"""REST request-rate limits: 429 with Retry-After per API key, Confluent's 42901 on REST Proxy paths (the DRF
views and the ASGI fast path alike), one budget across web processes (Redis), and bad settings refused.

The service is served by a real uvicorn on a free loopback port (in this process, so it sees the test's
committed rows) and called with a real HTTP client; a second process shares the budget through Redis.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from django.test import override_settings

from controlplane.core import ratelimit
from controlplane.tenancy.models import Role
from sluice.embedded import free_port
from tests.controlplane.conftest import TenantWorld

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def server(transactional_db: None) -> Iterator[str]:
    from controlplane.asgi import application

    port = free_port()
    config = uvicorn.Config(application, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    instance = uvicorn.Server(config)
    thread = threading.Thread(target=instance.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not instance.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.01)  # polling a condition, within the deadline
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        instance.should_exit = True
        thread.join(10)


def call(url: str, key: tuple[Any, str], method: str = "GET", body: Any = None) -> tuple[int, dict[str, str], Any]:
    api_key, secret = key
    headers = {"Authorization": f"Bearer {api_key.key_id}:{secret}"}
    data = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, _lower(response.headers), json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, _lower(exc.headers), json.loads(exc.read() or b"null")


def _lower(headers: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in headers.items()}


def test_the_management_api_answers_429_with_retry_after_per_key(server: str, world_a: TenantWorld) -> None:
    url = f"{server}{world_a.base}/clusters"
    owner, admin = world_a.keys[Role.OWNER], world_a.keys[Role.ADMIN]
    with override_settings(SLUICE_API_RATE_LIMIT="3/minute"):
        assert [call(url, owner)[0] for _ in range(3)] == [200, 200, 200]
        status, headers, body = call(url, owner)
        assert status == 429, body
        assert 1 <= int(headers["retry-after"]) <= 60, (headers, body)
        assert body["code"] == "throttled" and body["extra"]["retry_after_seconds"] == int(headers["retry-after"])
        assert call(url, admin)[0] == 200  # another key has its own budget
        # Another web process sees the same budget: it is counted in Redis, not in this process.
        other = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c",
             "from controlplane.core import ratelimit; "
             f"print(ratelimit.hit('api', 'key:{owner[0].key_id}'))"],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
            env={**os.environ, "SLUICE_API_RATE_LIMIT": "3/minute"})
        assert other.returncode == 0, other.stderr
        assert "Refusal(limit='3 per 1 minute'" in other.stdout


def test_rest_proxy_paths_answer_42901_on_drf_and_on_the_fast_path(server: str, world_a: TenantWorld) -> None:
    member = world_a.keys[Role.MEMBER]
    with override_settings(SLUICE_KAFKAREST_RATE_LIMIT="2/minute"):
        clusters = f"{server}/kafka/v3/clusters"
        assert [call(clusters, member)[0] for _ in range(2)] == [200, 200]
        status, headers, body = call(clusters, member)
        assert status == 429 and body["error_code"] == 42901 and "2 per 1 minute" in body["message"]
        assert int(headers["retry-after"]) >= 1
        # The streaming produce path (raw ASGI, outside DRF) spends the same key's budget.
        records = f"{server}/kafka/v3/clusters/skc-none/topics/orders/records"
        status, headers, body = call(records, member, "POST", {"value": {"type": "STRING", "data": "x"}})
        assert status == 429 and body["error_code"] == 42901, body
        assert int(headers["retry-after"]) >= 1
        v2 = f"{server}/kafka/v2/clusters/skc-none/topics/orders"
        status, headers, body = call(v2, member, "POST", {"records": [{"value": "eA=="}]})
        assert status == 429 and body["error_code"] == 42901
        # The management API has a budget of its own.
        assert call(f"{server}{world_a.base}/clusters", member)[0] == 200
    with override_settings(SLUICE_KAFKAREST_RATE_LIMIT=""):  # empty: no limit
        assert call(clusters, member)[0] == 200


def test_the_fast_path_counts_before_it_looks_anything_up(server: str, world_a: TenantWorld) -> None:
    viewer = world_a.keys[Role.VIEWER]
    records = f"{server}/kafka/v3/clusters/skc-none/topics/orders/records"
    with override_settings(SLUICE_KAFKAREST_RATE_LIMIT="1/minute"):
        first = call(records, viewer, "POST", {"value": {"type": "STRING", "data": "x"}})
        assert first[0] == 404 and first[2]["error_code"] == 404  # no such cluster for this tenant
        second = call(records, viewer, "POST", {"value": {"type": "STRING", "data": "x"}})
        assert second[0] == 429 and second[2]["error_code"] == 42901


@pytest.mark.parametrize("value", ["lots", "5/fortnight", "-3/second"])
def test_a_bad_limit_setting_stops_the_service_saying_which(value: str) -> None:
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120, env={**os.environ, "SLUICE_API_RATE_LIMIT": value})
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("django.core.exceptions.ImproperlyConfigured: SLUICE_API_RATE_LIMIT: "), last


def test_limits_parse_and_refusals_read_well() -> None:
    assert [str(item) for item in ratelimit.parse_limits("50/second;3000/minute")] == ["50 per 1 second",
                                                                                   "3000 per 1 minute"]
    assert ratelimit.parse_limits("") == ()
    refusal = ratelimit.Refusal("3 per 1 minute", 12)
    assert refusal.message == "Too many requests: the limit is 3 per 1 minute per API key. Retry after 12 s."
