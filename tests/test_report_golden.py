"""Issue 35, "Done when": the speed-ups change no number in any report. The report's tables on the shipped
sample (2 judges × 2 modes through the scripted local provider, data/sample/humans.csv declared random,
`--n-boot 20`, the default seed) are compared with tests/golden/sample_report_tables/, written by the code
before the speed-ups (b3ab986). Every cell must be equal (numbers to 1e-9) except three documented changes:

- `leaderboard`: `time_per_1k_s` and `median_latency_s` are measured wall times of the run;
- `position_bias`: `win_lo`/`win_hi` are now Wilson intervals (were t intervals): checked against
  statsmodels on the golden win rates and counts instead;
- `latent_competence`, MACE rows only: crowd-kit 1.4 read raters' strategy counts in a different order from
  the one it indexed them in, so the fit depended on row order; the vectorised EM (`latent_models.mace_em`)
  fits the model crowd-kit documents (tests/test_bootstrap_vectorised.py compares them on sorted data).

Refresh the golden tables only for a change that is meant to move a number, and name it above.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from tests.support.sample_report import ARGS, shared_sample_report
from tests.support.studies import ROOT

GOLDEN = ROOT / "tests" / "golden" / "sample_report_tables"
MEASURED = {"leaderboard": {"time_per_1k_s", "median_latency_s"}}
MACE_COLUMNS = {"accuracy", "accuracy_lo", "accuracy_hi", "competence", "competence_lo", "competence_hi"}


def _differences(name: str, old: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    """The cells of one table that differ beyond 1e-9 (numbers) or as text, outside the documented changes."""
    if list(old.columns) != list(new.columns) or len(old) != len(new):
        return [
            f"{name}: columns or rows changed ({list(old.columns)} {len(old)} -> {list(new.columns)} {len(new)})"
        ]
    rows = np.ones(len(old), dtype=bool)
    if name == "latent_competence":
        rows = (old["method"] != "MACE").to_numpy()
    out = []
    for column in old.columns:
        if column in MEASURED.get(name, set()) or (
            name == "position_bias" and column in ("win_lo", "win_hi")
        ):
            continue
        a, b = old[column], new[column]
        keep = (
            rows if name == "latent_competence" and column in MACE_COLUMNS else np.ones(len(old), dtype=bool)
        )
        if pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b):
            same = np.isclose(a.to_numpy(float), b.to_numpy(float), rtol=0, atol=1e-9, equal_nan=True)
        else:
            same = (a.astype(str) == b.astype(str)).to_numpy()
        if not same[keep].all():
            out.append(f"{name}.{column}: {int((~same[keep]).sum())} cells differ")
    return out


def test_report_tables_equal_the_tables_before_the_speed_ups(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The report is `python -m analysis.report` on the sample study, written once per session
    (tests.support.sample_report: the same command, arguments and study this test ran itself)."""
    out = shared_sample_report(tmp_path_factory, tmp_path / "report")
    humans = str(ROOT / "data" / "sample" / "humans.csv")
    assert ARGS == ("--humans", humans, "--humans-design", "random", "--n-boot", "20")  # the golden tables'
    golden = sorted(GOLDEN.glob("*.csv"))
    assert {p.name for p in golden} == {p.name for p in (out / "tables").glob("*.csv")}
    differences = []
    for path in golden:
        differences += _differences(path.stem, pd.read_csv(path), pd.read_csv(out / "tables" / path.name))
    assert not differences, differences
    # the one intended interval change, checked against its reference on the golden counts
    old, new = pd.read_csv(GOLDEN / "position_bias.csv"), pd.read_csv(out / "tables" / "position_bias.csv")
    lo, hi = proportion_confint(old["win_rate"] * old["n"], old["n"], method="wilson")
    assert np.allclose(new["win_lo"], lo, atol=1e-12) and np.allclose(new["win_hi"], hi, atol=1e-12)
    # and the MACE rows still hold a fit: accuracies in [0, 1] for every rater the golden table had
    mace = pd.read_csv(out / "tables" / "latent_competence.csv")
    mace = mace.loc[mace["method"] == "MACE"]
    assert len(mace) == int((pd.read_csv(GOLDEN / "latent_competence.csv")["method"] == "MACE").sum()) > 0
    assert mace["accuracy"].between(0, 1).all()
