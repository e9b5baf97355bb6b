"""Reports and what each role is offered, in headless Chromium against the console tests' ``sluice up``.

The stack's own reports worker runs the report on its Spark session (the only JVM here: it starts with the
first run, so the first test waits for it once). A report of a built-in kind is created in the form (an unknown
topic refused at its field first), run now, seen succeeding, drawn and tabled, and downloaded as CSV. A viewer
is offered no create, run or delete control; a member whose principal lacks a WRITE ACL sees producing disabled,
with the reason, until an admin grants it. Every page visited is screenshotted and checked by axe-core.
"""

from __future__ import annotations

import csv
import io
import re
import uuid

import pytest
from playwright.sync_api import Page, expect

from tests.console.browser import check_page, create_user, open_drawer, sign_in
from tests.console.test_console_e2e import kafka_produce
from tests.kafkarest.conftest import RestStack

pytestmark = pytest.mark.xdist_group("console")

SPARK = 300_000  # ms: the worker's first run starts its Spark session (a JVM) on a busy 2-core machine


def suffix() -> str:
    return uuid.uuid4().hex[:6]


def add_user(stack: RestStack, role: str) -> tuple[str, str, dict[str, str]]:
    name = f"{role}-{suffix()}"
    password = f"{role}-pass-1"
    create_user(stack.env, name, password, f"{name}@example.test")
    member = stack.add_member(name, password, f"{name}@example.test", role)
    return name, password, member


def test_report_run_chart_table_and_csv(page: Page, rest_stack: RestStack) -> None:
    stack = rest_stack
    topic = f"clicks-{suffix()}"
    stack.create_topic(topic, 2)
    kafka_produce(stack, topic, [("home", "1"), ("cart", "2"), ("home", "3"), ("pay", "4"), ("home", "5"),
                                 ("cart", "6")])
    sign_in(page, stack.base, stack.username, stack.password)
    page.get_by_role("navigation", name="Tenant").get_by_role("link", name="Reports").click()
    reports = f"/t/{stack.tenant}/clusters/{stack.cluster_pk}/reports"
    page.goto(reports)  # (with one cluster the tenant's Reports link goes straight here too)
    expect(page.get_by_role("heading", name="Reports", exact=True)).to_be_visible()

    open_drawer(page, "New report")  # the form opens in a drawer
    form = page.get_by_role("form", name="Create a report")
    form.get_by_role("button", name="Create report").click()  # the browser's rules first
    expect(form.get_by_text("Choose the topic to read.")).to_be_visible()
    name = f"top keys {suffix()}"
    form.get_by_label("Name").fill(name)
    form.get_by_label("Kind").select_option("top_keys")
    form.get_by_label("How many keys").fill("2")
    form.get_by_label("Topic").fill("no-such-topic")
    form.get_by_role("button", name="Create report").click()  # then the server's, shown at the same field
    expect(page.locator("#report-topic-error")).to_contain_text("unknown topic 'no-such-topic'")
    expect(form.get_by_label("Topic")).to_have_attribute("aria-invalid", "true")
    check_page(page, "reports")
    form.get_by_label("Topic").fill(topic)
    form.get_by_role("button", name="Create report").click()

    expect(page.get_by_role("heading", name=name)).to_be_visible()
    # Parameters in words, not raw JSON.
    expect(page.get_by_text("How many keys")).to_be_visible()
    expect(page.locator("main")).not_to_contain_text('{"topic"')
    page.get_by_role("button", name="Run now").click()
    runs = page.get_by_role("table", name="Runs")
    expect(runs.get_by_test_id("run-status").first).to_have_text(re.compile("queued|running|succeeded"))
    expect(runs.get_by_test_id("run-status").first).to_have_text("succeeded", timeout=SPARK)
    run_row = runs.get_by_role("row").nth(1)
    expect(run_row).to_contain_text("6")  # records scanned
    expect(page.get_by_role("figure", name=f"{name} chart")).to_be_visible()
    rows = page.get_by_role("table", name="Result rows").get_by_role("row")
    expect(rows).to_have_count(3)  # header + the 2 keys asked for
    expect(rows.nth(1)).to_have_text(re.compile(r"home\s*3"))
    expect(rows.nth(2)).to_have_text(re.compile(r"cart\s*2"))
    check_page(page, "report")

    with page.expect_download() as download:
        page.get_by_role("link", name="Download CSV").click()
    with open(download.value.path(), newline="") as f:
        assert list(csv.reader(io.StringIO(f.read()))) == [["key", "records"], ["home", "3"], ["cart", "2"]]
    with page.expect_download() as download:
        page.get_by_role("link", name="Download JSON").click()
    assert download.value.suggested_filename.endswith(".json")

    # A schedule, changed in place; the list shows it with the last run.
    schedule = page.get_by_role("form", name="Schedule")
    schedule.get_by_label("Runs").select_option("cron")
    schedule.get_by_label("Cron", exact=True).fill("*/5 * * *")
    schedule.get_by_role("button", name="Save schedule").click()
    expect(schedule.get_by_role("alert")).to_contain_text("Five fields")
    schedule.get_by_label("Cron", exact=True).fill("0 3 * * *")
    schedule.get_by_role("button", name="Save schedule").click()
    expect(page.get_by_test_id("schedule")).to_have_text("cron 0 3 * * * (UTC)")
    page.goto(reports)
    listed = page.get_by_role("row").filter(has=page.get_by_role("link", name=name))
    expect(listed).to_contain_text("cron 0 3 * * * (UTC)")
    expect(listed).to_contain_text("succeeded")


