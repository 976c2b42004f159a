"""Headless Chromium for browser tests: Debian's chromium driven by Playwright for Python."""

from __future__ import annotations

import os
from contextlib import contextmanager

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--autoplay-policy=no-user-gesture-required",
]


@contextmanager
def chromium_page(executable_path: str, **context_options):
    from playwright.sync_api import sync_playwright

    # The ORM is called from the test while Playwright's event loop runs in this thread.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=executable_path, args=CHROMIUM_ARGS
            )
            try:
                context = browser.new_context(**context_options)
                page = context.new_page()
                page.set_default_timeout(20_000)
                # Every page runs under the site's Content-Security-Policy: a script or style it
                # blocked is a broken page, so any violation fails the test.
                violations: list[str] = []
                page.on(
                    "console",
                    lambda message: (
                        violations.append(message.text)
                        if "Content Security Policy" in message.text
                        else None
                    ),
                )
                yield page
                assert not violations, f"Content-Security-Policy violations: {violations}"
            finally:
                browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


def log_in(page, live_server_url: str, username: str, password: str) -> None:
    page.goto(f"{live_server_url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_load_state()
