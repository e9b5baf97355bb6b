"""The registry's event-loop paths (``controlplane.registry.asgi``) through a real ``sluice up``: the same answers
as the views, Django's answers for everything they do not serve, hard deletes and revoked keys still honoured."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from tests.kafkarest.conftest import RestStack
from tests.support.polling import wait_until

pytestmark = pytest.mark.xdist_group("kafkarest")

JSON = "application/vnd.schemaregistry.v1+json"
WITHIN = 5.0  # the caches live 2 s (controlplane.registry.access / cache); a revocation or hard delete shows by then


def _schema(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "a", "type": "long"}]},
                      separators=(",", ":"))


def _call(stack: RestStack, method: str, path: str, body: Any = None, *, key: str | None = "owner",
          raw: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
    answer = stack.request(method, f"/schema-registry/{stack.cluster_id}{path}", body, key=key, raw=raw,
                           headers={"Content-Type": JSON, **(headers or {})})
    headers_seen = {k.lower(): v for k, v in answer.headers.items()}
    return answer.status, json.loads(answer.body) if answer.body else None, headers_seen


def test_fast_paths_answer_as_the_views(rest_stack: RestStack) -> None:
    subject = f"fast-{uuid.uuid4().hex[:8]}"
    text = _schema(f"R{uuid.uuid4().hex[:8]}")
    status, body, _ = _call(rest_stack, "POST", f"/subjects/{subject}/versions", {"schema": text})
    assert status == 200, body
    schema_id = body["id"]
    stored = _call(rest_stack, "GET", f"/subjects/{subject}/versions/1")[1]["schema"]  # the view's canonical text
    assert json.loads(stored) == json.loads(text)
    for _ in range(3):  # the first may fill the caches; the next are answered from them
        status, body, headers = _call(rest_stack, "GET", f"/schemas/ids/{schema_id}")
        assert (status, body) == (200, {"schema": stored})
        assert headers["content-type"] == JSON
        assert _call(rest_stack, "GET", f"/schemas/ids/{schema_id}/")[1] == {"schema": stored}
        registered = _call(rest_stack, "POST", f"/subjects/{subject}/versions", {"schema": text})
        assert registered[:2] == (200, {"id": schema_id})
        assert _call(rest_stack, "POST", f"/subjects/{subject}", {"schema": text})[:2] == \
            (200, {"subject": subject, "version": 1, "id": schema_id, "schema": stored})
    # the same schema, written differently: the canonical form is what identifies it
    spaced = json.dumps(json.loads(text), indent=2)
    registered = _call(rest_stack, "POST", f"/subjects/{subject}/versions", {"schema": spaced})
    assert registered[:2] == (200, {"id": schema_id})

    # A remembered answer ends with the write that changes it: a read-only subject refuses registrations.
    assert _call(rest_stack, "PUT", f"/mode/{subject}", {"mode": "READONLY"})[0] == 200
    refused = _call(rest_stack, "POST", f"/subjects/{subject}/versions", {"schema": text})
    assert (refused[0], refused[1]["error_code"]) == (422, 42205)
    assert _call(rest_stack, "DELETE", f"/mode/{subject}")[0] == 200
    assert _call(rest_stack, "POST", f"/subjects/{subject}/versions", {"schema": text})[1] == {"id": schema_id}

    # Not served there: Django answers, with the body the client sent (replayed).
    new_text = _schema(f"S{uuid.uuid4().hex[:8]}")
    other = f"{subject}-other"
    status, body, _ = _call(rest_stack, "POST", f"/subjects/{other}/versions", {"schema": new_text})
    assert status == 200 and body["id"] != schema_id
    assert _call(rest_stack, "POST", f"/subjects/{subject}", {"schema": new_text})[1]["error_code"] == 40403
    assert _call(rest_stack, "POST", f"/subjects/nope-{subject}", {"schema": text})[1]["error_code"] == 40401
    assert _call(rest_stack, "GET", "/schemas/ids/999999")[1] == {"error_code": 40403,
                                                                  "message": "Schema 999999 not found"}
    status, body, _ = _call(rest_stack, "POST", f"/subjects/{subject}/versions", raw=b"{not json")
    assert (status, body["error_code"]) == (400, 400)
    status, body, _ = _call(rest_stack, "POST", f"/subjects/{subject}/versions", {"schema": "{\"type\": \"nope\"}"})
    assert (status, body["error_code"]) == (422, 42201)
    status, body, _ = _call(rest_stack, "POST", f"/subjects/{subject}/versions", {"schema": text},
                            headers={"Content-Type": "text/plain"})
    assert status == 415


def test_fast_paths_refuse_as_the_views(rest_stack: RestStack) -> None:
    subject = f"auth-{uuid.uuid4().hex[:8]}"
    text = _schema(f"A{uuid.uuid4().hex[:8]}")
    schema_id = _call(rest_stack, "POST", f"/subjects/{subject}/versions", {"schema": text})[1]["id"]
    assert _call(rest_stack, "GET", f"/schemas/ids/{schema_id}", key=None)[1]["error_code"] == 40101
    key_id = rest_stack.key.partition(":")[0]
    wrong = _call(rest_stack, "GET", f"/schemas/ids/{schema_id}", key=f"{key_id}:{'x' * 40}")
    assert (wrong[0], wrong[1]["error_code"]) == (401, 40101)
    missing = rest_stack.request("GET", f"/schema-registry/skc-{uuid.uuid4().hex}/schemas/ids/{schema_id}")
    assert missing.status == 404
    # A service account's key needs subject ACLs, which the views check: the fast path does not serve it.
    app = rest_stack.new_key("member")
    for method, path in [("GET", f"/schemas/ids/{schema_id}"), ("POST", f"/subjects/{subject}"),
                         ("POST", f"/subjects/{subject}/versions")]:
        for _ in range(2):
            refused = _call(rest_stack, method, path, {"schema": text} if method == "POST" else None, key=app)
            assert (refused[0], refused[1]["error_code"]) == (403, 40301), (path, refused)

    # a revoked key stops working within the caches' lifetime, on every web process
    doomed = rest_stack.api("POST", "/api-keys", {"description": "revoked by the registry test"})
    key = f"{doomed['key_id']}:{doomed['secret']}"
    assert _call(rest_stack, "GET", f"/schemas/ids/{schema_id}", key=key)[0] == 200
    answer = rest_stack.request("DELETE", f"/api/v1/tenants/{rest_stack.tenant}/api-keys/{doomed['key_id']}")
    assert answer.status == 204, answer.body
    revoked_at = time.monotonic()
    wait_until(lambda: all(_call(rest_stack, "GET", f"/schemas/ids/{schema_id}", key=key)[0] == 401
                           for _ in range(4)), "the revoked key to be refused", timeout=WITHIN)
    assert time.monotonic() - revoked_at < WITHIN


def test_a_hard_deleted_schema_is_gone_from_the_fast_path(rest_stack: RestStack) -> None:
    subject = f"gone-{uuid.uuid4().hex[:8]}"
    text = _schema(f"G{uuid.uuid4().hex[:8]}")
    schema_id = _call(rest_stack, "POST", f"/subjects/{subject}/versions", {"schema": text})[1]["id"]
    for _ in range(4):  # cached on whichever web processes answer
        assert _call(rest_stack, "GET", f"/schemas/ids/{schema_id}")[0] == 200
        assert _call(rest_stack, "POST", f"/subjects/{subject}/versions", {"schema": text})[1] == {"id": schema_id}
    assert _call(rest_stack, "DELETE", f"/subjects/{subject}")[:2] == (200, [1])
    assert _call(rest_stack, "POST", f"/subjects/{subject}/versions", {"schema": text})[1] == {"id": schema_id}, \
        "a soft-deleted subject registers the schema again (a new version, the same id)"
    assert _call(rest_stack, "GET", f"/subjects/{subject}/versions")[1] == [2]
    assert _call(rest_stack, "DELETE", f"/subjects/{subject}")[:2] == (200, [2])
    assert _call(rest_stack, "DELETE", f"/subjects/{subject}?permanent=true")[:2] == (200, [1, 2])
    deleted_at = time.monotonic()
    wait_until(lambda: all(_call(rest_stack, "GET", f"/schemas/ids/{schema_id}")[1] ==
                           {"error_code": 40403, "message": f"Schema {schema_id} not found"} for _ in range(4)),
               "the hard-deleted schema to 404", timeout=WITHIN)
    assert time.monotonic() - deleted_at < WITHIN
    assert _call(rest_stack, "POST", f"/subjects/{subject}", {"schema": text})[1]["error_code"] == 40401
