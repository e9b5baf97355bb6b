"""Kafka's client-quota rules: entity checks, precedence and sharing, filters, and the rate/throttle arithmetic."""

from __future__ import annotations

import pytest

from dataplane.security.quotas import (
    CLIENT_ID,
    CONNECTION_CREATION_RATE,
    CONSUMER_BYTE_RATE,
    IP,
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    InvalidQuota,
    QuotaConfig,
    QuotaFilter,
    Rate,
    TokenBucket,
    Window,
    altered,
    entity,
    throttle_seconds,
)
from dataplane.server.quotas import QuotaManager

ALICE = entity([(USER, "alice")])
ALICE_APP = entity([(USER, "alice"), (CLIENT_ID, "app")])
ALICE_ANY_CLIENT = entity([(USER, "alice"), (CLIENT_ID, None)])
DEFAULT_USER = entity([(USER, None)])
DEFAULT_USER_APP = entity([(USER, None), (CLIENT_ID, "app")])
DEFAULT_USER_ANY_CLIENT = entity([(USER, None), (CLIENT_ID, None)])
APP = entity([(CLIENT_ID, "app")])
ANY_CLIENT = entity([(CLIENT_ID, None)])


# ---------------------------------------------------------------------- entities and values


@pytest.mark.parametrize(("pairs", "message"), [
    ([], "Invalid empty client quota entity"),
    ([("group", "x")], "Unhandled client quota entity type: group"),
    ([(USER, "a"), (USER, "b")], "duplicate entity type user"),
    ([(IP, "10.0.0.1"), (USER, "a")], "IP entity should not be combined"),
    ([(IP, "not-an-ip")], "not a valid IP"),
    ([(USER, "")], "Invalid empty user name"),
])
def test_bad_entities_are_refused_with_kafkas_reason(pairs: list[tuple[str, str | None]], message: str) -> None:
    with pytest.raises(InvalidQuota, match=message):
        entity(pairs)


def test_entities_are_canonical_whatever_the_order() -> None:
    assert entity([(CLIENT_ID, "app"), (USER, "alice")]) == ALICE_APP


@pytest.mark.parametrize(("kind", "key", "value", "message"), [
    (ALICE, "bogus_rate", 1.0, "Invalid configuration key bogus_rate"),
    (ALICE, PRODUCER_BYTE_RATE, -5.0, "must be greater than 0"),
    (ALICE, PRODUCER_BYTE_RATE, 0.0, "must be greater than 0"),
    (ALICE, PRODUCER_BYTE_RATE, 10.5, "not an integer"),
    (ALICE, PRODUCER_BYTE_RATE, 1e30, "too large for a LONG"),
    (ALICE, PRODUCER_BYTE_RATE, float("nan"), "must be greater than 0"),
    (ALICE, CONNECTION_CREATION_RATE, 5.0, "Invalid configuration key"),  # an IP key on a user
    (entity([(IP, None)]), PRODUCER_BYTE_RATE, 5.0, "Invalid configuration key"),
])
def test_bad_values_are_refused(kind: tuple[tuple[str, str | None], ...], key: str, value: float,
                                message: str) -> None:
    with pytest.raises(InvalidQuota, match=message):
        altered({}, kind, [(key, value, False)])


def test_ops_set_and_remove_keys() -> None:
    current = {ALICE: {PRODUCER_BYTE_RATE: 100.0, CONSUMER_BYTE_RATE: 200.0}}
    assert altered(current, ALICE, [(PRODUCER_BYTE_RATE, 0.0, True), (REQUEST_PERCENTAGE, 12.5, False)]) == {
        CONSUMER_BYTE_RATE: 200.0, REQUEST_PERCENTAGE: 12.5}


# ---------------------------------------------------------------------- precedence (KIP-55) and sharing


def test_the_most_specific_entity_wins_in_kafkas_order() -> None:
    order = [ALICE_APP, ALICE_ANY_CLIENT, ALICE, DEFAULT_USER_APP, DEFAULT_USER_ANY_CLIENT, DEFAULT_USER, APP,
             ANY_CLIENT]
    quotas = {kind: {PRODUCER_BYTE_RATE: float(rank + 1)} for rank, kind in enumerate(order)}
    for rank in range(len(order)):
        config = QuotaConfig({kind: value for kind, value in quotas.items() if order.index(kind) >= rank})
        applied = config.applied(PRODUCER_BYTE_RATE, "User:alice", "app")
        assert applied is not None and applied.bound == rank + 1


