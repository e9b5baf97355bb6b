"""The REST Proxy answers as Confluent's does where clients can tell: commit bodies, empty and malformed produce
bodies, unacceptable ``Accept`` headers and unknown paths -- over real HTTP against the test stack."""

from __future__ import annotations

import uuid

import pytest

from tests.kafkarest.conftest import Answer, RestStack
from tests.kafkarest.v2_helpers import BINARY, JSON, V2, b64, header, new_topic, scoped_key, until, v2

pytestmark = pytest.mark.xdist_group("kafkarest")

NOT_FOUND = {"error_code": 404, "message": "HTTP 404 Not Found"}
NOT_ACCEPTABLE = {"error_code": 406, "message": "HTTP 406 Not Acceptable"}


def _status_and_code(answer: Answer) -> tuple[int, int]:
    body = answer.json()
    assert isinstance(body["message"], str) and body["message"], body
    return answer.status, int(body["error_code"])


def test_an_explicit_commit_without_metadata_commits(rest_stack: RestStack) -> None:
    topic = new_topic(rest_stack, partitions=1)
    produced = v2(rest_stack, "POST", f"/topics/{topic}", {"records": [{"value": b64(b"a")}, {"value": b64(b"b")}]},
                  content_type=BINARY)
    assert produced.status == 200, produced.body
    group = f"g-{uuid.uuid4().hex[:8]}"
    created = v2(rest_stack, "POST", f"/consumers/{group}", {"format": "binary", "auto.offset.reset": "earliest",
                                                              "auto.commit.enable": "false"})
    assert created.status == 200, created.body
    instance = f"/consumers/{group}/instances/{created.json()['instance_id']}"
    partitions = {"partitions": [{"topic": topic, "partition": 0}]}
    assert v2(rest_stack, "POST", f"{instance}/assignments", partitions).status == 204
    until(lambda: v2(rest_stack, "GET", f"{instance}/records?timeout=500", accept=BINARY).json(), "a record")

    committed = v2(rest_stack, "POST", f"{instance}/offsets",
                   {"offsets": [{"topic": topic, "partition": 0, "offset": 0}]})
    assert committed.status == 200, committed.body
    offsets = v2(rest_stack, "GET", f"{instance}/offsets", partitions).json()["offsets"]
    assert [(o["partition"], o["offset"], o["metadata"]) for o in offsets] == [(0, 1, "")]
    assert v2(rest_stack, "DELETE", instance).status == 204


@pytest.fixture(scope="module")
def scoped(rest_stack: RestStack) -> str:
    """A member's key scoped to the demo cluster (root paths need one), with a topic it may produce to."""
    key = scoped_key(rest_stack, "member")
    rest_stack.create_topic("orders-v2-bodies", partitions=1)
    rest_stack.grant(key, "TOPIC", "orders-v2-bodies", "WRITE", "DESCRIBE")
    until(lambda: rest_stack.request("POST", "/topics/orders-v2-bodies", raw=b'{"records": [{"value": "eA=="}]}',
                                     headers={"Content-Type": BINARY}, key=key).status == 200,
          "the cluster to apply the key's ACLs")  # from reconcile
    return key


@pytest.fixture(scope="module")
def accept_topic(rest_stack: RestStack) -> str:
    rest_stack.create_topic("orders-accept", partitions=1)
    return "orders-accept"


@pytest.mark.parametrize(("raw", "status", "code"), [
    (b'{"records": []}', 422, 422),
    (b"{}", 422, 422),
    (b'{"records": null}', 422, 422),
    (b'{"records": [', 400, 400),
    (b"not json", 400, 400),
    (b'[{"value": "eA=="}]', 400, 400),
    (b'{"records": {"value": "eA=="}}', 400, 400),
    (b'{"records": ["eA=="]}', 400, 400),
    (b'{"records": [{"value": "not base64!"}]}', 422, 42206),
])
@pytest.mark.parametrize("prefix", ["cluster", "root"])
def test_v2_produce_bodies_answer_as_confluent(rest_stack: RestStack, scoped: str, raw: bytes, status: int,
                                               code: int, prefix: str) -> None:
    topic = "orders-v2-bodies"
    path = (f"/kafka/v2/clusters/{rest_stack.cluster_id}" if prefix == "cluster" else "") + f"/topics/{topic}"
    answer = rest_stack.request("POST", path, raw=raw, headers={"Content-Type": BINARY}, key=scoped)
    assert _status_and_code(answer) == (status, code), answer.body


