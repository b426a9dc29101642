"""Browser tests: Playwright for Python driving Debian's Chromium against the live server.

No browser is downloaded: `.ci/run` installs Debian's `chromium` and these tests launch
`/usr/bin/chromium` (or KINDGI_CHROMIUM). A missing browser fails the tests, never skips
them. Each test may save screenshots under test-artifacts/screenshots/ with `screenshot`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# Playwright's sync API runs an event loop in this thread; the ORM calls that the tests
# make to arrange data are still synchronous and safe here.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = os.environ.get("KINDGI_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/browser/" in str(item.fspath):
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium is not installed at {CHROMIUM}: apt-get install chromium (the CI script does)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, live_server: Any) -> Iterator[Page]:
    """A fresh browser context on the live server; script errors are collected."""
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1440, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.script_errors = errors  # type: ignore[attr-defined]
    yield page
    context.close()


@pytest.fixture
def sign_in(page: Page) -> Callable[[str, str], Page]:
    """Sign in through the real sign-in form."""

    def _sign_in(username: str, password: str) -> Page:
        page.goto("/login/")
        page.get_by_label("Username").fill(username)
        page.get_by_label("Password").fill(password)
        page.get_by_role("button", name="Sign in").click()
        page.wait_for_url(lambda url: "/login/" not in url)
        return page

    return _sign_in


def screenshot(page: Page, name: str) -> Path:
    """Save a full-page screenshot as a test artifact."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
