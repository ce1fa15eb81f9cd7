"""Judges vs real reviewers (analysis.reviewers) and the COLING loader (experiments.datasets.coling), on hand-made data."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from analysis.reviewers import ceiling, compare, judge_scores, main, markdown, round_half_up
from experiments.datasets.coling import (
    extraction_labels,
    load_coling,
    load_coling_records,
    review_scores,
    unmatched_chosen,
)
from experiments.datasets.validation import DatasetError
from tests.support.studies import public_data


def paper(pid: int, decision: str, scores: list[int]) -> dict[str, object]:
    return {
        "paper_id": pid,
        "title": f"Paper {pid}",
        "abstract": "We do X.",
        "decision": decision,
        "introduction_sentences": ["Background here.", f"We propose method {pid}."],
        "review_novelty_sentences": [],
        "reviews": [{"review_text": "ok", "scores": {"Originality": s, "overall": 3}} for s in scores],
    }


PAPERS = [
    paper(1, "Accept", [4, 4]),
    paper(2, "Accept", [3, 2, 3]),
    paper(3, "Reject", [1]),
    paper(4, "Accept", [5]),
]


def write(tmp: Path, records: list[dict[str, object]]) -> Path:
    path = tmp / "coling.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_loader_instances_scores_and_labels(tmp_path: Path) -> None:
    path = write(tmp_path, PAPERS)
    inst = load_coling(path)
    assert [i.instance_id for i in inst] == ["1", "2", "3", "4"] and inst[0].candidates[0].source == "paper"
    assert (
        "Abstract: We do X." in inst[0].candidates[0].text
        and "We propose method 1." in inst[0].candidates[0].text
    )
    rev = review_scores(load_coling_records(path))
    assert len(rev) == 7 and rev[rev["paper_id"] == "2"]["score"].tolist() == [3.0, 2.0, 3.0]
    labels = extraction_labels(
        load_coling_records(path), [{"id": "2", "paper_novelty": ["We propose method 2."]}]
    )
    assert labels["label"].tolist() == [0, 1] and set(labels["paper_id"]) == {"2"}  # papers NovBench covers


def test_loader_reports_every_problem(tmp_path: Path) -> None:
    bad = [
        paper(1, "Accept", [4]),
        {**paper(2, "Accept", [4]), "reviews": [{"scores": {"Originality": 7}}]},
        {**paper(1, "Accept", [4])},
    ]
    with pytest.raises(DatasetError) as err:
        load_coling_records(write(tmp_path, bad))
    assert any(":2: reviews[0].scores.Originality: must be an integer 1-5" in p for p in err.value.problems)
    assert any(":3: paper_id: duplicate id '1'" in p for p in err.value.problems)


def test_judge_scores_and_rounding() -> None:
    results = pd.DataFrame(
        {
            "judge": ["j"] * 4,
            "instance_id": ["1", "1", "2", "2"],
            "dimension": ["originality"] * 4,
            "score": [4.0, 3.0, 2.0, math.nan],
            "parse_ok": [True, True, True, False],
        }
    )
    got = judge_scores(results).set_index("paper_id")
    assert (
        got.loc["1", "judge_score"] == 3.5
        and got.loc["1", "n_samples"] == 2
        and got.loc["2", "n_samples"] == 1
    )
    assert round_half_up(pd.Series([3.5, 2.5, 2.49])).tolist() == [4.0, 3.0, 2.0]
    modes = results.assign(mode=["independent", "comparative"] * 2)  # one judge, two modes: two raters
    split = judge_scores(modes).set_index(["judge", "paper_id"])["judge_score"]
    assert split[("j [independent]", "1")] == 4.0 and split[("j [comparative]", "1")] == 3.0
    assert judge_scores(results.assign(mode="independent"))["judge"].unique().tolist() == ["j"]


def test_compare_planted_perfect_judge_and_ceiling() -> None:
    reviews = review_scores(PAPERS)
    # per-paper reviewer means: 4, 8/3, 1, 5 -> a judge saying 4, 3, 1, 5 ranks them identically
    judged = pd.DataFrame(
        {
            "judge": ["j"] * 4,
            "paper_id": ["1", "2", "3", "4"],
            "judge_score": [4.0, 3.0, 1.0, 5.0],
            "n_samples": [1] * 4,
        }
    )
    table = compare(judged, reviews).set_index("comparison")
    assert table.loc["judge vs mean reviewer", "rho"] == pytest.approx(1.0)
    assert table.loc["judge vs mean reviewer", "tau"] == pytest.approx(1.0)
    each = table.loc["judge (mapped) vs each review"]
    # pairs (judge, review): (4,4) (4,4) (3,3) (3,2) (3,3) (1,1) (5,5): 6 of 7 equal
    assert each["n"] == 7 and each["percent"] == pytest.approx(6 / 7) and 0.9 < each["kappa_w"] < 1.0
    accept = table.loc["judge accept (score >= 3) vs decision"]
    assert accept["percent"] == 1.0 and accept["kappa"] == pytest.approx(1.0)  # 1 2 4 accept, 3 reject
    # ceiling: paper 1 (4, 4) -> 1 pair; paper 2 (3, 2, 3) -> 3 pairs (3,2) (3,3) (2,3): 2 of 4 pairs agree
    ceil = ceiling(reviews)
    assert ceil["n"] == 4 and ceil["percent"] == pytest.approx(0.5) and "2 papers" in ceil["comparison"]


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, PAPERS)
    run = tmp_path / "run"
    run.mkdir()
    pd.DataFrame(
        {
            "judge": "j",
            "mode": "independent",
            "instance_id": ["1", "2", "3", "4"],
            "candidate_id": "c",
            "source": "paper",
            "rubric": "paper_originality",
            "dimension": "originality",
            "higher_is_better": True,  # as a real run writes it (the analysis never reads conf/)
            "score": [4.0, 3.0, 1.0, 5.0],
            "parse_ok": True,
        }
    ).to_csv(run / "results.csv", index=False)
    assert main([str(run), "--reviews", str(path)]) == 0
    assert "identity" in (run / "reviewers.md").read_text() and (run / "reviewers.csv").exists()
    capsys.readouterr()
    assert main([str(run), "--reviews", str(tmp_path / "missing.jsonl")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main([str(run), "--reviews", str(path), "--aspect", "Nope", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'Nope'" in err and "aspects found: ['Originality', 'overall']" in err
    other = write(tmp_path, [paper(7, "Accept", [4]), paper(8, "Reject", [2])])  # papers the judge never saw
    assert main([str(run), "--reviews", str(other), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(run) in err and str(other) in err and "['j']" in err
    assert not (tmp_path / "o").exists()


def test_a_judge_of_another_study_in_the_folder_is_dropped_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review 3, finding 7: a multirun root with a coling run and another study's judge (the novelty rubric also
    has an `originality` dimension) still compares the coling judge; the other is named once on stderr."""
    path = write(tmp_path, PAPERS)
    root = tmp_path / "multirun"
    for name, rubric, ids in (
        ("coling", "paper_originality", ["1", "2", "3", "4"]),
        ("novelty", "novelty", ["n1"]),
    ):
        (root / name).mkdir(parents=True)
        pd.DataFrame(
            {
                "judge": f"j-{name}",
                "mode": "independent",
                "instance_id": ids,
                "candidate_id": "c",
                "source": "paper",
                "rubric": rubric,
                "dimension": "originality",
                "higher_is_better": True,  # as a real run writes it (the analysis never reads conf/)
                "score": 3.0,
                "parse_ok": True,
            }
        ).to_csv(root / name / "results.csv", index=False)
    assert main([str(root), "--reviews", str(path)]) == 0
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1 and err.startswith("note:") and "j-novelty" in err and "j-coling" not in err
    ), err
    judges = set(pd.read_csv(root / "reviewers.csv")["judge"])
    assert len(judges) == 2 and "reviewers" in judges and any("j-coling" in j for j in judges), judges


