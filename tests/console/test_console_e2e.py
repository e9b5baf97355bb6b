"""The web console end to end, in headless Chromium against a real ``sluice up``: sign in and out; create a
cluster and watch it become Ready; create a topic and an API key; produce from the UI and see the record in
the browser, in the live tail and with a Kafka client; a consumer group's lag; ACLs through the wizard; and a
viewer who is shown no produce or delete controls. Every page visited is screenshotted and checked by axe-core.
"""

from __future__ import annotations

import json
import re
import urllib.request
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from playwright.sync_api import Page, Route, expect

from tests.console.browser import DIST, check_page, create_user, open_drawer, sign_in
from tests.kafkarest.conftest import RestStack
from tests.support.polling import wait_until

pytestmark = pytest.mark.xdist_group("console")

LONG = 180_000  # ms: a cluster's create-to-Ready on a busy 2-core machine


def suffix() -> str:
    return uuid.uuid4().hex[:6]


def kafka_produce(stack: RestStack, topic: str, records: list[tuple[str, str]]) -> None:
    producer = Producer({**stack.kafka, "linger.ms": 1})
    for key, value in records:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(60) == 0


def test_sign_in_refusal_and_sign_out(page: Page, rest_stack: RestStack) -> None:
    page.goto("/t/whatever/clusters")
    expect(page).to_have_url(re.compile(r"/login$"))  # a signed-out visitor is sent to sign in
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_text("Enter your username.")).to_be_visible()
    page.get_by_label("Username").fill(rest_stack.username)
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("Wrong username or password.")
    check_page(page, "sign-in")
    sign_in(page, rest_stack.base, rest_stack.username, rest_stack.password)
    expect(page).to_have_url(re.compile(rf"/t/{rest_stack.tenant}/clusters$"))
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/login$"))
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/login$"))  # the session is gone on the server too


def test_a_click_while_the_list_loads_opens_the_form(page: Page, rest_stack: RestStack) -> None:
    """The topic list's request held back: the "New topic" click (a synchronous update) lands while the table has
    no data. It once sent the table into an endless render loop that froze the tab."""
    sign_in(page, rest_stack.base, rest_stack.username, rest_stack.password)
    held: list[Route] = []

    def hold(route: Route) -> None:
        held.append(route)

    page.route(re.compile(r"/api/v1/tenants/[^/]+/clusters/[^/]+/topics/\?"), hold)
    with page.expect_request(re.compile(r"/topics/\?")):
        page.goto(f"/t/{rest_stack.tenant}/clusters/{rest_stack.cluster_pk}/topics")
    expect(page.get_by_role("table", name="Topics")).to_contain_text("Loading")
    page.get_by_role("button", name="New topic").click()
    expect(page.get_by_role("form", name="Create a topic")).to_be_visible()
    for route in held:
        route.continue_()
    page.unroute(re.compile(r"/api/v1/tenants/[^/]+/clusters/[^/]+/topics/\?"))
    page.keyboard.press("Escape")
    expect(page.get_by_test_id("topic-count")).to_have_text(re.compile(r"\d+ topics?"))


