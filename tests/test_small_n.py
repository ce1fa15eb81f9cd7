"""Issue 32 items 5 and 6 through the command line: every table that compares raters rests on the items all
compared raters scored, with n per rater, and rates keep honest intervals at small n."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

from tests.support.studies import cli_env
from tests.support.study_folders import DIMENSIONS, sample_candidates, write_fake_run

#: Generated candidates the experts rate (10) and the judges score (j1 7 of them, j2 6 of j1's 7).
PAIRS = [c for _, c, source, _ in sample_candidates() if source != "reference"][:10]
J1, J2 = set(PAIRS[:7]), set(PAIRS[:6])


def planted_study(tmp: Path) -> tuple[Path, Path]:
    """A two-judge run folder and a labels file: 3 experts rate 10 pairs on every dimension; the judges
    leave pairs unscored (j1 3, j2 4), so only 6 pairs are scored by every rater. On those 6 the experts
    prefer the reference; on the 4 the judges did not score, the generated candidate."""
    scored = {"j1": J1, "j2": J2}
    gen = set(PAIRS)

    def scorer(judge: str, cand: str, dim: str, k: int) -> float | None:
        if cand in gen and cand not in scored[judge]:
            return None  # unscored: a budget stop or an unparsed answer
        return 1.0 if cand.endswith(":ref") else 2.0

    root = tmp / "runs"
    for judge in ("j1", "j2"):
        write_fake_run(root / judge, judge, "independent", scorer)
    instances = {c: i for i, c, _, _ in sample_candidates()}
    sources = {c: s for _, c, s, _ in sample_candidates()}
    rows = []
    for a, expert in enumerate(("expert_a", "expert_b", "expert_c")):
        for p, cand in enumerate(PAIRS):
            inst = instances[cand]
            # judged pairs: mostly losses for the generated candidate; unjudged pairs: wins
            gen_score = 3 if cand not in J2 else (0 if (p + a) % 3 else 2)
            for cid, score in ((f"{inst}:ref", 1), (cand, gen_score)):
                for dim in DIMENSIONS:
                    rows.append((expert, inst, cid, sources[cid], dim, score))
    labels = pd.DataFrame(rows, columns=["annotator", "instance_id", "candidate_id", "source", "dimension", "score"])
    labels = labels.drop_duplicates(["annotator", "instance_id", "candidate_id", "dimension"])
    path = tmp / "humans.csv"
    labels.to_csv(path, index=False)
    return root, path


def report(tmp: Path, root: Path, humans: Path) -> Path:
    out = tmp / "report"
    done = subprocess.run(
        [sys.executable, "-m", "analysis.report", str(root), "--humans", str(humans), "--out", str(out)]
        + ["--n-boot", "50"],
        env=cli_env(tmp),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return out / "tables"


def test_every_rater_row_rests_on_the_same_pairs(tmp_path: Path) -> None:
    tables = report(tmp_path, *planted_study(tmp_path))
    rates = pd.read_csv(tables / "expert_vs_judge.csv")
    rates = rates.loc[rates["dimension"] == "originality"].set_index("rater")
    raters = [f"human:expert_{x}" for x in "abc"] + ["j1 [independent]", "j2 [independent]"]
    assert rates.loc[raters, "n"].tolist() == [6] * 5  # before: experts 10, j1 7, j2 6
    # on the 6 shared pairs each expert prefers the reference on 4 (before: 4 of 10 with 4 extra wins)
    assert (rates.loc[raters[:3], "gen_win"] <= 2 / 6 + 1e-9).all()
    winners = pd.read_csv(tables / "winner_agreement.csv")
    pairs = winners.loc[winners["kind"] != "all"]
    judged = pairs.loc[~pairs["rater_a"].eq("human:majority") & ~pairs["rater_b"].eq("human:majority")]
    assert set(judged["n"]) == {6 * len(DIMENSIONS)}  # before: expert vs j1 on 7 pairs per dimension
    agree = pd.read_csv(tables / "human_agreement.csv")
    assert set(agree["n"]) == {7}  # the 6 pairs and their reference, for both judges (before: j1 8, j2 7)
    latent = pd.read_csv(tables / "latent_competence.csv")
    assert set(latent["n_items"]) == {6 * len(DIMENSIONS)}  # before: experts 30, j1 21, j2 18
