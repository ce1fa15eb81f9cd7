"""analysis.report.build end to end: collect a multirun folder, compute every table, write md/html/csv/png."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import yaml

from analysis.load.collect import find_results, load_results, prepare
from analysis.load.synthetic import synthetic_humans, synthetic_pairwise, synthetic_results
from analysis.report.build import UNKNOWN, compute_tables, main, overview
from analysis.report.render import markdown_table
from analysis.report.sections import NO_HUMANS, ONE_RATER
from analysis.report.summary import leaderboard
from analysis.stats.illusion import CROSS_MODE, SAME_JUDGE
from experiments.datasets.loader import Candidate, Instance, Paper
from experiments.manifest import Tally
from experiments.modes import build_prompts
from experiments.modes.independent import Independent
from experiments.rows import rows_for, to_frame
from judge.client import CallResult
from judge.rubric import rubric_from_config
from judge.types import Completion
from tests.support.report_run import figures_undrawn


def write_runs(root: Path, frame: pd.DataFrame, csv: tuple[str, ...] = ()) -> None:
    """One run folder per judge × mode, like a multirun: results.parquet (or results.csv) in each."""
    for (judge, mode), part in frame.groupby(["judge", "mode"], observed=True):
        folder = root / f"{judge}-{mode}"
        folder.mkdir(parents=True)
        part = part.astype({c: str for c in part.columns if isinstance(part[c].dtype, pd.CategoricalDtype)})
        if mode in csv:
            part.to_csv(folder / "results.csv", index=False)
        else:
            part.to_parquet(folder / "results.parquet", index=False)
        (folder / "manifest.json").write_text("{}")


@pytest.fixture(scope="module")
def study() -> pd.DataFrame:
    return synthetic_results(
        n_instances=12,
        shift=1.0,
        unscored=0.05,
        generators=("gpt-5", "narrow_gen"),
        models=("openai/gpt-4o", "gemini/gemini-2.5-pro"),
        seed=1,
    )


@pytest.fixture
def figures_skipped() -> Iterator[None]:
    """The report without its figures, for a test that reads only its tables and text: drawing and saving the
    figures is ~3/4 of a report's CPU (~10 of ~14 CPU-s on `study` with experts). The figures are drawn and
    checked by test_full_report_on_a_multirun_with_humans and test_one_judge_one_mode_degrades_to_sentences."""
    with figures_undrawn():
        yield


def test_collect_reads_parquet_and_csv_runs(tmp_path: Path, study: pd.DataFrame) -> None:
    write_runs(tmp_path, study, csv=("comparative",))
    assert len(find_results(tmp_path)) == 4
    loaded = load_results(tmp_path)
    assert len(loaded) == len(study)
    assert isinstance(loaded["judge"].dtype, pd.CategoricalDtype) and loaded["score"].dtype == float
    with pytest.raises(FileNotFoundError):
        load_results(tmp_path / "nothing-here")


def test_direction_survives_a_csv_and_old_tables_take_it_from_the_run_config(
    tmp_path: Path, study: pd.DataFrame
) -> None:
    write_runs(tmp_path / "new", study, csv=("comparative",))
    loaded = load_results(tmp_path / "new")
    flags = loaded.groupby("dimension", observed=True)["higher_is_better"].unique()
    assert {d: list(v) for d, v in flags.items()} == {"originality": [True], "source_boundedness": [False]}
    # a results file written before the column existed: its run's config.json holds the rubric it used (never
    # conf/: the shipped narrowness says lower is better, this run's own `narrowness` says higher)
    old = study.drop(columns=["higher_is_better"]).astype({"rubric": str}).assign(rubric="narrowness")
    old = old.assign(dimension=old["dimension"].astype(str).replace({"originality": "diagnostic_framing"}))
    write_runs(tmp_path / "old", old)
    dims = [
        {"name": "diagnostic_framing", "low": 0, "high": 10, "higher_is_better": False},
        {"name": "source_boundedness", "low": 0, "high": 10, "higher_is_better": True},
    ]
    for config in (tmp_path / "old").glob("*/manifest.json"):
        rubric = {"name": "narrowness", "dimensions": dims}
        config.with_name("config.json").write_text(json.dumps({"rubric": rubric}))
    flags = load_results(tmp_path / "old").groupby("dimension", observed=True)["higher_is_better"].unique()
    expected = {"diagnostic_framing": [False], "source_boundedness": [True]}
    assert {d: list(v) for d, v in flags.items()} == expected
    write_runs(tmp_path / "custom", old.assign(rubric="my_rubric"), csv=("independent", "comparative"))
    with pytest.raises(
        ValueError,
        match=r"results\.csv: no 'higher_is_better' column, and rubric 'my_rubric' of the run folder .*"
        r"judge_a-comparative has no config.json",
    ):
        load_results(tmp_path / "custom")


def test_a_bad_direction_is_one_line(
    tmp_path: Path, study: pd.DataFrame, capsys: pytest.CaptureFixture
) -> None:
    bad = study.astype({"higher_is_better": object}).assign(higher_is_better="maybe")
    write_runs(tmp_path / "bad", bad, csv=("independent", "comparative"))
    assert main([str(tmp_path / "bad"), "--n-boot", "10"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and "results.csv:2: higher_is_better 'maybe' is not true or false" in err
    labels = synthetic_humans(study, seed=2).assign(higher_is_better="sometimes")
    write_runs(tmp_path / "ok", study)
    labels.to_csv(tmp_path / "h.csv", index=False)
    assert main([str(tmp_path / "ok"), "--humans", str(tmp_path / "h.csv"), "--n-boot", "10"]) == 2
    assert "not 'sometimes'" in capsys.readouterr().err


def test_prepare_splits_a_judge_that_ran_two_rubrics(study: pd.DataFrame) -> None:
    two = pd.concat([study.astype({"rubric": str}), study.astype({"rubric": str}).assign(rubric="other")])
    assert set(prepare(two)["judge"].astype(str)) == {
        "judge_a/rq",
        "judge_a/other",
        "judge_b/rq",
        "judge_b/other",
    }


def test_full_report_on_a_multirun_with_humans(tmp_path: Path, study: pd.DataFrame) -> None:
    write_runs(tmp_path / "multirun", study)
    pairwise = synthetic_pairwise(n_instances=10, judges=("judge_a",), first_bias=0.5)
    (tmp_path / "multirun" / "pw").mkdir()
    pairwise.to_parquet(tmp_path / "multirun" / "pw" / "results.parquet", index=False)
    synthetic_humans(study, seed=2).to_csv(tmp_path / "humans.csv", index=False)
    out = tmp_path / "report"
    assert (
        main(
            [
                str(tmp_path / "multirun"),
                "--humans",
                str(tmp_path / "humans.csv"),
                "--humans-design",
                "random",
                "--out",
                str(out),
                "--n-boot",
                "100",
            ]
        )
        == 0
    )
    tables = {p.stem for p in (out / "tables").glob("*.csv")}
    assert {
        "overview",
        "winrate",
        "winrate_combined",
        "mode_shift",
        "preference_gap",
        "score_agreement",
        "winner_agreement",
        "winner_agreement_by_kind",
        "human_reliability",
        "alignment",
        "score_summary",
        "self_consistency",
        "position_bias",
        "pairwise_bias",
        "length_bias",
        "leaderboard",
        "human_agreement",
    } <= tables
    figures = {p.stem for p in (out / "figures").glob("*.png")}
    assert figures == {
        "winrate",
        "mode_shift",
        "score_agreement",
        "winner_agreement",
        "score_distributions",
        "self_consistency",
        "position_bias",
        "human_agreement",
        "calibration",
        "preference_gap",
    }
    assert {"corrected_estimates", "calibration", "multiple_testing"} <= tables
    md, html = (out / "report.md").read_text(), (out / "report.html").read_text()
    assert md.split("\n## ")[1].startswith("Summary") and "## Glossary" in md and "## Contents" in md
    assert '<section id="summary">' in html and 'id="leaderboard"' in html
    assert "## Mode shift (the novelty illusion)" in md and "![Win / tie / loss" in md
    # ten section figures, and the novelty-illusion answer's two (mode shift, preference gap) in the summary
    assert html.count("data:image/png;base64,") == 12 and "<table" in html
    shift = pd.read_csv(out / "tables" / "mode_shift.csv")
    assert {"delta_win", "delta_win_lo", "delta_win_hi", "mcnemar_p", "n"} <= set(shift.columns)
    best = pd.read_csv(out / "tables" / "best_of_k_scores.csv")
    assert list(best.columns) == ["judge", "mode", "source", "dimension", "n", "n_judges_min", "mean", "sd"]
    assert {"mode_shift_combined", "human_majority"} <= tables
    paper_md, paper_tex = (out / "paper_tables.md").read_text(), (out / "paper_tables.tex").read_text()
    assert "## Best-of-K scores" in paper_md and "## Experts and judges on the same pairs" in paper_md
    assert "## Corrected estimates" in paper_md
    assert paper_tex.count("\\judgescopetable{") >= 9 and "\\toprule" in paper_tex


def test_one_judge_one_mode_degrades_to_sentences(tmp_path: Path, study: pd.DataFrame) -> None:
    one = study.loc[(study["judge"] == "judge_a") & (study["mode"] == "independent")]
    write_runs(tmp_path / "run", one)
    out = tmp_path / "report"
    assert main([str(tmp_path / "run" / "judge_a-independent"), "--out", str(out), "--n-boot", "50"]) == 0
    md = (out / "report.md").read_text()
    assert ONE_RATER in md and NO_HUMANS in md and "Only one judge" in md
    assert "No judge ran both independent and comparative mode" in md
    assert not (out / "figures" / "score_agreement.png").exists()
    assert {p.stem for p in (out / "figures").glob("*.png")} == {
        "winrate",
        "score_distributions",
        "self_consistency",
    }


def test_compute_tables_without_humans_has_no_human_tables(study: pd.DataFrame) -> None:
    tables = compute_tables(study, n_boot=50)
    assert "preference_gap" not in tables and "alignment" not in tables
    assert {"winrate", "mode_shift", "score_agreement", "winner_agreement"} <= set(tables)
    kinds = set(tables["winner_agreement"]["kind"])
    assert kinds == {"judge-judge", SAME_JUDGE, CROSS_MODE, "all"}  # a judge across modes: not judge-judge


def test_markdown_table_formats_and_cuts() -> None:
    frame = pd.DataFrame({"a": [1.23456, float("nan")], "b": ["x|y", "z"]})
    assert markdown_table(frame).splitlines()[2] == "| 1.235 | x\\|y |"
    assert markdown_table(frame).splitlines()[3] == "|  | z |"
    assert "1 of 2 rows shown" in markdown_table(frame, max_rows=1)


def test_human_labels_on_dimensions_no_judge_scored_are_counted_or_refused(
    tmp_path: Path, study: pd.DataFrame, capsys: pytest.CaptureFixture, figures_skipped: None
) -> None:
    """A small study (4 of the 12 instances): what is tested is how the labels are counted and refused."""
    small = study.loc[study["instance_id"].isin(sorted(set(study["instance_id"]))[:4])]
    write_runs(tmp_path / "run", small)
    labels = synthetic_humans(small, seed=2)
    extra = labels.loc[labels["dimension"] == "originality"].assign(dimension="clarity")
    pd.concat([labels, extra]).to_csv(tmp_path / "extra.csv", index=False)
    out = tmp_path / "report"
    assert (
        main(
            [
                str(tmp_path / "run"),
                "--humans",
                str(tmp_path / "extra.csv"),
                "--out",
                str(out),
                "--n-boot",
                "10",
            ]
        )
        == 0
    )
    md = (out / "report.md").read_text()
    assert f"{len(extra)} human labels on dimensions no judge scored (clarity) were not compared." in md
    assert "No human labels were given" not in md
    # every label on a differently spelt dimension: one error line naming the file and both spellings
    labels.assign(dimension=labels["dimension"].str.capitalize()).to_csv(tmp_path / "case.csv", index=False)
    capsys.readouterr()
    assert (
        main(
            [
                str(tmp_path / "run"),
                "--humans",
                str(tmp_path / "case.csv"),
                "--out",
                str(out),
                "--n-boot",
                "10",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and err.startswith("error: ") and "case.csv" in err
    assert "['Originality', 'Source_boundedness']" in err and "['originality', 'source_boundedness']" in err


def test_a_reference_no_candidate_has_is_one_line(
    tmp_path: Path, study: pd.DataFrame, capsys: pytest.CaptureFixture
) -> None:
    write_runs(tmp_path / "run", study)
    assert (
        main([str(tmp_path / "run"), "--reference", "nosuch", "--out", str(tmp_path / "r"), "--n-boot", "5"])
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and err.startswith("error: --reference 'nosuch'")
    assert "['gpt-5', 'narrow_gen', 'reference']" in err and not (tmp_path / "r").exists()


def test_runs_table_counts_each_calls_cost_once() -> None:
    """Review F3: every row of a call carries the call's cost; a comparative prompt of 3 candidates × 2
    dimensions asked twice (2 calls of $0.01) is 12 rows but $0.02, not 12 × $0.01."""
    rows = [
        {
            "run_id": "r",
            "judge": "j",
            "model": "m",
            "mode": "comparative",
            "rubric": "rq",
            "prompt_id": "p1",
            "instance_id": "i",
            "candidate_id": c,
            "source": "reference" if c == "ref" else "g",
            "dimension": d,
            "higher_is_better": True,
            "sample_idx": s,
            "score": 5.0,
            "parse_ok": True,
            "cost_usd": 0.01,
            "cached": s == 1,
        }
        for s in (0, 1)
        for c in ("ref", "g0", "g1")
        for d in ("originality", "clarity")
    ]
    out = overview(pd.DataFrame(rows)).iloc[0]
    assert (out["rows"], out["prompts"]) == (12, 1)
    assert out["cost_usd"] == pytest.approx(0.02)  # 2 calls × $0.01
    assert out["cached"] == pytest.approx(0.5)


def _tallied_calls(costs: tuple[float | None, ...]) -> tuple[pd.DataFrame, Tally]:
    """Independent prompts of one instance, one call each as the study makes them: a completion of each cost
    in `costs`, then a call that failed at the provider (no completion) and a twin sharing the first answer;
    the results rows (rows_for) and the manifest's Tally of the same calls."""
    rubric = rubric_from_config(yaml.safe_load((Path("conf/rubric/novelty.yaml")).read_text()))
    cands = tuple(Candidate(f"i1:g:{k}", "g", f"question {k}?") for k in range(len(costs) + 1))
    inst = Instance("i1", "nlp", (Paper("T", "text"),), Candidate("i1:ref", "reference", "ref?"), cands)
    answer = '{"originality": 3, "gap_addressing": 2, "non_obviousness": 4}'
    done = [CallResult(Completion(answer, "stop", 10, 5, c, 0.5), cached=False, retries=0) for c in costs]
    results = [*done, CallResult(None, False, 2, "provider: RateLimitError"), replace(done[0], shared=True)]
    meta = {
        "run_id": "r",
        "judge": "j",
        "model": "m",
        "mode": "independent",
        "rubric": "novelty",
        "rubric_version": "v",
        "temperature": 0.0,
    }
    tally, rows = Tally(), []
    for prompt, result in zip(build_prompts([inst], rubric, Independent(), seed=0), results, strict=True):
        tally.add(result, scored=result.completion is not None)
        rows += rows_for(prompt, 0, result, rubric, meta)
    return to_frame(rows), tally


