"""The authorizer against a small reference model of Kafka's rules, plus the regression cases."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplane.security.acl import (
    CLUSTER_RESOURCE_NAME,
    VALID_OPERATIONS,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
)
from dataplane.security.authorizer import AclBinding, Authorizer

O, P, R, T = AclOperation, AclPermission, ResourceType, PatternType  # noqa: E741 (short names keep cases readable)
EXAMPLES = int(os.environ.get("SLUICE_HYPOTHESIS_EXAMPLES", "3000"))

# Written from Kafka's documentation, deliberately without the authorizer's index or tables.
IMPLIES = {O.DESCRIBE: {O.READ, O.WRITE, O.DELETE, O.ALTER}, O.DESCRIBE_CONFIGS: {O.ALTER_CONFIGS}}


def reference(bindings: list[AclBinding], super_users: set[str], principal: str, host: str, op: AclOperation,
              rtype: ResourceType, name: str) -> bool:
    if principal in super_users:
        return True

    def matches(b: AclBinding) -> bool:
        if b.resource_type != rtype or b.principal not in (principal, "User:*") or b.host not in (host, "*"):
            return False
        if b.pattern_type == T.PREFIXED:
            return name.startswith(b.resource_name)
        return b.resource_name in (name, "*")

    applicable = [b for b in bindings if matches(b)]
    if any(b.permission == P.DENY and b.operation in (op, O.ALL) for b in applicable):
        return False
    return any(b.permission == P.ALLOW and (b.operation in (op, O.ALL) or b.operation in IMPLIES.get(op, ()))
               for b in applicable)


NAMES = ["f", "fo", "foo", "foobar", "bar", "*"]
PRINCIPALS = ["User:alice", "User:bob", "User:*"]
HOSTS = ["*", "10.0.0.1", "10.0.0.2"]


@st.composite
def bindings(draw: st.DrawFn) -> AclBinding:
    rtype = draw(st.sampled_from(list(R)))
    pattern = draw(st.sampled_from(list(T)))
    if rtype is R.CLUSTER:
        name = CLUSTER_RESOURCE_NAME
    else:
        name = draw(st.sampled_from([n for n in NAMES if not (pattern is T.PREFIXED and n == "*")]))
    return AclBinding(rtype, name, pattern, draw(st.sampled_from(PRINCIPALS)), draw(st.sampled_from(HOSTS)),
                      draw(st.sampled_from(sorted(VALID_OPERATIONS[rtype]))), draw(st.sampled_from(list(P))))


@settings(max_examples=EXAMPLES, deadline=None)
@given(acls=st.lists(bindings(), max_size=12), supers=st.sets(st.sampled_from(["User:alice", "User:root"])),
       principal=st.sampled_from(["User:alice", "User:bob", "User:carol"]),
       host=st.sampled_from(["10.0.0.1", "10.0.0.2"]), rtype=st.sampled_from(list(R)),
       name=st.sampled_from(["f", "fo", "foo", "foobar", "foobaz", "bar", "b", "*", CLUSTER_RESOURCE_NAME]),
       op=st.sampled_from([o for o in O if o is not O.ALL]))
def test_authorizer_equals_the_reference_model(acls: list[AclBinding], supers: set[str], principal: str, host: str,
                                               rtype: ResourceType, name: str, op: AclOperation) -> None:
    authorizer = Authorizer(acls, supers)
    assert authorizer.authorize(principal, host, op, rtype, name) == \
        reference(acls, supers, principal, host, op, rtype, name)


@settings(max_examples=max(EXAMPLES // 3, 100), deadline=None)
@given(acls=st.lists(bindings(), max_size=10), principal=st.sampled_from(["User:alice", "User:bob"]),
       rtype=st.sampled_from([R.TOPIC, R.GROUP]), op=st.sampled_from([O.READ, O.WRITE, O.DESCRIBE]))
def test_authorize_any_agrees_with_some_concrete_name(acls: list[AclBinding], principal: str, rtype: ResourceType,
                                                      op: AclOperation) -> None:
    """When some name among a rich set is allowed, ``authorize_any`` says so; when it says no, none is."""
    authorizer = Authorizer(acls)
    candidates = [*NAMES, "foobarbaz", "fox", "zzz", "b", "ba"]
    some = any(authorizer.authorize(principal, "10.0.0.1", op, rtype, n) for n in candidates if n != "*")
    if some:
        assert authorizer.authorize_any(principal, "10.0.0.1", op, rtype)
    if not authorizer.authorize_any(principal, "10.0.0.1", op, rtype):
        assert not some


def acl(name: str, op: AclOperation = O.READ, permission: AclPermission = P.ALLOW, *,
        pattern: PatternType = T.LITERAL, principal: str = "User:alice", host: str = "*",
        rtype: ResourceType = R.TOPIC) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, permission)


def test_prefixed_deny_beats_literal_allow() -> None:
    authorizer = Authorizer([acl("foobar"), acl("foo", permission=P.DENY, pattern=T.PREFIXED)])
    assert not authorizer.authorize("User:alice", "1.2.3.4", O.READ, R.TOPIC, "foobar")


def test_no_acl_for_the_principal_on_a_resource_with_acls_is_denied() -> None:
    authorizer = Authorizer([acl("orders", principal="User:bob")])
    assert authorizer.authorize("User:bob", "1.2.3.4", O.READ, R.TOPIC, "orders")
    assert not authorizer.authorize("User:alice", "1.2.3.4", O.READ, R.TOPIC, "orders")
    assert not Authorizer([]).authorize("User:alice", "1.2.3.4", O.READ, R.TOPIC, "orders")


def test_wildcards_and_super_users() -> None:
    authorizer = Authorizer([acl("*", principal="User:*", op=O.WRITE)], super_users={"User:admin"})
    assert authorizer.authorize("User:anyone", "1.2.3.4", O.WRITE, R.TOPIC, "x")
    assert authorizer.authorize("User:anyone", "1.2.3.4", O.DESCRIBE, R.TOPIC, "x")  # WRITE implies DESCRIBE
    assert not authorizer.authorize("User:anyone", "1.2.3.4", O.READ, R.TOPIC, "x")
    assert not authorizer.authorize("User:anyone", "1.2.3.4", O.WRITE, R.GROUP, "x")
    assert authorizer.authorize("User:admin", "1.2.3.4", O.ALTER, R.CLUSTER, CLUSTER_RESOURCE_NAME)


def test_deny_of_describe_does_not_deny_read_and_implication_is_allow_only() -> None:
    authorizer = Authorizer([acl("t", O.READ), acl("t", O.DESCRIBE, P.DENY)])
    assert authorizer.authorize("User:alice", "h", O.READ, R.TOPIC, "t")
    assert not authorizer.authorize("User:alice", "h", O.DESCRIBE, R.TOPIC, "t")


def test_host_must_match() -> None:
    authorizer = Authorizer([acl("t", host="10.0.0.1")])
    assert authorizer.authorize("User:alice", "10.0.0.1", O.READ, R.TOPIC, "t")
    assert not authorizer.authorize("User:alice", "10.0.0.2", O.READ, R.TOPIC, "t")


def test_authorized_operations_bits() -> None:
    authorizer = Authorizer([acl("t", O.ALTER_CONFIGS), acl("t", O.WRITE)])
    bits = authorizer.authorized_operations("User:alice", "h", R.TOPIC, "t")
    assert bits == (1 << O.ALTER_CONFIGS) | (1 << O.DESCRIBE_CONFIGS) | (1 << O.WRITE) | (1 << O.DESCRIBE)


@pytest.mark.parametrize("count", [10, 10_000])
def test_decision_looks_only_at_acls_that_can_match(count: int) -> None:
    """10,000 ACLs on other topics leave the entries a decision inspects unchanged."""
    others = [acl(f"topic-{i}", principal=f"User:u{i}") for i in range(count)]
    others += [acl(f"pre-{i}-", pattern=T.PREFIXED) for i in range(count // 10)]
    authorizer = Authorizer([*others, acl("orders")])
    assert sum(map(len, authorizer._matching(R.TOPIC, "orders"))) == 1
