"""The DRF produce paths (a console session; any produce Django serves) answer as the ASGI paths (API keys):
both go through the one engine (``kafkarest.produce``), so the edge cases where the two used to differ are
asked of both here, against the real service, and must get the same HTTP status and Confluent error code.
"""

from __future__ import annotations

import base64
import http.cookiejar
import json
import urllib.error
import urllib.request
import uuid
from typing import Any

import pytest

from tests.kafkarest.conftest import Answer, RestStack
from tests.kafkarest.v2_helpers import BINARY

pytestmark = pytest.mark.xdist_group("kafkarest")


class Session:
    """A signed-in console session on the service: its requests carry no Authorization, so Django serves them."""

    def __init__(self, stack: RestStack) -> None:
        self.base = stack.base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        login = {"username": stack.username, "password": stack.password}
        self.opener.open(urllib.request.Request(f"{self.base}/api/v1/auth/login", method="POST",
                                                headers={"Content-Type": "application/json"},
                                                data=json.dumps(login).encode()), timeout=60).close()
        self.csrf = next(c.value for c in self.jar if c.name == "csrftoken")

    def request(self, method: str, path: str, body: Any = None, *, raw: bytes | None = None,
                headers: dict[str, str] | None = None) -> Answer:
        sent = {"Content-Type": "application/json", "X-CSRFToken": self.csrf, "Referer": f"{self.base}/",
                **(headers or {})}
        data = raw if raw is not None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=sent)
        try:
            with self.opener.open(request, timeout=60) as response:
                return Answer(response.status, dict(response.headers), response.read())
        except urllib.error.HTTPError as exc:
            return Answer(exc.code, dict(exc.headers), exc.read())


@pytest.fixture(scope="module")
def session(rest_stack: RestStack) -> Session:
    return Session(rest_stack)


@pytest.fixture(scope="module")
def topic(rest_stack: RestStack) -> str:
    name = f"drf-{uuid.uuid4().hex[:8]}"
    rest_stack.create_topic(name, partitions=3)
    return name


def both(stack: RestStack, session: Session, path: str, body: Any = None, *, raw: bytes | None = None,
         headers: dict[str, str] | None = None) -> tuple[Answer, Answer]:
    """The same POST through the ASGI path (the owner's API key) and the DRF path (the owner's session)."""
    asgi = stack.request("POST", path, body, raw=raw, headers=headers)
    drf = session.request("POST", path, body, raw=raw, headers=headers)
    return asgi, drf


def codes(*answers: Answer) -> list[tuple[int, int | None]]:
    return [(a.status, a.json().get("error_code")) for a in answers]


def _records(stack: RestStack, topic: str) -> str:
    return f"/kafka/v3/clusters/{stack.cluster_id}/topics/{topic}/records"


def test_the_session_path_produces_and_reports_offsets(rest_stack: RestStack, session: Session, topic: str) -> None:
    one = session.request("POST", _records(rest_stack, topic), {"partition_id": 1, "key": {"type": "STRING",
                                                                                             "data": "k"},
                                                                 "value": {"type": "STRING", "data": "v"}})
    assert one.status == 200, one.body
    report = one.json()
    assert (report["error_code"], report["partition_id"], report["topic_name"]) == (200, 1, topic)
    batch = session.request("POST", _records(rest_stack, topic) + ":batch", {"entries": [
        {"id": str(i), "partition_id": 2, "value": {"type": "STRING", "data": f"b{i}"}} for i in range(5)]})
    assert batch.status == 207 and not batch.json()["failures"], batch.body
    offsets = [s["offset"] for s in batch.json()["successes"]]
    assert offsets == list(range(offsets[0], offsets[0] + 5))
    v2 = session.request("POST", f"/kafka/v2/clusters/{rest_stack.cluster_id}/topics/{topic}",
                         {"records": [{"value": base64.b64encode(b"x").decode(), "partition": 0}] * 3},
                         headers={"Content-Type": BINARY})
    assert v2.status == 200, v2.body
    assert [(o["partition"], o["error_code"]) for o in v2.json()["offsets"]] == [(0, None)] * 3


