"""Issue 15: revoking a key, or removing its owner from the tenant, ends its WebSocket tails and v2 consumer
instances within 5 s, on every web process, while other credentials' keep working.

The service runs as ``sluice up`` (one web process) plus a second web process; the tails and instances live on
the second one and the revocation goes through the first, so the news has to cross processes (Redis).
Real HTTP, WebSocket and Kafka clients; the 5 s are deadlines on conditions polled, never sleeps.
"""

from __future__ import annotations

import asyncio
import base64
import http.cookiejar
import json
import subprocess
import sys
import time
import urllib.request
import uuid
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.kafkarest.conftest import ROOT, RestStack
from tests.kafkarest.tailing import DEADLINE, aproduce, next_frame, subscribe
from tests.kafkarest.v2_helpers import BINARY, new_topic, until, v2, web_process

pytestmark = pytest.mark.xdist_group("kafkarest")

WITHIN = 5.0  # issue 15: a revoked credential's tails and instances end within this


async def tail(stack: RestStack, base: str, topic: str, *, key: str | None = None,
               cookie: str | None = None) -> ClientConnection:
    """A subscribed tail on the web process at ``base``, opened with an API key or a session cookie."""
    headers = {"Authorization": stack.basic(key)} if key else {"Cookie": cookie or ""}
    url = f"ws://{base.removeprefix('http://')}/ws/clusters/{stack.cluster_id}/topics/{topic}/tail"
    ws = await connect(url, additional_headers=headers, proxy=None, open_timeout=DEADLINE)
    await subscribe(ws, **{"from": "earliest"})
    return ws


async def closed_within(ws: ClientConnection, seconds: float) -> tuple[dict[str, Any], int | None]:
    """The tail's last frame and its close code, which must come within ``seconds``."""
    last: dict[str, Any] = {}

    async def drain() -> None:
        nonlocal last
        try:
            while True:
                last = json.loads(await ws.recv())
        except ConnectionClosed:
            pass
    await asyncio.wait_for(drain(), seconds)
    return last, ws.close_code


async def still_tails(ws: ClientConnection, stack: RestStack, topic: str, value: str) -> None:
    await aproduce(stack, topic, [{"value": value.encode()}])
    while True:
        frame = await next_frame(ws)
        assert frame["type"] in ("records", "progress"), frame
        if any(r["value"] == value for r in frame.get("records", [])):
            return


def instance(stack: RestStack, base: str, group: str, key: str, topic: str) -> str:
    """A v2 consumer instance made on the web process at ``base`` with ``key``, subscribed to ``topic`` and a
    member of its group (it joins at its first read)."""
    made = v2(stack, "POST", f"/consumers/{group}", {"format": "binary", "auto.offset.reset": "earliest",
                                                    "fetch.min.bytes": 1}, key=key, base=base)
    assert made.status == 200, made.body
    path = f"/consumers/{group}/instances/{made.json()['instance_id']}"
    assert v2(stack, "POST", f"{path}/subscription", {"topics": [topic]}, key=key, base=base).status == 204

    def joined() -> bool:
        answer = v2(stack, "GET", f"{path}/records?timeout=200", accept=BINARY, key=key, base=base)
        assert answer.status == 200, answer.body
        return not group_empty(stack, group)
    until(joined, f"the instance to join {group}")
    return path


def reads(stack: RestStack, path: str, key: str, value: str) -> bool:
    """Reads through the instance until ``value`` comes (an instance that works)."""
    got: list[str] = []

    def read() -> bool:
        answer = v2(stack, "GET", f"{path}/records?timeout=500", accept=BINARY, key=key)
        assert answer.status == 200, answer.body
        got.extend(base64.b64decode(r["value"]).decode() for r in answer.json())
        return value in got
    return until(read, f"{value} through {path}")