def test_v2_consumer_bodies_of_the_wrong_shape_are_400(rest_stack: RestStack) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    assert _status_and_code(v2(rest_stack, "POST", f"/consumers/{group}", [1])) == (400, 400)
    created = v2(rest_stack, "POST", f"/consumers/{group}", {"format": "binary"})
    instance = f"/consumers/{group}/instances/{created.json()['instance_id']}"
    for path, body in [("/assignments", {"partitions": {"topic": "t"}}), ("/assignments", "text"),
                       ("/positions/beginning", [1]), ("/offsets", {"offsets": 5})]:
        assert _status_and_code(v2(rest_stack, "POST", instance + path, body)) == (400, 400), (path, body)
    bad = rest_stack.request("POST", f"/kafka/v2/clusters/{rest_stack.cluster_id}{instance}/offsets",
                             raw=b'{"offsets": [', headers={"Content-Type": V2})
    assert _status_and_code(bad) == (400, 400)
    assert v2(rest_stack, "DELETE", instance).status == 204


@pytest.mark.parametrize("accept", ["text/html", "application/xml", "text/plain, image/png",
                                    "application/json;q=0"])
def test_an_accept_the_endpoint_cannot_produce_is_406(rest_stack: RestStack, accept_topic: str,
                                                      accept: str) -> None:
    topic = accept_topic
    v3 = f"/kafka/v3/clusters/{rest_stack.cluster_id}"
    answers = [
        v2(rest_stack, "GET", "/topics", accept=accept),
        v2(rest_stack, "GET", "/brokers", accept=accept),
        v2(rest_stack, "POST", f"/topics/{topic}", {"records": [{"value": b64(b"x")}]}, content_type=BINARY,
           accept=accept),
        rest_stack.request("GET", f"{v3}/topics", headers={"Accept": accept}),
        rest_stack.request("POST", f"{v3}/topics/{topic}/records", {"value": {"type": "STRING", "data": "x"}},
                           headers={"Accept": accept}),
        rest_stack.request("POST", f"{v3}/topics/{topic}/records:batch", {"entries": []},
                           headers={"Accept": accept}),
    ]
    for answer in answers:
        assert (answer.status, answer.json()) == (406, NOT_ACCEPTABLE), answer.body


@pytest.mark.parametrize("accept", [None, "*/*", "application/*", "application/json", V2,
                                    "application/vnd.kafka+json", "text/html, */*;q=0.1"])
def test_acceptable_accepts_still_work(rest_stack: RestStack, accept_topic: str, accept: str | None) -> None:
    headers = {} if accept is None else {"Accept": accept}
    v3 = f"/kafka/v3/clusters/{rest_stack.cluster_id}"
    base = f"/kafka/v2/clusters/{rest_stack.cluster_id}"
    assert rest_stack.request("GET", f"{base}/topics", headers=headers).status == 200
    produced = rest_stack.request("POST", f"{base}/topics/{accept_topic}", raw=b'{"records": [{"value": "eA=="}]}',
                                  headers={"Content-Type": BINARY, **headers})
    assert produced.status == 200, produced.body
    assert header(produced, "Content-Type").startswith(V2)
    if accept in (None, "*/*", "application/*", "application/json", "text/html, */*;q=0.1"):
        assert rest_stack.request("GET", f"{v3}/topics", headers=headers).status == 200
        record = rest_stack.request("POST", f"{v3}/topics/{accept_topic}/records",
                                    {"value": {"type": "STRING", "data": "x"}}, headers=headers)
        assert record.status == 200, record.body


def test_a_records_read_accepts_its_embedded_type(rest_stack: RestStack) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    created = v2(rest_stack, "POST", f"/consumers/{group}", {"format": "json"})
    instance = f"/consumers/{group}/instances/{created.json()['instance_id']}"
    assert v2(rest_stack, "GET", f"{instance}/records?timeout=10", accept=JSON).status == 200
    assert (v2(rest_stack, "GET", f"{instance}/records", accept="text/csv").json()) == NOT_ACCEPTABLE
    assert v2(rest_stack, "DELETE", instance).status == 204


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/kafka/v3/nope"),
    ("GET", "/kafka/v3/clusters/{cluster}/nope/deeper"),
    ("POST", "/kafka/v3/clusters/{cluster}/topics/t/records/extra"),
    ("GET", "/kafka/v9/clusters"),
    ("GET", "/kafka/"),
    ("GET", "/kafka"),
    ("GET", "/kafka/v2/clusters/{cluster}/nope"),
    ("GET", "/topics/t/partitions/0/offsets/more"),
    ("POST", "/consumers/g/instances/i/nope"),
    ("DELETE", "/brokers/1/extra"),
])
def test_unknown_rest_paths_answer_confluents_404(rest_stack: RestStack, method: str, path: str) -> None:
    answer = rest_stack.request(method, path.replace("{cluster}", rest_stack.cluster_id),
                                {} if method == "POST" else None)
    assert (answer.status, answer.json()) == (404, NOT_FOUND), answer.body
    assert header(answer, "Content-Type").startswith("application/json")


def test_the_management_api_keeps_its_own_404(rest_stack: RestStack) -> None:
    answer = rest_stack.request("GET", "/api/v1/nope")
    assert answer.status == 404 and answer.json()["code"] == "not_found"