def test_a_group_that_never_committed_shows_no_commit_not_a_lag_of_0(page: Page, rest_stack: RestStack) -> None:
    stack = rest_stack
    topic = f"uncommitted-{suffix()}"
    stack.create_topic(topic, 2)
    kafka_produce(stack, topic, [("a", "1"), ("b", "2")])
    group = f"e2e-idle-{suffix()}"
    consumer = Consumer({**stack.kafka, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    try:
        def assigned() -> bool:
            consumer.poll(0.5)
            return len(consumer.assignment()) == 2
        wait_until(assigned, "the member's assignment")
        sign_in(page, stack.base, stack.username, stack.password)
        page.goto(f"/t/{stack.tenant}/clusters/{stack.cluster_pk}/consumer-groups/{group}")
        # The member owns both partitions and committed neither: their lag is unknown, not 0.
        lag = page.get_by_role("table", name="Lag per partition")
        expect(lag.get_by_role("row").filter(has_text=topic)).to_have_count(2)
        expect(lag.get_by_text("no commit")).to_have_count(2)
        expect(page.get_by_test_id("total-lag")).to_have_text("no commit")
    finally:
        consumer.close()


def test_owner_journey(page: Page, rest_stack: RestStack) -> None:
    stack = rest_stack
    sign_in(page, stack.base, stack.username, stack.password)
    tenant = f"/t/{stack.tenant}"

    # A cluster, created with a plan, becomes Ready in the list.
    cluster = f"e2e-{suffix()}"
    page.goto(f"{tenant}/clusters")
    open_drawer(page, "New cluster")  # the form opens in a drawer
    form = page.get_by_role("form", name="Create a cluster")
    form.get_by_label("Name").fill("Bad Name!")
    form.get_by_role("button", name="Create cluster").click()
    expect(form.get_by_role("alert")).to_contain_text("Lower-case letters")
    form.get_by_label("Name").fill(cluster)
    form.get_by_label("Plan").select_option("basic")
    form.get_by_role("button", name="Create cluster").click()
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=cluster, exact=True))
    expect(row.get_by_text("Ready", exact=True)).to_be_visible(timeout=LONG)
    check_page(page, "clusters")
    row.get_by_role("link", name=cluster).click()
    expect(page.get_by_role("heading", name="Brokers")).to_be_visible()
    expect(page.get_by_test_id("bootstrap")).to_have_text(re.compile(r"127\.0\.0\.1:\d+"))
    expect(page.get_by_test_id("schema-registry-url")).to_have_text(re.compile(r"/schema-registry/skc-[0-9a-f]+$"))
    expect(page.get_by_role("table", name="Brokers").get_by_role("row")).to_have_count(2)  # header + 1 broker
    check_page(page, "cluster-overview")
    # Deleting asks for the name first; the new cluster's broker is stopped again.
    page.get_by_role("button", name="Delete cluster").click()
    page.get_by_label("Confirmation").fill(cluster)
    page.get_by_role("button", name="Confirm delete cluster").click()
    expect(page.get_by_text("Deletion requested")).to_be_visible()

    # A topic on the demo cluster: server-side search finds it.
    topic = f"orders-{suffix()}"
    demo = f"{tenant}/clusters/{stack.cluster_pk}"
    page.goto(f"{demo}/topics")
    open_drawer(page, "New topic")
    form = page.get_by_role("form", name="Create a topic")
    form.get_by_label("Name").fill(topic)
    form.get_by_label("Partitions").fill("3")
    form.get_by_role("button", name="Create topic").click()
    page.get_by_label("Search topics").fill(topic[:10])
    expect(page.get_by_role("link", name=topic)).to_be_visible()
    expect(page.get_by_test_id("topic-count")).to_have_text("1 topic")  # not "1 topics"
    check_page(page, "topics")
    stack.wait_for_leaders(topic, 3)

    # The topic opens on its newest records: none yet, and no Read needed to know it.
    page.get_by_role("link", name=topic).click()
    browse = page.get_by_role("region", name="Browse messages")
    expect(browse.get_by_test_id("record-count")).to_have_text("0 records")
    # Produce from the UI (in a drawer): JSON value, key, a header, a chosen partition.
    page.get_by_role("button", name="Produce a message").click()
    produce = page.get_by_role("region", name="Produce a message")
    produce.get_by_label("Key", exact=True).fill("order-1")
    produce.get_by_label("Partition").select_option("1")
    produce.get_by_label("Value type").select_option("JSON")
    produce.get_by_label("Value", exact=True).fill("{not json")
    produce.get_by_role("button", name="Produce").click()
    expect(produce.get_by_role("alert")).to_have_text("The value is not valid JSON.")
    produce.get_by_label("Value", exact=True).fill('{"status": "paid", "total": 5}')
    produce.get_by_role("button", name="Add header").click()
    produce.get_by_label("Header name").fill("trace")
    produce.get_by_label("Header value").fill("t-42")
    produce.get_by_role("button", name="Produce").click()
    expect(produce.get_by_role("status")).to_have_text("Produced to partition 1 at offset 0.")
    page.keyboard.press("Escape")  # closes the drawer
    expect(produce).to_have_count(0)

    # The produce refreshed the list: the record is there without pressing Read ("1 record", not "1 records").
    record = browse.get_by_test_id("record")
    expect(record).to_have_count(1)
    expect(browse.get_by_test_id("record-count")).to_have_text("1 record")
    expect(record).to_contain_text("order-1")
    expect(record).to_contain_text('"status": "paid"')
    expect(record).to_contain_text("t-42")
    check_page(page, "topic-messages")
    # The record drawer: the record whole, with copy buttons.
    record.get_by_role("button", name="Open record 1:0").click()
    drawer = page.get_by_test_id("record-drawer")
    expect(drawer).to_contain_text("order-1")
    expect(drawer).to_contain_text("trace")
    expect(drawer.get_by_role("button", name="Copy value")).to_be_visible()
    check_page(page, "record-drawer")
    page.keyboard.press("Escape")
    expect(drawer).to_have_count(0)
    browse.get_by_label("JSON field").fill("status")
    browse.get_by_label("equals").fill("refunded")
    browse.get_by_role("button", name="Read").click()
    expect(browse.get_by_text("No records.")).to_be_visible()
    browse.get_by_label("equals").fill("paid")
    browse.get_by_role("button", name="Read").click()
    expect(record).to_have_count(1)
    with page.expect_download() as download:
        browse.get_by_role("button", name="Export JSON").click()
    exported = json.loads(open(download.value.path()).read())  # noqa: SIM115
    assert [(r["partition"], r["offset"], r["key"]) for r in exported] == [(1, 0, "order-1")]

    # A Kafka client reads what the UI produced, commits, and leaves lag behind for the group page.
    group = f"e2e-group-{suffix()}"
    consumer = Consumer({**stack.kafka, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    seen: list[tuple[bytes | None, bytes | None]] = []

    def got_it() -> bool:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            seen.append((message.key(), message.value()))
            consumer.commit(message, asynchronous=False)
        return bool(seen)

    wait_until(got_it, "the UI's record at a Kafka consumer")
    consumer.close()
    assert seen == [(b"order-1", b'{"status":"paid","total":5}')] or json.loads(seen[0][1] or b"") == {
        "status": "paid", "total": 5}

    # The live tail: the last records, then new ones on top; pause holds, resume continues from the cursor.
    page.get_by_role("tab", name="Live tail").click()
    tail = page.get_by_role("region", name="Live tail")
    expect(tail.get_by_test_id("tail-state")).to_have_text("live")
    expect(tail.get_by_test_id("record").first).to_contain_text("order-1")
    kafka_produce(stack, topic, [("from-kafka-1", "hello")])
    expect(tail.get_by_test_id("record").first).to_contain_text("from-kafka-1")
    check_page(page, "topic-tail")
    tail.get_by_role("button", name="Pause").click()
    expect(tail.get_by_test_id("tail-state")).to_have_text("paused")
    kafka_produce(stack, topic, [("while-paused", "x")])
    expect(tail.get_by_text("while-paused")).to_have_count(0)
    tail.get_by_role("button", name="Resume").click()
    expect(tail.get_by_test_id("record").first).to_contain_text("while-paused")
    expect(tail.get_by_test_id("record")).to_have_count(3)  # no gap, no duplicate

    # Back on Messages: the filters are kept for the visit (still one paid record); cleared and read, the newest
    # records, newest first across partitions.
    page.get_by_role("tab", name="Messages").click()
    expect(browse.get_by_label("equals")).to_have_value("paid")
    expect(browse.get_by_test_id("record")).to_have_count(1)
    browse.get_by_role("button", name="Clear filters").click()
    expect(browse.get_by_label("equals")).to_have_value("")
    browse.get_by_role("button", name="Read").click()
    expect(browse.get_by_test_id("record")).to_have_count(3)
    expect(browse.get_by_test_id("record").first).to_contain_text("while-paused")
    expect(browse.get_by_test_id("record").last).to_contain_text("order-1")

    # Partitions with leader, ISR and offsets; configs with their defaults, an edit and a refused one.
    page.get_by_role("tab", name="Partitions").click()
    partitions = page.get_by_role("table", name="Partitions")
    expect(partitions.get_by_role("row")).to_have_count(4)
    check_page(page, "topic-partitions")
    page.get_by_role("tab", name="Configs").click()
    page.get_by_label("Filter configs").fill("retention.ms")
    page.get_by_role("button", name="Edit retention.ms").click()
    page.get_by_label("Value of retention.ms").fill("soon")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("alert")).to_contain_text("retention.ms")
    page.get_by_label("Value of retention.ms").fill("3600000")
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_text("saved; applying…")).to_be_visible()
    retention = page.get_by_role("row").filter(has=page.get_by_role("rowheader", name="retention.ms", exact=True))
    expect(retention).to_contain_text("3600000", timeout=LONG)  # once the reconciler has applied it
    expect(retention).to_contain_text("604800000")  # the default it overrides (Kafka's 7 days), not "cluster default"
    check_page(page, "topic-configs")

    # The group's lag per partition (2 records after its commit on partition 1; the others it never read).
    page.goto(f"{demo}/consumer-groups")
    page.get_by_role("link", name=group).click()
    expect(page.get_by_test_id("group-state")).to_have_text(re.compile("Empty"))
    expect(page.get_by_role("figure", name="Lag per partition chart")).to_be_visible()
    expect(page.get_by_test_id("total-lag")).not_to_have_text("0")
    check_page(page, "consumer-group")
    reset = page.get_by_role("region", name="Reset offsets")
    reset.get_by_role("button", name="Preview (dry run)").click()
    expect(reset.get_by_role("status")).to_contain_text("Preview — nothing changed")
    # The preview is a table (topic, partition, current -> new), not raw JSON.
    plan = reset.get_by_role("table", name="Offset reset plan")
    expect(plan.get_by_role("row").filter(has_text=topic).first).to_be_visible()
    expect(reset.get_by_role("status")).not_to_contain_text('"new_offset"')
    expect(page.get_by_test_id("total-lag")).not_to_have_text("0")  # a preview changes nothing

    # A service account and its API key: the secret is shown once, and it works against the API.
    account = f"e2e-sa-{suffix()}"
    page.goto(f"{tenant}/service-accounts")
    open_drawer(page, "New service account")
    form = page.get_by_role("form", name="Create a service account")
    form.get_by_label("Name").fill(account)
    form.get_by_role("button", name="Create").click()
    expect(page.get_by_role("table", name="Service accounts").get_by_text(account)).to_be_visible()
    open_drawer(page, "New API key")
    keys = page.get_by_role("form", name="Create an API key")
    keys.get_by_label("For").select_option(label=account)
    keys.get_by_label("Description").fill("e2e")
    keys.get_by_role("button", name="Create key").click()
    key_id = keys.get_by_test_id("new-key-id").inner_text()
    secret = keys.get_by_test_id("new-key-secret").inner_text()
    # The key authenticates; as a service account with no ACLs yet, the cluster hides the topic from it (40401),
    # as from its own Kafka clients.
    answer = stack.request("GET", f"/kafka/v3/clusters/{stack.cluster_id}/topics/{topic}", key=f"{key_id}:{secret}")
    assert answer.status == 404 and json.loads(answer.body)["error_code"] == 40401, answer.body
    check_page(page, "api-key-created")
    page.reload()
    expect(page.get_by_text(secret)).to_have_count(0)  # shown once
    key_row = page.get_by_role("row").filter(has_text=key_id)
    expect(key_row).to_contain_text(account)  # the key's owner by name
    check_page(page, "service-accounts")
    key_row.get_by_role("button", name="Revoke").click()
    page.get_by_role("dialog").get_by_role("button", name="Confirm revoke").click()
    expect(key_row).to_contain_text("revoked")
    # The REST Proxy remembers a key for up to 2 s (controlplane.tenancy.authentication.CACHE_SECONDS).
    wait_until(lambda: stack.request("GET", f"/kafka/v3/clusters/{stack.cluster_id}/topics/{topic}",
                                     key=f"{key_id}:{secret}").status == 401, "the revoked key to be refused")

    # ACLs through the producer wizard, then deleted.
    principal = (page.get_by_role("table", name="Service accounts").get_by_role("row").filter(has_text=account)
                 .locator("code").inner_text())
    page.goto(f"{demo}/acls")
    page.get_by_role("button", name="Grant access").click()
    wizard = page.get_by_role("form", name="Create ACLs")
    wizard.get_by_label("Principal").fill(principal)
    wizard.get_by_label("Topic", exact=True).fill(topic)
    wizard.get_by_role("button", name="Create").click()
    expect(page.get_by_text("2 ACLs created.")).to_be_visible()  # a toast; the drawer closed
    expect(wizard).to_have_count(0)
    rows = page.get_by_role("table", name="ACLs").get_by_role("row").filter(has_text=principal)
    expect(rows).to_have_count(2)
    check_page(page, "acls")
    for left in (1, 0):
        rows.first.get_by_role("button", name="Delete").click()
        page.get_by_role("dialog").get_by_role("button", name="Confirm delete").click()
        expect(rows).to_have_count(left)

    page.goto(f"{tenant}/members")
    members = page.get_by_role("table", name="Members")
    expect(members.get_by_role("cell", name=stack.username, exact=True)).to_be_visible()
    check_page(page, "members")
    page.goto(f"{tenant}/audit")
    expect(page.get_by_role("table", name="Audit events").get_by_text("topic.create").first).to_be_visible()
    check_page(page, "audit")  # (fits 1,024 px: it overflowed to 1,784 px with raw JSON details)
    assert "{" not in page.get_by_role("table", name="Audit events").inner_text()  # details in words, not JSON
    page.get_by_label("Action").select_option("topic.")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"action_prefix=topic\."))


