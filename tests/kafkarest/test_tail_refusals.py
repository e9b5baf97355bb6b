"""The WebSocket tail refuses bad upgrades (HTTP answers) and bad messages (error frame, close code)."""

from __future__ import annotations

import asyncio
import http.cookiejar
import json
import time
import urllib.request
import uuid
from typing import Any

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.kafkarest.conftest import RestStack
from tests.kafkarest.tailing import next_frame, open_tail, subscribe, topic_name

pytestmark = pytest.mark.xdist_group("kafkarest")


@pytest.fixture(scope="module")
def topic(rest_stack: RestStack) -> str:
    name = topic_name("tail-refuse")
    rest_stack.create_topic(name, partitions=2)
    return name


class Console:
    """The demo owner logged in as the web console is: a session cookie (and CSRF token for writes)."""

    def __init__(self, stack: RestStack) -> None:
        self.stack = stack
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        self.post("/api/v1/auth/login", {"username": stack.username, "password": stack.password})

    @property
    def cookie(self) -> str:
        return "; ".join(f"{c.name}={c.value}" for c in self.jar)

    def post(self, path: str, body: Any) -> Any:
        csrf = next((c.value for c in self.jar if c.name == "csrftoken"), "")
        request = urllib.request.Request(self.stack.base + path, method="POST", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json", "X-CSRFToken": csrf,
                                                  "Origin": self.stack.base, "Referer": self.stack.base + "/"})
        with self.opener.open(request, timeout=30) as response:
            assert response.status < 300
            return json.loads(response.read() or b"null")


