"""Issue 37 item 4: `python -m analysis.view bundle RUN OUT/` writes a viewer that opens from file:// in
Chromium with no server: the list (filters, sorts, pages, each disagreement with its dimension, the experts'
scores) and the item pages (within 1,280 px, the reference's score from the same prompt beside the
candidate's), with the served viewer's numbers."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis.load.synthetic import synthetic_humans
from analysis.view.data import Study
from tests.support.browser import browser_page
from tests.support.cli import run as run_cli
from tests.support.studies import ROOT, cli_env
from tests.support.view_study import write_synthetic


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, pd.DataFrame]:
    """(study folder, bundle folder, humans) written through the command line."""
    tmp = tmp_path_factory.mktemp("bundle")
    frame = write_synthetic(tmp / "study")
    humans = synthetic_humans(frame.astype({"judge": "category", "mode": "category"}), seed=1)
    humans.to_csv(tmp / "humans.csv", index=False)
    run = run_cli(
        [sys.executable, "-m", "analysis.view", "bundle", str(tmp / "study"), str(tmp / "out")]
        + ["--humans", str(tmp / "humans.csv")],
        cwd=ROOT,
        env=cli_env(tmp),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert "35 item pages" in run.stdout  # 5 instances × 7 candidates
    return tmp / "study", tmp / "out", humans


def test_the_bundle_lists_sorts_filters_and_opens_items_from_file_urls(
    bundled: tuple[Path, Path, pd.DataFrame],
) -> None:
    study_dir, out, humans = bundled
    with Study(study_dir, humans) as study:
        served = study.page({}, "judge_judge", size=10).rows
        total = study.page({}).total
    with browser_page() as (page, errors):
        page.goto((out / "index.html").as_uri())
        assert page.inner_text("#total") == f"{total} judged items" == "140 judged items"
        # opens sorted by judge–judge, as the served list: same items first, same figures, with dimensions
        rows = page.locator("#items tbody tr")
        firsts = [
            (
                rows.nth(i).locator("td:nth-child(1)").inner_text(),
                rows.nth(i).locator("td:nth-child(2)").inner_text(),
            )
            for i in range(10)
        ]
        assert firsts == [(r["instance_id"], r["candidate_id"]) for r in served]
        figures = page.locator("#items tbody td:nth-child(10) .fig").all_inner_texts()
        known = [float(v) for v in figures if v != "–"]
        assert known and known == sorted(known, reverse=True)
        assert (
            page.locator("#items tbody td:nth-child(10) .dim").first.inner_text()
            == served[0]["judge_judge_dim"]
        )
        experts = page.locator("#items tbody td.experts").all_inner_texts()
        assert any(e.startswith(("originality ", "source_boundedness ")) for e in experts), experts
        # sort by spread: the planted outlier sample first
        page.select_option("select[name=sort]", "spread")
        page.wait_for_function("location.hash.includes('sort=spread')")
        first = page.locator("#items tbody tr").first
        assert first.locator("td:nth-child(1)").inner_text() == "inst00003"
        assert first.locator("td:nth-child(2)").inner_text() == "narrow_gen_2"
        # filters: one judge, then one dimension (the per-dimension rows)
        page.select_option("select[name=judge]", "judge_b")
        page.wait_for_function("location.hash.includes('judge=judge_b')")
        assert page.inner_text("#total") == "70 judged items"
        assert set(page.locator("#items tbody td:nth-child(5)").all_inner_texts()) == {"judge_b"}
        page.click("#next")
        page.wait_for_function("location.hash.includes('offset=50')")
        assert page.locator("#items tbody tr").count() == 20
        page.go_back()
        page.wait_for_function("!location.hash.includes('offset')")
        # an item page: the served template, within 1,280 px, the reference's score beside the candidate
        page.goto((out / "index.html").as_uri() + "#mode=comparative&source=broad_gen")
        page.locator("#items tbody a").first.click()
        page.wait_for_selector("#scores")
        assert page.url.startswith((out / "items").as_uri())
        assert page.locator("p.reference").count() >= 1
        assert (
            page.locator("p.reference b")
            .first.inner_text()
            .startswith(("originality ", "source_boundedness "))
        )
        assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        box = page.locator("#scores").bounding_box()
        assert box is not None and box["x"] + box["width"] <= 1280
        page.click("#list-link")
        page.wait_for_selector("#items tbody tr")
        assert errors == []