def test_each_key_is_resolved_on_its_own() -> None:
    config = QuotaConfig({ALICE: {PRODUCER_BYTE_RATE: 10.0}, DEFAULT_USER: {CONSUMER_BYTE_RATE: 20.0}})
    produce = config.applied(PRODUCER_BYTE_RATE, "User:alice", "x")
    fetch = config.applied(CONSUMER_BYTE_RATE, "User:alice", "x")
    assert produce is not None and produce.bound == 10
    assert fetch is not None and fetch.bound == 20
    assert config.applied(REQUEST_PERCENTAGE, "User:alice", "x") is None


def test_who_shares_a_quota() -> None:
    config = QuotaConfig({ALICE: {PRODUCER_BYTE_RATE: 10.0}, DEFAULT_USER: {PRODUCER_BYTE_RATE: 5.0},
                          APP: {CONSUMER_BYTE_RATE: 7.0}})
    alice_a, alice_b = (config.applied(PRODUCER_BYTE_RATE, "User:alice", c) for c in ("a", "b"))
    assert alice_a is not None and alice_b is not None and alice_a.scope == alice_b.scope == ("alice", "")
    bob, carol = (config.applied(PRODUCER_BYTE_RATE, f"User:{u}", "a") for u in ("bob", "carol"))
    assert bob is not None and carol is not None and bob.scope != carol.scope  # a default: one quota per user
    app = config.applied(CONSUMER_BYTE_RATE, "User:bob", "app")
    assert app is not None and app.scope == ("", "app")


def test_unauthenticated_clients_are_the_anonymous_user() -> None:
    config = QuotaConfig({entity([(USER, "ANONYMOUS")]): {PRODUCER_BYTE_RATE: 3.0}})
    applied = config.applied(PRODUCER_BYTE_RATE, "User:ANONYMOUS", "")
    assert applied is not None and applied.bound == 3


# ---------------------------------------------------------------------- DescribeClientQuotas filters


def describe(components: list[tuple[str, int, str | None]], strict: bool = False) -> list[str]:
    config = QuotaConfig({kind: {PRODUCER_BYTE_RATE: 1.0} for kind in
                          (ALICE, ALICE_APP, DEFAULT_USER, APP, ANY_CLIENT, entity([(IP, "10.0.0.1")]))})
    return [",".join(f"{t}={n}" for t, n in kind) for kind, _ in config.describe(QuotaFilter.checked(components,
                                                                                                     strict))]


def test_filters_match_as_kafkas() -> None:
    assert describe([(USER, MATCH_EXACT, "alice")]) == ["client-id=app,user=alice", "user=alice"]
    assert describe([(USER, MATCH_EXACT, "alice")], strict=True) == ["user=alice"]
    assert describe([(USER, MATCH_DEFAULT, None)]) == ["user=None"]
    assert describe([(CLIENT_ID, MATCH_SPECIFIED, None)]) == ["client-id=None", "client-id=app",
                                                              "client-id=app,user=alice"]
    assert len(describe([])) == 6
    assert describe([], strict=True) == []


@pytest.mark.parametrize(("components", "message", "unknown"), [
    ([(USER, MATCH_EXACT, None)], "MATCH_TYPE_EXACT, but set match string to null", False),
    ([(USER, MATCH_DEFAULT, "x")], "MATCH_TYPE_DEFAULT, but also specified a match string", False),
    ([(USER, 7, None)], "Unknown match type 7", False),
    ([(USER, MATCH_DEFAULT, None), (USER, MATCH_DEFAULT, None)], "cannot appear more than once", False),
    ([("group", MATCH_DEFAULT, None)], "Unknown entity type group", True),
    ([(IP, MATCH_DEFAULT, None), (USER, MATCH_DEFAULT, None)], "IP filter component should not be used", False),
])
def test_bad_filters(components: list[tuple[str, int, str | None]], message: str, unknown: bool) -> None:
    with pytest.raises(InvalidQuota, match=message) as raised:
        QuotaFilter.checked(components, False)
    assert raised.value.unknown_type is unknown


# ---------------------------------------------------------------------- rates and throttle times


def test_a_fresh_rate_counts_at_least_the_whole_window_less_one_sample() -> None:
    rate = Rate(Window(samples=11, size=1.0))
    rate.record(1000, now=100.0)
    assert rate.elapsed(100.0) == pytest.approx(10.0)
    assert rate.measure(100.0) == pytest.approx(100.0)


def test_throttle_brings_the_rate_back_to_the_bound() -> None:
    window = Window(samples=11, size=1.0)
    rate = Rate(window)
    for second in range(11):
        rate.record(1500, now=float(second))  # 1500 B/s against a 1000 B/s quota
    now = 10.0
    throttle = throttle_seconds(rate, 1000, now)
    assert throttle == pytest.approx((rate.measure(now) - 1000) / 1000 * rate.elapsed(now))
    # Staying away that long brings the measured rate down to the quota: total / (elapsed + throttle) = bound.
    total = rate.measure(now) * rate.elapsed(now)
    assert 0 < throttle < window.max_throttle
    assert total / (rate.elapsed(now) + throttle) == pytest.approx(1000)


