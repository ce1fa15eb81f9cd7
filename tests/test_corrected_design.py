"""Corrected estimates valid by design (issue 32, items 1-2; issue 34, breaks 3 and 6).

Planted truths: coverage of the corrected CI under random, stratified and disagreement-weighted designs; the
active-inference form against a hand computation; through the command line: an export records its design
and inclusion probabilities, ingest carries them, the report corrects only under a known design, a perfect
annotator's corrected win rate is the win table's, and a sheet of another export or a two-choice Label
Studio answer is refused in one line.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.annotate import select as annotate
from analysis.load.collect import load_humans, load_results
from analysis.load.synthetic import synthetic_humans, synthetic_results
from analysis.stats import corrected
from analysis.stats.corrected import active_estimate, active_estimates, estimate
from analysis.stats.study import study_candidates
from tests.support.report_run import report_without_figures
from tests.support.study_folders import write_fake_run

R, N, TRUTH = 200, 1500, 0.35


def _truth(cand: str, dim: str) -> int:
    """The planted true score of a candidate on a dimension (0..3)."""
    return int(hashlib.sha256(f"{cand}|{dim}".encode()).hexdigest(), 16) % 4


def _agreeing(judge: str, cand: str, dim: str, k: int) -> float:
    return float(_truth(cand, dim))


def _off(judge: str, cand: str, dim: str, k: int) -> float:
    """One point above the truth on a third of the candidates (capped at the scale's top)."""
    t = _truth(cand, dim)
    return float(min(3, t + 1)) if int(hashlib.sha256(cand.encode()).hexdigest(), 16) % 3 == 0 else float(t)


def planted(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """R replicates of N units: true wins at rate TRUTH; a judge that errs (flips the verdict) with a
    probability rising with a fixed per-unit disagreement d in [0, 1] (biased: its win rate is not TRUTH)."""
    rng = np.random.default_rng(seed)
    d = np.linspace(0.0, 1.0, N)
    y = (rng.random((R, N)) < TRUTH).astype(float)
    wrong = rng.random((R, N)) < 0.5 * d
    return y, np.where(wrong, 1.0 - y, y), d


def _covered(lo: np.ndarray, hi: np.ndarray) -> float:
    return float(((lo <= TRUTH) & (TRUTH <= hi)).mean())


def test_random_design_ppi_covers_and_the_judge_alone_does_not() -> None:
    y, yhat, _ = planted(1)
    rng = np.random.default_rng(2)
    hits = judge_hits = 0
    for r in range(R):
        labelled = np.zeros(N, dtype=bool)
        labelled[rng.choice(N, size=200, replace=False)] = True
        got = estimate(y[r, labelled], yhat[r, labelled], yhat[r, ~labelled])
        hits += got.corrected[1] <= TRUTH <= got.corrected[2]
        judge_hits += got.judge_only[1] <= TRUTH <= got.judge_only[2]
    assert hits / R >= 0.93
    assert judge_hits / R < 0.5


def test_stratified_design_weighted_estimate_covers() -> None:
    """Strata by disagreement (low half at rate 0.05, high half at 0.4), a simple random sample in each."""
    y, yhat, d = planted(3)
    rng = np.random.default_rng(4)
    keys = rng.random((R, N))
    labelled = np.zeros((R, N), dtype=bool)
    pi = np.zeros(N)
    for stratum, rate in ((d < 0.5, 0.05), (d >= 0.5, 0.4)):
        size = int(stratum.sum())
        take = round(rate * size)
        ranks = keys[:, stratum].argsort(axis=1).argsort(axis=1)
        labelled[:, stratum] = ranks < take
        pi[stratum] = take / size
    point, lo, hi = active_estimates(y, yhat, labelled, np.broadcast_to(pi, (R, N)))
    assert _covered(lo, hi) >= 0.93
    # read unweighted (as if random), the same labels over-represent the hard units: the estimate is off
    naive = np.array(
        [estimate(y[r, labelled[r]], yhat[r, labelled[r]], yhat[r, ~labelled[r]]) for r in range(R)]
    )
    naive_cover = np.mean([e.corrected[1] <= TRUTH <= e.corrected[2] for e in naive])
    assert naive_cover < _covered(lo, hi)


def test_disagreement_weighted_design_covers() -> None:
    """Poisson sampling with π rising with the disagreement (active inference's own design)."""
    y, yhat, d = planted(5)
    pi = np.broadcast_to(0.03 + 0.3 * d, (R, N))
    labelled = np.random.default_rng(6).random((R, N)) < pi
    point, lo, hi = active_estimates(y, yhat, labelled, pi)
    assert _covered(lo, hi) >= 0.93
    human = active_estimates(y, yhat, labelled, pi, lam=0.0)
    assert _covered(human[1], human[2]) >= 0.93
    assert np.median(hi - lo) < np.median(human[2] - human[1])  # the judge narrows the experts' CI


def test_active_estimate_matches_a_hand_computation() -> None:
    y = np.array([1.0, 0.0, np.nan, np.nan])
    yhat = np.array([1.0, 1.0, 0.0, 1.0])
    labelled = np.array([True, True, False, False])
    pi = np.array([0.5, 0.25, 0.5, 0.5])
    # λ = 1: terms 1 + 2·(1 − 1) = 1, 1 + 4·(0 − 1) = −3, 0, 1; mean −0.25; sd √(10.75 / 3)
    point, lo, hi = active_estimate(y, yhat, labelled, pi, lam=1.0)
    half = 1.959963984540054 * np.sqrt(10.75 / 3) / 2
    assert (point, lo, hi) == pytest.approx((-0.25, -0.25 - half, -0.25 + half))
    # λ = 0: Horvitz–Thompson, terms 2, 0, 0, 0
    assert active_estimate(y, yhat, labelled, pi, lam=0.0)[0] == pytest.approx(0.5)
    # tuned: a = (2, 0, 0, 0), b = ŷ(1 − ξ/π) = (−1, −3, 0, 1); λ = −cov(a, b) / var(b) = 0.5 / 8.75
    lam = 0.5 / 8.75
    assert active_estimate(y, yhat, labelled, pi)[0] == pytest.approx(np.mean([2 - lam, -3 * lam, 0, lam]))
    # every unit labelled with certainty: the experts' own mean
    assert active_estimate(np.array([1.0, 0, 1, 1]), yhat, np.ones(4, bool), np.ones(4))[0] == pytest.approx(
        0.75
    )


# ---- through the command line ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("design") / "multirun"
    write_fake_run(root / "0_judge-a_independent_novelty", "judge-a", "independent", _agreeing)
    write_fake_run(root / "1_judge-b_independent_novelty", "judge-b", "independent", _off)
    return root


def _fill(out: Path, tmp: Path, name: str) -> Path:
    """The export's sheet filled by a perfect annotator (the planted truth on every row)."""
    key = pd.read_csv(out / "key.csv", dtype=str, keep_default_na=False)
    sheet = pd.read_csv(out / "sheet.csv", dtype=str, keep_default_na=False)
    truth = {
        i: _truth(c, d) for i, c, d in zip(key["item"], key["candidate_id"], key["dimension"], strict=True)
    }
    sheet["annotator"] = "perfect"
    sheet["score"] = [str(truth[i]) for i in sheet["item"]]
    path = tmp / f"{name}.csv"
    sheet.to_csv(path, index=False)
    return path


def _ingest(sheet: Path, out: Path, labels: Path) -> int:
    return annotate.main(["ingest", str(sheet), "--key", str(out / "key.csv"), "--out", str(labels)])


def _report(study: Path, out: Path, *extra: str) -> int:
    """The report command in this process, its figures undrawn (these tests read its tables and text)."""
    return report_without_figures([str(study), "--out", str(out), "--n-boot", "20", *extra])


def _err_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    return err.splitlines()[-1]


def test_random_export_records_its_design_and_a_perfect_annotator_gives_the_win_table(
    study: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "random"
    assert annotate.main(["export", str(study), "--out", str(out), "--by", "random", "--n", "18"]) == 0
    key = pd.read_csv(out / "key.csv")
    assert set(key["design"]) == {"random"} and (key["inclusion_prob"] == 1.0).all()  # 18 of 18 units
    labels = tmp_path / "humans.csv"
    assert _ingest(_fill(out, tmp_path, "done"), out, labels) == 0
    humans = pd.read_csv(labels)
    assert set(humans["design"]) == {"random"} and (humans["inclusion_prob"] == 1.0).all()
    assert _report(study, tmp_path / "report", "--humans", str(labels)) == 0
    tables = tmp_path / "report" / "tables"
    design = pd.read_csv(tables / "corrected_design.csv")
    assert design["design"].tolist() == ["random"] and design["corrected"][0].startswith("computed: PPI++")
    estimates = pd.read_csv(tables / "corrected_estimates.csv")
    wins = estimates.loc[estimates["quantity"] == "win_rate"]
    table = pd.read_csv(tables / "winrate.csv")
    joined = wins.merge(table, on=["judge", "mode", "source", "dimension"])
    assert len(joined) == len(table) > 0
    a = joined.loc[joined["judge"] == "judge-a"]  # the judge the perfect annotator agrees with
    assert np.allclose(a["corrected"], a["win"]) and np.allclose(a["judge_only"], a["win"])
    for col in ("judge_only", "human_only", "corrected"):
        assert wins[[col, f"{col}_lo", f"{col}_hi"]].stack().between(0, 1).all(), col
    assert (wins["n_no_majority"] == 0).all()  # one annotator: always a strict majority


def test_stratified_export_has_known_probabilities_and_gives_weighted_estimates(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "strat"
    argv = ["export", str(study), "--out", str(out), "--by", "stratified", "--rates", "0.25,0.75"]
    assert annotate.main(argv) == 0
    key = pd.read_csv(out / "key.csv")
    assert set(key["design"]) == {"stratified"}
    units = key.drop_duplicates(["instance_id", "dimension"])
    per_stratum = units.groupby("stratum")["inclusion_prob"].agg(["first", "nunique", "size"])
    assert (per_stratum["nunique"] == 1).all()
    # π = n_h / N_h with N_h = 9 units per stratum (6 instances × 3 dimensions cut in two)
    assert per_stratum["first"].tolist() == pytest.approx([2 / 9, 7 / 9])  # round(0.25 · 9), round(0.75 · 9)
    assert per_stratum["size"].tolist() == [2, 7]
    labels = tmp_path / "humans.csv"
    assert _ingest(_fill(out, tmp_path, "done"), out, labels) == 0
    humans, cands = load_humans(labels), study_candidates(load_results(study), "reference")
    assert (humans["inclusion_prob"] > 0).all()  # carried by ingest, read by the report's loader
    design = corrected.design_table(cands, humans)
    assert design["corrected"][0] == "computed: inverse-probability weighted (active inference)"
    table = corrected.corrected_estimates(cands, humans)
    assert set(table["design"]) == {"stratified"} and table["corrected"].notna().any()


def test_top_k_labels_and_undeclared_labels_give_no_corrected_estimate(
    study: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "topk"
    assert annotate.main(["export", str(study), "--out", str(out), "--by", "entropy", "--n", "30"]) == 0
    labels = tmp_path / "humans.csv"
    assert _ingest(_fill(out, tmp_path, "done"), out, labels) == 0
    assert set(pd.read_csv(labels)["design"]) == {"rule:entropy"}
    assert _report(study, tmp_path / "report", "--humans", str(labels)) == 0
    tables = tmp_path / "report" / "tables"
    why = pd.read_csv(tables / "corrected_design.csv")["corrected"][0]
    assert why.startswith(
        "not computed: items chosen by a rule without inclusion probabilities (entropy top-k)"
    )
    assert pd.read_csv(tables / "corrected_estimates.csv").empty
    assert "not computed: items chosen by a rule" in (tmp_path / "report" / "report.md").read_text()
    capsys.readouterr()
    # a declaration never overrides the design the file records
    assert _report(study, tmp_path / "r2", "--humans", str(labels), "--humans-design", "random") == 2
    assert "records its own design (rule:entropy)" in _err_line(capsys)

    # an expert set collected elsewhere (the shipped sample's humans.csv): undeclared, then declared random
    shipped = Path(__file__).resolve().parents[1] / "data" / "sample" / "humans.csv"
    cands = study_candidates(load_results(study), "reference")
    why = corrected.design_table(cands, load_humans(shipped))["corrected"][0]
    assert why.startswith("not computed: the labels file records no design")
    assert _report(study, tmp_path / "r4", "--humans", str(shipped), "--humans-design", "random") == 0
    table = pd.read_csv(tmp_path / "r4" / "tables" / "corrected_estimates.csv")
    assert set(table["design"]) == {"random"} and table["corrected"].notna().all()
    assert (table["n_no_majority"] >= 0).all()


def test_a_second_export_into_one_folder_and_a_sheet_of_another_export_are_refused(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 34, break 3."""
    first, other = tmp_path / "a", tmp_path / "b"
    assert annotate.main(["export", str(study), "--out", str(first), "--by", "disagreement", "--n", "8"]) == 0
    key = (first / "key.csv").read_bytes()
    capsys.readouterr()
    again = ["export", str(study), "--out", str(first), "--by", "entropy", "--n", "8", "--seed", "5"]
    assert annotate.main(again) == 2
    assert "key.csv exists" in _err_line(capsys)
    assert (first / "key.csv").read_bytes() == key
    argv = ["export", str(study), "--out", str(other), "--by", "entropy", "--n", "8", "--seed", "5"]
    assert annotate.main(argv) == 0
    capsys.readouterr()
    sheet = _fill(first, tmp_path, "done-a")
    assert _ingest(sheet, other, tmp_path / "h.csv") == 2  # the sheet of export a with the key of b
    line = _err_line(capsys)
    assert "done-a.csv: row " in line and "a sheet of another export?" in line
    assert not (tmp_path / "h.csv").exists()


def test_a_label_studio_answer_with_two_choices_is_refused(
    study: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 34, break 6: the first of two choices was taken as the score."""
    out = tmp_path / "ls"
    assert annotate.main(["export", str(study), "--out", str(out), "--by", "disagreement", "--n", "3"]) == 0
    tasks = json.loads((out / "labelstudio_tasks.json").read_text())
    for n, task in enumerate(tasks):
        choices = ["1", "2"] if n == 1 else ["1"]
        result = [{"from_name": "score", "to_name": "text", "type": "choices", "value": {"choices": choices}}]
        task["annotations"] = [{"completed_by": 3, "was_cancelled": False, "result": result}]
    (tmp_path / "export.json").write_text(json.dumps(tasks))
    capsys.readouterr()
    assert _ingest(tmp_path / "export.json", out, tmp_path / "h.csv") == 2
    line = _err_line(capsys)
    assert "task 2, annotation 1: choices: 2 choices (1, 2) for one item" in line


def test_a_group_with_nothing_to_correct_is_a_row_that_says_why_and_splits_are_counted() -> None:
    study = synthetic_results(n_instances=8, seed=4)
    humans = synthetic_humans(study, seed=5)
    humans = humans.loc[humans["source"] != "broad_gen"]  # the experts never rated broad_gen's candidates
    two = humans.loc[humans["annotator"].isin(["h1", "h2"])]  # two annotators: a split has no strict majority
    cands = study_candidates(study, "reference")
    table = corrected.corrected_estimates(cands, corrected.declare_design(two, "random", "test"))
    broad = table.loc[table["source"] == "broad_gen"]
    assert len(broad) and (broad["n_labeled"] == 0).all() and broad["corrected"].isna().all()
    assert (
        broad["why_no_estimate"].str.startswith("nothing to correct: no unit of this group was rated").all()
    )
    narrow = table.loc[(table["source"] == "narrow_gen") & (table["quantity"] == "win_rate")]
    assert narrow["corrected"].notna().all() and narrow["n_no_majority"].sum() > 0
    assert narrow[["corrected", "corrected_lo", "corrected_hi"]].stack().between(0, 1).all()