def test_run_cost_follows_the_manifests_rule_for_failed_and_shared_calls() -> None:
    """Review 7 F6: a call that failed at the provider (no completion) costs nothing and a twin sharing another
    call's answer paid nothing of its own (the manifest's Tally); the Runs table made one failed call turn the
    run's cost "unknown", and counted a shared answer twice. By hand: $0.01 + $0.02 = $0.03 spent on the 2
    paid judgments of 4 calls (review 9 F2: per 1,000 paid judgments, not per call); a completed call of
    unknown price keeps both unknown. Older results files hold NaN for a failed call."""
    frame, tally = _tallied_calls((0.01, 0.02))
    assert tally.cost_known and tally.cost_usd == pytest.approx(0.03)
    assert overview(frame).iloc[0]["cost_usd"] == pytest.approx(tally.cost_usd)
    assert leaderboard(frame, {}).iloc[0]["cost_per_1k"] == pytest.approx(0.03 / 2 * 1000)
    failed = (frame["raw"] == "").to_numpy()
    old = frame.assign(cost_usd=frame["cost_usd"].mask(failed))  # as rows.py wrote it before
    assert failed.sum() == 3 and overview(old).iloc[0]["cost_usd"] == pytest.approx(0.03)
    assert leaderboard(old, {}).iloc[0]["cost_per_1k"] == pytest.approx(0.03 / 2 * 1000)
    frame, tally = _tallied_calls((0.01, None))
    assert not tally.cost_known and overview(frame).iloc[0]["cost_usd"] == UNKNOWN
    assert pd.isna(leaderboard(frame, {}).iloc[0]["cost_per_1k"])


