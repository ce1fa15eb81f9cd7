"""A real headless Chromium for the page tests: Debian's `chromium` driven by Playwright (no browser
download). Where it is missing, the test is skipped with one line saying so."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1280, "height": 900}


def _available() -> Any:
    """Playwright's `sync_playwright`, or a one-line skip where chromium or Playwright is missing."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"browser tests need Debian's chromium at {CHROMIUM} (apt-get install -y chromium)")
    return pytest.importorskip("playwright.sync_api").sync_playwright


@contextmanager
def chromium() -> Iterator[Any]:
    """One running Chromium for several tests (a module-scoped fixture): starting it costs ~1 CPU-s, and each
    `browser_page(browser)` in it is a fresh context (no cookies, storage or cache of another page)."""
    with _available()() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextmanager
def browser_page(browser: Any = None) -> Iterator[tuple[Any, list[str]]]:
    """(page, console errors) in a fresh profile, of its own Chromium or in a fresh context of `browser`
    (`chromium()`); every console error and page error is collected."""
    if browser is not None:
        context = browser.new_context(viewport=VIEWPORT)
        try:
            yield _watched(context.new_page())
        finally:
            context.close()
        return
    sync_playwright = _available()
    profile = tempfile.mkdtemp(prefix="judgescope-chromium-")
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=ARGS, viewport=VIEWPORT
            )
            try:
                yield _watched(context.new_page())
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def _watched(page: Any) -> tuple[Any, list[str]]:
    """`page` and the list its console errors and page errors are collected in."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    return page, errors
