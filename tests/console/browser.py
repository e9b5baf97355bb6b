"""Driving the web console in a real browser: Debian's Chromium through Playwright (no browser download),
axe-core injected from the console's node_modules, and screenshots kept as test artifacts.

Used by the e2e tests and by ``bench/console.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from playwright.sync_api import Browser, Page, Playwright, expect, sync_playwright
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
AXE = ROOT / "frontend" / "node_modules" / "axe-core" / "axe.min.js"
DIST = ROOT / "frontend" / "dist"
ARTIFACTS = ROOT / "var" / "test-artifacts" / "console"
TIMEOUT_MS = 60_000


def check_prerequisites() -> None:
    """What the e2e tests need, said in one line each (``make test`` provides all three)."""
    if not CHROMIUM.exists():
        raise RuntimeError("/usr/bin/chromium is missing: `make chromium` (apt-get install chromium) installs it")
    if not (DIST / "index.html").exists():
        raise RuntimeError("frontend/dist is not built: run `make console`")
    if not AXE.exists():
        raise RuntimeError("frontend/node_modules has no axe-core: run `make console`")


@contextmanager
def chromium() -> Iterator[Browser]:
    check_prerequisites()
    with sync_playwright() as playwright:
        browser = launch(playwright)
        try:
            yield browser
        finally:
            browser.close()


def launch(playwright: Playwright) -> Browser:
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--disable-dev-shm-usage"])


def sign_in(page: Page, base: str, username: str, password: str) -> None:
    page.goto(base + "/login")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible(timeout=TIMEOUT_MS)


def serious_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core on the page as it is now: the violations of impact serious or critical."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(content=AXE.read_text())
    result = page.evaluate("async () => (await window.axe.run(document, {resultTypes: ['violations']})).violations")
    return [{"id": v["id"], "impact": v["impact"], "help": v["help"],
             "nodes": [n["target"] for n in v["nodes"]][:5]}
            for v in result if v["impact"] in ("serious", "critical")]


# The widths the console's layouts must hold at: a 1,280 px window and a small laptop's 1,024 px.
WIDTHS = (1280, 1024)
SCHEMES = ("light", "dark")


def set_scheme(page: Page, scheme: str) -> None:
    """The colour scheme Mantine renders (its CSS keys on this attribute; the toggle sets the same one)."""
    page.evaluate("(s) => document.documentElement.setAttribute('data-mantine-color-scheme', s)", scheme)


def overflow(page: Page) -> int:
    """How many pixels the page is wider than the window (0 when nothing sticks out sideways)."""
    return int(page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth"))


# The innermost elements whose right edge passes the window's, as "tag.class[aria-label]" (to name the culprit).
_STICKING_OUT = """() => {
  const out = [];
  for (const el of document.body.querySelectorAll('*')) {
    if (el.getBoundingClientRect().right <= window.innerWidth + 0.5) continue;
    if ([...el.children].some((c) => c.getBoundingClientRect().right > window.innerWidth + 0.5)) continue;
    const label = el.getAttribute('aria-label') || el.getAttribute('data-testid') || '';
    out.push(`${el.tagName.toLowerCase()}.${[...el.classList].join('.')}${label ? `[${label}]` : ''}`
             + ` right=${Math.round(el.getBoundingClientRect().right)}`);
    if (out.length >= 5) break;
  }
  return out;
}"""


def sticking_out(page: Page) -> list[str]:
    return list(page.evaluate(_STICKING_OUT))


# Every finite animation done (a drawer's or dialog's fade-in: axe measures contrast on half-transparent text
# otherwise); endless ones (spinners, striped progress) are left running.
_SETTLED = """() => document.getAnimations().every(
  (a) => a.playState !== 'running' || a.effect?.getComputedTiming().iterations === Infinity)"""


def settle(page: Page) -> None:
    page.wait_for_function(_SETTLED, timeout=10_000)


def check_page(page: Page, name: str) -> None:
    """Every page the suite visits, in light and in dark: a screenshot kept under var/test-artifacts/console/
    (``name.png`` and ``name-dark.png``), axe-core clean of serious and critical violations, and no sideways overflow
    at 1,280 and 1,024 px wide."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    before = page.evaluate("() => document.documentElement.getAttribute('data-mantine-color-scheme')") or "light"
    viewport = page.viewport_size
    try:
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": viewport["height"] if viewport else 900})
            # Charts follow a new width a few frames later (their ResizeObserver): poll, never sleep.
            try:
                page.wait_for_function("() => document.documentElement.scrollWidth <= window.innerWidth",
                                       timeout=5_000)
            except PlaywrightTimeoutError:
                raise AssertionError(f"{name}: the page overflows a {width} px window by {overflow(page)} px: "
                                     f"{', '.join(sticking_out(page))}") from None
        page.set_viewport_size({"width": WIDTHS[0], "height": viewport["height"] if viewport else 900})
        for scheme in SCHEMES:
            set_scheme(page, scheme)
            page.wait_for_function("() => new Promise((r) => requestAnimationFrame(() => r(true)))")
            settle(page)
            suffix = "" if scheme == "light" else f"-{scheme}"
            page.screenshot(path=str(ARTIFACTS / f"{name}{suffix}.png"), full_page=True)
            violations = serious_violations(page)
            assert not violations, f"{name} ({scheme}): accessibility violations {json.dumps(violations, indent=1)}"
    finally:
        set_scheme(page, before)
        if viewport:
            page.set_viewport_size(viewport)


def create_user(env: dict[str, str], username: str, password: str, email: str) -> None:
    """A user account on the running stack's database (join a tenant with ``RestStack.add_member``: invited, then
    accepted)."""
    code = ("from django.contrib.auth import get_user_model; "
            f"get_user_model().objects.create_user({username!r}, {email!r}, {password!r})")
    subprocess.run([sys.executable, "-m", "sluice", "manage", "shell", "-c", code], cwd=ROOT, env=env, check=True,
                   capture_output=True, timeout=120)




def open_drawer(page: Page, name: str) -> None:
    """Open a create form (a drawer) from its page-header button, with the mouse as a user does."""
    page.get_by_role("button", name=name).click()
