"""The study's tables score unperturbed rows only (review 11, F2): a candidate scored 3 unperturbed and 1 under
`padding` is 3 in the report and the card, as in the viewer, while the card's robustness field still sees the
padded rows (shift 1 - 3 = -2)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import latent
from analysis.annotate import select as annotate
from analysis.card import build as card
from analysis.report import build as report
from analysis.robustness import unperturbed
from tests.support.study_folders import write_fake_run


def test_unperturbed_keeps_none_and_empty_like_the_viewer() -> None:
    kinds = ["none", "", "  ", None, np.nan, " none ", "padding", "injection"]
    frame = pd.DataFrame({"perturbation": kinds, "score": range(len(kinds))})
    assert unperturbed(frame)["score"].tolist() == [0, 1, 2, 3, 4, 5]
    as_category = frame.astype({"perturbation": "category"})
    assert unperturbed(as_category)["score"].tolist() == [0, 1, 2, 3, 4, 5]
    without = frame.drop(columns="perturbation")
    assert unperturbed(without) is without


def _study(root: Path, judges: tuple[str, ...] = ("j",)) -> Path:
    """Independent mode: generated candidates 3 and the reference 2 unperturbed; under padding the
    generated candidates 1 (the reference 2)."""
    for judge in judges:
        for kind, gen in (("none", 3.0), ("padding", 1.0)):
            _run(root / f"{judge}_{kind}", judge, kind, gen)
    return root


def _run(folder: Path, judge: str, kind: str, gen: float) -> None:
    """One run of `judge`: generated candidates `gen`, the reference 2, every row tagged `kind`."""
    write_fake_run(folder, judge, "independent", lambda j, c, d, k: gen)
    rows = pd.read_csv(folder / "results.csv")
    rows["score"] = np.where(rows["source"] == "reference", 2.0, gen)
    rows.assign(perturbation=kind).to_csv(folder / "results.csv", index=False)


def test_report_scores_the_unperturbed_candidates(tmp_path, capsys) -> None:
    root = _study(tmp_path / "study")
    assert report.main([str(root), "--n-boot", "20", "--out", str(tmp_path / "rep")]) == 0
    tables = tmp_path / "rep" / "tables"
    summary = pd.read_csv(tables / "score_summary.csv").set_index("source")["mean"]
    assert summary["reference"].tolist() == pytest.approx([2.0] * 3)
    assert summary.drop("reference").tolist() == pytest.approx([3.0] * (len(summary) - 3))  # pooled: 2.0
    assert set(pd.read_csv(tables / "winrate.csv")["win"]) == {1.0}  # 3 beats 2; pooled 2 vs 2 tied
    assert set(pd.read_csv(tables / "overview.csv")["run_id"]) == {"j_none", "j_padding"}  # calls: all runs
    n_padded = len(pd.read_csv(root / "j_padding" / "results.csv"))
    assert f"note: {n_padded} perturbed rows" in capsys.readouterr().err


def test_card_robustness_still_reads_the_padded_rows(tmp_path, capsys) -> None:
    root = _study(tmp_path / "study")
    results = report.load_results(root)
    base = results.loc[results["perturbation"] == "none"]
    humans = base[["instance_id", "candidate_id", "source", "dimension", "score"]].assign(annotator="h")
    tables = card.study_tables(results, humans, n_boot=20, seed=0)
    assert set(tables["human_agreement"]["percent"]) == {1.0}  # the human's 3 and 2; pooled, gen 2 vs 3
    robust = tables["robustness"]
    assert robust["perturbation"].unique().tolist() == ["padding"]
    assert robust["shift"].tolist() == pytest.approx([-2.0] * len(robust))  # 1 - 3 per generated candidate
    assert robust["flip_rate"].tolist() == pytest.approx([1.0] * len(robust))  # win vs 2 becomes a loss
    assert card.main([str(root), "--n-boot", "20", "--out", str(tmp_path / "cards")]) == 0
    assert "perturbed rows" in capsys.readouterr().err
    written = json.loads((tmp_path / "cards" / "j.json").read_text())
    assert written["robustness"] and {r["perturbation"] for r in written["robustness"]} == {"padding"}


def test_latent_tables_leave_the_perturbed_rows_out(tmp_path) -> None:
    results = report.load_results(_study(tmp_path / "study", ("j", "k", "l")))
    rates = latent.latent_tables(results, n_boot=20)["latent_winrate"]
    assert set(rates["win"]) == {1.0}  # every rater: 3 beats the reference's 2 (pooled: 2 vs 2, a tie)


def test_annotate_uncertainty_leaves_the_perturbed_rows_out(tmp_path) -> None:
    root = _study(tmp_path / "study")  # j: 3 unperturbed, 1 padded
    _run(root / "k_none", "k", "none", 3.0)  # k: 3, never perturbed
    table = annotate.uncertainty(report.load_results(root))
    generated = table.loc[table["source"] != "reference", "disagreement"]
    assert len(generated) and set(generated) == {0.0}  # j 3 vs k 3; pooled, j's 2 vs k's 3 made 1


def test_a_spaced_none_baseline_is_the_baseline_for_robustness_too(tmp_path) -> None:
    """Review 12, F2: " none " was unperturbed to the report (left out of nothing) but no baseline for
    analysis.robustness, so the padded rows the report left to it were measured nowhere."""
    from analysis.load.collect import load_results
    from analysis.robustness import robustness_table

    root = tmp_path / "study"
    _run(root / "j_none", "j", " none ", 3.0)
    _run(root / "j_padding", "j", "padding", 1.0)
    table = robustness_table(load_results(root), n_boot=20)
    assert set(table["perturbation"]) == {"padding"} and table["shift"].tolist() == pytest.approx(
        [-2.0] * len(table)
    )


def test_a_run_without_the_column_is_a_none_of_its_own_study(tmp_path) -> None:
    """Review 13: an ordinary run of j (another study, no perturbation column, generated candidates 0) next to a
    robustness study of j (none 2, padding 3): the plain run read as `none` only in robustness, after the
    runs were told apart, so it joined the baseline (shift 2.0 for 1.0). Normalised at load, it is its own
    rater (j@plain) and the padding shift is +1."""
    from analysis.load.collect import load_results
    from analysis.robustness import robustness_table

    def run(folder: Path, kind: str | None, gen: float, study: str) -> None:
        write_fake_run(folder, "j", "independent", lambda j, c, d, k: gen, study_id=study)
        rows = pd.read_csv(folder / "results.csv")
        rows["score"] = np.where(rows["source"] == "reference", 1.0, gen)
        (rows if kind is None else rows.assign(perturbation=kind)).to_csv(folder / "results.csv", index=False)

    root = tmp_path / "s"
    run(root / "plain", None, 0.0, "A")
    run(root / "j_none", "none", 2.0, "B")
    run(root / "j_padding", "padding", 3.0, "B")
    results = load_results(root)
    assert len(set(results["judge"].astype(str))) == 2
    table = robustness_table(results, n_boot=20)
    assert set(table["perturbation"]) == {"padding"} and table["shift"].tolist() == pytest.approx(
        [1.0] * len(table)
    )
