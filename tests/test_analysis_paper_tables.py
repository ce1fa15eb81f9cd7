"""analysis.report.paper_tables: every cell is a value of a report table, formatted, never recomputed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis.load.synthetic import synthetic_humans, synthetic_results
from analysis.report import paper_tables as pt
from analysis.report.build import compute_tables
from analysis.report.summary import shift_lines
from analysis.stats.corrected import declare_design


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    results = synthetic_results(n_instances=15, shift=1.0, unscored=0.05, seed=7)
    humans = declare_design(
        synthetic_humans(results, seed=8), "random", "synthetic"
    )  # corrected estimates too
    return compute_tables(results, humans, n_boot=100)


@pytest.fixture(scope="module")
def shown(tables: dict[str, pd.DataFrame]) -> dict[str, pt.PaperTable]:
    return {t.key: t for t in pt.paper_tables(tables)}


def test_formatting_by_hand() -> None:
    assert pt.mean_sd(1.98, 0.254) == "1.98 ± 0.25" and pt.mean_sd(0.47, float("nan")) == "0.47"
    assert pt.pct(0.272) == "27.2%" and pt.pct_ci(0.5, 0.25, 0.75) == "50.0% [25.0, 75.0]"
    assert pt.p_value(0.0001) == "<0.001" and pt.p_value(0.25) == "0.250"


def test_best_five_cells_are_the_best_of_k_table(tables: dict, shown: dict) -> None:
    wide = shown["best_five"].frame.set_index(["judge", "mode", "source"])
    best = tables["best_of_k_scores"]
    assert len(best) == wide.size and "mean of 2 judges (judge_a+judge_b)" in set(best["judge"])
    for row in best.itertuples():
        judges = f"{row.n_judges_min} judge" + ("" if row.n_judges_min == 1 else "s")
        cell = f"{row.mean:.2f} ± {row.sd:.2f} (n={row.n}, {judges})"
        assert wide.loc[(row.judge, row.mode, row.source), row.dimension] == cell
    assert wide.index.get_level_values("source")[0] == "reference"  # the reference first, as in the paper


def test_win_tie_loss_cells_are_the_winrate_and_shift_tables(tables: dict, shown: dict) -> None:
    frame = shown["win_tie_loss"].frame.set_index(["judge", "source", "dimension"])
    combined = tables["winrate_combined"].loc[tables["winrate_combined"]["combine"] == "mean"]
    rates = pd.concat([tables["winrate"], combined])
    assert len(rates) == 2 * len(frame)  # both modes of every judge, the mean combination included
    for row in rates.itertuples():
        cell = frame.loc[(row.judge, row.source, row.dimension)]
        for name in ("win", "tie", "loss"):
            assert cell[f"{row.mode} {name}"] == f"{100 * getattr(row, name):.1f}%"
        assert cell[f"{row.mode} n"] == row.n
    shifts = pd.concat([tables["mode_shift"], tables["mode_shift_combined"]])
    assert "mean of 2 judges (judge_a+judge_b)" in set(tables["mode_shift_combined"]["judge"])
    for row in shifts.itertuples():
        cell = frame.loc[(row.judge, row.source, row.dimension)]
        assert (
            cell["win shift"] == f"{100 * row.delta_win:+.1f}"
            and cell["tie shift"] == f"{100 * row.delta_tie:+.1f}"
        )


def test_expert_and_alignment_cells_are_the_human_tables(tables: dict, shown: dict) -> None:
    frame = shown["preference_gap"].frame.set_index(["judge", "mode", "source", "dimension"])
    excluded = tables["human_majority"].set_index(["source", "dimension"])["n_excluded"]
    for row in tables["preference_gap"].itertuples():
        cell = frame.loc[(row.judge, row.mode, row.source, row.dimension)]
        assert (cell["n"], cell["experts win"], cell["judge win"]) == (
            row.n,
            f"{100 * row.human_win:.1f}%",
            f"{100 * row.judge_win:.1f}%",
        )
        assert cell["gap [95% CI]"].startswith(f"{100 * row.gap_win:+.1f} [")
        assert cell["no majority"] == excluded.loc[(row.source, row.dimension)]
    raters = shown["expert_vs_judge"].frame.set_index(["rater", "dimension"])
    assert len(raters) == len(tables["expert_vs_judge"])
    for row in tables["expert_vs_judge"].itertuples():
        cell = raters.loc[(row.rater, row.dimension)]
        assert (cell["kind"], cell["n"], cell["GT preferred"], cell["generated preferred"], cell["tie"]) == (
            row.kind,
            row.n,
            pt.pct(row.gt_win),
            pt.pct(row.gen_win),
            pt.pct(row.tie),
        )
    judges = tables["expert_vs_judge"].query("kind == 'judge' and dimension == 'source_boundedness'")
    bounded = shown["boundedness_on_rated_pairs"].frame.set_index("rater")
    assert sorted(bounded.index) == sorted(judges["rater"])
    for row in judges.itertuples():
        assert bounded.loc[row.rater, "generated preferred"] == pt.pct(row.gen_win)
    aligned = shown["alignment"].frame.set_index(["human dimension", "judge", "judge dimension"])
    assert aligned.size == len(tables["alignment"])
    for row in tables["alignment"].itertuples():
        cell = aligned.loc[(row.dimension_a, row.rater_b, row.dimension_b), row.rater_a]
        assert cell == f"{pt.pct_ci(row.percent, row.percent_lo, row.percent_hi)} n={row.n}"
    by_kind = shown["agreement_by_kind"].frame.set_index("pairs of")
    assert list(by_kind.index) == ["expert–expert", "LLM–LLM", "expert–LLM"]
    kinds = tables["winner_agreement_by_kind"].set_index("kind")
    assert by_kind.loc["LLM–LLM", "rater pairs"] == kinds.loc["judge-judge", "pairs"] == 2  # a vs b, per mode
    assert by_kind.loc["expert–LLM", "agreement"] == pt.pct(kinds.loc["expert-judge", "percent"])


def test_boundedness_cells_and_the_written_files(tables: dict, shown: dict, tmp_path) -> None:
    frame = shown["boundedness"].frame.set_index(["judge", "mode", "source"])
    best = tables["best_of_k_scores"]
    for row in best.loc[best["dimension"] == "source_boundedness"].itertuples():
        cell = frame.loc[(row.judge, row.mode, row.source)]
        assert cell["source_boundedness (mean ± sd)"] == pt.mean_sd(row.mean, row.sd)
        assert (cell["n"], cell["n_judges_min"]) == (row.n, row.n_judges_min)
    wins = tables["winrate"].loc[tables["winrate"]["dimension"] == "source_boundedness"]
    for row in wins.itertuples():
        cell = frame.loc[(row.judge, row.mode, row.source)]
        assert (cell["loss"], cell["n (win / loss)"]) == (pt.pct(row.loss), row.n)
    md, tex = pt.write_paper_tables(tables, tmp_path)
    text = md.read_text()
    assert text.count("\n## ") == 9 and pt.mean_sd(best["mean"].iloc[0], best["sd"].iloc[0]) in text
    latex = tex.read_text()
    assert latex.count("\\begin{table}") == 9 and "\\multicolumn{4}{c}{comparative}" in latex


def test_tables_without_humans_or_modes_are_left_out(tables: dict) -> None:
    judge_only = {k: v for k, v in tables.items() if k in ("best_of_k_scores", "winrate")}
    assert [t.key for t in pt.paper_tables(judge_only)] == ["best_five", "win_tie_loss", "boundedness"]
    assert pt.paper_tables({}) == []


#: Generated candidate's score per (judge, mode) on instance 0 and 1; the reference scores 5 everywhere.
HAND = {
    ("judge_a", "independent"): (6, 6),
    ("judge_b", "independent"): (6, 5),
    ("judge_c", "independent"): (2, 3),
    ("judge_a", "comparative"): (5, 4),
    ("judge_b", "comparative"): (5, 5),
}


def _hand_results(runs: dict[tuple[str, str], tuple[int | None, ...]]) -> pd.DataFrame:
    """One instance per score of a run (two in HAND), one generated candidate, one dimension; only the (judge,
    mode) runs of `runs`, and only the instances a run has a score (not None) for."""
    judges = sorted({j for j, _ in runs})
    n_instances = max(len(v) for v in runs.values())
    r = synthetic_results(
        n_instances=n_instances,
        generators=("gen",),
        k=1,
        dimensions=("originality",),
        judges=judges,
        n_samples=1,
        seed=0,
    )
    r = r.loc[[k in runs for k in zip(r["judge"].astype(str), r["mode"].astype(str), strict=True)]]
    inst = r["instance_id"].cat.codes.to_numpy()
    given = [
        runs[(j, m)][i] for j, m, i in zip(r["judge"].astype(str), r["mode"].astype(str), inst, strict=True)
    ]
    r["score"] = [
        5.0 if s == "reference" else float(v or 0)
        for s, v in zip(r["source"].astype(str), given, strict=True)
    ]
    return r.loc[[v is not None for v in given]].reset_index(drop=True)


def _row(table: pt.PaperTable, judge: str) -> pd.Series:
    return table.frame.set_index(["judge", "source", "dimension"]).loc[(judge, "gen", "originality")]


def _cells(row: pd.Series, mode: str) -> tuple[str, ...]:
    return tuple(row[f"{mode} {o}"] for o in ("n", "win", "tie", "loss"))


def test_a_judge_in_one_mode_only_has_no_shift_and_no_crash(tmp_path) -> None:
    """Review 5 F4: judge_b ran independent mode only; the table used to raise TypeError (Int64 n filled with
    ""). Its comparative cells are blank, its shift n/a and named in the note. Review 7 F2: the judges' mean
    row showed judge_a's comparative rates under "mean of 2 judges"; comparative has one judge, so the mean
    has no comparative rates. By hand: mean independent 6 and 5.5 vs 5, two wins; judge_a comparative 5 and 4
    vs 5, a tie and a loss, after two independent wins; judge_b independent 6 and 5, a win and a tie."""
    runs = {k: v for k, v in HAND.items() if k[0] != "judge_c" and k != ("judge_b", "comparative")}
    tables = compute_tables(_hand_results(runs), n_boot=20)
    assert "mode_shift_combined" not in tables and set(tables["mode_shift"]["judge"]) == {"judge_a"}
    assert set(tables["winrate_combined"]["mode"]) == {"independent"}
    table = pt.win_tie_loss_by_mode(tables)
    mean, a, b = (_row(table, j) for j in ("mean of 2 judges (judge_a+judge_b)", "judge_a", "judge_b"))
    assert _cells(mean, "independent") == (2, "100.0%", "0.0%", "0.0%")
    assert _cells(mean, "comparative") == ("", "", "", "")
    assert _cells(a, "comparative") == (2, "0.0%", "50.0%", "50.0%")
    assert (a["win shift"], a["tie shift"]) == ("-100.0", "+50.0")
    assert _cells(b, "independent") == (2, "50.0%", "50.0%", "0.0%") and _cells(b, "comparative")[0] == ""
    for row in (mean, b):
        assert (row["win shift"], row["tie shift"], row["McNemar p"]) == ("n/a", "n/a", "n/a")
    assert table.note.endswith(
        "no shift (n/a) for judge_b, mean of 2 judges (judge_a+judge_b): it (or one of "
        "its judges) ran one mode only"
    )
    md, _ = pt.write_paper_tables(tables, tmp_path)
    assert "| judge_b " in md.read_text()


def test_a_combination_row_is_over_the_judges_it_names_in_every_mode() -> None:
    """Review 7 F2: judge_c ran independent mode only. "mean of 3 judges" used to show comparative rates of
    judge_a and judge_b, and the shift of those two ("mean of 2 judges (judge_a+judge_b)") had no row and was
    dropped. By hand (reference 5): mean of 3 independent (6+6+2)/3 and (6+5+3)/3, two losses; mean of 2
    independent 6 and 5.5, two wins, comparative 5 and 4.5, a tie and a loss: Δwin -100, Δtie +50, McNemar
    on 2 discordant pairs p = 0.5."""
    tables = compute_tables(_hand_results(HAND), n_boot=20)
    three, two = "mean of 3 judges (judge_a+judge_b+judge_c)", "mean of 2 judges (judge_a+judge_b)"
    combined = tables["winrate_combined"]
    for row in combined.itertuples():  # every instance of every row rests on the judges its label names
        assert row.n_judges_min == int(row.judge.split(" of ")[1][0]), row
    assert set(combined.loc[combined["judge"].str.contains("judge_c"), "mode"]) == {"independent"}
    table = pt.win_tie_loss_by_mode(tables)
    row3, row2 = _row(table, three), _row(table, two)
    assert _cells(row3, "independent") == (2, "0.0%", "0.0%", "100.0%")
    assert _cells(row3, "comparative") == ("", "", "", "") and row3["win shift"] == "n/a"
    assert _cells(row2, "independent") == (2, "100.0%", "0.0%", "0.0%")
    assert _cells(row2, "comparative") == (2, "0.0%", "50.0%", "50.0%")
    assert (row2["win shift"], row2["tie shift"], row2["McNemar p"]) == ("-100.0", "+50.0", "0.500")
    assert table.note.endswith(
        f"no shift (n/a) for judge_c, {three}: it (or one of its judges) ran one mode only"
    )
    best = tables["best_of_k_scores"].set_index(["judge", "mode", "source"])["mean"]
    assert best[(three, "independent", "gen")] == pytest.approx((14 / 3 + 14 / 3) / 2)
    assert best[(two, "comparative", "gen")] == pytest.approx((5 + 4.5) / 2)
    assert (three, "comparative", "gen") not in best.index


def test_a_shift_is_the_difference_of_the_paired_rates_beside_it() -> None:
    """Issue 24 item 2: the table showed independent 50.0% (n=10), comparative 83.3% (n=6) and "win shift
    +66.7": the rates are over each mode's instances, the shift over the 6 in both. By hand (reference 5):
    independent wins on instances 0 and 6-9 (5 of 10); comparative, run on 0-5 only, wins on 0-4 (5 of 6);
    on the 6 paired instances independent wins 1 (16.7%), comparative 5 (83.3%): +66.7 = 83.3 - 16.7."""
    runs = {
        ("judge_a", "independent"): (6, 4, 4, 4, 4, 4, 6, 6, 6, 6),
        ("judge_a", "comparative"): (6, 6, 6, 6, 6, 4, None, None, None, None),
    }
    tables = compute_tables(_hand_results(runs), n_boot=20)
    row = _row(pt.win_tie_loss_by_mode(tables), "judge_a")
    assert (row["independent n"], row["independent win"]) == (10, "50.0%")
    assert (row["comparative n"], row["comparative win"]) == (6, "83.3%")
    assert (row["n paired"], row["independent win (paired)"], row["comparative win (paired)"]) == (
        6,
        "16.7%",
        "83.3%",
    )
    assert row["win shift"] == "+66.7"
    (line,) = [x for x in shift_lines(tables["mode_shift"]) if x.startswith("judge_a:")]
    assert "Δwin = 0.67 [" in line and "win 0.17 → 0.83 on the 6 instances in both modes" in line


def test_every_shift_shown_is_the_difference_of_its_paired_rates(shown: dict) -> None:
    frame = shown["win_tie_loss"].frame
    rows = frame.loc[frame["win shift"] != "n/a"]
    assert len(rows)
    for _, row in rows.iterrows():
        for what in ("win", "tie"):
            before, after = (
                float(row[f"{m} {what} (paired)"].rstrip("%")) for m in ("independent", "comparative")
            )
            assert float(row[f"{what} shift"]) == pytest.approx(after - before, abs=0.11)


def _planted_experts() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Ten pairs (one generated candidate vs the reference per instance). Expert 1 prefers the reference (GT)
    on pairs 0-7, expert 2 on 0-4; both prefer the generated one on 8-9. The judge scores the generated
    candidate 6 against a reference 5 on pairs 2-9 and 4 on 0-1, so it prefers the generated one on 8."""
    results = _hand_results({("judge_a", "independent"): (4, 4, 6, 6, 6, 6, 6, 6, 6, 6)})
    labels = results[["instance_id", "candidate_id", "source", "dimension"]].drop_duplicates().astype(str)
    pair = labels["instance_id"].map({v: i for i, v in enumerate(sorted(labels["instance_id"].unique()))})
    is_ref = (labels["source"] == "reference").to_numpy()
    humans = pd.concat(
        [
            labels.assign(annotator=name, score=np.where(is_ref, 2.0, np.where(pair < gt_until, 1.0, 3.0)))
            for name, gt_until in (("e1", 8), ("e2", 5))
        ],
        ignore_index=True,
    )
    return results, humans