def group_empty(stack: RestStack, group: str) -> bool:
    """The group has no member left (the instance's consumer left it when it was closed)."""
    admin = AdminClient(stack.kafka)
    described = admin.describe_consumer_groups([group])[group].result(10)
    return not described.members and described.state in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD)


def test_revoking_a_key_ends_its_tails_and_instances_on_every_web_process(rest_stack: RestStack) -> None:
    stack = rest_stack
    topic = new_topic(stack, partitions=1)
    doomed = stack.api("POST", "/api-keys", {"description": "revoked by the test"})  # the owner's, as the demo key
    key = f"{doomed['key_id']}:{doomed['secret']}"
    group, other_group = f"g-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"

    with web_process(stack) as (other, _):
        async def scenario() -> None:
            ws = await tail(stack, other, topic, key=key)
            kept = await tail(stack, other, topic, key=stack.key)
            revoked_instance = await asyncio.to_thread(instance, stack, other, group, key, topic)
            kept_instance = await asyncio.to_thread(instance, stack, other, other_group, stack.key, topic)

            answer = await asyncio.to_thread(stack.request, "DELETE",
                                             f"/api/v1/tenants/{stack.tenant}/api-keys/{doomed['key_id']}")
            assert answer.status == 204, answer.body
            last, code = await closed_within(ws, WITHIN)
            assert code == 4401, (code, last)
            assert last["type"] == "error" and last["code"] == "credentials_revoked", last
            assert "revoked" in last["message"] and last["cursor"] == {"0": 0}

            # The instance is deleted: the same principal's other key (the demo key) is told it does not exist,
            # as for an unknown instance, and the revoked key authenticates nowhere.
            deadline = time.monotonic() + WITHIN
            while (answer := await asyncio.to_thread(v2, stack, "GET", f"{revoked_instance}/subscription")).status \
                    != 404:
                assert time.monotonic() < deadline, ("the revoked key's instance is still there", answer.body)
                await asyncio.sleep(0.05)  # a poll interval within the deadline
            assert answer.json()["error_code"] == 40403
            await asyncio.to_thread(until, lambda: group_empty(stack, group), "its consumer to leave the group",
                                    WITHIN)
            refused = await asyncio.to_thread(v2, stack, "GET", f"{revoked_instance}/subscription", key=key,
                                              base=other)
            assert refused.status == 401, refused.body
            with pytest.raises(InvalidStatus) as upgrade:
                await tail(stack, other, topic, key=key)
            assert upgrade.value.response.status_code == 401

            # Another key's tail and instance go on.
            await still_tails(kept, stack, topic, "after the revocation")
            assert await asyncio.to_thread(reads, stack, kept_instance, stack.key, "after the revocation")
            await kept.close()
            assert (await asyncio.to_thread(v2, stack, "DELETE", kept_instance)).status == 204

        asyncio.run(scenario())


