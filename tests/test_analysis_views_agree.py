"""Issue 23's done-when: on one study (the shipped sample with its humans.csv, two judges, both modes, run
through the real pipeline against a scripted local server), every statistic that the report, the paper
tables, the judge cards and the viewer share has the same value in each. One test per shared statistic.

The study includes a robustness sweep (experiment=robustness: each judge × mode re-judged with padded
candidates, and comparative prompts in another order): its statistics are the card's `robustness` field and
`python -m analysis.robustness`'s table, and its perturbed rows change none of the study's other values."""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from analysis import robustness
from analysis.card import build as card
from analysis.load.collect import load_humans, load_results
from analysis.report import paper_tables
from analysis.report.build import compute_tables
from analysis.stats.corrected import declare_design
from analysis.stats.humans import consensus_scores
from analysis.stats.scores import candidate_scores
from analysis.stats.study import study_candidates
from analysis.view.data import Study
from analysis.view.sql import DISAGREEMENT_SQL
from tests.support.studies import ROOT, run_robustness_sweep, shared_sample_study

N_BOOT = 50
N_NULL = 10  # each card's null ranges: a range is what is checked, not its width (was 30)
#: the shared sample study's size (tests.support.studies.shared_sample_study: built once a session, was its own
#: at limit 3): 2 instances × 11 candidates, every one rated by the shipped experts, still hold an unparseable
#: answer for each judge, a score padding moves and every statistic compared below
LIMIT = 2
SWEEP = ("padding", "order")  # no generator call (a paraphrase would need one); order: comparative only


class Views:
    """The sample study and what each view computed from it."""

    def __init__(self, root: Path, out: Path) -> None:
        self.root = root
        # the shipped experts rated every candidate of their instances: declared a random sample (issue 32)
        self.humans = declare_design(
            load_humans(str(ROOT / "data" / "sample" / "humans.csv")), "random", "sample"
        )
        self.results = load_results(root)
        self.tables = compute_tables(self.results, self.humans, n_boot=N_BOOT, seed=0)
        cards = card.write_cards(root, out, self.humans, n_boot=N_BOOT, seed=0, n_null=N_NULL)
        self.cards = {c["judge"]: c for c in cards}
        self.paper = {t.key: t for t in paper_tables.paper_tables(self.tables)}


@pytest.fixture(scope="module")
def study_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The sample study's runs, and a copy of them with the robustness sweep's runs added."""
    tmp = tmp_path_factory.mktemp("views")
    plain = shared_sample_study(tmp_path_factory, tmp / "plain", limit=LIMIT)
    shutil.copytree(tmp / "plain", tmp / "swept")
    return plain, run_robustness_sweep(tmp / "swept", SWEEP, limit=LIMIT)


@pytest.fixture(scope="module")
def views(study_dirs: tuple[Path, Path]) -> Views:
    """The study with its robustness sweep, as every view computes it."""
    return Views(study_dirs[1], study_dirs[1].parent / "cards")


@pytest.fixture(scope="module")
def plain(study_dirs: tuple[Path, Path]) -> Views:
    """The same study without the sweep."""
    return Views(study_dirs[0], study_dirs[0].parent / "cards")


def _same(a: Any, b: Any) -> bool:
    """Equal values, NaN and None (JSON's NaN) counted equal, floats to 1e-12."""
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or (isinstance(b, float) and math.isnan(b))
    if isinstance(a, int | float | np.number) and isinstance(b, int | float | np.number):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)
    return str(a) == str(b)


def _card_matches_report(views: Views, field: str, keys: list[str]) -> int:
    """Every record of every card's `field` equals the report's row of that judge (where the report's table
    names judges; the latent tables name raters) and `keys`; the number of records checked."""
    table = views.tables[field].astype({k: str for k in keys})
    checked = 0
    for judge, made in views.cards.items():
        mine = table.loc[table["judge"].astype(str) == judge] if "judge" in table else table
        for record in made[field]:
            wanted = pd.Series(record)[keys].astype(str)
            match = mine.loc[(mine[keys] == wanted).all(axis=1)]
            assert len(match) == 1, (judge, record)
            row = match.iloc[0]
            for col, value in record.items():
                assert _same(row[col], value), (field, judge, col, row[col], value)
            checked += 1
    return checked


