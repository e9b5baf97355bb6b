"""Helpers shared by the REST Proxy v2 tests: topics made with a Kafka admin client, polling, media types."""

from __future__ import annotations

import base64
import contextlib
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any, TypeVar

import psutil
from confluent_kafka.admin import AdminClient, NewTopic

from sluice.embedded import free_port
from tests.kafkarest.conftest import ROOT, Answer, RestStack
from tests.support.polling import wait_until

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSON = "application/vnd.kafka.json.v2+json"

T = TypeVar("T")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def header(answer: Answer, name: str) -> str:
    return next((v for k, v in answer.headers.items() if k.lower() == name.lower()), "")


def new_topic(stack: RestStack, partitions: int = 3) -> str:
    """A fresh topic with leaders on every partition (made with a Kafka admin client)."""
    name = f"v2-{uuid.uuid4().hex[:10]}"
    admin = AdminClient(stack.kafka)
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)
    stack.wait_for_leaders(name, partitions)
    return name


until = wait_until  # the name this package's tests use


def v2(stack: RestStack, method: str, path: str, body: Any = None, *, content_type: str = V2,
       accept: str = V2, prefix: str | None = None, **kwargs: Any) -> Answer:
    """A v2 request under the demo cluster's prefix (``prefix=""`` for a root path)."""
    base = f"/kafka/v2/clusters/{stack.cluster_id}" if prefix is None else prefix
    raw = json.dumps(body).encode() if body is not None else None
    headers = {"Accept": accept, **({"Content-Type": content_type} if raw is not None else {})}
    headers.update(kwargs.pop("headers", {}))
    return stack.request(method, base + path, raw=raw, headers=headers, **kwargs)


def scoped_key(stack: RestStack, role: str = "member") -> str:
    """A service account's key scoped to the demo cluster."""
    account = stack.api("POST", "/service-accounts", {"name": f"sa-{uuid.uuid4().hex[:8]}", "role": role})
    made = stack.api("POST", "/api-keys", {"service_account": account["id"], "cluster": stack.cluster_pk})
    assert made["cluster"] == stack.cluster_pk
    return f"{made['key_id']}:{made['secret']}"


def other_tenant_key(stack: RestStack) -> str:
    """The key of the owner of a second tenant (made with manage.py, as an operator would)."""
    slug = f"other-{uuid.uuid4().hex[:8]}"
    script = (
        "from django.contrib.auth import get_user_model\n"
        "from controlplane.tenancy import services\n"
        "from controlplane.tenancy.selectors import actor_for\n"
        f"user = get_user_model().objects.create_user('{slug}', password='x-{uuid.uuid4().hex}')\n"
        f"tenant = services.tenant_create(slug='{slug}', name='{slug}', owner=user, actor=actor_for(user))\n"
        "issued = services.api_key_create(tenant=tenant, actor=actor_for(user), owner_user=user)\n"
        "print('KEY', issued.api_key.key_id + ':' + issued.secret)\n")
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT, env=stack.env,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    return next(line.split()[1] for line in out.splitlines() if line.startswith("KEY "))


@contextlib.contextmanager
def web_process(stack: RestStack) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """Another web process of the same service (its own port), as a second host of the web tier would be."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "controlplane.asgi:application", "--host", "127.0.0.1",
                             "--port", str(port), "--no-access-log"], cwd=ROOT, env=stack.env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    stack.extra.append(proc)
    base = f"http://127.0.0.1:{port}"
    try:
        until(lambda: proc.poll() is None and _up(stack, base), "the second web process")
        yield base, proc
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
        proc.wait(30)


def _up(stack: RestStack, base: str) -> bool:
    try:
        return stack.request("GET", "/healthz", base=base, key=None, timeout=5).status < 500
    except OSError:
        return False
