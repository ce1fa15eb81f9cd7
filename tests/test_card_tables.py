"""The cards compute only the tables they read (issue 35, item 4): the same values as when every table is
computed, the q-values included (a field's p-values are corrected with their whole family)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.card.build import card_tables
from analysis.load.collect import load_results
from analysis.tables import registry
from analysis.tables.declarations import card_specs, p_columns, p_families
from analysis.tables.registry import StudyInputs
from tests.support.study_folders import DIMENSIONS, sample_candidates, write_fake_run


def _score(judge: str, cand: str, dim: str, k: int) -> float:
    """A judge that varies with the candidate, the dimension and the sample (never a constant table)."""
    return float((sum(map(ord, judge + cand + dim)) + k) % 4)


def test_card_tables_are_the_fields_their_test_families_and_the_readers_of_all() -> None:
    keys = card_tables()
    assert {s.key for s in card_specs()} <= keys
    assert {"latent_duplicates", "multiple_testing"} <= keys  # the notes; the q-values
    families = p_families()
    for key in keys & set(p_columns()):  # every table corrected together with a field's is computed too
        partners = {k for k in p_columns() if families.get(k, k) == families.get(key, key)}
        assert partners <= keys, (key, partners - keys)
    assert not keys & {"alignment", "winrate_combined", "score_agreement", "overview"}  # report-only


def test_the_card_subset_gives_the_values_of_every_table(tmp_path: Path) -> None:
    root = tmp_path / "multirun"
    write_fake_run(root / "a1", "judge-a", "independent", _score, n_samples=2)
    write_fake_run(root / "a2", "judge-a", "comparative", _score, n_samples=2)
    write_fake_run(root / "b1", "judge-b", "independent", _score, n_samples=2)
    write_fake_run(root / "b2", "judge-b", "comparative", _score, n_samples=2)
    humans = pd.DataFrame(
        [
            (a, inst, cand, src, dim, (len(cand) + len(dim) + i) % 4)
            for i, a in enumerate(("h1", "h2", "h3"))
            for inst, cand, src, _ in sample_candidates()
            for dim in DIMENSIONS
        ],
        columns=["annotator", "instance_id", "candidate_id", "source", "dimension", "score"],
    )
    results = load_results(root)

    def inputs() -> StudyInputs:
        return StudyInputs(results, humans, n_boot=20, seed=3, n_null=10)

    every = registry.compute_tables(inputs(), report_only=False)
    subset = registry.compute_tables(inputs(), report_only=False, keys=card_tables())
    assert set(subset) == set(every) & card_tables()
    assert set(every) - set(subset), "the study has report-only tables the cards now skip"
    assert any(k.endswith("_q") for k in subset["mode_shift"]), "a field with q-values is compared"
    summaries = {s.key for s in registry.REGISTRY if s.reads_all}  # of the tables present: not card fields
    assert not summaries & {s.key for s in card_specs()}
    for key in set(subset) - summaries:
        pd.testing.assert_frame_equal(subset[key], every[key], obj=key)