def test_the_study_has_two_judges_in_both_modes_and_experts(views: Views) -> None:
    assert sorted(views.cards) == ["qwen_a", "qwen_b"]
    assert all(c["modes"] == ["comparative", "independent"] for c in views.cards.values())
    assert views.humans["annotator"].nunique() >= 2


def test_human_agreement_is_one_value_in_report_leaderboard_and_card(views: Views) -> None:
    assert _card_matches_report(views, "human_agreement", ["mode", "dimension"]) == 12
    board = views.tables["leaderboard"].set_index("judge")
    for row in views.tables["human_agreement"].itertuples(index=False):
        assert _same(board.loc[row.judge, f"kappa_w:{row.dimension} [{row.mode}]"], row.kappa_w)


def test_latent_competence_is_one_value_in_report_and_card(views: Views) -> None:
    judges = _card_matches_report(views, "latent_competence", ["method", "mode", "rater"])
    assert judges == 2 * 2 * 3  # judges × modes × (Dawid-Skene, majority vote, MACE)


def test_parse_rate_and_latency_are_one_value_in_leaderboard_and_card(views: Views) -> None:
    board = views.tables["leaderboard"].set_index("judge")
    for judge, made in views.cards.items():
        assert _same(board.loc[judge, "parse_rate"], made["parse_rate"])
        assert _same(board.loc[judge, "median_latency_s"], made["latency_s"]["median"])
    assert min(c["parse_rate"] for c in views.cards.values()) < 1.0  # the server's unparseable answers


@pytest.mark.parametrize(
    ("field", "keys"),
    [
        ("self_consistency", ["mode", "dimension"]),
        ("length_bias", ["mode", "dimension"]),
        ("self_preference", ["mode", "dimension", "family"]),
        ("position_bias", ["dimension", "position"]),
    ],
)
def test_bias_and_consistency_are_one_value_in_report_and_card(
    views: Views, field: str, keys: list[str]
) -> None:
    if field not in views.tables or views.tables[field].empty:
        assert all(c[field] == [] for c in views.cards.values())
        return
    assert _card_matches_report(views, field, keys) > 0


def test_paper_tables_show_the_reports_values(views: Views) -> None:
    best = views.tables["best_of_k_scores"]
    shown = views.paper["best_five"].frame.set_index(["mode", "generator"])
    for row in best.loc[~best["judge"].str.contains(r"\(")].itertuples(index=False):
        cell = shown.loc[(row.mode, row.source), f"{row.judge} {row.dimension}"]
        assert cell == paper_tables.mean_sd(row.mean, row.sd) + f" ({row.n})"
    rates = views.tables["winrate"]
    wins = views.paper["win_tie"].frame.set_index(["mode", "generator"])
    for row in rates.itertuples(index=False):
        cell = wins.loc[(row.mode, row.source), f"{row.judge} {row.dimension}"]
        assert cell == f"{100 * row.win:.1f} / {100 * row.tie:.1f} ({row.n})"


def test_viewer_scores_and_human_distance_are_the_cores(views: Views) -> None:
    """The viewer's candidate mean score is the report's candidate score, and its judge–human distance is
    the distance to the same human consensus the report and the card compare with."""
    with Study(views.root, views.humans) as study:
        shown = study._cursor().execute(DISAGREEMENT_SQL.format(where="")).fetchdf()
    keys = ["judge", "mode", "instance_id", "candidate_id", "dimension"]
    core = candidate_scores(study_candidates(views.results)).astype({k: str for k in keys})
    both = (
        shown.dropna(subset=["score"])
        .astype({k: str for k in keys})
        .merge(core, on=keys, suffixes=("_view", ""))
    )
    assert len(both) == len(core) > 0
    assert both["score_view"].to_numpy() == pytest.approx(both["score"].to_numpy(), abs=1e-12)
    human = consensus_scores(views.humans)
    paired = both.merge(human, on=["instance_id", "candidate_id", "dimension"], suffixes=("_view", ""))
    assert len(paired) > 0 and paired["judge_human"].notna().all()
    if "human_view" in paired:  # the viewer's experts' mean column is the same consensus
        assert paired["human_view"].to_numpy(dtype=float) == pytest.approx(
            paired["human"].to_numpy(dtype=float)
        )
    assert paired["judge_human"].to_numpy() == pytest.approx(
        (paired["score"] - paired["human"]).abs().to_numpy()
    )