def per_generator_comparative() -> pd.DataFrame:
    """One judge, comparative mode, one prompt per (instance, generator): the reference and that generator's
    one candidate. The reference is scored twice per instance: i1 4 (with g) and 6 (with h), i2 3 and 5."""
    scored = {
        ("i1", "g"): {"ref": 4.0, "g": 5.0},
        ("i1", "h"): {"ref": 6.0, "h": 7.0},
        ("i2", "g"): {"ref": 3.0, "g": 2.0},
        ("i2", "h"): {"ref": 5.0, "h": 6.0},
    }
    rows = [
        {
            "run_id": "r",
            "judge": "j",
            "model": "m",
            "mode": "comparative",
            "rubric": "rq",
            "prompt_id": f"{inst}-{gen}",
            "instance_id": inst,
            "candidate_id": f"{inst}-{cand}",
            "source": "reference" if cand == "ref" else cand,
            "dimension": "originality",
            "higher_is_better": True,
            "sample_idx": 0,
            "score": score,
            "parse_ok": True,
        }
        for (inst, gen), cands in scored.items()
        for cand, score in cands.items()
    ]
    return pd.DataFrame(rows)


def test_the_reference_counts_once_per_instance_not_once_per_comparative_prompt() -> None:
    """Review F5: best-of-K and win / tie / loss already count the reference per instance (its prompts
    averaged: i1 5, i2 4); the agreement with the experts paired it once per prompt (8 items for 6
    candidates), so a judge that agrees exactly with the experts on its mean scores showed κ_w < 1."""
    results = per_generator_comparative()
    humans = pd.DataFrame(
        {
            "annotator": "h1",
            "instance_id": ["i1"] * 3 + ["i2"] * 3,
            "candidate_id": ["i1-ref", "i1-g", "i1-h", "i2-ref", "i2-g", "i2-h"],
            "source": ["reference", "g", "h"] * 2,
            "dimension": "originality",
            "score": [5.0, 5.0, 7.0, 4.0, 2.0, 6.0],
        }
    )
    tables = compute_tables(results, humans, n_boot=20)
    best = tables["best_of_k_scores"].set_index("source")
    assert (best.loc["reference", "n"], best.loc["reference", "mean"]) == (2, 4.5)
    assert best.loc["reference", "sd"] == pytest.approx(0.5**0.5)
    rates = tables["winrate"].set_index("source")  # g: i1 5 > 4 win, i2 2 < 3 loss; h: 7 > 6, 6 > 5
    assert rates.loc["g", ["n", "n_win", "n_loss"]].tolist() == [2, 1, 1]
    assert rates.loc["h", ["n", "n_win", "n_loss"]].tolist() == [2, 2, 0]
    agree = tables["human_agreement"].iloc[0]
    assert agree["n"] == 6 and agree["kappa_w"] == pytest.approx(1.0) and agree["rho"] == pytest.approx(1.0)


