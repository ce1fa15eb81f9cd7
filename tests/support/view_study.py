"""The viewer tests' synthetic study (tests/test_view*.py): two judges × two modes, one planted outlier."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.load.synthetic import synthetic_results

#: The base URL the in-process viewer clients use (no socket is opened).
LOCAL = "http://127.0.0.1:8765"


def write_synthetic(root: Path) -> pd.DataFrame:
    """Two judges × two modes of synthetic results, one run folder each; one planted outlier sample."""
    frame = synthetic_results(n_instances=5, seed=3)
    frame = frame.astype({c: str for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)})
    outlier = (
        (frame["judge"] == "judge_b")
        & (frame["mode"] == "independent")
        & (frame["sample_idx"] == 1)
        & (frame["candidate_id"] == "narrow_gen_2")
        & (frame["instance_id"] == "inst00003")
    )
    frame.loc[outlier, "score"] = 30.0
    for (judge, mode), part in frame.groupby(["judge", "mode"]):
        (root / f"{judge}-{mode}").mkdir(parents=True)
        part.to_parquet(root / f"{judge}-{mode}" / "results.parquet", index=False)
    return frame


def one_human_label() -> pd.DataFrame:
    """One expert's label on one candidate of the synthetic study: a study opened with it has another
    fingerprint than the same study without."""
    return pd.DataFrame(
        {
            "annotator": ["a1"],
            "instance_id": ["inst00003"],
            "candidate_id": ["narrow_gen_2"],
            "source": ["generated"],
            "dimension": ["originality"],
            "score": [1.0],
        }
    )
