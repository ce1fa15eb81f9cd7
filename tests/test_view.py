"""The study viewer: DuckDB list queries with planted disagreements, a real fake-provider study served over
HTTP, and a real headless Chromium driving the list and item pages (tests.support.browser)."""

from __future__ import annotations

import html
import json
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pandas as pd
import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis.load.synthetic import synthetic_humans, synthetic_results
from analysis.view.data import Study, ViewError
from analysis.view.item import split_background
from analysis.view.server import bind, bind_port, create_app, main
from tests.support.browser import browser_page, chromium
from tests.support.hostile import one_line
from tests.support.sample_report import shared_sample_report
from tests.support.studies import UNPARSEABLE, shared_sample_study
from tests.support.view_study import LOCAL, write_synthetic


def test_list_counts_filters_and_sorts_by_planted_disagreement(tmp_path: Path) -> None:
    frame = write_synthetic(tmp_path)
    humans = synthetic_humans(frame.astype({"judge": "category", "mode": "category"}), seed=1)
    study = Study(tmp_path, humans)
    items = frame.drop_duplicates(["instance_id", "candidate_id", "judge", "mode"])
    assert study.page({}).total == len(items) == 5 * 7 * 4
    assert study.page({"judge": "judge_a", "mode": "comparative"}).total == 5 * 7
    assert study.page({"source": "reference", "dimension": "originality"}).total == 5 * 4
    for sort in ("spread", "judge_judge", "mode_shift", "judge_human"):
        top = study.page({}, sort, size=3).rows[0]
        assert (top["instance_id"], top["candidate_id"]) == ("inst00003", "narrow_gen_2"), sort
    spread = study.page({"judge": "judge_b", "mode": "independent"}, "spread", size=1).rows[0]
    samples = frame.loc[
        (frame["judge"] == "judge_b")
        & (frame["mode"] == "independent")
        & (frame["candidate_id"] == "narrow_gen_2")
        & (frame["instance_id"] == "inst00003")
    ]
    expected = samples.groupby("dimension")["score"].agg(lambda s: s.max() - s.min()).max()
    assert spread["spread"] == pytest.approx(expected)
    with ThreadPoolExecutor(8) as pool:  # the server answers on several threads at once
        totals = list(
            pool.map(lambda j: study.page({"judge": j}, "judge_judge").total, ["judge_a", "judge_b"] * 8)
        )
    assert totals == [5 * 7 * 2] * 16
    second = study.page({}, "item", offset=50, size=50)
    assert second.offset == 50 and len(second.rows) == 50 and second.rows[0] != study.page({}).rows[0]