def test_viewer_is_offered_no_report_or_topic_writes(page: Page, rest_stack: RestStack) -> None:
    stack = rest_stack
    topic = f"seen-{suffix()}"
    stack.create_topic(topic, 1)
    report = stack.api("POST", f"/clusters/{stack.cluster_pk}/reports",
                       {"name": f"sizes {suffix()}", "kind": "value_size_histogram", "params": {"topic": topic}})
    name, password, _ = add_user(stack, "viewer")
    sign_in(page, stack.base, name, password)
    reports = f"/t/{stack.tenant}/clusters/{stack.cluster_pk}/reports"
    page.goto(reports)
    expect(page.get_by_role("link", name=report["name"])).to_be_visible()
    expect(page.get_by_role("form", name="Create a report")).to_have_count(0)
    expect(page.get_by_role("note")).to_contain_text("needs the member role")
    check_page(page, "viewer-reports")
    page.get_by_role("link", name=report["name"]).click()
    expect(page.get_by_role("heading", name=report["name"])).to_be_visible()
    expect(page.get_by_role("table", name="Runs")).to_be_visible()
    for control in ("Run now", "Delete report", "Save schedule", "Cancel"):
        expect(page.get_by_role("button", name=control)).to_have_count(0)
    check_page(page, "viewer-report")

    page.goto(f"/t/{stack.tenant}/clusters/{stack.cluster_pk}/topics/{topic}")
    expect(page.get_by_role("note").first).to_contain_text("need the member role")
    expect(page.get_by_role("region", name="Produce a message")).to_have_count(0)
    expect(page.get_by_role("button", name="Delete topic")).to_have_count(0)
    page.goto(f"/t/{stack.tenant}/service-accounts")
    expect(page.get_by_role("form", name="Create an API key")).to_have_count(0)
    expect(page.get_by_role("button", name="Revoke")).to_have_count(0)


def test_member_without_write_acl_sees_produce_disabled_with_the_reason(page: Page, rest_stack: RestStack) -> None:
    stack = rest_stack
    topic = f"guarded-{suffix()}"
    stack.create_topic(topic, 1)
    name, password, member = add_user(stack, "member")
    sign_in(page, stack.base, name, password)
    page.goto(f"/t/{stack.tenant}/clusters/{stack.cluster_pk}/topics/{topic}")
    page.get_by_role("button", name="Produce a message").click()
    produce = page.get_by_role("region", name="Produce a message")
    expect(produce.get_by_role("note")).to_contain_text(f"WRITE on topic '{topic}'")
    expect(produce.get_by_role("note")).to_contain_text(member["principal"])
    button = produce.get_by_role("button", name="Produce")
    expect(button).to_be_disabled()
    expect(button).to_have_attribute("title", re.compile("needs an ACL allowing WRITE"))
    page.keyboard.press("Escape")
    expect(page.get_by_role("button", name="Delete topic")).to_be_visible()  # the role allows that one
    page.get_by_role("button", name="Produce a message").click()
    check_page(page, "member-produce-disabled")
    # An admin grants the ACL: the page offers producing again (it asks again every 10 s).
    answer = stack.request("POST", f"/kafka/v3/clusters/{stack.cluster_id}/acls", {
        "resource_type": "TOPIC", "resource_name": topic, "pattern_type": "LITERAL",
        "principal": member["principal"], "host": "*", "operation": "WRITE", "permission": "ALLOW"})
    assert answer.status == 201, (answer.status, answer.body[:300])
    expect(button).to_be_enabled(timeout=30_000)
    expect(produce.get_by_role("note")).to_have_count(0)