@pytest.mark.parametrize(("body", "status", "code"), [
    ({"value": {"type": "BINARY", "data": "%%%"}}, 422, 42206),
    ({"value": {"type": "AVRO", "data": {}}}, 400, 400),  # a type with a schema needs its schema (Confluent's 400)
    ({"partition_id": -1, "value": None}, 422, 42206),
    ({"partition_id": 7, "value": None}, 404, 40402),
    ({"value": None, "timestamp": "yesterday"}, 422, 42206),
])
def test_bad_records_answer_alike(rest_stack: RestStack, session: Session, topic: str, body: Any, status: int,
                                  code: int) -> None:
    assert codes(*both(rest_stack, session, _records(rest_stack, topic), body)) == [(status, code)] * 2


def test_request_level_errors_answer_alike(rest_stack: RestStack, session: Session, topic: str) -> None:
    path = _records(rest_stack, topic)
    assert codes(*both(rest_stack, session, _records(rest_stack, "no-such-topic"), {"value": None})) \
        == [(404, 40401)] * 2
    for raw in (b'{"value": {"type": "STRING", "data": "x"', b"[1, 2]", b"  "):
        assert codes(*both(rest_stack, session, path, raw=raw)) == [(422, 42206)] * 2, raw
    mixed = {"entries": [{"id": "a", "value": {"type": "STRING", "data": "ok"}},
                         {"id": "b", "value": {"type": "BINARY", "data": "!!"}},
                         {"id": "c", "partition_id": 9, "value": None}]}
    for answer in both(rest_stack, session, path + ":batch", mixed):
        assert answer.status == 207, answer.body
        assert {f["id"]: f["error_code"] for f in answer.json()["failures"]} == {"b": 42206, "c": 40402}
    for bad in ({"entries": []}, {"entries": [{"id": "x"}, {"id": "x"}]}, {"nope": 1}):
        assert codes(*both(rest_stack, session, path + ":batch", bad)) == [(422, 42208)] * 2, bad


def test_v2_bad_input_answers_alike(rest_stack: RestStack, session: Session, topic: str) -> None:
    """v2 through a session used to be a 415 for every request (no parser for the embedded formats)."""
    path = f"/kafka/v2/clusters/{rest_stack.cluster_id}/topics/{topic}"
    binary = {"Content-Type": BINARY}
    assert codes(*both(rest_stack, session, path, {"records": [{"value": "%%%"}]}, headers=binary)) \
        == [(422, 42206)] * 2
    assert codes(*both(rest_stack, session, path, {"records": []}, headers=binary)) == [(422, 422)] * 2
    assert codes(*both(rest_stack, session, path + "/partitions/9", {"records": [{"value": "eA=="}]},
                       headers=binary)) == [(404, 40402)] * 2
    assert codes(*both(rest_stack, session, path, {"records": [{"value": "eA=="}]},
                       headers={"Content-Type": "text/plain"})) == [(415, 415)] * 2


def test_a_record_the_topic_refuses_as_too_large_is_413_on_both_paths(rest_stack: RestStack,
                                                                      session: Session) -> None:
    """Also a body over Django's 2.5 MB upload limit: the DRF path answered it with an HTML 400."""
    name = f"drf-small-{uuid.uuid4().hex[:6]}"
    rest_stack.create_topic(name, partitions=1, configs={"max.message.bytes": "2048"})
    path = _records(rest_stack, name)
    big = {"value": {"type": "BINARY", "data": base64.b64encode(b"z" * 10_000).decode()}}
    assert codes(*both(rest_stack, session, path, big)) == [(413, 413)] * 2
    huge = {"value": {"type": "BINARY", "data": base64.b64encode(b"z" * 3_000_000).decode()}}
    assert codes(*both(rest_stack, session, path, huge)) == [(413, 413)] * 2
