"""Known-value tests for the EchoReview metrics (analysis.echoreview.metrics)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.echoreview.metrics import QUALITY_DIMENSIONS, overall_quality, quality_by_source
from experiments.stages.issue_matching import (
    decisions_frame,
    issue_overlap,
    macro_overlap,
    match_by_embedding,
    match_by_judge,
    matched_pairs,
)


class FakeEmbedder:
    """Fake embedder: fixed 2-D vectors per text."""

    model_name = "fake-2d"

    def __init__(self, table: dict[str, tuple[float, float]]) -> None:
        self.table = table

    def encode(self, sentences: Sequence[str]) -> np.ndarray:
        return np.array([self.table[s] for s in sentences], dtype=float)


def test_issue_overlap_on_issue_sets_issue_example() -> None:
    # the issue's example: 3 human issues, 2 model statements both restating h0 -> E = {h0}
    # O = {h0}, |H ∪ E| = 3 -> overlap 1/3; human-only 2/3; model-only 0/1 (one-to-one matching gave .25, .5)
    r = issue_overlap(["h0", "h1", "h2"], ["e0", "e1"], [(0, 0), (0, 1)])
    assert (r["overlap"], r["human_only"], r["model_only"]) == pytest.approx((1 / 3, 2 / 3, 0.0))
    assert (r["n_human_issues"], r["n_model_issues"], r["n_shared"]) == (3, 1, 1)


def test_issue_overlap_statement_expressing_two_issues_and_unmatched() -> None:
    # H = 3, statements e0..e3; (0,0) (0,1) (1,1) (2,3): e1 expresses h0 and h1, e2 matches nothing
    # E = {h0, h1, h2, new(e2)}: O = 3, |H ∪ E| = 3 + 1 = 4 -> 3/4; human-only 0/3; model-only 1/4
    r = issue_overlap(["h0", "h1", "h2"], ["e0", "e1", "e2", "e3"], [(0, 0), (0, 1), (1, 1), (2, 3)])
    assert (r["overlap"], r["human_only"], r["model_only"]) == pytest.approx((0.75, 0.0, 0.25))


def test_issue_overlap_same_side_links_merge_statements() -> None:
    # two unmatched model statements that restate one point are one model-only issue, not two:
    # H = {h0, h1}; e0 -> h0; e1 ~ e2 (linked), unmatched -> E = {h0, x}: O = 1, |H ∪ E| = 3
    r = issue_overlap(["h0", "h1"], ["e0", "e1", "e2"], [(0, 0)], same_model=[(1, 2)])
    assert (r["overlap"], r["human_only"], r["model_only"]) == pytest.approx((1 / 3, 0.5, 0.5))
    # an unmatched statement linked to a matched one shares its issue; linked human statements are one issue
    r = issue_overlap(["h0", "h1"], ["e0", "e1"], [(0, 0)], same_human=[(0, 1)], same_model=[(0, 1)])
    assert (r["overlap"], r["human_only"], r["model_only"]) == pytest.approx((1.0, 0.0, 0.0))
    assert r["n_human_issues"] == 1


def test_issue_overlap_edge_cases() -> None:
    r = issue_overlap([], ["e0"], [])
    assert math.isnan(r["human_only"]) and r["model_only"] == 1.0 and r["overlap"] == 0.0
    r = issue_overlap([], [], [])
    assert all(math.isnan(r[k]) for k in ("overlap", "human_only", "model_only"))
    with pytest.raises(IndexError):
        issue_overlap(["h0"], ["e0"], [(0, 1)])
    with pytest.raises(IndexError):
        issue_overlap(["h0"], ["e0"], [], same_model=[(0, 1)])


def test_match_by_embedding_records_every_pair() -> None:
    emb = FakeEmbedder({"h0": (1, 0), "h1": (0, 1), "e0": (0.8, 0.6), "e1": (0.6, 0.8)})
    dec = match_by_embedding(["h0", "h1"], ["e0", "e1"], emb, threshold=0.7)
    assert len(dec) == 4
    # cos(h0,e0) = .8 yes; cos(h0,e1) = .6 no; cos(h1,e0) = .6 no; cos(h1,e1) = .8 yes
    assert [d.similarity for d in dec] == pytest.approx([0.8, 0.6, 0.6, 0.8])
    assert matched_pairs(dec) == [(0, 0), (1, 1)]
    assert dec[0].method == "embedding:fake-2d@0.7"
    assert list(decisions_frame(dec).columns) == [
        "human_idx",
        "model_idx",
        "decision",
        "similarity",
        "method",
    ]
    assert match_by_embedding([], ["e0"], emb) == []


def test_match_by_judge_keeps_unscored_out_of_matches() -> None:
    def fake_decide(h: str, m: str) -> bool | None:
        return None if m == "e1" else h[1] == m[1]

    dec = match_by_judge(["h0", "h1"], ["e0", "e1"], fake_decide)
    assert [(d.human_idx, d.model_idx, d.decision) for d in dec] == [
        (0, 0, True),
        (0, 1, None),
        (1, 0, False),
        (1, 1, None),
    ]
    assert matched_pairs(dec) == [(0, 0)]
    r = issue_overlap(["h0", "h1"], ["e0", "e1"], matched_pairs(dec))
    assert r["overlap"] == pytest.approx(1 / 3)  # O = {h0}; e1 model-only: 1 / (2 + 1)


def test_macro_overlap() -> None:
    per_paper = pd.DataFrame(
        {
            "source": ["m"] * 3,
            "overlap": [0.75, 0.25, float("nan")],
            "human_only": [0.0, 0.5, float("nan")],
            "model_only": [0.25, 2 / 3, 1.0],
        }
    )
    out = macro_overlap(per_paper, by=("source",)).iloc[0]
    assert out["overlap"] == pytest.approx(0.5) and out["overlap_n"] == 2  # (.75 + .25)/2, NaN left out
    assert out["model_only"] == pytest.approx((0.25 + 2 / 3 + 1.0) / 3)
    assert out["overlap_lo"] <= 0.5 <= out["overlap_hi"] and out["n_papers"] == 3


def _results() -> pd.DataFrame:
    rows = []
    # review r1 (human): sample 0 dims 6,8,7,9 -> 7.5; sample 1 dims 8,8,8,8 -> 8; sample 2 one unparsed -> dropped
    # overall = (7.5 + 8) / 2 = 7.75.  review r2 (gpt): only sample 0 complete: 4,5,6,5 -> 5.0
    spec: dict[tuple[str, str], list[list[int | None]]] = {
        ("r1", "human"): [[6, 8, 7, 9], [8, 8, 8, 8], [9, None, 9, 9]],
        ("r2", "gpt"): [[4, 5, 6, 5], [None, None, None, None]],
    }
    for (cand, src), samples in spec.items():
        for k, scores in enumerate(samples):
            for dim, s in zip(QUALITY_DIMENSIONS, scores, strict=True):
                rows.append(
                    {
                        "instance_id": "p1",
                        "candidate_id": cand,
                        "source": src,
                        "rubric": "review_quality",
                        "dimension": dim,
                        "sample_idx": k,
                        "score": np.nan if s is None else float(s),
                        "parse_ok": s is not None,
                    }
                )
    # a row of another rubric must be ignored
    rows.append(
        {
            "instance_id": "p1",
            "candidate_id": "r1",
            "source": "human",
            "rubric": "other",
            "dimension": "comprehensiveness",
            "sample_idx": 0,
            "score": 0.0,
            "parse_ok": True,
        }
    )
    # r3: never scored -> NaN, not 0
    rows.append(
        {
            "instance_id": "p2",
            "candidate_id": "r3",
            "source": "gpt",
            "rubric": "review_quality",
            "dimension": "specificity",
            "sample_idx": 0,
            "score": np.nan,
            "parse_ok": False,
        }
    )
    return pd.DataFrame(rows)


def test_overall_quality_per_review() -> None:
    out = overall_quality(_results()).set_index("candidate_id")
    assert out.loc["r1", "overall"] == pytest.approx(7.75) and out.loc["r1", "n_samples"] == 2
    assert out.loc["r1", "n_dropped"] == 1
    assert out.loc["r2", "overall"] == pytest.approx(5.0) and out.loc["r2", "n_samples"] == 1
    assert math.isnan(out.loc["r3", "overall"])
    # spread across runs: r1's complete runs 7.5 and 8 -> min 7.5, max 8, sd |8 - 7.5| / sqrt(2)
    assert (out.loc["r1", "sample_min"], out.loc["r1", "sample_max"]) == (7.5, 8.0)
    assert out.loc["r1", "sample_sd"] == pytest.approx(0.5 / math.sqrt(2))
    assert math.isnan(out.loc["r2", "sample_sd"])  # one run: no spread


def test_quality_by_source() -> None:
    tab = quality_by_source(overall_quality(_results())).set_index("source")
    assert tab.loc["human", "overall"] == pytest.approx(7.75) and tab.loc["human", "n"] == 1
    assert tab.loc["gpt", "overall"] == pytest.approx(5.0) and tab.loc["gpt", "n_unscored"] == 1


def _quality_rows(spec: Sequence[tuple[str, str, int, float]]) -> pd.DataFrame:
    """review_quality rows of p1/c (source gen) by judge j: (mode, run_id, sample_idx, every dimension)."""
    return pd.DataFrame(
        [
            {
                "run_id": run,
                "judge": "j",
                "mode": mode,
                "rubric": "review_quality",
                "prompt_id": f"p1|c|{mode}",
                "instance_id": "p1",
                "candidate_id": "c",
                "source": "gen",
                "dimension": dim,
                "sample_idx": k,
                "score": value,
                "parse_ok": True,
            }
            for mode, run, k, value in spec
            for dim in QUALITY_DIMENSIONS
        ]
    )


def test_overall_quality_is_per_mode_never_pooled_across_modes() -> None:
    # one run, one review judged in two modes: independent samples 4 and 6 -> 5; comparative 8 (pooled: 6)
    rows = _quality_rows(
        [("independent", "r1", 0, 4.0), ("independent", "r1", 1, 6.0), ("comparative", "r1", 0, 8.0)]
    )
    for table in (rows, rows.drop(columns="run_id")):
        out = overall_quality(table).set_index("mode")
        assert out.loc["independent", "overall"] == pytest.approx(5.0)
        assert out.loc["comparative", "overall"] == 8.0
        assert out.loc["independent", "n_samples"] == 2 and out.loc["comparative", "n_samples"] == 1
    by = quality_by_source(overall_quality(rows)).set_index("mode")  # default `by`: still per judge and mode
    assert by.loc["independent", "overall"] == pytest.approx(5.0) and by.loc["independent", "n"] == 1
    assert by.loc["comparative", "overall"] == 8.0 and by.loc["comparative", "n"] == 1


def test_overall_quality_runs_of_one_judge_on_the_same_review_are_separate_raters() -> None:
    # runs r1 (samples 4, 6 -> 5) and r2 (samples 8, 8 -> 8) of judge j judged the same samples of p1/c:
    # raters j@r1 and j@r2, one review each (pooled: one rater, 6.5, or one review counted twice)
    rows = _quality_rows(
        [
            ("independent", "r1", 0, 4.0),
            ("independent", "r1", 1, 6.0),
            ("independent", "r2", 0, 8.0),
            ("independent", "r2", 1, 8.0),
        ]
    )
    out = overall_quality(rows).set_index("judge")
    assert out["overall"].to_dict() == {"j@r1": pytest.approx(5.0), "j@r2": pytest.approx(8.0)}
    assert out.loc["j@r1", "sample_sd"] == pytest.approx(math.sqrt(2))  # 4 and 6 around 5
    by = quality_by_source(overall_quality(rows)).set_index("judge")
    assert by["overall"].to_dict() == {"j@r1": pytest.approx(5.0), "j@r2": pytest.approx(8.0)}
    assert by["n"].tolist() == [1, 1]
    # runs over disjoint samples (a rerun that filled in a sample) stay one rater: (4 + 8) / 2
    one = overall_quality(_quality_rows([("independent", "r1", 0, 4.0), ("independent", "r2", 1, 8.0)]))
    assert one["judge"].tolist() == ["j"] and one.loc[0, "overall"] == pytest.approx(6.0)


def test_overall_quality_refuses_a_judgment_recorded_twice() -> None:
    # sample 0's comprehensiveness twice in run r1 (4 and 10): a mean would silently make that sample 5.5
    rows = _quality_rows([("independent", "r1", 0, 4.0)])
    twice = pd.concat([rows, rows.iloc[[0]].assign(score=10.0)], ignore_index=True)
    with pytest.raises(
        ValueError,
        match=r"^review_quality rows: 2 rows repeat a judgment, e\.g\. \(judge=j, "
        r"mode=independent, .*sample_idx=0, dimension=comprehensiveness\)",
    ):
        overall_quality(twice)


def test_issue_overlap_with_unscored_calls_is_undefined_not_a_miss() -> None:
    # e1's call with h0 came back unscored: as "no match" e1 was model-only (1/3, 1/2, 1/2); now undefined
    r = issue_overlap(["h0", "h1"], ["e0", "e1"], [(0, 0)], n_unscored=1)
    assert all(math.isnan(r[k]) for k in ("overlap", "human_only", "model_only")) and r["n_unscored"] == 1
    assert issue_overlap(["h0", "h1"], ["e0", "e1"], [(0, 0)])["n_unscored"] == 0


def test_macro_overlap_counts_papers_left_out_for_unscored_calls() -> None:
    per_paper = pd.DataFrame(
        {
            "source": ["m"] * 3,
            "overlap": [0.75, 0.25, float("nan")],
            "human_only": [0.0, 0.5, float("nan")],
            "model_only": [0.25, 0.5, float("nan")],
            "n_unscored": [0, 0, 3],
        }
    )
    out = macro_overlap(per_paper, by=("source",)).iloc[0]
    assert out["overlap"] == pytest.approx(0.5) and out["overlap_n"] == 2  # the third paper left out
    assert (out["n_papers"], out["n_unscored"], out["n_papers_unscored"]) == (3, 3, 1)


def test_overall_quality_flags_runs_not_at_the_defined_temperature(tmp_path: Path) -> None:
    """Issue 24.7: Overall Quality is defined at T = 0.1; a judge recorded at 1.0 (gpt-5) or at no known
    temperature is flagged in the tables and the report, one at 0.1 is not."""
    from analysis.echoreview.report import report

    rows = _quality_rows([("independent", "r1", 0, 4.0), ("independent", "r1", 1, 6.0)])
    table = pd.concat(
        [rows.assign(judge="qwen", temperature=0.1), rows.assign(judge="gpt5", temperature=1.0)],
        ignore_index=True,
    )
    per_review = overall_quality(table).set_index("judge")
    assert per_review.loc["qwen", "temperature"] == 0.1 and per_review.loc["qwen", "temperature_ok"]
    assert per_review.loc["gpt5", "temperature"] == 1.0 and not per_review.loc["gpt5", "temperature_ok"]
    by = quality_by_source(overall_quality(table)).set_index("judge")
    assert by.loc["gpt5", "overall"] == by.loc["qwen", "overall"] == pytest.approx(5.0)  # the scores stay
    assert by["temperature_ok"].to_dict() == {"gpt5": False, "qwen": True}
    markdown = report(table, tmp_path)
    assert "| gpt5 | independent | gen | 5.000 [5.000, 5.000] | 1 | 0 | 1 ⚠ |" in markdown
    assert "| qwen | independent | gen | 5.000 [5.000, 5.000] | 1 | 0 | 0.1 |" in markdown
    assert "⚠ Overall Quality is defined at T = 0.1" in markdown and "gpt5 (independent) at T = 1" in markdown
    assert "qwen (independent)" not in markdown
    csv = pd.read_csv(tmp_path / "echoreview_quality.csv").set_index("judge")
    assert csv.loc["gpt5", "temperature"] == 1.0 and not csv.loc["gpt5", "temperature_ok"]
    # a sample of one review at another temperature (a rerun at 1.0) makes the review's temperature mixed
    mixed = table[table["judge"] == "qwen"].assign(temperature=[0.1] * 4 + [1.0] * 4)
    one = overall_quality(mixed).iloc[0]
    assert math.isnan(one["temperature"]) and not one["temperature_ok"]
    assert "j (independent) at T = unknown" in report(rows, tmp_path / "old")  # no temperature recorded