def _member(stack: RestStack) -> tuple[str, str, str, str]:
    """A new user with a password, invited to the demo tenant as an admin and accepting (the role's derived ACLs let
    it read), with an API key; returns (username, password, key, membership id). Made with manage.py's shell."""
    name = f"member-{uuid.uuid4().hex[:8]}"
    password = f"pw-{uuid.uuid4().hex}"
    script = (
        "from django.contrib.auth import get_user_model\n"
        "from controlplane.core.actors import SYSTEM_ACTOR\n"
        "from controlplane.tenancy import services\n"
        "from controlplane.tenancy.models import Tenant\n"
        f"user = get_user_model().objects.create_user('{name}', email='{name}@example.com', password='{password}')\n"
        f"tenant = Tenant.objects.get(slug='{stack.tenant}')\n"
        f"invitation = services.invitation_create(tenant=tenant, email='{name}@example.com', role='admin', "
        "actor=SYSTEM_ACTOR)\n"
        "membership = services.invitation_accept(invitation=invitation.invitation, user=user)\n"
        "issued = services.api_key_create(tenant=tenant, actor=SYSTEM_ACTOR, owner_user=user)\n"
        "print('MADE', issued.api_key.key_id + ':' + issued.secret, membership.id)\n")
    out = subprocess.run([sys.executable, "manage.py", "shell", "-c", script], cwd=ROOT, env=stack.env,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    _, key, membership = next(line.split() for line in out.splitlines() if line.startswith("MADE "))
    return name, password, key, membership


def _session_cookie(stack: RestStack, base: str, username: str, password: str) -> str:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    request = urllib.request.Request(f"{base}/api/v1/auth/login", method="POST",
                                     data=json.dumps({"username": username, "password": password}).encode(),
                                     headers={"Content-Type": "application/json"})
    with opener.open(request, timeout=30) as answer:
        assert answer.status == 200
    return "; ".join(f"{c.name}={c.value}" for c in jar)


def test_removing_a_member_ends_their_key_and_session_tails_and_instances(rest_stack: RestStack) -> None:
    stack = rest_stack
    topic = new_topic(stack, partitions=1)
    username, password, key, membership = _member(stack)
    group = f"g-{uuid.uuid4().hex[:8]}"

    with web_process(stack) as (other, _):
        cookie = _session_cookie(stack, other, username, password)

        async def admitted() -> ClientConnection:
            # The admin role's ACLs reach the cluster through reconcile: until then the tail is refused (4403).
            deadline = time.monotonic() + DEADLINE
            while True:
                try:
                    return await tail(stack, other, topic, key=key)
                except (AssertionError, ConnectionClosed):  # an error frame instead of "subscribed"
                    assert time.monotonic() < deadline, "the member's ACLs never reached the cluster"
                    await asyncio.sleep(0.2)  # a poll interval within the deadline

        async def scenario() -> None:
            by_key = await admitted()
            by_session = await tail(stack, other, topic, cookie=cookie)
            kept = await tail(stack, other, topic, key=stack.key)
            member_instance = await asyncio.to_thread(instance, stack, other, group, key, topic)

            answer = await asyncio.to_thread(stack.request, "DELETE",
                                             f"/api/v1/tenants/{stack.tenant}/members/{membership}")
            assert answer.status == 204, answer.body
            (key_last, key_code), (session_last, session_code) = await asyncio.gather(
                closed_within(by_key, WITHIN), closed_within(by_session, WITHIN))
            assert (key_code, key_last["code"]) == (4401, "credentials_revoked"), key_last
            assert (session_code, session_last["code"]) == (4401, "credentials_revoked"), session_last
            assert "removed" in session_last["message"]

            refused = await asyncio.to_thread(v2, stack, "GET", f"{member_instance}/subscription", key=key)
            assert refused.status == 401, refused.body
            # The instance was deleted: back in the tenant, the same principal (their session) is told it does
            # not exist. (Its group membership may outlive it by the group's session timeout: the member's ACLs
            # can be gone before its consumer's LeaveGroup reaches the broker, which then refuses it.)
            again = await asyncio.to_thread(stack.add_member, username, password, f"{username}@example.com",
                                            "viewer")
            deadline = time.monotonic() + WITHIN
            while (answer := await asyncio.to_thread(v2, stack, "GET", f"{member_instance}/subscription", key=None,
                                                     base=other, headers={"Cookie": cookie})).status != 404:
                assert time.monotonic() < deadline, ("the removed member's instance is still there", answer.body)
                await asyncio.sleep(0.05)  # a poll interval within the deadline
            assert answer.json()["error_code"] == 40403, answer.body
            await asyncio.to_thread(stack.api, "DELETE", f"/members/{again['id']}")  # and out again: the session
            with pytest.raises(InvalidStatus) as upgrade:  # reaches none of the tenant's clusters
                await tail(stack, other, topic, cookie=cookie)
            assert upgrade.value.response.status_code == 404

            await still_tails(kept, stack, topic, "after the removal")
            await kept.close()

        asyncio.run(scenario())
