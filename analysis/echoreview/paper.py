"""EchoReview's paper tables (Overall Quality, the randomized pairwise win rate), built with the study's
paper-table layout (`analysis.report.paper_tables`): kept with EchoReview's metrics, since the report's paper
tables are below the benchmarks that use them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis.echoreview.metrics import QUALITY_TEMPERATURE
from analysis.report.paper_tables import OUTCOMES, PaperTable, _one_rubric


def echoreview_quality(by_source: pd.DataFrame) -> PaperTable:
    """EchoReview's Overall Quality (`analysis.echoreview.report`'s echoreview_quality.csv): mean [95% CI] per
    rater (judge, mode) and generator; a rater not recorded at the defined T = 0.1 is starred and named so."""
    frame, rubric = _one_rubric(by_source)
    keys = [c for c in ("judge", "rubric", "mode") if c in frame]
    out = frame[keys].astype(str).assign(generator=frame["source"].astype(str).to_numpy())
    out["Overall"] = [
        "" if pd.isna(v) else f"{v:.2f} [{lo:.2f}, {hi:.2f}]"
        for v, lo, hi in zip(frame["overall"], frame["ci_lo"], frame["ci_hi"], strict=True)
    ]
    out["n"] = frame["n"].astype(int).to_numpy()
    out["unscored"] = frame["n_unscored"].astype(int).to_numpy()
    temps = frame["temperature"] if "temperature" in frame else pd.Series(np.nan, index=frame.index)
    ok = (
        frame["temperature_ok"].astype(bool)
        if "temperature_ok" in frame
        else pd.Series(False, index=frame.index)
    )
    out["T"] = [
        ("unknown" if pd.isna(t) else f"{t:g}") + ("" if good else "*")
        for t, good in zip(temps, ok, strict=True)
    ]
    off = (
        f"; * not recorded at T = {QUALITY_TEMPERATURE:g}, where Overall Quality is defined (three runs): "
        "not comparable with the others"
        if not ok.all()
        else ""
    )
    return PaperTable(
        "echoreview_quality",
        "EchoReview: Overall Quality",
        "mean [95% CI over reviews] of each review's mean of the four quality dimensions, averaged over runs, "
        f"over the n reviews of each generator; unscored reviews left out; T: the judge's temperature{off}{rubric}",
        out,
    )


def echoreview_pairwise(table: pd.DataFrame) -> PaperTable:
    """EchoReview's randomized pairwise win rate (echoreview_pairwise.csv): win / tie / loss in percent with
    95% CIs per judge, dimension, generator pair and order protocol, with the position flips."""
    frame, rubric = _one_rubric(table)
    out = frame[[c for c in ("judge", "rubric", "dimension", "generator") if c in frame]].astype(str)
    out["vs"] = frame["opponent"].astype(str).to_numpy()
    out["protocol"] = frame["protocol"].astype(str).to_numpy()
    out["n (pairs)"] = [f"{int(n)} ({int(p)})" for n, p in zip(frame["n"], frame["n_pairs"], strict=True)]
    for k in OUTCOMES:
        out[f"{k} %"] = [
            "" if pd.isna(v) else f"{100 * v:.0f} [{100 * lo:.0f}, {100 * hi:.0f}]"
            for v, lo, hi in zip(frame[k], frame[f"{k}_lo"], frame[f"{k}_hi"], strict=True)
        ]
    out["flips"] = [
        f"{int(f)}/{int(b)}" for f, b in zip(frame["n_flip"], frame["n_both_orders"], strict=True)
    ]
    single = [c for c in ("dimension", "vs") if out[c].nunique() == 1]  # named once in the note, not per row
    named = "".join(f"; {c} {out[c].iloc[0]}" for c in single)
    return PaperTable(
        "echoreview_pairwise",
        "EchoReview: randomized pairwise win rate",
        "win / tie / loss of the generator against vs, in percent [95% CI resampling review pairs] over n "
        "comparisons (review pair × sample; the review pairs in brackets); random order: one presentation "
        "order per comparison, drawn with a fixed seed; both orders: the verdict where both orders agree, a "
        "flip counted as a tie; flips: comparisons whose two orders disagree / comparisons with both orders"
        + named
        + rubric,
        out.drop(columns=single),
    )
