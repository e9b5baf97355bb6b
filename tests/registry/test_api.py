"""Confluent's Schema Registry API, behaviour by behaviour, through the real views, database and key auth."""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connection

from controlplane.audit.models import AuditEvent
from tests.registry.conftest import Registry

pytestmark = pytest.mark.django_db(transaction=True)

V1 = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]})
V2 = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int", "default": 0}]})
BREAKS = json.dumps({"type": "record", "name": "User", "fields": [
    {"name": "name", "type": "string"}, {"name": "email", "type": "string"}]})


def test_register_fetch_and_idempotence(reg: Registry) -> None:
    assert reg.call("GET", "/").body == {}
    first = reg.call("POST", "/subjects/users-value/versions", {"schema": V1})
    assert first.status == 200 and first.body == {"id": 1}
    again = reg.call("POST", "/subjects/users-value/versions", {"schema": json.dumps(json.loads(V1), indent=2)})
    assert again.body == {"id": 1}
    assert reg.call("GET", "/subjects/users-value/versions").body == [1]
    assert reg.call("POST", "/subjects/users-value/versions", {"schema": V2}).body == {"id": 2}
    assert reg.call("POST", "/subjects/other-value/versions", {"schema": V1}).body == {"id": 1}
    by_id = reg.call("GET", "/schemas/ids/1").body
    assert "schemaType" not in by_id and json.loads(by_id["schema"]) == json.loads(V1)
    assert reg.call("GET", "/schemas/ids/2/schema").body == json.loads(V2)
    assert reg.call("GET", "/schemas/ids/1/versions").body == [
        {"subject": "other-value", "version": 1}, {"subject": "users-value", "version": 1}]
    assert reg.call("GET", "/schemas/ids/1/subjects").body == ["other-value", "users-value"]
    latest = reg.call("GET", "/subjects/users-value/versions/latest").body
    assert (latest["subject"], latest["version"], latest["id"]) == ("users-value", 2, 2)
    assert reg.call("GET", "/subjects").body == ["other-value", "users-value"]
    assert reg.call("GET", "/subjects?subjectPrefix=users").body == ["users-value"]
    looked = reg.call("POST", "/subjects/users-value", {"schema": V1}).body
    assert (looked["id"], looked["version"]) == (1, 1)
    assert reg.call("GET", "/schemas/types").body == ["JSON", "PROTOBUF", "AVRO"]
    assert AuditEvent.objects.filter(action="schema.register").count() == 3


def test_incompatible_is_409_and_compatibility_endpoint(reg: Registry) -> None:
    reg.call("POST", "/subjects/s/versions", {"schema": V1})
    refused = reg.call("POST", "/subjects/s/versions", {"schema": BREAKS})
    assert refused.status == 409 and refused.body["error_code"] == 409
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in refused.body["message"]
    test = reg.call("POST", "/compatibility/subjects/s/versions/latest?verbose=true", {"schema": BREAKS}).body
    assert test["is_compatible"] is False and test["messages"]
    assert reg.call("POST", "/compatibility/subjects/s/versions/1", {"schema": V2}).body == {"is_compatible": True}
    assert reg.call("POST", "/compatibility/subjects/new/versions/latest", {"schema": V1}).body == {
        "is_compatible": True}


def test_config_and_mode(reg: Registry) -> None:
    assert reg.call("GET", "/config").body == {"compatibilityLevel": "BACKWARD"}
    assert reg.call("GET", "/config/s").body["error_code"] == 40408
    assert reg.call("GET", "/config/s?defaultToGlobal=true").body == {"compatibilityLevel": "BACKWARD"}
    assert reg.call("PUT", "/config/s", {"compatibility": "NONE"}).body == {"compatibility": "NONE"}
    assert reg.call("GET", "/config/s").body == {"compatibilityLevel": "NONE"}
    reg.call("POST", "/subjects/s/versions", {"schema": V1})
    assert reg.call("POST", "/subjects/s/versions", {"schema": BREAKS}).status == 200
    bad = reg.call("PUT", "/config", {"compatibility": "SIDEWAYS"})
    assert (bad.status, bad.body["error_code"]) == (422, 42203)
    assert reg.call("DELETE", "/config/s").body == {"compatibilityLevel": "NONE"}
    assert reg.call("GET", "/mode").body == {"mode": "READWRITE"}
    assert reg.call("PUT", "/mode", {"mode": "SOMETIMES"}).body["error_code"] == 42204
    assert reg.call("PUT", "/mode", {"mode": "IMPORT"}).body["error_code"] == 42205  # not empty
    assert reg.call("PUT", "/mode", {"mode": "READONLY"}).body == {"mode": "READONLY"}
    refused = reg.call("POST", "/subjects/s/versions", {"schema": V2})
    assert (refused.status, refused.body["error_code"]) == (422, 42205)
    assert reg.call("PUT", "/mode/t", {"mode": "IMPORT"}).body == {"mode": "IMPORT"}
    assert reg.call("POST", "/subjects/t/versions", {"schema": V2, "id": 100}).body == {"id": 100}
    assert reg.call("GET", "/schemas/ids/100").status == 200
    assert reg.call("GET", "/mode/u").body["error_code"] == 40409
    assert {e.action for e in AuditEvent.objects.all()} >= {"registry.config", "registry.mode", "schema.register"}


