"""ACLs and credentials in the metadata store, against real Postgres."""

from __future__ import annotations

from dataplane.cluster.security_store import SecurityStore
from dataplane.cluster.store import MetadataStore
from dataplane.security.acl import AclOperation, AclPermission, PatternType, ResourceType
from dataplane.security.authorizer import AclBinding
from dataplane.security.filters import ANY, MATCH, AclFilter
from dataplane.security.sasl import plain_hash
from dataplane.security.scram import derive
from tests.dataplane.cluster.test_store import store  # noqa: F401  (fixture)

T, P = ResourceType.TOPIC, PatternType


def binding(name: str, pattern: PatternType = P.LITERAL, principal: str = "User:alice",
            op: AclOperation = AclOperation.READ) -> AclBinding:
    return AclBinding(T, name, pattern, principal, "*", op, AclPermission.ALLOW)


def test_acls_round_trip_and_bump_the_security_version(store: MetadataStore) -> None:  # noqa: F811
    security = SecurityStore(store)
    before = store.versions()
    acls = [binding("orders"), binding("ord", P.PREFIXED), binding("*", principal="User:*")]
    security.create_acls(acls)
    security.create_acls(acls[:1])  # existing: no duplicate
    after = store.versions()
    assert after[0] > before[0] and after[1] > before[1]
    assert sorted(security.acls(), key=repr) == sorted(acls, key=repr)


def test_delete_with_match_and_any_filters(store: MetadataStore) -> None:  # noqa: F811
    security = SecurityStore(store)
    acls = [binding("orders"), binding("ord", P.PREFIXED), binding("*"), binding("other"),
            binding("orders", principal="User:bob")]
    security.create_acls(acls)
    match_orders = AclFilter(ANY, "orders", MATCH, "User:alice", None, ANY, ANY)
    nothing = AclFilter(int(T), "absent", int(P.LITERAL), None, None, ANY, ANY)
    matched = security.delete_acls([match_orders, nothing])
    assert sorted(map(repr, matched[0])) == sorted(map(repr, acls[:3]))
    assert matched[1] == []
    assert sorted(map(repr, security.acls())) == sorted(map(repr, acls[3:]))


def test_credentials_are_stored_without_the_password(store: MetadataStore) -> None:  # noqa: F811
    security = SecurityStore(store)
    security.set_plain_credential("KEY1", plain_hash("secret"))
    credential = derive("SCRAM-SHA-256", "secret")
    assert security.alter_scram_credentials([("alice", "SCRAM-SHA-256", credential)],
                                             [("bob", "SCRAM-SHA-512")]) == {("bob", "SCRAM-SHA-512")}
    creds = security.credentials()
    assert creds.plain == {"KEY1": plain_hash("secret")}
    assert creds.scram == {("alice", "SCRAM-SHA-256"): credential}
    assert security.scram_mechanisms(None) == {"alice": [("SCRAM-SHA-256", 4096)]}
    assert security.scram_mechanisms(["bob"]) == {}
    rows = store.conn.execute("SELECT cluster_id, username, password_sha256 FROM plain_credentials UNION ALL"
                              " SELECT cluster_id, username, mechanism FROM scram_credentials").fetchall()
    assert not any("secret" in str(r) for r in rows)
    assert security.delete_plain_credential("KEY1") and not security.delete_plain_credential("KEY1")