def test_real_coling_labels_and_ceiling() -> None:
    papers = load_coling_records(public_data("coling2020_reviews.jsonl"))
    text = public_data("novbench_coling2020.jsonl").read_text()
    novelty = [json.loads(x) for x in text.splitlines() if x.strip()]
    labels = extraction_labels(papers, novelty)
    assert labels["paper_id"].nunique() == 73 and len(labels) == 1947 and labels["label"].sum() == 512
    assert unmatched_chosen(papers, novelty).empty  # all 512 chosen sentences are introduction sentences
    reviews = review_scores(papers)
    assert len(reviews) == 110 and reviews["paper_id"].nunique() == 86
    assert ceiling(reviews)["n"] == 26  # 20 papers with 2 reviews (1 pair) + 2 with 3 (3 pairs)


def test_papers_without_a_decision_are_left_out_of_accept_reject_and_counted() -> None:
    """Review F7: an empty decision ("" or blanks; the loader allows it) was a third class, so every judge and
    the reviewers' reference row 'disagreed' with it; now such papers are left out of the accept/reject rows
    and counted (n_no_decision)."""
    papers = [*PAPERS, paper(5, "", [2]), paper(6, "  ", [4])]
    judged = pd.DataFrame(
        {
            "judge": "j",
            "paper_id": ["1", "2", "3", "4", "5", "6"],
            "n_samples": 1,
            "judge_score": [4.0, 3.0, 1.0, 5.0, 2.0, 4.0],
        }
    )
    table = compare(judged, review_scores(papers)).set_index("comparison")
    accept = table.loc["judge accept (score >= 3) vs decision"]
    # papers 1-4 only: judge A A R A vs decision A A R A
    assert (accept["n"], accept["n_no_decision"], accept["percent"]) == (4, 2, 1.0)
    ref = table.loc["reviewer mean >= 3 vs decision"]
    # reviewer means 4, 8/3, 1, 5 -> A R R A vs A A R A: 3 of 4
    assert (ref["n"], ref["n_no_decision"], ref["percent"]) == (4, 2, 0.75)
    assert table.loc["judge vs mean reviewer", "n"] == 6  # the scores still compare on every paper
    assert "| 4 (+2 without a decision, left out) |" in markdown(table.reset_index(), "Originality")


