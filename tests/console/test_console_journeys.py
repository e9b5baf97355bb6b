"""The redesigned console (issue 31) page by page, in Chromium against a real ``sluice up``: each role (owner, admin,
member, viewer) over every page, with the controls its role allows and no others; every page screenshotted in light
and dark, axe-core clean, and within 1,280 and 1,024 px windows (``check_page``). And the defects a user met, each
by a check that fails without its fix: broker addresses with the port once, a healthy ``Degraded False`` in green,
no Scale or Rebalance on a one-broker cluster, topic config actions apart and in units, no literal backticks in the
demo key's description, the dark mode remembered, and sign-in landing on the tenant last used.
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from dataclasses import dataclass

import pytest
from confluent_kafka import Producer
from playwright.sync_api import Page, expect

from tests.console.browser import ROOT, check_page, create_user, sign_in
from tests.kafkarest.conftest import RestStack

pytestmark = pytest.mark.xdist_group("console")

RANK = {"viewer": 0, "member": 1, "admin": 2, "owner": 3}


def suffix() -> str:
    return uuid.uuid4().hex[:6]


@dataclass(frozen=True)
class Login:
    role: str
    username: str
    password: str
    principal: str


@dataclass(frozen=True)
class World:
    """What every journey visits: a topic with a record, and one account per role."""

    topic: str
    logins: dict[str, Login]


@pytest.fixture(scope="module")
def world(rest_stack: RestStack) -> World:
    stack = rest_stack
    topic = f"journey-{suffix()}"
    stack.create_topic(topic, 2)
    producer = Producer({**stack.kafka, "linger.ms": 1})
    producer.produce(topic, key="k-1", value='{"status": "paid"}')
    assert producer.flush(60) == 0
    logins = {"owner": Login("owner", stack.username, stack.password, "")}
    for role in ("admin", "member", "viewer"):
        name = f"{role}-{suffix()}"
        password = f"{role}-pass-1"
        create_user(stack.env, name, password, f"{name}@example.test")
        member = stack.add_member(name, password, f"{name}@example.test", role)
        logins[role] = Login(role, name, password, member["principal"])
    return World(topic, logins)


def at_least(role: str, needed: str) -> bool:
    return RANK[role] >= RANK[needed]


def offered(page: Page, name: str, allowed: bool) -> None:
    """A control is shown exactly when the role allows it."""
    button = page.get_by_role("button", name=name, exact=True)
    if allowed:
        expect(button).to_be_visible()
    else:
        expect(button).to_have_count(0)


@pytest.mark.parametrize("role", ["owner", "admin", "member", "viewer"])
def test_every_page_for_each_role(page: Page, rest_stack: RestStack, world: World, role: str) -> None:
    stack = rest_stack
    login = world.logins[role]
    sign_in(page, stack.base, login.username, login.password)
    expect(page.get_by_test_id("role")).to_have_text(role)
    tenant = f"/t/{stack.tenant}"
    cluster = f"{tenant}/clusters/{stack.cluster_pk}"

    page.goto(f"{tenant}/clusters")
    expect(page.get_by_role("heading", name="Clusters", level=1)).to_be_visible()
    offered(page, "New cluster", at_least(role, "admin"))
    check_page(page, f"{role}-clusters")

    # The sidebar reaches the cluster's pages.
    page.goto(cluster)
    expect(page.get_by_role("heading", name="Brokers")).to_be_visible()
    offered(page, "Delete cluster", at_least(role, "admin"))
    check_page(page, f"{role}-cluster-overview")
    sidebar = page.get_by_role("navigation", name="Cluster")
    sidebar.get_by_role("link", name="Topics").click()
    expect(page.get_by_role("heading", name="Topics", level=1)).to_be_visible()
    offered(page, "New topic", at_least(role, "member"))
    check_page(page, f"{role}-topics")

    page.goto(f"{cluster}/topics/{world.topic}")
    expect(page.get_by_role("heading", name=world.topic, level=1)).to_be_visible()
    offered(page, "Produce a message", at_least(role, "member"))
    check_page(page, f"{role}-topic-messages")
    for tab in ("Live tail", "Partitions", "Configs"):
        page.get_by_role("tab", name=tab).click()
        expect(page.get_by_role("tab", name=tab)).to_have_attribute("aria-selected", "true")
        check_page(page, f"{role}-topic-{tab.lower().replace(' ', '-')}")

    for link, heading, control, needed in (
        ("Consumer groups", "Consumer groups", None, "viewer"),
        ("ACLs", "ACLs", "Grant access", "admin"),
        ("Schemas", "Schemas", None, "viewer"),
        ("Transactions", "Transactions", None, "viewer"),
        ("Reports", "Reports", "New report", "member"),
    ):
        page.get_by_role("navigation", name="Cluster").get_by_role("link", name=link).click()
        expect(page.get_by_role("heading", name=heading, level=1)).to_be_visible()
        if control:
            offered(page, control, at_least(role, needed))
        check_page(page, f"{role}-{link.lower().replace(' ', '-')}")

    tenant_nav = page.get_by_role("navigation", name="Tenant")
    tenant_nav.get_by_role("link", name="Members").click()
    expect(page.get_by_role("heading", name="Members and roles")).to_be_visible()
    offered(page, "Invite a member", role == "owner")
    check_page(page, f"{role}-members")
    tenant_nav.get_by_role("link", name="Service accounts & API keys").click()
    expect(page.get_by_role("heading", name="Service accounts", level=1)).to_be_visible()
    offered(page, "New service account", at_least(role, "admin"))
    offered(page, "New API key", at_least(role, "member"))
    check_page(page, f"{role}-service-accounts")
    audit = tenant_nav.get_by_role("link", name="Audit log")
    if at_least(role, "admin"):
        audit.click()
        expect(page.get_by_role("heading", name="Audit log")).to_be_visible()
        check_page(page, f"{role}-audit")
    else:
        expect(audit).to_have_count(0)
    tenant_nav.get_by_role("link", name="Your account").click()
    expect(page.get_by_role("heading", name="Your account")).to_be_visible()
    check_page(page, f"{role}-account")


def test_cluster_overview_defects(page: Page, rest_stack: RestStack) -> None:
    stack = rest_stack
    sign_in(page, stack.base, stack.username, stack.password)
    page.goto(f"/t/{stack.tenant}/clusters/{stack.cluster_pk}")
    brokers = page.get_by_role("table", name="Brokers")
    expect(brokers.get_by_role("row")).to_have_count(2)  # header + the demo cluster's one broker
    address = brokers.get_by_role("row").nth(1).get_by_role("cell").nth(1)
    expect(address).to_have_text(re.compile(r"^127\.0\.0\.1:\d+$"))  # not 127.0.0.1:31093:31093
    # A healthy "Degraded False" is good news: a green badge, not a yellow one.
    conditions = page.get_by_role("table", name="Conditions")
    degraded = conditions.get_by_role("row").filter(has=page.get_by_role("cell", name="Degraded", exact=True))
    expect(degraded.locator(".badge")).to_have_text("False", timeout=60_000)
    expect(degraded.locator(".badge")).to_have_class(re.compile(r"\bbadge-ok\b"))
    # One broker: nothing to scale to within its plan, nothing to rebalance.
    expect(page.get_by_role("form", name="Scale")).to_have_count(0)
    expect(page.get_by_role("button", name="Propose a rebalance")).to_have_count(0)


def test_topic_configs_in_units_with_defaults_and_separate_actions(page: Page, rest_stack: RestStack) -> None:
    stack = rest_stack
    topic = f"configs-{suffix()}"
    stack.create_topic(topic, 1, {"retention.ms": "3600000"})
    sign_in(page, stack.base, stack.username, stack.password)
    page.goto(f"/t/{stack.tenant}/clusters/{stack.cluster_pk}/topics/{topic}?tab=configs")
    retention = page.get_by_role("row").filter(has=page.get_by_role("rowheader", name="retention.ms", exact=True))
    expect(retention.get_by_role("cell").nth(0)).to_contain_text("1 h")  # in units, the raw value under it
    expect(retention.get_by_role("cell").nth(0)).to_contain_text("3600000")
    expect(retention.get_by_role("cell").nth(1)).not_to_have_text("—")  # the overridden config's default
    # "Edit" and "Reset to default" are two controls, not "EditReset to default".
    expect(retention.get_by_role("button", name="Edit retention.ms")).to_have_text("Edit")
    expect(retention.get_by_role("button", name="Reset to default: retention.ms")).to_have_text("Reset to default")
    segment = page.get_by_role("row").filter(has=page.get_by_role("rowheader", name="segment.bytes", exact=True))
    expect(segment.get_by_role("cell").nth(0)).to_contain_text(re.compile(r"^\d+(\.\d+)? (B|KiB|MiB|GiB)"))
    check_page(page, "topic-configs-units")


def test_demo_key_description_has_no_literal_backticks(page: Page, rest_stack: RestStack) -> None:
    stack = rest_stack
    sign_in(page, stack.base, stack.username, stack.password)
    page.goto(f"/t/{stack.tenant}/service-accounts")
    keys = page.get_by_role("table", name="API keys")
    demo = keys.get_by_role("row").filter(has_text="demo key created by")
    expect(demo.first).to_be_visible()
    expect(demo.first).not_to_contain_text("`")
    expect(demo.first.locator("code", has_text="sluice up")).to_be_visible()


def test_dark_mode_is_remembered(page: Page, rest_stack: RestStack) -> None:
    stack = rest_stack
    sign_in(page, stack.base, stack.username, stack.password)
    html = page.locator("html")
    expect(html).to_have_attribute("data-mantine-color-scheme", "light")
    page.get_by_role("button", name="Dark mode").click()
    expect(html).to_have_attribute("data-mantine-color-scheme", "dark")
    page.reload()
    expect(page.get_by_role("button", name="Dark mode")).to_have_attribute("aria-pressed", "true")
    expect(html).to_have_attribute("data-mantine-color-scheme", "dark")
    page.get_by_role("button", name="Dark mode").click()
    expect(html).to_have_attribute("data-mantine-color-scheme", "light")


def test_sign_in_lands_on_the_tenant_last_used(page: Page, rest_stack: RestStack) -> None:
    stack = rest_stack
    name = f"two-{suffix()}"
    create_user(stack.env, name, "two-pass-1", f"{name}@example.test")
    stack.add_member(name, "two-pass-1", f"{name}@example.test", "viewer")
    first = f"aaa-{suffix()}"  # sorts before the demo tenant: where sign-in used to land
    code = ("from django.contrib.auth import get_user_model; "
            "from controlplane.tenancy.services import tenant_create; "
            "from controlplane.tenancy.selectors import actor_for; "
            f"u = get_user_model().objects.get(username={name!r}); "
            f"tenant_create(slug={first!r}, name={first!r}, owner=u, actor=actor_for(u))")
    subprocess.run([sys.executable, "-m", "sluice", "manage", "shell", "-c", code], cwd=ROOT, env=stack.env,
                   check=True, capture_output=True, timeout=120)
    sign_in(page, stack.base, name, "two-pass-1")
    page.get_by_role("combobox", name="Tenant").select_option(stack.tenant)
    expect(page).to_have_url(re.compile(rf"/t/{stack.tenant}/clusters$"))
    expect(page.get_by_test_id("role")).to_have_text("viewer")
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/login$"))
    sign_in(page, stack.base, name, "two-pass-1")
    expect(page).to_have_url(re.compile(rf"/t/{stack.tenant}/clusters$"))