@pytest.mark.parametrize(
    ("field", "keys", "q"),
    [
        ("corrected_estimates", ["mode", "source", "dimension", "quantity"], None),
        ("calibration", ["mode", "dimension"], None),
        ("mode_shift", ["source", "dimension"], "mcnemar_p_q"),
        ("self_preference", ["mode", "dimension", "family"], "p_q"),
    ],
)
def test_inference_is_one_value_in_report_and_card(
    views: Views, field: str, keys: list[str], q: str | None
) -> None:
    """Issue 27: the card's corrected estimates, calibration error before / after and q-values (over the
    report's whole family of tests) are the report's."""
    if field == "self_preference" and views.tables[field].empty:
        pytest.skip("no generator of a judge's own family in the sample")
    assert _card_matches_report(views, field, keys) > 0
    if q is not None:
        assert all(q in r for c in views.cards.values() for r in c[field])
        assert views.tables[field][q].notna().any()


def test_paper_corrected_estimates_show_the_reports_values(views: Views) -> None:
    table = views.tables["corrected_estimates"]
    shown = views.paper["corrected_estimates"].frame
    assert len(shown) == len(table) > 0
    for (_, row), (_, cell) in zip(table.iterrows(), shown.iterrows(), strict=True):
        assert cell["corrected"] == paper_tables._estimate(
            row["corrected"], row["corrected_lo"], row["corrected_hi"], row["quantity"]
        )
        assert cell["judge only"] == paper_tables._estimate(
            row["judge_only"], row["judge_only_lo"], row["judge_only_hi"], row["quantity"]
        )


def test_cards_carry_a_null_range_for_each_bias_field(views: Views) -> None:
    """Item 6: position, length, mode shift and human agreement each have ranges on the sample's cards
    (self-preference only where a generator shares the judge's family), each range around a finite value."""
    for made in views.cards.values():
        flags = pd.DataFrame(made["flags"])
        assert {"position_bias", "mode_shift", "human_agreement"} <= set(flags["field"])
        ranged = flags.dropna(subset=["null_lo", "null_hi"])  # an untested row says why in `note` instead
        assert (ranged["null_lo"] <= ranged["null_hi"]).all() and (flags["note"].notna()).all()
        md = card.card_markdown(made)
        assert "## Flags" in md and "- flags: " in md


def test_the_study_has_a_robustness_sweep(views: Views) -> None:
    kinds = views.results.assign(p=robustness.perturbation_names(views.results["perturbation"]))
    shown = kinds.groupby("p")["mode"].agg(lambda m: sorted(set(m.astype(str))))
    assert shown.to_dict() == {
        "none": ["comparative", "independent"],
        "padding": ["comparative", "independent"],
        "order": ["comparative"],
    }
    for made in views.cards.values():
        rows = pd.DataFrame(made["robustness"])
        assert {(r.mode, r.perturbation) for r in rows.itertuples()} == {
            ("independent", "padding"),
            ("comparative", "padding"),
            ("comparative", "order"),
        }
        assert (
            rows["abs_shift"] if "abs_shift" in rows else rows["shift"].abs()
        ).max() > 0  # padding moved a score


def test_robustness_is_one_value_on_the_card_and_in_the_robustness_table(
    views: Views, tmp_path: Path
) -> None:
    """The card's `robustness` records are the rows of `python -m analysis.robustness`'s robustness.csv (same
    bootstrap size and seed), and every row of that table is on its judge's card."""
    assert robustness.main([str(views.root), "--out", str(tmp_path), "--n-boot", str(N_BOOT)]) == 0
    table = pd.read_csv(tmp_path / "robustness.csv", keep_default_na=False, na_values=[""])
    keys = ["judge", "mode", "perturbation", "dimension"]
    table = table.astype({k: str for k in keys})
    checked = 0
    for judge, made in views.cards.items():
        for record in made["robustness"]:
            match = table.loc[(table[keys] == pd.Series({**record, "judge": judge})[keys]).all(axis=1)]
            assert len(match) == 1, (judge, record)
            for col, value in record.items():
                assert _same(match.iloc[0][col], value), ("robustness", judge, col, match.iloc[0][col], value)
            checked += 1
    assert checked == len(table) == 2 * 3 * 3  # judges × (mode, perturbation) × dimensions
    assert table["flip_rate"].notna().all() and table["n"].gt(0).all()


