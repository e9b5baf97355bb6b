"""A tiered topic in the console: the topics list and the topic page show what the brokers' disks hold and what
the remote tier holds, and the local-retention configs read in words."""

from __future__ import annotations

import re
import uuid

import pytest
from confluent_kafka import Producer
from playwright.sync_api import Page, expect

from tests.console.browser import sign_in
from tests.kafkarest.conftest import RestStack
from tests.support.polling import wait_until

pytestmark = pytest.mark.xdist_group("console")


def test_a_tiered_topic_shows_local_and_remote_sizes(page: Page, rest_stack: RestStack) -> None:
    stack = rest_stack
    topic = f"tiered-ui-{uuid.uuid4().hex[:6]}"
    stack.api("POST", f"/clusters/{stack.cluster_pk}/topics", {"name": topic, "partitions": 1, "configs": {
        "remote.storage.enable": "true", "segment.bytes": "4096", "local.retention.bytes": "8192"}})
    stack.wait_for_leaders(topic, 1)
    producer = Producer({**stack.kafka, "linger.ms": 1, "batch.size": 1024})
    for i in range(300):
        producer.produce(topic, key=f"k{i}", value=f"v{i}".ljust(200, "."))
    assert producer.flush(60) == 0
    wait_until(lambda: (stack.api("GET", f"/clusters/{stack.cluster_pk}/topics/{topic}")["remote_size_bytes"] or 0)
               > 0, "segments in the remote tier", 60)

    sign_in(page, stack.base, stack.username, stack.password)
    page.goto(f"/t/{stack.tenant}/clusters/{stack.cluster_pk}/topics?q={topic}")
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=topic, exact=True))
    expect(row.get_by_text(re.compile(r"^\+ .+ tiered$"))).to_be_visible()
    row.get_by_role("link", name=topic).click()
    expect(page.get_by_text("Size (local + remote)")).to_be_visible()
