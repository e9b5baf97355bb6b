"""Self-hosted means offline: the API docs (Swagger UI) and the admin's sign-in page render whole in a browser
that may reach nothing but the stack itself, every other request aborted and recorded. And an invitee without
an account joins through the invitation's link, then changes their password from the Account page."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import BrowserContext, Page, Request, Response, Route, expect

from tests.console.browser import check_page, sign_in
from tests.kafkarest.conftest import RestStack

pytestmark = pytest.mark.xdist_group("console")

LOCAL = {"127.0.0.1", "localhost"}


class Offline:
    """Every request to a host other than this machine is aborted and kept; every response too."""

    def __init__(self, context: BrowserContext) -> None:
        self.left: list[str] = []
        self.responses: list[Response] = []
        context.route("**/*", self._route)
        context.on("response", self._response)

    def _route(self, route: Route, request: Request) -> None:
        if urlsplit(request.url).hostname in LOCAL:
            route.continue_()
        else:
            self.left.append(request.url)
            route.abort("internetdisconnected")

    def _response(self, response: Response) -> None:
        self.responses.append(response)

    def statuses(self, suffix: str) -> list[int]:
        return [r.status for r in self.responses if urlsplit(r.url).path.endswith(suffix)]


@pytest.fixture
def offline(context: BrowserContext) -> Iterator[Offline]:
    watch = Offline(context)
    yield watch
    assert watch.left == [], f"requests left the machine: {watch.left}"


def test_api_docs_render_offline(page: Page, offline: Offline, rest_stack: RestStack) -> None:
    sign_in(page, rest_stack.base, rest_stack.username, rest_stack.password)
    page.goto("/api/docs/")
    # An operation of the API, rendered by Swagger UI from its locally served bundle and the local schema.
    expect(page.locator(".opblock-summary-path", has_text="/api/v1/me").first).to_be_visible()
    assert offline.statuses("swagger-ui-bundle.js") == [200]
    assert offline.left == []


def test_admin_sign_in_page_is_styled_offline(page: Page, offline: Offline, rest_stack: RestStack) -> None:
    page.goto("/admin/login/")
    expect(page.get_by_label("Username:")).to_be_visible()
    css = [r for r in offline.responses if urlsplit(r.url).path.startswith("/static/admin/css/")]
    assert css and all(r.status == 200 for r in css), [(r.url, r.status) for r in css]
    # The stylesheet applies: the admin's header has its colour, where an unstyled page leaves it transparent.
    background = page.locator("#header").evaluate("e => getComputedStyle(e).backgroundColor")
    assert background not in ("rgba(0, 0, 0, 0)", "transparent"), background
    check_page(page, "admin-login")


def test_an_invitee_joins_by_link_and_changes_their_password(page: Page, offline: Offline,
                                                              rest_stack: RestStack) -> None:
    name = f"pw{uuid.uuid4().hex[:6]}"
    old, new = f"old-{uuid.uuid4().hex}", f"new-{uuid.uuid4().hex}"
    invitation = rest_stack.api("POST", "/invitations", {"email": f"{name}@example.com", "role": "viewer"})
    page.goto(invitation["join_url"])  # the link the inviter was shown, for an address with no account
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password", exact=True).fill(old)
    page.get_by_label("Repeat password").fill(old)
    page.get_by_role("button", name="Create account and join").click()
    expect(page).to_have_url(re.compile(rf"/t/{rest_stack.tenant}/clusters$"))
    expect(page.get_by_test_id("role")).to_have_text("viewer")
    page.get_by_role("link", name="Your account").click()
    page.get_by_label("Current password").fill("not-my-password")
    page.get_by_label("New password", exact=True).fill(new)
    page.get_by_label("Repeat new password").fill(new)
    page.get_by_role("button", name="Change password").click()
    expect(page.get_by_role("alert")).to_contain_text("The current password is wrong.")
    page.get_by_label("Current password").fill(old)
    page.get_by_role("button", name="Change password").click()
    expect(page.get_by_role("status")).to_contain_text("Password changed.")
    check_page(page, "account")
    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/login$"))
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(old)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("Wrong username or password.")
    sign_in(page, rest_stack.base, name, new)