def test_within_the_bound_there_is_no_throttle_and_it_is_capped_by_the_window() -> None:
    rate = Rate(Window(samples=3, size=1.0))
    rate.record(10, now=0.0)
    assert throttle_seconds(rate, 100, 0.0) == 0
    rate.record(10**9, now=0.5)
    assert throttle_seconds(rate, 100, 0.5) == 3.0


def test_old_samples_expire() -> None:
    rate = Rate(Window(samples=2, size=1.0))
    rate.record(500, now=0.0)
    assert not rate.idle(1.5)
    assert rate.idle(2.0)
    assert rate.measure(2.0) == 0


def test_the_manager_holds_a_principal_to_its_quota_over_time() -> None:
    """Simulated clock: a producer that always comes back when its throttle ends averages its quota."""
    manager = QuotaManager(Window(samples=11, size=1.0))
    manager.update(1, {ALICE: {PRODUCER_BYTE_RATE: 10_000.0}})
    now, sent = 0.0, 0
    while now < 120:
        sent += 5_000
        throttle = manager.record(PRODUCER_BYTE_RATE, "User:alice", "p", 5_000, now)
        now += max(throttle, 0.01)  # the client sends again at once unless throttled
    assert sent / now == pytest.approx(10_000, rel=0.1)


def test_connection_caps_count_per_principal_and_free_on_close() -> None:
    manager = QuotaManager(Window(), max_connections_per_principal=5)
    manager.update(1, {ALICE: {"max_connections": 2.0}})
    first, second = manager.connection_opened("User:alice", "a"), manager.connection_opened("User:alice", "b")
    refused = manager.connection_opened("User:alice", "c")
    assert isinstance(refused, str) and "at most 2" in refused and "User:alice" in refused
    assert not isinstance(first, str) and not isinstance(second, str)
    manager.connection_closed(first)
    assert not isinstance(manager.connection_opened("User:alice", "c"), str)
    bob = [manager.connection_opened("User:bob", "") for _ in range(6)]  # the broker-wide cap
    assert [isinstance(s, str) for s in bob] == [False] * 5 + [True]


def test_each_credential_has_its_own_cap_under_its_principals() -> None:
    # Two API keys of one service account: the principal's cap (3) is shared, each key holds at most 2.
    manager = QuotaManager(Window(), max_connections_per_principal=3, max_connections_per_credential=2)
    a1, a2 = manager.connection_opened("User:sa-1", "", "key-a"), manager.connection_opened("User:sa-1", "", "key-a")
    refused = manager.connection_opened("User:sa-1", "", "key-a")
    assert refused == ("Too many connections for credential key-a: 2 open, at most 2 allowed "
                       "(max.connections.per.credential)")
    b1 = manager.connection_opened("User:sa-1", "", "key-b")
    assert not any(isinstance(s, str) for s in (a1, a2, b1))
    assert isinstance(manager.connection_opened("User:sa-1", "", "key-b"), str)  # now the principal's cap (3)
    assert manager.open_connections("User:sa-1") == 3  # refusals are not counted
    assert not isinstance(a1, str)
    manager.connection_closed(a1)
    assert not isinstance(manager.connection_opened("User:sa-1", "", "key-a"), str)
    # Without a credential (PLAINTEXT, OAUTHBEARER) only the principal's cap applies.
    other = [manager.connection_opened("User:sa-2", "") for _ in range(3)]
    assert not any(isinstance(s, str) for s in other)


def test_ip_connection_creation_rate() -> None:
    manager = QuotaManager(Window(samples=11, size=1.0))
    manager.update(1, {entity([(IP, None)]): {CONNECTION_CREATION_RATE: 2.0}})
    accepted = sum(manager.accept_ip("10.0.0.9") for _ in range(100))
    assert accepted == 20  # two a second over the (at least) ten seconds a fresh rate is measured over
    assert manager.accept_ip("10.0.0.10")


def test_the_token_bucket_allows_one_window_then_one_request_at_a_time() -> None:
    bucket = TokenBucket(Window(samples=10, size=0.1))  # a one-second window
    assert bucket.record(900, bound=1000, now=0.0) == 0  # a fresh bucket holds a window's worth
    assert bucket.record(300, bound=1000, now=0.0) == pytest.approx(0.2)  # 200 in debt at 1000/s
    assert bucket.record(100, bound=1000, now=0.2) == pytest.approx(0.1)  # debt paid, the next one owes
    assert bucket.record(10**9, bound=1000, now=0.3) == 1.0  # never more than the window
    assert not bucket.idle(1.0) and bucket.idle(2.31)