def test_experts_vs_judges_each_expert_and_judge_has_a_row() -> None:
    """Issue 24 item 1: the table printed only the strict majority ("experts 28.6%, judge 71.4%, n=7, no
    majority 3": two experts disagree on 3 of 10 pairs, which the majority drops). The paper's layout gives
    each expert's and each judge's rate on all 10 pairs: GT 80% and 50%, the judge generated 80%; the
    majority an extra row on its 7 pairs (GT on 5)."""
    results, humans = _planted_experts()
    tables = compute_tables(results, humans, n_boot=20)
    rates = tables["expert_vs_judge"]
    assert list(rates.columns) == ["rater", "kind", "dimension", "n", "gt_win", "gen_win", "tie"]
    got = {r.rater: (r.kind, r.n, r.gt_win, r.gen_win, r.tie) for r in rates.itertuples()}
    assert got == {
        "human:e1": ("expert", 10, 0.8, pytest.approx(0.2), 0.0),
        "human:e2": ("expert", 10, 0.5, 0.5, 0.0),
        "judge_a [independent]": ("judge", 10, pytest.approx(0.2), 0.8, 0.0),
        "human:majority": ("majority", 7, pytest.approx(5 / 7), pytest.approx(2 / 7), 0.0),
    }
    assert list(rates["kind"]) == ["expert", "expert", "judge", "majority"]
    shown = pt.expert_vs_judge(tables).frame.set_index("rater")
    assert (
        shown.loc["human:e1", "GT preferred"] == "80.0%" and shown.loc["human:e2", "GT preferred"] == "50.0%"
    )
    assert shown.loc["judge_a [independent]", "generated preferred"] == "80.0%"
    gap = pt.preference_gap(tables).frame.iloc[0]  # the majority's comparison stays, under its own title
    assert (gap["n"], gap["experts win"], gap["judge win"], gap["no majority"]) == (7, "28.6%", "71.4%", 3)
    aligned = pt.alignment(tables).frame  # one column per expert and the majority (the paper's 72-76%)
    columns = ["human dimension", "judge", "judge dimension", "human:e1", "human:e2", "human:majority"]
    assert list(aligned.columns) == columns
    # the winner on the same pairs: e1 agrees with the judge on pairs 0-1 and 8-9 -> 4 of 10
    assert aligned.iloc[0]["human:e1"].startswith("40.0% [") and aligned.iloc[0]["human:e1"].endswith(" n=10")


