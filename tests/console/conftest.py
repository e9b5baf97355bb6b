"""The console's browser tests: one real ``sluice up`` (the REST tests' ``rest_stack``, serving the built
console) and one Chromium per session, on the worker that owns the ``console`` xdist group."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from tests.console.browser import ARTIFACTS, check_prerequisites, launch
from tests.kafkarest.conftest import RestStack, rest_stack  # noqa: F401  (the session's service)

# Assertions poll until true or this deadline (a busy 2-core CI machine runs other suites alongside).
expect.set_options(timeout=30_000)


# Module scope: Playwright's sync API keeps an event loop running in this thread while it is open, and the
# worker that ran these tests goes on to tests that call asyncio.run (which refuses to nest).
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    check_prerequisites()
    with sync_playwright() as playwright:
        browser = launch(playwright)
        yield browser
        browser.close()


@pytest.fixture
def context(browser: Browser, rest_stack: RestStack) -> Iterator[BrowserContext]:  # noqa: F811
    """A fresh browser profile (cookies, storage) per test, so sign-ins do not leak between tests."""
    context = browser.new_context(base_url=rest_stack.base, viewport={"width": 1400, "height": 900})
    context.set_default_timeout(30_000)
    yield context
    context.close()


@pytest.fixture
def page(context: BrowserContext, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A tab; when the test fails, the page it failed on is kept as var/test-artifacts/console/failed-<test>.png."""
    page = context.new_page()
    # The page's own errors go to the test's captured output, shown with a failure.
    page.on("pageerror", lambda error: print(f"page error: {error}"))
    page.on("console", lambda message: message.type == "error" and print(f"console error: {message.text[:300]}"))
    yield page
    if request.node.stash.get(FAILED, False):
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"failed-{request.node.name}.png"), full_page=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    if report.when == "call" and report.failed:
        item.stash[FAILED] = True
    return report


FAILED = pytest.StashKey[bool]()