def test_reviewer_rows_are_also_on_the_papers_the_judge_rated() -> None:
    """Review F8: the ceiling and the reference row were computed on every reviewed paper even when the judge
    rated a subset (limit=...); now they are given on all papers and on the judge's papers, each labelled."""
    judged = pd.DataFrame(
        {"judge": "j", "paper_id": ["1", "3", "4"], "judge_score": [4.0, 1.0, 5.0], "n_samples": 1}
    )
    table = compare(judged, review_scores(PAPERS))
    assert table.loc[table["judge"] == "j", "papers"].unique().tolist() == ["the 3 j rated"]
    rev = table[table["judge"] == "reviewers"].set_index(["papers", "comparison"])
    ref = "reviewer mean >= 3 vs decision"
    # all 4: means 4, 8/3, 1, 5 -> A R R A vs A A R A: 3 of 4; the judge's 1, 3, 4: A R A vs A R A: 3 of 3
    assert (rev.loc[("all 4", ref), "n"], rev.loc[("all 4", ref), "percent"]) == (4, 0.75)
    assert (rev.loc[("the 3 j rated", ref), "n"], rev.loc[("the 3 j rated", ref), "percent"]) == (3, 1.0)
    ceil = rev[rev.index.get_level_values(1).str.startswith("reviewer vs reviewer")]
    # all: paper 1 (4, 4) and paper 2 (3, 2, 3): 4 pairs, 2 agree; the judge's: paper 1 only: 1 pair, agrees
    assert ceil.loc["all 4", ["n", "percent"]].iloc[0].tolist() == [4, 0.5]
    assert ceil.loc["the 3 j rated", ["n", "percent"]].iloc[0].tolist() == [1, 1.0]
    text = markdown(table, "Originality")
    assert "| reviewers | the 3 j rated | reviewer mean >= 3 vs decision | 3 |" in text
    assert "| reviewers | all 4 | reviewer mean >= 3 vs decision | 4 |" in text
    everything = compare(
        judged.assign(paper_id=["1", "2", "3"]).pipe(
            lambda d: pd.concat([d, d.iloc[[0]].assign(paper_id="4")])
        ),
        review_scores(PAPERS),
    )  # rated all 4: no second set of rows
    assert set(everything["papers"]) == {"all 4"} and (everything["judge"] == "reviewers").sum() == 2


def test_cli_csv_runs_no_formula_in_a_spreadsheet(tmp_path: Path) -> None:
    """A judge named like a spreadsheet formula (names come from configs) is written as text: a leading quote
    (OWASP), while the numbers stay numbers."""
    path = write(tmp_path, PAPERS)
    run = tmp_path / "run"
    run.mkdir()
    pd.DataFrame(
        {
            "judge": '=HYPERLINK("http://x","y")',
            "mode": "independent",
            "instance_id": ["1", "2", "3", "4"],
            "candidate_id": "c",
            "source": "paper",
            "rubric": "paper_originality",
            "dimension": "originality",
            "higher_is_better": True,  # as a real run writes it (the analysis never reads conf/)
            "score": [4.0, 3.0, 1.0, 5.0],
            "parse_ok": True,
        }
    ).to_csv(run / "results.csv", index=False)
    assert main([str(run), "--reviews", str(path)]) == 0
    table = pd.read_csv(run / "reviewers.csv")
    judges = set(table["judge"])
    assert not any(str(j).startswith("=") for j in judges), judges
    assert any(str(j).startswith("'=HYPERLINK") for j in judges), judges
    assert pd.api.types.is_numeric_dtype(table["n"])


def test_judge_scores_leave_perturbed_rows_to_robustness() -> None:
    """Review 12, F3: a padded run in the folder was pooled into the judge's per-paper score (2.0 from 3 and 1
    instead of 3.0); an unknown parse status counts as parsed, as everywhere in the analysis."""
    rows = pd.DataFrame(
        {
            "judge": "j",
            "mode": "independent",
            "instance_id": ["1", "1", "2"],
            "candidate_id": "c",
            "source": "paper",
            "rubric": "paper_originality",
            "dimension": "originality",
            "higher_is_better": True,  # as a real run writes it (the analysis never reads conf/)
            "score": [3.0, 1.0, 4.0],
            "parse_ok": [True, True, None],
            "perturbation": ["none", "padding", ""],
        }
    )
    scores = judge_scores(rows).set_index("paper_id")["judge_score"]
    assert scores.to_dict() == {"1": 3.0, "2": 4.0}
