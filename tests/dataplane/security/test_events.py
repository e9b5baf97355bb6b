"""The broker's security event counter: counts per key, and its memory stays bounded under a flood."""

from __future__ import annotations

from dataplane.security.events import ACL_DENIED, MORE, SASL_FAILED, SASL_OK, SecurityEventCounter


def test_events_are_counted_per_key_and_drained() -> None:
    counter = SecurityEventCounter()
    for _ in range(3):
        counter.denied("User:a", "WRITE", "TOPIC", "orders", "10.0.0.1")
    counter.sasl_failed("mallory", "PLAIN", "10.0.0.2")
    counter.sasl_failed(None, "GSSAPI", "10.0.0.2")
    events = {(e.kind, e.principal, e.detail): e.count for e in counter.drain()}
    assert events == {(ACL_DENIED, "User:a", "WRITE TOPIC orders"): 3, (SASL_FAILED, "User:mallory", "PLAIN"): 1,
                      (SASL_FAILED, "unknown", "GSSAPI"): 1}
    assert counter.drain() == []


def test_a_flood_of_distinct_events_keeps_a_bounded_number_of_keys() -> None:
    counter = SecurityEventCounter(max_keys=10)
    for i in range(10_000):
        counter.denied(f"User:u{i % 3}", "READ", "TOPIC", f"t{i}", "h")
    assert len(counter) <= 20
    events = counter.drain()
    assert sum(e.count for e in events) == 10_000  # nothing is lost, only folded
    assert any(e.detail == MORE for e in events)


def test_logins_are_one_entry_per_username_and_failures_do_not_crowd_them_out() -> None:
    counter = SecurityEventCounter(max_keys=2, max_logins=2)
    for i in range(100):
        counter.sasl_failed(f"guess{i}", "PLAIN", "h")
    for username in ["AAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBB", "CCCCCCCCCCCCCCCC"]:
        counter.authenticated(username)
    logins = {e.detail: e.count for e in counter.drain() if e.kind == SASL_OK}
    assert logins == {"AAAAAAAAAAAAAAAA": 2, "BBBBBBBBBBBBBBBB": 1}  # past the bound, dropped till next interval
    counter.authenticated("CCCCCCCCCCCCCCCC")
    assert [(e.kind, e.detail) for e in counter.drain()] == [(SASL_OK, "CCCCCCCCCCCCCCCC")]
