"""The console's Schemas pages and schema'd records, in headless Chromium against a real ``sluice up``: versions
registered by API key and from the page, the subject list, the diff between versions, the compatibility level
changed by an owner, an incompatible draft refused with the registry's reason, the topic the subject belongs to,
an Avro record written with Confluent's serializer shown decoded with its schema id in the message browser, and a
viewer who reads but cannot change anything. Every page visited is screenshotted and checked by axe-core."""

from __future__ import annotations

import json
import re
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from playwright.sync_api import Browser, Page, expect

from tests.console.browser import check_page, create_user, sign_in
from tests.kafkarest.conftest import RestStack

pytestmark = pytest.mark.xdist_group("console")

V1 = {"type": "record", "name": "User", "namespace": "console",
      "fields": [{"name": "name", "type": "string"}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "age", "type": "int", "default": 0}]}
BREAKING = {**V2, "fields": [*V2["fields"], {"name": "email", "type": "string"}]}


def register(stack: RestStack, subject: str, schema: dict[str, object]) -> int:
    """A version registered with the owner's API key, as a producer's serializer would."""
    answer = stack.request("POST", f"/schema-registry/{stack.cluster_id}/subjects/{subject}/versions",
                           {"schema": json.dumps(schema)})
    assert answer.status == 200, answer.body[:300]
    return int(answer.json()["id"])


def test_schemas_journey(page: Page, rest_stack: RestStack) -> None:
    stack = rest_stack
    topic = f"people-{uuid.uuid4().hex[:6]}"
    subject = f"{topic}-value"
    stack.create_topic(topic, 1)
    register(stack, subject, V1)
    sign_in(page, stack.base, stack.username, stack.password)
    cluster = f"/t/{stack.tenant}/clusters/{stack.cluster_pk}"

    # The list, reached from the cluster's navigation.
    page.goto(cluster)
    page.get_by_role("navigation", name="Cluster").get_by_role("link", name="Schemas").click()
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=subject, exact=True))
    expect(row).to_contain_text("AVRO")
    expect(row.get_by_role("cell").nth(2)).to_have_text("1")
    check_page(page, "schemas")

    # The second version, registered from the page.
    row.get_by_role("link", name=subject).click()
    expect(page.get_by_role("heading", name=subject, level=1)).to_be_visible()
    used_by = page.get_by_test_id("used-by")
    expect(used_by.get_by_role("link", name=topic)).to_be_visible()
    form = page.get_by_role("region", name="Register a version")
    form.get_by_role("textbox", name="Schema", exact=True).fill("{not json")
    form.get_by_role("button", name="Register").click()
    expect(form.get_by_role("alert")).to_contain_text("not valid JSON")
    form.get_by_role("textbox", name="Schema", exact=True).fill(json.dumps(V2, indent=2))
    form.get_by_role("button", name="Check compatibility").click()
    expect(form.get_by_role("status")).to_have_text("Compatible with the latest version.")
    form.get_by_role("button", name="Register").click()
    expect(form.get_by_role("status")).to_contain_text("Registered with schema id")
    expect(page.get_by_test_id("version")).to_have_count(2)

    # The diff between versions 1 and 2: the added field.
    diff = page.get_by_role("region", name="Diff")
    expect(diff.get_by_test_id("diff")).to_contain_text('+       "name": "age"')
    expect(diff.get_by_test_id("diff-stats")).to_have_text(re.compile(r"^[1-9]\d* added, [0-9]+ removed$"))
    check_page(page, "schema-subject")

    # The owner (at least admin) changes the subject's compatibility level.
    compatibility = page.get_by_role("region", name="Compatibility")
    expect(compatibility.get_by_test_id("compatibility")).to_have_text("BACKWARD")
    compatibility.get_by_label("Compatibility level").select_option("FULL")
    compatibility.get_by_role("button", name="Change compatibility").click()
    expect(compatibility.get_by_test_id("compatibility")).to_have_text("FULL")
    expect(compatibility).not_to_contain_text("registry's default")

    # An incompatible draft: the registry's reason is shown, and registering it is refused with the 409's message.
    form.get_by_role("textbox", name="Schema", exact=True).fill(json.dumps(BREAKING))
    form.get_by_role("button", name="Check compatibility").click()
    expect(form.get_by_test_id("incompatible")).to_contain_text("email")
    form.get_by_role("button", name="Register").click()
    expect(form.get_by_role("alert")).to_contain_text("incompatible")
    expect(page.get_by_test_id("version")).to_have_count(2)

    # The list shows the new latest version and the subject's own level.
    page.goto(f"{cluster}/schemas")
    row = page.get_by_role("row").filter(has=page.get_by_role("link", name=subject, exact=True))
    expect(row.get_by_role("cell").nth(2)).to_have_text("2")
    expect(row.get_by_role("cell").nth(4)).to_have_text("FULL")

    # A record written by Confluent's AvroSerializer, shown decoded with its schema id in the message browser.
    client = SchemaRegistryClient({"url": f"{stack.base}/schema-registry/{stack.cluster_id}",
                                   "basic.auth.user.info": stack.key})
    serializer = AvroSerializer(client, json.dumps(V2),
                                conf={"auto.register.schemas": False, "use.latest.version": True})
    framed = serializer({"name": "ada", "age": 36}, SerializationContext(topic, MessageField.VALUE))
    assert framed is not None
    schema_id = int.from_bytes(framed[1:5], "big")
    producer = Producer({**stack.kafka, "linger.ms": 1})
    producer.produce(topic, key="user-1", value=framed)
    assert producer.flush(60) == 0
    page.goto(f"{cluster}/topics/{topic}")
    browse = page.get_by_role("region", name="Browse messages")
    browse.get_by_label("From").select_option("earliest")
    browse.get_by_role("button", name="Read").click()
    record = browse.get_by_test_id("record")
    expect(record).to_have_count(1)
    expect(record.get_by_test_id("schema-id")).to_have_text(f"AVRO · schema id {schema_id}")
    expect(record).to_contain_text('"name": "ada"')
    expect(record).to_contain_text('"age": 36')
    check_page(page, "schema-record")