def test_bad_folders_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ViewError, match="no results.parquet or results.csv"):
        Study(tmp_path)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results.parquet").write_bytes(b"PAR1 not really parquet")
    assert main([str(tmp_path), "--no-browser", "--port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "could not be read" in err and str(tmp_path) in err


def test_split_background_folds_only_the_papers() -> None:
    text = "Rate it.\n<<<PAPER 1>>>\nA\n<<<END PAPER 1>>>\n<<<PAPER 2>>>\nB\n<<<END PAPER 2>>>\nQ?"
    before, papers, after = split_background(text)
    assert before == "Rate it.\n" and papers.startswith("<<<PAPER 1>>>") and papers.endswith("2>>>\n")
    assert after == "Q?" and split_background("no papers") == ("no papers", "", "")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """The viewer on a real 2-judge × 2-mode study (fake provider), on a free port of 127.0.0.1."""
    root = shared_sample_study(tmp_path_factory, tmp_path_factory.mktemp("view"))
    humans = pd.read_csv(Path(__file__).resolve().parent.parent / "data" / "sample" / "humans.csv")
    sock = bind(0)
    study = Study(root, humans)
    server = uvicorn.Server(uvicorn.Config(create_app(study), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/", root
    server.should_exit = True
    thread.join(10)
    study.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One Chromium for this file's page tests, each in a fresh context (tests.support.browser.chromium)."""
    with chromium() as running:
        yield running


def test_item_page_shows_prompt_answers_and_every_rater(served: tuple[str, Path]) -> None:
    url, root = served
    results = pd.concat([pd.read_parquet(p) for p in root.glob("*/results.parquet")])
    bad = results.loc[results["raw"] == UNPARSEABLE].iloc[0]
    query = f"item?instance_id={bad['instance_id']}&candidate_id={bad['candidate_id']}".replace(":", "%3A")
    page = html.unescape(urllib.request.urlopen(url + query).read().decode())
    assert UNPARSEABLE in page and "not parsed" in page and "<<<PAPER 1>>>" in page
    for rater in ("qwen_a · novelty · independent", "qwen_b · novelty · comparative", "human:expert_a"):
        assert rater in page
    prompts = pd.concat([pd.read_parquet(p) for p in root.glob("*/prompts.parquet")])
    sent = json.loads(prompts.loc[prompts["prompt_id"] == bad["prompt_id"], "messages"].iloc[0])
    assert sent[0]["content"].splitlines()[0] in page


def test_browser_filters_and_opens_an_item(served: tuple[str, Path], browser: Any) -> None:
    url, _ = served
    with browser_page(browser) as (page, errors):
        page.goto(url)
        total = page.inner_text("#total")
        assert int(total.split()[0]) == 2 * 2 * 2 * 11  # 2 instances × 11 candidates × 2 judges × 2 modes
        page.select_option("select[name=judge]", "qwen_b")
        page.wait_for_url("**judge=qwen_b**")
        assert page.inner_text("#total") != total
        assert set(page.locator("#items tbody td:nth-child(5)").all_inner_texts()) == {"qwen_b"}
        page.select_option("select[name=sort]", "judge_judge")
        page.wait_for_url("**sort=judge_judge**")
        page.locator("#items tbody a").first.click()
        page.wait_for_selector("#scores")
        assert page.locator("details.prompt pre").count() >= 2  # system and user messages
        assert page.locator("details.background").count() >= 1
        assert page.locator("pre.raw").count() >= 4  # 2 samples × 2 modes of one judge at least
        assert not page.locator("details.background pre").first.is_visible()  # background folded
        assert errors == []


def test_browser_list_opens_sorted_by_disagreement_with_text_and_folded_prompts(
    served: tuple[str, Path], browser: Any
) -> None:
    """Issue 28: the list opens sorted by judge–judge disagreement (was: by instance), each row shows the first
    line of its candidate's text, and an item's prompts are folded until clicked (were open: 8,300 px); the
    position shown is the one the results store (0 = first; the page said 1 where the table said 0)."""
    url, root = served
    results = pd.concat([pd.read_parquet(p) for p in root.glob("*/results.parquet")])
    with browser_page(browser) as (page, errors):
        expect = pytest.importorskip("playwright.sync_api").expect
        page.goto(url)
        # until every item's disagreement is built the list is in item order, says so and reloads itself
        expect(page.locator("#pending")).to_have_count(0, timeout=120_000)
        assert page.locator("select[name=sort]").input_value() == "judge_judge"
        ranges = page.locator("#items tbody td:nth-child(10) .fig").all_inner_texts()
        known = [float(v) for v in ranges if v != "–"]
        assert known and known == sorted(known, reverse=True) and known[0] > 0
        assert ranges[: len(known)] == [f"{v:.2f}" for v in known]  # unknown ranges last
        first = page.locator("#items tbody tr").first
        instance, candidate = (first.locator(f"td:nth-child({i})").inner_text() for i in (1, 2))
        text = results.loc[
            (results["instance_id"] == instance) & (results["candidate_id"] == candidate), "candidate_text"
        ].iloc[0]
        line = next(ln.strip() for ln in text.splitlines() if ln.strip())
        assert first.locator(".first-line").inner_text() == line
        compared = results.loc[results["mode"] == "comparative"].iloc[0]
        page.goto(
            url
            + "item?"
            + urlencode({"instance_id": compared["instance_id"], "candidate_id": compared["candidate_id"]})
        )
        prompt = page.locator("details.prompt").first
        assert prompt.get_attribute("open") is None and not prompt.locator("pre").first.is_visible()
        folded = page.evaluate("document.documentElement.scrollHeight")
        prompt.locator("summary").first.click()
        assert prompt.locator("pre").first.is_visible()
        assert page.evaluate("document.documentElement.scrollHeight") > folded
        shown = results.loc[
            (results["instance_id"] == compared["instance_id"])
            & (results["candidate_id"] == compared["candidate_id"])
            & (results["mode"] == "comparative")
        ]
        positions = page.locator("b.position").all_inner_texts()
        assert positions and set(positions) <= {str(int(p)) for p in shown["position"].dropna()}
        assert errors == []


def test_report_in_the_browser(
    served: tuple[str, Path], browser: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """report.html of the same study, written where the viewer serves it: summary first, the leaderboard
    sorted by a click on a column's name (the test clicked the header and never checked a reorder; only the
    small arrow sorted), every figure loads, long tables folded, and the viewer and report link each other.
    The report is the session's `python -m analysis.report` of this study with its experts
    (tests.support.sample_report), copied to where the viewer serves it."""
    url, root = served
    shared_sample_report(tmp_path_factory, root / "report")
    md = (root / "report" / "report.md").read_text()
    assert (
        md.index("## Summary")
        < md.index("## Contents")
        < md.index("## Judge leaderboard")
        < md.index("## Glossary")
    )
    cells = "#leaderboard table.dataTable tbody tr td:first-child"
    with browser_page(browser) as (page, errors):
        page.goto(url)
        page.click("#report-link")
        page.wait_for_url("**/report")
        assert page.locator("section").first.get_attribute("id") == "summary"
        assert re.search(
            r"agrees? (most|equally) with the experts|no clear best judge", page.inner_text("#summary")
        )
        page.wait_for_selector("#leaderboard table.dataTable")
        before = page.locator(cells).all_inner_texts()
        assert sorted(before) == ["qwen_a", "qwen_b"]
        name = page.locator("#leaderboard thead th .dt-column-title", has_text="judge").first
        first = f"document.querySelector({json.dumps(cells)})?.innerText"
        name.click()  # the column's name, not the arrow icon beside it
        page.wait_for_function(f"{first} === 'qwen_a'", timeout=5000)  # the table redraws after the click
        ascending = page.locator(cells).all_inner_texts()
        name.click()
        page.wait_for_function(f"{first} === 'qwen_b'", timeout=5000)
        descending = page.locator(cells).all_inner_texts()
        assert ascending == ["qwen_a", "qwen_b"] and descending == ["qwen_b", "qwen_a"]
        assert before != ascending or before != descending  # a click changed the order
        images = page.locator("img")
        assert images.count() >= 4
        assert page.evaluate("[...document.images].every(i => i.complete && i.naturalWidth > 0)")
        assert page.locator("#glossary td", has_text="kappa_w").count() >= 1
        folded = page.locator("details.table")
        assert folded.count() >= 5 and not folded.first.locator("table").first.is_visible()
        assert "rows;" in folded.first.locator("summary").inner_text()
        page.click("#viewer-link")
        page.wait_for_selector("#items")
        assert page.url == url
        assert errors == []


def test_cli_prints_its_url_once_it_serves_and_stops_on_ctrl_c(served: tuple[str, Path]) -> None:
    _, root = served
    proc = subprocess.Popen(
        [sys.executable, "-m", "analysis.view", str(root), "--no-browser", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        url = line.split(": ", 1)[1].split()[0]
        assert url.startswith("http://127.0.0.1:")
        assert "judged items" in urllib.request.urlopen(url).read().decode()
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err and proc.returncode == 0  # the study closed: no SIGABRT on the way out


def test_a_bad_port_is_one_line_naming_it() -> None:
    """Out of range (was an OverflowError traceback) and taken (was errno text without the setting)."""
    with pytest.raises(ViewError, match=r"^--port 99999: .*choose another"):
        bind_port(99999)
    taken = bind_port(0)
    taken.listen()  # as the running viewer's socket is
    try:
        with pytest.raises(ViewError, match=rf"^--port {taken.getsockname()[1]}: .*in use"):
            bind_port(taken.getsockname()[1])
    finally:
        taken.close()


def write_humans(path: Path, duplicate: bool) -> Path:
    """Labels for inst00003 / narrow_gen_2 of `write_synthetic`; line 4 repeats line 2's key when `duplicate`."""
    lines = [
        "annotator,instance_id,candidate_id,source,dimension,score",
        "ann1,inst00003,narrow_gen_2,narrow_gen,originality,3",
        "ann2,inst00003,narrow_gen_2,narrow_gen,originality,4",
        f"ann1,inst00003,narrow_gen_2,narrow_gen,{'originality' if duplicate else 'feasibility'},1",
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def no_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    """`main` fails the test instead of serving forever when it accepts what it should refuse."""
    monkeypatch.setattr(uvicorn.Server, "run", lambda *a, **k: pytest.fail("served despite bad labels"))


def test_duplicate_human_labels_are_one_error_line_naming_file_line_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    no_serving(monkeypatch)
    write_synthetic(tmp_path / "study")
    labels = write_humans(tmp_path / "labels.csv", duplicate=True)
    assert main([str(tmp_path / "study"), "--humans", str(labels), "--no-browser", "--port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {labels}:4: "), err
    assert "ann1" in err and "inst00003" in err and "narrow_gen_2" in err and "originality" in err
    assert "line 2" in err  # where the key was first given


def test_humans_file_errors_name_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    no_serving(monkeypatch)
    write_synthetic(tmp_path / "study")
    bad = tmp_path / "labels.csv"
    bad.write_text("annotator,instance_id,score\nann1,inst00003,3\n")  # columns missing
    for path in (bad, tmp_path / "missing.csv"):
        assert main([str(tmp_path / "study"), "--humans", str(path), "--no-browser", "--port", "0"]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith(f"error: {path}: "), err


def test_item_page_never_500s_on_duplicate_labels(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from analysis.view.item import score_grid

    write_synthetic(tmp_path / "study")
    labels = pd.read_csv(write_humans(tmp_path / "labels.csv", duplicate=True))
    with pytest.raises(ViewError, match="duplicate"):
        Study(tmp_path / "study", labels)  # handed a frame: refused too, one line
    study = Study(tmp_path / "study", pd.read_csv(write_humans(tmp_path / "ok.csv", duplicate=False)))
    study.humans = labels.astype({"instance_id": str, "candidate_id": str})  # past every check
    grid = score_grid(
        study.item_rows("inst00003", "narrow_gen_2"), study.human_rows("inst00003", "narrow_gen_2")
    )
    assert grid.loc["originality", "human:ann1"] == "3 / 1"  # both of ann1's labels shown, not a crash
    client = TestClient(create_app(study), base_url="http://127.0.0.1")
    response = client.get("/item?instance_id=inst00003&candidate_id=narrow_gen_2")
    assert response.status_code == 200


def test_spread_is_across_samples_of_one_prompt_not_across_prompts_or_perturbations(tmp_path: Path) -> None:
    # candidate c: two samples per prompt, each prompt's samples agree (spread 0 within every prompt), but
    # the unperturbed run scores 3, the padded run 1, and the reference scores 2 in prompt p1, 4 in p2
    base = {"judge": "j", "mode": "comparative", "rubric": "r", "instance_id": "i", "dimension": "d"}
    rows = [
        {
            **base,
            "run_id": run,
            "perturbation": pert,
            "prompt_id": prompt,
            "candidate_id": cand,
            "source": "gen" if cand == "c" else "reference",
            "sample_idx": s,
            "score": score,
        }
        for run, pert, prompt, cand, score in (
            ("r0", "none", "p1", "c", 3.0),
            ("r1", "padding", "p1", "c", 1.0),
            ("r0", "none", "p1", "ref", 2.0),
            ("r0", "none", "p2", "ref", 4.0),
        )
        for s in (0, 1)
    ]
    frame = pd.DataFrame(rows)
    for run, part in frame.groupby("run_id"):
        (tmp_path / run).mkdir()
        part.to_parquet(tmp_path / run / "results.parquet", index=False)
    pages = Study(tmp_path).page({}, "spread").rows
    assert {(r["candidate_id"], r["spread"]) for r in pages} == {("c", 0.0), ("ref", 0.0)}
    with_one = frame.loc[(frame["candidate_id"] == "c") & (frame["run_id"] == "r0")].copy()
    with_one.loc[with_one["sample_idx"] == 1, "score"] = 5.0  # now p1's samples of c disagree by 2
    with_one.to_parquet(tmp_path / "r0" / "results.parquet", index=False)
    assert Study(tmp_path).page({"instance_id": "i"}, "spread").rows[0]["spread"] == 2.0


def test_mode_shift_is_independent_vs_comparative_only_never_comparative_all(tmp_path: Path) -> None:
    # one candidate, one judge: independent 3, comparative 3 (no shift), comparative_all 1 (another setting)
    base = {
        "judge": "j",
        "rubric": "r",
        "instance_id": "i",
        "candidate_id": "c",
        "source": "gen",
        "dimension": "d",
        "sample_idx": 0,
        "prompt_id": "p",
    }
    for mode, score in (("independent", 3.0), ("comparative", 3.0), ("comparative_all", 1.0)):
        (tmp_path / mode).mkdir()
        pd.DataFrame([{**base, "mode": mode, "score": score}]).to_parquet(tmp_path / mode / "results.parquet")
    shift = {r["mode"]: r["mode_shift"] for r in Study(tmp_path).page({}, "mode_shift").rows}
    assert shift == {"independent": 0.0, "comparative": 0.0, "comparative_all": None}


def test_grid_shows_pairwise_preferences_beside_scores() -> None:
    from analysis.view.item import score_grid

    base = {"judge": "j", "rubric": "r", "dimension": "d"}
    rows = pd.DataFrame(
        [
            {**base, "mode": "independent", "score": 3.0, "preference": None},
            {**base, "mode": "independent", "score": 4.0, "preference": None},
            {**base, "mode": "pairwise", "score": float("nan"), "preference": "a"},
            {**base, "mode": "pairwise", "score": float("nan"), "preference": "tie"},
        ]
    )
    grid = score_grid(rows, pd.DataFrame(columns=["annotator", "dimension", "score"]))
    assert grid.loc["d", "j · r · independent"] == "3.50 (3, 4)"
    assert grid.loc["d", "j · r · pairwise"] == "a/tie"  # was "–": the preferences were dropped


def test_leaderboard_parse_rate_equals_the_manifests_on_the_same_runs(served: tuple[str, Path]) -> None:
    from analysis.load.collect import load_results
    from analysis.report.summary import leaderboard

    _, root = served
    board = leaderboard(load_results(root), {}).set_index("judge")
    for judge in ("qwen_a", "qwen_b"):  # each judge's two runs (independent, comparative) pooled
        runs = [json.loads(p.read_text()) for p in root.glob(f"*_{judge}_*/manifest.json")]
        unscored = sum(m["unscored_calls"] for m in runs)
        attempted = sum(m["calls_total"] for m in runs)
        assert len(runs) == 2 and unscored > 0
        assert board.loc[judge, "parse_rate"] == pytest.approx(1 - unscored / attempted)


def test_zero_padded_ids_join_results_csv_and_labels(tmp_path: Path) -> None:
    """Review 8 F2: results.csv as a study writes it (Arrow's CSV writer quotes every string) and a labels
    file over instance 007, candidates 2.10 and 1e3. Planted: the judge scores 3, the human 5, so judge–human
    is |3 − 5| = 2 on both. Read as numbers the labels said 7 (no join: NULL, no human row on the item page)
    and DuckDB read the candidates as the numbers 2.1 and 1000.0."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    from analysis.load.collect import load_humans

    run = tmp_path / "study" / "run"
    run.mkdir(parents=True)
    rows = {
        "run_id": ["run"] * 2,
        "judge": ["j"] * 2,
        "mode": ["independent"] * 2,
        "rubric": ["r"] * 2,
        "prompt_id": ["p1", "p2"],
        "instance_id": ["007"] * 2,
        "candidate_id": ["2.10", "1e3"],
        "source": ["gen"] * 2,
        "dimension": ["clarity"] * 2,
        "sample_idx": [0, 0],
        "score": [3.0, 3.0],
        "parse_ok": [True, True],
    }
    pa_csv.write_csv(pa.table(rows), run / "results.csv")
    labels = tmp_path / "labels.csv"
    labels.write_text(
        "annotator,instance_id,candidate_id,source,dimension,score\n"
        "h,007,2.10,gen,clarity,5\nh,007,1e3,gen,clarity,5\n"
    )
    study = Study(tmp_path / "study", load_humans(labels))
    study.wait()
    got = study.con.execute("SELECT candidate_id, judge_human FROM item_dim ORDER BY candidate_id").fetchall()
    assert got == [("1e3", 2.0), ("2.10", 2.0)]
    for cand in ("2.10", "1e3"):
        assert len(study.item_rows("007", cand)) == 1 and len(study.human_rows("007", cand)) == 1


def test_only_the_bound_host_is_answered(tmp_path: Path) -> None:
    """Issue 25 #18 (DNS rebinding): `Host: evil.example` got 200, so a page the user visits elsewhere could
    point its name at 127.0.0.1 and read the study. Only 127.0.0.1 and localhost (any port) are answered."""
    from starlette.testclient import TestClient

    write_synthetic(tmp_path)
    with Study(tmp_path) as study:
        app = create_app(study)
        hosts = {"evil.example": 400, "127.0.0.1.evil.example": 400, "127.0.0.1:8765": 200, "localhost": 200}
        for host, status in hosts.items():
            assert TestClient(app, base_url=f"http://{host}").get("/").status_code == status, host


def test_hostile_query_strings_and_files_are_one_line_never_a_500(tmp_path: Path) -> None:
    """Issue 25 #15: offset 2**63 (DuckDB's OFFSET overflowed), a run folder removed while served, non-JSON
    messages in prompts.parquet: HTTP 500 with a traceback. Now a page, or a 4xx with one line of text."""
    from starlette.testclient import TestClient

    frame = write_synthetic(tmp_path / "study")
    part = frame[(frame["judge"] == "judge_a") & (frame["mode"] == "independent")]
    keys = {"run_id": [part["run_id"].iloc[0]], "prompt_id": [part["prompt_id"].iloc[0]]}
    messages = pd.DataFrame({**keys, "messages": ["not json{"]})
    messages.to_parquet(tmp_path / "study" / "judge_a-independent" / "prompts.parquet")
    item = f"/item?instance_id={part['instance_id'].iloc[0]}&candidate_id={part['candidate_id'].iloc[0]}"
    with Study(tmp_path / "study") as study:
        client = TestClient(create_app(study), base_url=LOCAL, raise_server_exceptions=False)
        assert client.get("/?offset=9223372036854775808").status_code == 200  # past the end: an empty page
        assert client.get("/?sort=spread&offset=-9223372036854775809").status_code == 200
        for query in ("/?offset=1e30", "/?offset=abc", "/item?instance_id=x"):
            response = client.get(query)
            assert response.status_code == 400 and response.text.startswith("error: "), query
            assert len(response.text.splitlines()) == 1, query
        shown = client.get(item)
        assert shown.status_code == 200 and "not a JSON list of messages" in shown.text
        shutil.rmtree(tmp_path / "study" / "judge_a-independent")  # removed while served
        response = client.get(item)
        assert response.status_code == 409 and "could not be read now" in response.text
        assert len(response.text.splitlines()) == 1 and "Traceback" not in response.text


@pytest.mark.parametrize(
    ("column", "value", "line"),
    [
        ("sample_idx", "x1", r"results\.csv: sample_idx 'x1' is not an integer$"),
        ("position", "1e30", r"results\.csv: position '1e30' is not an integer$"),
        ("score", "high", r"results\.csv: score 'high' is not a number$"),
        ("parse_ok", "maybe", r"results\.csv: parse_ok 'maybe' is not true or false$"),
    ],
)
def test_a_results_value_its_column_cannot_hold_is_one_line_at_open(
    tmp_path: Path, column: str, value: str, line: str
) -> None:
    """Issue 25 #15: a non-integer sample_idx (or position 1e30) in results.csv made every item page that read
    it an HTTP 500; the study now refuses to open, naming the file, the column and the value."""
    frame = write_synthetic(tmp_path / "parquet")
    run = tmp_path / "csv" / "run"
    run.mkdir(parents=True)
    part = frame.iloc[:40].astype({column: object})
    part.loc[part.index[3], column] = value
    part.to_csv(run / "results.csv", index=False)
    with pytest.raises(ViewError, match=line):
        Study(tmp_path / "csv")
    assert main([str(tmp_path / "csv"), "--no-browser", "--port", "0"]) == 2
    part.loc[part.index[3], column] = "NA"  # missing, as the analysis reads it: opens
    part.to_csv(run / "results.csv", index=False)
    Study(tmp_path / "csv").close()


def test_a_parquet_position_too_large_for_its_column_is_one_line(tmp_path: Path) -> None:
    frame = write_synthetic(tmp_path / "study")
    folder = tmp_path / "study" / "judge_a-independent"
    frame.iloc[:40].assign(position=1e30).to_parquet(folder / "results.parquet")
    with pytest.raises(ViewError, match=r"results\.parquet: position '1e\+30' is not an integer$"):
        Study(tmp_path / "study")


# --- hostile query strings (issue 25): any query on any page, from any Host ---


@pytest.fixture(scope="module")
def viewer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The viewer's app on a small synthetic study (two runs: parquet and CSV), as a test client."""
    from starlette.testclient import TestClient

    from analysis.view.data import Study
    from analysis.view.server import create_app

    root = tmp_path_factory.mktemp("viewer")
    frame = synthetic_results(n_instances=3, seed=2)
    frame = frame.astype({c: str for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)})
    for n, (_, part) in enumerate(frame.groupby(["judge", "mode"])):
        (root / str(n)).mkdir()
        if n % 2:
            part.to_csv(root / str(n) / "results.csv", index=False)
        else:
            part.to_parquet(root / str(n) / "results.parquet", index=False)
    study = Study(root)
    # entered: one event-loop thread answers every request (~20% less CPU than one started per request)
    with TestClient(
        create_app(study), base_url="http://127.0.0.1:8765", raise_server_exceptions=False
    ) as client:
        yield client
    study.close()


QUERY_VALUE = st.one_of(
    st.text(max_size=12),
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(["1e30", "nan", "-0", "9223372036854775808", "", "%00", "'", '"', "inst00001", "spread"]),
)


@settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    path=st.sampled_from(["/", "/item"]),
    params=st.dictionaries(
        st.sampled_from(
            [
                "offset",
                "sort",
                "judge",
                "mode",
                "rubric",
                "dimension",
                "source",
                "instance_id",
                "candidate_id",
                "x",
            ]
        ),
        QUERY_VALUE,
        max_size=5,
    ),
    host=st.sampled_from(["127.0.0.1:8765", "localhost", "evil.example", "127.0.0.1.evil.example"]),
)
def test_a_hostile_query_string_is_a_page_or_one_line(
    viewer: Any, path: str, params: dict[str, str], host: str
) -> None:
    """Any query string on any page, from any Host: a page (the item page says when nothing matches), or a
    4xx with one line; never a 500 or a traceback, and never the study for another host (DNS rebinding)."""
    response = viewer.get(path, params=params, headers={"host": host})
    assert response.status_code < 500, (path, params, response.text[:300])
    if "evil" in host:
        assert response.status_code == 400
    assert "Traceback" not in response.text
    if response.status_code >= 400 and not response.text.startswith("<!doctype html>"):  # a page, or one line
        assert one_line(response.text), response.text[:300]