def test_id_only_in_import_mode(reg: Registry) -> None:
    answer = reg.call("POST", "/subjects/s/versions", {"schema": V1, "id": 7})
    assert (answer.status, answer.body["error_code"]) == (422, 42205)


def test_delete_rules(reg: Registry) -> None:
    reg.call("PUT", "/config", {"compatibility": "NONE"})
    reg.call("POST", "/subjects/s/versions", {"schema": V1})
    reg.call("POST", "/subjects/s/versions", {"schema": BREAKS})
    assert reg.call("DELETE", "/subjects/s/versions/1?permanent=true").body["error_code"] == 40407
    assert reg.call("DELETE", "/subjects/s/versions/1").body == 1
    assert reg.call("DELETE", "/subjects/s/versions/1").body["error_code"] == 40406
    assert reg.call("GET", "/subjects/s/versions/1").body["error_code"] == 40402
    assert reg.call("GET", "/subjects/s/versions/1?deleted=true").status == 200
    assert reg.call("GET", "/subjects/s/versions?deleted=true").body == [1, 2]
    assert reg.call("DELETE", "/subjects/s?permanent=true").body["error_code"] == 40405
    assert reg.call("DELETE", "/subjects/s").body == [2]
    assert reg.call("DELETE", "/subjects/s").body["error_code"] == 40404
    assert reg.call("GET", "/subjects").body == []
    assert reg.call("GET", "/subjects?deleted=true").body == ["s"]
    assert reg.call("GET", "/subjects/s/versions").body["error_code"] == 40401
    assert reg.call("DELETE", "/subjects/s?permanent=true", role="member").body["error_code"] == 40301
    assert reg.call("DELETE", "/subjects/s?permanent=true").body == [1, 2]
    assert reg.call("GET", "/schemas/ids/1").body["error_code"] == 40403
    assert reg.call("DELETE", "/subjects/s").body["error_code"] == 40401
    # ids are never reused after a hard delete; versions restart only once the subject is gone
    assert reg.call("POST", "/subjects/s/versions", {"schema": V2}).body == {"id": 3}
    assert reg.call("GET", "/subjects/s/versions").body == [1]


def test_references(reg: Registry) -> None:
    address = json.dumps({"type": "record", "name": "Address", "namespace": "x",
                          "fields": [{"name": "city", "type": "string"}]})
    person = json.dumps({"type": "record", "name": "Person", "namespace": "x",
                         "fields": [{"name": "home", "type": "x.Address"}]})
    assert reg.call("POST", "/subjects/address/versions", {"schema": address}).body == {"id": 1}
    refs = [{"name": "x.Address", "subject": "address", "version": 1}]
    assert reg.call("POST", "/subjects/person/versions", {"schema": person, "references": refs}).body == {"id": 2}
    assert reg.call("GET", "/schemas/ids/2").body["references"] == refs
    assert reg.call("GET", "/subjects/address/versions/1/referencedby").body == [2]
    assert reg.call("DELETE", "/subjects/address/versions/1").body["error_code"] == 42206
    missing = reg.call("POST", "/subjects/p2/versions", {"schema": person})
    assert missing.body["error_code"] == 42201


def test_json_schema_and_protobuf(reg: Registry) -> None:
    json_schema = json.dumps({"type": "object", "properties": {"a": {"type": "string"}}})
    assert reg.call("POST", "/subjects/j/versions", {"schema": json_schema, "schemaType": "JSON"}).body == {"id": 1}
    assert reg.call("GET", "/schemas/ids/1").body["schemaType"] == "JSON"
    proto = 'syntax = "proto3";\npackage p;\nmessage M { string a = 1; }\n'
    assert reg.call("POST", "/subjects/p/versions", {"schema": proto, "schemaType": "PROTOBUF"}).body == {"id": 2}
    assert reg.call("GET", "/subjects/p/versions/1").body["schemaType"] == "PROTOBUF"


@pytest.mark.parametrize("version", ["0", "-2", "abc", "2147483648"])
def test_bad_versions_are_42202(reg: Registry, version: str) -> None:
    reg.call("POST", "/subjects/s/versions", {"schema": V1})
    for method, path in [("GET", f"/subjects/s/versions/{version}"), ("DELETE", f"/subjects/s/versions/{version}")]:
        answer = reg.call(method, path)
        assert (answer.status, answer.body["error_code"]) == (422, 42202), (method, answer.body)


