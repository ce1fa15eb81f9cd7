"""EchoReview issue matching with unscored judge calls (experiments.issues.score_paper, judge faked)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from experiments import issues

CFG = {"judge": {}, "threshold": 0.7}


def fake_verdicts(table: Mapping[tuple[str, str], bool | None]) -> Any:
    """A stand-in for `issues.judge_decisions`: the verdict of each (a, b) pair from `table` (default no)."""

    async def decide(judge: Any, rubric: Any, pairs: Sequence[tuple[str, str]], params: Any,
                     structured: bool) -> list[bool | None]:  # fmt: skip
        return [table.get(pair, False) for pair in pairs]

    return decide


@pytest.mark.parametrize("unscored", [("h0", "e1"), ("e0", "e1")])  # a cross call, a same-side call
def test_an_unscored_matching_call_leaves_the_review_out_and_is_counted(monkeypatch: pytest.MonkeyPatch,
                                                                        unscored: tuple[str, str]) -> None:
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
