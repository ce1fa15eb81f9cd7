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


@contextmanager
def browser_page() -> Iterator[tuple[Any, list[str]]]:
    """(page, console errors) in a fresh profile; every console error and page error is collected."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"browser tests need Debian's chromium at {CHROMIUM} (apt-get install -y chromium)")
    sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright
    profile = tempfile.mkdtemp(prefix="judgescope-chromium-")
    errors: list[str] = []
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile,
                executable_path=CHROMIUM,
                headless=True,
                args=ARGS,
                viewport={"width": 1280, "height": 900},
            )
            page = context.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            try:
                yield page, errors
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