def test_a_viewer_reads_schemas_but_changes_nothing(browser: Browser, rest_stack: RestStack) -> None:
    stack = rest_stack
    subject = f"viewed-{uuid.uuid4().hex[:6]}-value"
    register(stack, subject, V1)
    register(stack, subject, V2)
    name = f"schema-viewer-{uuid.uuid4().hex[:6]}"
    create_user(stack.env, name, "viewer-pass-1", f"{name}@example.test")
    stack.add_member(name, "viewer-pass-1", f"{name}@example.test", "viewer")
    context = browser.new_context(base_url=stack.base, viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        sign_in(page, stack.base, name, "viewer-pass-1")
        page.goto(f"/t/{stack.tenant}/clusters/{stack.cluster_pk}/schemas/{subject}")
        expect(page.get_by_test_id("version")).to_have_count(2)
        expect(page.get_by_test_id("diff")).to_contain_text("age")
        expect(page.get_by_text("Only an admin changes the compatibility level.")).to_be_visible()
        expect(page.get_by_label("Compatibility level")).to_have_count(0)
        form = page.get_by_role("region", name="Register a version")
        expect(form.get_by_role("button", name="Register")).to_be_disabled()
        expect(form.get_by_role("button", name="Check compatibility")).to_be_disabled()
        expect(form.get_by_role("note")).to_have_text("Your role (viewer) can read schemas only.")
        expect(page.get_by_role("button", name="Delete version 2")).to_be_disabled()
        expect(page.get_by_role("button", name="Delete subject")).to_have_count(0)
        check_page(page, "schema-subject-viewer")
        # The server refuses too: the session's write (with its CSRF token) is a 403 for a viewer.
        status = page.evaluate("""async ([path, body]) => {
            const token = document.cookie.match(/csrftoken=([^;]+)/)[1];
            const r = await fetch(path, {method: "PUT", body, headers: {"Content-Type": "application/json",
                                                                        "X-CSRFToken": token}});
            return [r.status, (await r.json()).error_code];
        }""", [f"/schema-registry/{stack.cluster_id}/config/{subject}", json.dumps({"compatibility": "NONE"})])
        assert status == [403, 40301]
    finally:
        context.close()
