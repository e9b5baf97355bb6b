"""The broker's security event counter: counts per key, and its memory stays bounded under a flood."""

from __future__ import annotations

from dataplane.security.events import ACL_DENIED, MORE, SASL_FAILED, SecurityEventCounter


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