def _twin_judges_two_rubrics() -> pd.DataFrame:
    """judge_b a copy of judge_a's every judgment, both run under rubrics rq and other (the same scores)."""
    one = synthetic_results(n_instances=20, shift=1.0, judges=("judge_a",), seed=5)
    twins = pd.concat([one, one.assign(judge="judge_b", model="openai/judge-b")], ignore_index=True)
    twins = twins.astype({"judge": str, "rubric": str})
    return pd.concat([twins, twins.assign(rubric="other")], ignore_index=True)


def test_identical_judges_get_identical_cis_and_the_rubric_is_a_column() -> None:
    """Two judges with the same judgments: one bootstrap stream per group seeded by its counts, so their CIs
    are equal (one stream for all groups gave judge_b other replicates, hence another CI for the same data).
    Run under two rubrics, each is one judge with a rubric column, not `judge_a/rq` and `judge_a/other`."""
    from analysis.load.collect import prepare

    tables = compute_tables(prepare(_twin_judges_two_rubrics()), n_boot=200)
    rates = tables["winrate"].assign(judge=tables["winrate"]["judge"].astype(str))
    keys, ci = ["mode", "source", "dimension"], ["win_lo", "win_hi", "tie_lo", "tie_hi", "loss_lo", "loss_hi"]
    a = rates.loc[rates["judge"] == "judge_a/rq"].set_index(keys)[ci].sort_index()
    b = rates.loc[rates["judge"] == "judge_b/rq"].set_index(keys)[ci].sort_index()
    assert len(a) == 8 and (a["win_hi"] > a["win_lo"]).any()  # 2 modes × 2 generators × 2 dimensions
    pd.testing.assert_frame_equal(a, b)
    shift = tables["mode_shift"].set_index("judge")
    assert (
        shift.loc["judge_a/rq", "delta_win_lo"].tolist() == shift.loc["judge_b/rq", "delta_win_lo"].tolist()
    )
    shown = {t.key: t.frame for t in pt.paper_tables(tables)}
    assert list(shown["win_tie_loss"].columns[:2]) == ["judge", "rubric"]
    assert set(shown["win_tie_loss"]["judge"]) == {"judge_a", "judge_b", "mean of 2 judges (judge_a+judge_b)"}
    assert set(shown["win_tie_loss"]["rubric"]) == {"rq", "other"}
    assert not any("/" in j for j in shown["best_five"]["judge"])


