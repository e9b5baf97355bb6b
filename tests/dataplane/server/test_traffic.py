"""Per-topic bytes sent to consumers: what is published, and nothing lost between a copy and its write."""

from __future__ import annotations

from dataplane.server.traffic import TopicTraffic


def test_counters_are_published_only_when_they_moved() -> None:
    traffic = TopicTraffic()
    assert traffic.unpublished() is None
    traffic.sent("orders", 100)
    traffic.sent("orders", 0)  # an empty read is no traffic
    traffic.sent("audit", 7)
    assert traffic.unpublished() == {"orders": 100, "audit": 7}
    traffic.published()
    assert traffic.unpublished() is None


def test_bytes_counted_while_a_copy_is_being_written_are_published_next() -> None:
    traffic = TopicTraffic()
    traffic.sent("orders", 100)
    copy = traffic.unpublished()
    traffic.sent("orders", 50)  # lands while the renewal carrying ``copy`` is in flight
    traffic.published()
    assert copy == {"orders": 100}
    assert traffic.unpublished() == {"orders": 150}


def test_a_failed_write_is_retried_with_the_totals() -> None:
    traffic = TopicTraffic()
    traffic.sent("orders", 100)
    assert traffic.unpublished() == {"orders": 100}  # the renewal fails: published() is not called
    assert traffic.unpublished() == {"orders": 100}