def test_viewer_sees_no_produce_or_delete_controls(page: Page, rest_stack: RestStack) -> None:
    stack = rest_stack
    name = f"viewer-{suffix()}"
    create_user(stack.env, name, "viewer-pass-1", f"{name}@example.test")
    member = stack.add_member(name, "viewer-pass-1", f"{name}@example.test", "viewer")
    topic = f"viewed-{suffix()}"
    stack.create_topic(topic, 1)
    kafka_produce(stack, topic, [("k", "seen by a viewer")])
    # A viewer reads as its own principal, so the cluster's ACLs must let it (roles and ACLs compose); its Configs
    # tab needs DESCRIBE_CONFIGS, as kafka-configs --describe does.
    sign_in(page, stack.base, name, "viewer-pass-1")
    # Without a READ ACL, Read is not offered (disabled, with the reason), rather than failing when pressed.
    page.goto(f"/t/{stack.tenant}/clusters/{stack.cluster_pk}/topics/{topic}")
    browse = page.get_by_role("region", name="Browse messages")
    expect(browse.get_by_role("button", name="Read")).to_be_disabled()
    expect(page.get_by_role("note").filter(has_text="needs an ACL allowing READ")).to_be_visible()
    check_page(page, "viewer-topic-no-acl")

    for operation in ("READ", "DESCRIBE", "DESCRIBE_CONFIGS"):
        answer = stack.request("POST", f"/kafka/v3/clusters/{stack.cluster_id}/acls", {
            "resource_type": "TOPIC", "resource_name": topic, "pattern_type": "LITERAL",
            "principal": member["principal"], "host": "*", "operation": operation, "permission": "ALLOW"})
        assert answer.status == 201, (answer.status, answer.body[:300])
    page.goto(f"/t/{stack.tenant}/clusters")
    expect(page.get_by_test_id("role")).to_have_text("viewer")
    expect(page.get_by_role("form", name="Create a cluster")).to_have_count(0)
    page.goto(f"/t/{stack.tenant}/clusters/{stack.cluster_pk}/topics")
    expect(page.get_by_role("link", name="demo", exact=True)).to_be_visible()
    expect(page.get_by_role("form", name="Create a topic")).to_have_count(0)
    page.goto(f"/t/{stack.tenant}/clusters/{stack.cluster_pk}/topics/{topic}")
    expect(browse.get_by_role("button", name="Read")).to_be_enabled()

    def read_back() -> bool:  # the ACLs reach the cluster with the next reconcile pass
        if not browse.get_by_test_id("record").count():  # read on open; again while the ACLs are on their way
            browse.get_by_role("button", name="Read").click()
        try:
            expect(browse.get_by_test_id("record")).to_contain_text("seen by a viewer", timeout=3000)
        except AssertionError:
            return False
        return True

    wait_until(read_back, "the viewer's read, once its ACLs are on the cluster")
    expect(page.get_by_role("region", name="Produce a message")).to_have_count(0)
    expect(page.get_by_role("button", name="Delete topic")).to_have_count(0)
    check_page(page, "viewer-topic")
    page.get_by_role("tab", name="Configs").click()
    expect(page.get_by_role("row").filter(has_text="cleanup.policy").first).to_be_visible()
    expect(page.get_by_role("button", name=re.compile("^Edit "))).to_have_count(0)
    page.goto(f"/t/{stack.tenant}/clusters/{stack.cluster_pk}/acls")
    expect(page.get_by_role("form", name="Create ACLs")).to_have_count(0)
    expect(page.get_by_role("link", name="Audit log")).to_have_count(0)
    # The server refuses too: hiding is not the only guard.
    request = urllib.request.Request(f"{stack.base}/kafka/v3/clusters/{stack.cluster_id}/topics/{topic}",
                                     method="DELETE")
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    request.add_header("Cookie", f"sessionid={cookies['sessionid']}; csrftoken={cookies['csrftoken']}")
    request.add_header("X-CSRFToken", cookies["csrftoken"])
    request.add_header("Origin", stack.base)
    request.add_header("Referer", stack.base + "/")
    try:
        urllib.request.urlopen(request, timeout=30)
        raise AssertionError("a viewer deleted a topic")
    except urllib.error.HTTPError as refused:
        assert refused.code == 403


def test_first_page_javascript_within_budget() -> None:
    """The build's own measure (frontend/scripts/bundle-size.mjs): JavaScript index.html loads, gzipped."""
    size = json.loads((DIST / "bundle-size.json").read_text())
    assert size["firstPage"] <= 300 * 1024, size
    assert size["lazy"], "the chart library is expected in a lazily loaded chunk"