JUDGE = '=HYPERLINK("http://x")|`j`<script>alert(1)</script>'  # a formula, a pipe, backticks and HTML
GENERATOR = "-gen|x\ny"  # a formula start, a pipe and a line break


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of a study whose judge and generator names are hostile text (review F10, F11)."""
    frame = synthetic_results(n_instances=6, generators=("gpt-5", GENERATOR), seed=1)
    frame["judge"] = frame["judge"].cat.rename_categories({"judge_a": JUDGE})
    root = tmp_path_factory.mktemp("hostile")
    frame.to_parquet(root / "results.parquet", index=False)
    assert main([str(root), "--out", str(root / "report"), "--n-boot", "10"]) == 0
    return root / "report"


def test_table_csvs_never_run_as_formulas_and_keep_numbers(hostile_report: Path) -> None:
    """Review F10: a text cell a spreadsheet would run (= + - @ tab CR) starts with a quote; numbers
    (negative ones too) stay numbers; pandas reads the rest back unchanged."""
    rates = pd.read_csv(hostile_report / "tables" / "winrate.csv", keep_default_na=False)
    assert set(rates["judge"]) == {"'" + JUDGE, "judge_b"}
    assert set(rates["source"]) == {"gpt-5", "'" + GENERATOR}
    shift = pd.read_csv(hostile_report / "tables" / "mode_shift.csv")
    assert shift["delta_win"].dtype == float and shift["delta_win"].between(-1, 1).all()
    assert (shift["delta_win"] < 0).any() or (shift["delta_tie"] < 0).any()  # negatives stay numbers


def test_markdown_tables_show_hostile_names_as_text(hostile_report: Path) -> None:
    """Review F11: a pipe, a line break, backticks or HTML in a name neither breaks a table's columns nor
    reaches report.md / paper_tables.md as raw HTML (summary sentences: HTML escaped, one line)."""
    shown_judge = '=HYPERLINK("http://x")\\|&#96;j&#96;&lt;script&gt;alert(1)&lt;/script&gt;'
    for name in ("report.md", "paper_tables.md"):
        text = (hostile_report / name).read_text()
        assert "<script>" not in text and shown_judge in text and "-gen\\|x<br>y" in text, name
        for table in text.split("\n\n"):
            rows = [r for r in table.splitlines() if r.startswith("|")]
            assert not any("`j`" in r for r in rows), name  # no code span in a cell
            widths = {len(re.findall(r"(?<!\\)\|", r)) for r in rows}
            assert len(widths) <= 1, (name, table[:200])  # every row has as many cells as the header


@pytest.mark.slow  # the 2 × 2 sample study through the scripted provider and its report (run once a session)
def test_the_shipped_sample_with_humans_has_a_row_per_expert_and_judge(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Issue 24 item 1 on the shipped sample: 2 judges × 2 modes (scripted fake provider) with
    data/sample/humans.csv; tables/expert_vs_judge.csv has every expert, every judge [mode] and the majority
    on every dimension both scored. The report is the session's one of that study and those experts
    (tests.support.sample_report: `python -m analysis.report`, also read by the golden and browser tests)."""
    from tests.support.sample_report import shared_sample_report

    out = shared_sample_report(tmp_path_factory, tmp_path / "report")
    rates = pd.read_csv(out / "tables" / "expert_vs_judge.csv")
    assert list(rates.columns) == ["rater", "kind", "dimension", "n", "gt_win", "gen_win", "tie"]
    raters = {f"human:expert_{x}" for x in "abc"} | {
        f"qwen_{j} [{m}]" for j in "ab" for m in ("independent", "comparative")
    }
    assert set(rates["rater"]) == raters | {"human:majority"}
    per_dimension = rates.groupby("dimension")["rater"].nunique()
    assert (per_dimension == len(raters) + 1).all() and len(per_dimension) == 3  # the rubric's 3 dimensions
    assert ((rates["gt_win"] + rates["gen_win"] + rates["tie"]).round(9) == 1).all()
    assert "## Experts and judges on the same pairs" in (out / "paper_tables.md").read_text()