def test_tex_compiles_in_a_two_column_article_with_no_overfull_box(tmp_path) -> None:
    """paper_tables.tex \\input into a two-column article: pdflatex (Debian's texlive-latex-base and
    texlive-latex-recommended) compiles it, every table numbered, labelled, \\small, none wider than the column."""
    import shutil
    import subprocess

    from analysis.load.collect import prepare

    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex not found (apt-get install texlive-latex-base texlive-latex-recommended)")
    results = prepare(_twin_judges_two_rubrics())
    tables = compute_tables(results, synthetic_humans(results, seed=8), n_boot=50)
    _, tex = pt.write_paper_tables(tables, tmp_path)
    latex = tex.read_text()
    n_tables = len(pt.paper_tables(tables))
    assert n_tables >= 5
    assert (
        latex.count("\\begin{table}") == latex.count("\\caption{") == latex.count("}\\label{tab:") == n_tables
    )
    assert (
        latex.count("\\centering\\small") == n_tables
        and "\\caption*" not in latex
        and "judge & rubric &" in latex
    )
    (tmp_path / "paper.tex").write_text(
        "\\documentclass[twocolumn]{article}\n\\usepackage{booktabs,graphicx}\n\\begin{document}\n"
        "Table~\\ref{tab:judgescope-win_tie_loss}.\n\\input{paper_tables}\n\\end{document}\n"
    )
    run = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    log = (tmp_path / "paper.log").read_text(errors="replace")
    assert run.returncode == 0, log[-2000:]
    assert "Overfull" not in log and "Underfull \\hbox (badness 10000)" not in log


def test_a_single_rubric_is_named_in_every_caption(shown: dict) -> None:
    """One rubric: no constant rubric column, the caption names it (several: a column, tested above)."""
    assert all(t.note.endswith("; rubric rq") and "rubric" not in t.frame for t in shown.values())