def refused(stack: RestStack, topic: str, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    async def attempt() -> tuple[int, dict[str, Any]]:
        with pytest.raises(InvalidStatus) as error:
            await open_tail(stack, topic, **kwargs)
        response = error.value.response
        return response.status_code, json.loads(response.body or b"{}")
    return asyncio.run(attempt())


def test_unauthenticated_and_bad_credentials_are_401(rest_stack: RestStack, topic: str) -> None:
    assert refused(rest_stack, topic, key=None)[0] == 401
    key_id = rest_stack.key.split(":")[0]
    status, body = refused(rest_stack, topic, key=f"{key_id}:{'0' * 64}")
    assert (status, body["error_code"]) == (401, 401)
    assert refused(rest_stack, topic, key=None, headers={"Authorization": "Bearer nonsense"})[0] == 401


def test_unknown_and_other_tenants_clusters_are_the_same_404(rest_stack: RestStack, topic: str) -> None:
    unknown = refused(rest_stack, topic, cluster_id="skc-doesnotexist")
    assert unknown[0] == 404 and unknown[1]["error_code"] == 404
    # A second tenant of the same user, with its own key: the demo cluster is not its cluster.
    slug = f"other-{uuid.uuid4().hex[:6]}"
    session = Console(rest_stack)
    session.post("/api/v1/tenants", {"slug": slug})
    account = session.post(f"/api/v1/tenants/{slug}/service-accounts", {"name": "outsider", "role": "admin"})
    key = session.post(f"/api/v1/tenants/{slug}/api-keys", {"service_account": account["id"]})
    status, body = refused(rest_stack, topic, key=f"{key['key_id']}:{key['secret']}")
    assert (status, body["error_code"]) == (unknown[0], unknown[1]["error_code"])
    assert body["message"] == f"Cluster {rest_stack.cluster_id} not found."


def test_unknown_topic_is_404(rest_stack: RestStack) -> None:
    status, body = refused(rest_stack, "no-such-topic")
    assert (status, body["error_code"]) == (404, 40401)


def test_viewer_role_suffices(rest_stack: RestStack, topic: str) -> None:
    """The viewer role lets a key open tails; the cluster's ACLs (READ on the topic) let its principal read."""
    viewer = rest_stack.new_key("viewer")
    rest_stack.grant(viewer, "TOPIC", topic, "READ")

    async def scenario() -> dict[str, Any] | None:
        async with await open_tail(rest_stack, topic, key=viewer) as ws:
            try:  # refused (not_authorized, then closed) until reconcile has put the ACL on the cluster
                await ws.send(json.dumps({"type": "subscribe"}))
                answer = await next_frame(ws)
            except ConnectionClosed:
                return None
            return answer if answer.get("type") == "subscribed" else None

    deadline = time.monotonic() + 60
    subscribed = asyncio.run(scenario())
    while subscribed is None and time.monotonic() < deadline:
        time.sleep(0.2)  # polling for the ACL to reach the cluster, within the deadline
        subscribed = asyncio.run(scenario())
    assert subscribed is not None and subscribed["partitions"] == [0, 1]


def test_origin(rest_stack: RestStack, topic: str) -> None:
    status, body = refused(rest_stack, topic, origin="https://evil.example")
    assert (status, body["error_code"]) == (403, 403)

    async def same_site() -> None:
        async with await open_tail(rest_stack, topic, origin=f"http://127.0.0.1:{rest_stack.port}") as ws:
            await subscribe(ws)

    asyncio.run(same_site())


def test_session_cookie_from_the_console(rest_stack: RestStack, topic: str) -> None:
    cookie = Console(rest_stack).cookie
    assert "sessionid=" in cookie

    async def console() -> None:
        async with await open_tail(rest_stack, topic, key=None, headers={"Cookie": cookie},
                                   origin=f"http://127.0.0.1:{rest_stack.port}") as ws:
            await subscribe(ws)

    asyncio.run(console())
    # The same cookie from a foreign page (cross-site WebSocket hijacking) is refused.
    assert refused(rest_stack, topic, key=None, headers={"Cookie": cookie}, origin="https://evil.example")[0] == 403


async def _answer(stack: RestStack, topic: str, *messages: str | bytes) -> tuple[dict[str, Any], int]:
    """Send messages, return the error frame and the close code."""
    async with await open_tail(stack, topic) as ws:
        for message in messages:
            await ws.send(message)
        frame = await next_frame(ws)
        while frame["type"] != "error":
            frame = await next_frame(ws)
        with pytest.raises(ConnectionClosed) as closed:
            await next_frame(ws)
        assert closed.value.rcvd is not None
        return frame, closed.value.rcvd.code


@pytest.mark.parametrize(("messages", "code", "close"), [
    (["not json"], "invalid_message", 4400),
    ([b"\x00binary"], "invalid_message", 4400),
    (['["a list"]'], "invalid_message", 4400),
    (['{"type": "hello"}'], "invalid_message", 4400),
    (['{"type": "subscribe", "from": "yesterday"}'], "invalid_subscribe", 4400),
    (['{"type": "subscribe", "from": {"offsets": {"x": 1}}}'], "invalid_subscribe", 4400),
    (['{"type": "subscribe", "from": {"last": -1}}'], "invalid_subscribe", 4400),
    (['{"type": "subscribe", "partitions": "0"}'], "invalid_subscribe", 4400),
    (['{"type": "subscribe", "partition": [0]}'], "invalid_subscribe", 4400),
    (['{"type": "subscribe", "until": "forever"}'], "invalid_subscribe", 4400),
    (['{"type": "subscribe", "filter": 7}'], "invalid_filter", 4400),
    (['{"type": "subscribe", "partitions": [0, 9]}'], "partition_not_found", 4404),
    (['{"type": "subscribe"}', '{"type": "subscribe"}'], "already_subscribed", 4400),
    (['{"type": "subscribe"}', '{"type": "nope"}'], "invalid_message", 4400),
])
def test_malformed_messages(rest_stack: RestStack, topic: str, messages: list[str | bytes], code: str,
                            close: int) -> None:
    frame, closed = asyncio.run(_answer(rest_stack, topic, *messages))
    assert (frame["code"], closed) == (code, close), frame


def test_ping_pong_before_and_after_subscribing(rest_stack: RestStack, topic: str) -> None:
    async def scenario() -> None:
        async with await open_tail(rest_stack, topic) as ws:
            await ws.send(json.dumps({"type": "ping", "id": "a"}))
            assert await next_frame(ws) == {"type": "pong", "id": "a"}
            await subscribe(ws)
            await ws.send(json.dumps({"type": "ping", "id": 2}))
            assert await next_frame(ws) == {"type": "pong", "id": 2}
            await ws.ping()  # a protocol-level ping is answered by the server's WebSocket layer

    asyncio.run(scenario())