def test_long_tables_fold_under_their_headline_and_the_rubric_is_a_column(
    tmp_path: Path, study: pd.DataFrame, figures_skipped: None
) -> None:
    """Issue 28: every table longer than FOLD_ROWS sits in a <details> whose summary names the CSV and the
    table's headline number (the winrate table's highest win rate, and whose); the leaderboard stays open. A
    judge run under two rubrics is one judge with a rubric column (was two judges, `judge_a/rq` and
    `judge_a/other`), in the leaderboard, every table's CSV and the report's tables."""
    from analysis.report.render import headline
    from analysis.report.sections import FOLD_ROWS

    two = study.astype({"rubric": str, "run_id": str, "instance_id": str})
    two = two.loc[two["instance_id"].isin(sorted(set(two["instance_id"]))[:4])]  # a small study: fast
    write_runs(tmp_path / "runs" / "rq", two)
    write_runs(tmp_path / "runs" / "other", two.assign(rubric="other", run_id=two["run_id"] + "-other"))
    out = tmp_path / "report"
    assert main([str(tmp_path / "runs"), "--out", str(out), "--n-boot", "50"]) == 0
    board = pd.read_csv(out / "tables" / "leaderboard.csv")
    assert list(board.columns[:2]) == ["judge", "rubric"] and len(board) == 4
    assert set(zip(board["judge"], board["rubric"], strict=True)) == {
        (j, r) for j in ("judge_a", "judge_b") for r in ("rq", "other")
    }
    rates = pd.read_csv(out / "tables" / "winrate.csv")
    assert set(rates["judge"]) == {"judge_a", "judge_b"} and set(rates["rubric"]) == {"rq", "other"}
    combined = pd.read_csv(out / "tables" / "winrate_combined.csv")
    assert set(combined["judge"].str.replace(r" \(.*", "", regex=True)) == {
        "mean of 2 judges",
        "unanimous of 2 judges",
        "majority of 2 judges",
    }
    html_text = (out / "report.html").read_text()
    top = rates.loc[rates["win"].idxmax()]
    line = headline("winrate", rates)
    assert line == (
        f"{len(rates)} rows; highest win rate {top['win']:.3f} "
        f"({top['judge']} · {top['rubric']} · {top['mode']} · {top['source']} · {top['dimension']})"
    )
    assert len(rates) > FOLD_ROWS
    assert (
        f'<details class="table" id="table-winrate"><summary><code>tables/winrate.csv</code>: {line}'
        in html_text
    )
    assert 'id="table-leaderboard"' not in html_text and 'id="leaderboard"' in html_text
    assert "<details><summary><code>tables/winrate.csv</code>" in (out / "report.md").read_text()


def test_a_folded_tables_headline_is_its_extreme_row_by_hand() -> None:
    """The summary line's number and row, planted: the highest win rate (0.9, judge b), a NaN skipped, a
    repeated index label read by position; a pair table's over-all-raters row is not a pair; a table without
    a headline column gives its row count."""
    from analysis.report.render import headline

    rates = pd.DataFrame(
        {"judge": ["a", "b", "c"], "mode": ["x", "y", "z"], "win": [0.1, 0.9, float("nan")]}, index=[5, 5, 7]
    )
    assert headline("winrate", rates) == "3 rows; highest win rate 0.900 (b · y)"
    pairs = pd.DataFrame({"rater_a": ["a", "(all)"], "rater_b": ["b", "(all)"], "kappa_w": [0.2, 0.9]})
    assert headline("score_agreement", pairs) == "2 rows; highest κ_w 0.200 (a · b)"
    shifts = pd.DataFrame({"judge": ["a", "b"], "delta_win": [0.3, -0.5]})
    assert headline("mode_shift", shifts) == "2 rows; largest |Δwin| -0.500 (b)"
    assert headline("unknown_table", rates) == "3 rows"