def test_bad_input(reg: Registry) -> None:
    assert reg.call("POST", "/subjects/s/versions", raw=b"{not json").body["error_code"] == 400
    invalid = reg.call("POST", "/subjects/s/versions", {"schema": '{"type": "record"}'})
    assert (invalid.status, invalid.body["error_code"]) == (422, 42201)
    unknown = reg.call("POST", "/subjects/s/versions", {"schema": V1, "schemaType": "XML"})
    assert unknown.body["error_code"] == 42201
    assert reg.call("POST", "/subjects/s/versions", {}).body["error_code"] == 42201
    assert reg.call("GET", "/schemas/ids/99").body == {"error_code": 40403, "message": "Schema 99 not found"}
    assert reg.call("GET", "/subjects/nope/versions/1").body["error_code"] == 40401
    assert reg.call("POST", "/subjects/nope", {"schema": V1}).body["error_code"] == 40401
    reg.call("POST", "/subjects/s/versions", {"schema": V1})
    assert reg.call("POST", "/subjects/s", {"schema": V2}).body["error_code"] == 40403
    assert reg.call("GET", "/subjects/s/versions/9").body["error_code"] == 40402


def test_auth_roles_and_tenant_isolation(reg: Registry, reg_b: Registry) -> None:
    assert reg.call("GET", "/subjects", key="").body["error_code"] == 40101
    wrong = reg.call("GET", "/subjects", key="AAAAAAAAAAAAAAAA:wrongsecretwrongsecret")
    assert (wrong.status, wrong.body["error_code"]) == (401, 40101)
    assert reg.call("POST", "/subjects/s/versions", {"schema": V1}, role="viewer").body["error_code"] == 40301
    assert reg.call("POST", "/subjects/s/versions", {"schema": V1}, role="member").body == {"id": 1}
    assert reg.call("GET", "/subjects", role="viewer").body == ["s"]
    assert reg.call("PUT", "/config", {"compatibility": "FULL"}, role="member").body["error_code"] == 40301
    assert reg.call("PUT", "/config", {"compatibility": "FULL"}, role="admin").status == 200
    # tenant B's key on tenant A's registry, and A's on B's: 404 on every path, as for a cluster that does not exist
    api_key, secret = reg_b.world.keys["owner"]
    for path in ["/", "/subjects", "/schemas/ids/1"]:
        answer = reg.call("GET", path, key=f"{api_key.key_id}:{secret}")
        assert answer.status == 404, answer.body
    assert reg_b.call("GET", "/schemas/ids/1").body["error_code"] == 40403  # B's registry is its own
    assert reg_b.call("GET", "/subjects").body == []


def test_concurrent_registration_gets_one_id_and_one_version(reg: Registry) -> None:
    answers: list[object] = []
    start = threading.Barrier(6)

    def register() -> None:
        start.wait()
        try:
            answers.append(reg.call("POST", "/subjects/race/versions", {"schema": V1}).body)
        finally:
            connection.close()

    threads = [threading.Thread(target=register) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [{"id": 1}] * 6
    assert reg.call("GET", "/subjects/race/versions").body == [1]


def test_cluster_api_shows_the_registry_url(reg: Registry) -> None:
    client = reg.world.client("owner")
    answer = client.get(f"{reg.world.base}/clusters/{reg.cluster.pk}")
    assert answer.status_code == 200
    assert answer.json()["schema_registry_url"].endswith(f"/schema-registry/{reg.cluster.kafka_cluster_id}")


def test_hostile_bodies_get_confluent_errors_not_500s(reg: Registry) -> None:
    deep = b'{"schema": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    nested = reg.call("POST", "/subjects/s/versions", raw=deep)
    assert (nested.status, nested.body["error_code"]) == (400, 400)
    deep_schema = '{"type": "array", "items": ' * 5_000 + '"int"' + "}" * 5_000
    refused = reg.call("POST", "/subjects/s/versions", {"schema": deep_schema})
    assert (refused.status, refused.body["error_code"]) == (422, 42201)
    deep_json = '{"type": "array", "items": ' * 5_000 + '{"type": "integer"}' + "}" * 5_000
    refused = reg.call("POST", "/subjects/j/versions", {"schema": deep_json, "schemaType": "JSON"})
    assert (refused.status, refused.body["error_code"]) == (422, 42201)
    huge = reg.call("POST", "/subjects/s/versions", {"schema": "x" * (11 * 1024 * 1024)})
    assert huge.status == 413 and huge.body["error_code"] == 413 and "too large" in huge.body["message"]
    assert reg.call("GET", "/subjects").body == []