def test_the_robustness_baseline_is_the_studys_scores_and_verdicts(views: Views) -> None:
    """Against its `none` run a `none` run moves nothing: the robustness table of the study's own rows tagged
    as a perturbation has shift 0 and flip rate 0, so its baseline scores and verdicts (same-prompt reference)
    are the study's in both modes."""
    study = robustness.unperturbed(views.results)
    again = pd.concat([study, study.assign(perturbation="padding")], ignore_index=True)
    table = robustness.robustness_table(again, n_boot=N_BOOT)
    assert set(table["mode"]) == {"comparative", "independent"}
    assert (table["shift"] == 0).all() and (table["flip_rate"] == 0).all()


def test_viewer_counts_the_perturbed_rows_the_robustness_table_reads(views: Views) -> None:
    """The viewer lists each item's perturbed rows apart (`perturbed`), by the spelling the robustness table
    reads (`perturbation_names`): per item × judge × mode × dimension, the count of rows not `none`."""
    with Study(views.root, views.humans) as study:
        shown = study._cursor().execute(DISAGREEMENT_SQL.format(where="")).fetchdf()
    keys = ["judge", "mode", "instance_id", "candidate_id", "dimension"]
    rows = views.results.assign(moved=robustness.perturbation_names(views.results["perturbation"]) != "none")
    core = rows.astype({k: str for k in keys}).groupby(keys)["moved"].sum().rename("core").reset_index()
    both = shown.astype({k: str for k in keys}).merge(core, on=keys, how="outer", indicator=True)
    assert (both["_merge"] == "both").all() and both["perturbed"].sum() > 0
    assert both["perturbed"].astype(int).tolist() == both["core"].astype(int).tolist()


def _frame_same(a: pd.DataFrame, b: pd.DataFrame, what: str) -> None:
    assert list(a.columns) == list(b.columns) and len(a) == len(b), what
    for col in a.columns:
        for x, y in zip(a[col].tolist(), b[col].tolist(), strict=True):
            assert _same(x, y), (what, col, x, y)


def test_the_sweep_changes_none_of_the_studys_other_values(views: Views, plain: Views) -> None:
    """The perturbed rows are left to robustness: every report table and every card field but `robustness`
    is the same with and without the sweep, except what counts every call (perturbed ones too, as their
    glossary says): the overview's runs, the leaderboard's judgments, parse rate and latency (median and time
    per 1,000), the card's rows, parse rate and latency."""
    assert set(views.tables) == set(plain.tables) and len(plain.tables) > 20
    for key in set(plain.tables) - {"overview", "leaderboard"}:
        _frame_same(plain.tables[key], views.tables[key], key)
    runs = views.tables["overview"].set_index("run_id").loc[plain.tables["overview"]["run_id"]].reset_index()
    _frame_same(plain.tables["overview"], runs, "overview")
    board = [
        c
        for c in plain.tables["leaderboard"]
        if c not in ("judgments", "parse_rate", "median_latency_s", "time_per_1k_s")
    ]
    assert any(c.startswith("kappa_w:") for c in board)
    _frame_same(plain.tables["leaderboard"][board], views.tables["leaderboard"][board], "leaderboard")
    calls = {"rows", "parse_rate", "latency_s", "robustness", "notes", "completeness"}  # banner: every call
    for judge, made in plain.cards.items():
        swept = views.cards[judge]
        for field, value in made.items():
            if field not in calls:
                assert swept[field] == value, (judge, field)
        assert made["robustness"] == [] and swept["robustness"]
        assert [n for n in made["notes"] if not n.startswith("robustness:")] == swept["notes"]
        assert swept["rows"] > made["rows"]
