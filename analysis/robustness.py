"""How far a judge's scores and verdicts move under meaning-preserving perturbations (experiment=robustness).

Each perturbed run is paired with the `none` run of the same judge and mode, candidate by candidate
(generated candidates only; the reference is never perturbed). Per judge × mode × perturbation × dimension:
- `shift`: mean of (perturbed − original) candidate score, with a bootstrap CI over candidates, and
  `abs_shift`, the mean absolute change;
- `flip_rate`: share of (candidate, dimension) pairs whose verdict against the reference (better / equal /
  worse, each run judging its own reference; in comparative mode the reference scored in the candidate's own
  prompt, as the win tables compare them) differs from the original's, with a Wilson CI.
- `resample_flip_rate`: the judge's own noise floor, with a Wilson CI: the share of (candidate, dimension)
  pairs of the `none` run whose single-sample verdict differs between two samples of the same prompt (sample 0
  vs sample 1, each against its own sample's reference); beside it `flip_rate_1`, the same comparison with the
  perturbed prompt's sample 0 in place of the original's (perturbed sample 0 vs original sample 1). Both
  compare two samples, so a perturbation that does nothing has `flip_rate_1` equal to the floor in
  expectation; `flip_rate` (means over samples) is less noisy than either. Both need `n_samples >= 2`.
A robust judge moves little under paraphrase, deletion, padding and order / label permutations, and not at all
under injection. `order` and `labels` only change comparative prompts, so they are reported for that mode only.

`python -m analysis.robustness <multirun-dir> [--out DIR]` writes robustness.csv.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.load.collect import load_results
from analysis.stats import modes
from analysis.stats.humans import pair_outcomes
from analysis.stats.scores import CONTEXT_KEYS, ORIGINAL, candidate_scores, perturbation_names
from analysis.stats.spec import CardField, TableSpec
from analysis.stats.study import unperturbed as unperturbed  # its home; the commands read it from here
from analysis.stats.winrate import check_reference
from core.cells import write_csv
from core.intervals import grouped_mean_ci, positive_int, wilson_interval
from core.modes import ModeKind

PROMPT_ONLY = frozenset(
    {"order", "labels"}
)  # perturbations of how a several-candidates prompt shows the texts
PAIR = ["judge", "mode", "instance_id", "candidate_id", "source", "dimension"]


def note_perturbed(results: pd.DataFrame, kept: pd.DataFrame) -> None:
    """One `note:` line on stderr when `unperturbed` left rows out (nothing otherwise)."""
    if len(results) > len(kept):
        print(
            f"note: {len(results) - len(kept)} perturbed rows (experiment=robustness) were left out of these "
            "tables; `python -m analysis.robustness` measures them",
            file=sys.stderr,
        )


def _scores(results: pd.DataFrame, reference: str, *, by_sample: bool = False) -> pd.DataFrame:
    """Candidate scores per perturbation (and per sample with `by_sample`), the reference once per prompt
    context (as the study's win tables read it: `study.study_candidates`), so each verdict uses the
    same-prompt reference."""
    results = results.assign(perturbation=perturbation_names(results["perturbation"]))
    split = ("perturbation", *(["sample_idx"] if by_sample else []))
    cands = candidate_scores(results, (*CONTEXT_KEYS, *split), reference)
    cands = cands.astype({k: str for k in (*PAIR, *split)})
    multi = modes.modes_of(modes.kinds_by_mode(results), ModeKind.multi)  # where positions are shown
    keep = ~(cands["perturbation"].isin(PROMPT_ONLY) & ~cands["mode"].isin(multi))
    return cands.loc[keep.to_numpy()]


def _verdicts(cands: pd.DataFrame, reference: str) -> pd.DataFrame:
    """Each candidate's outcome vs its own run's reference, per perturbation (and sample, where `cands` has
    one row per sample: the reference of the same sample)."""
    split = ["perturbation", *(["sample_idx"] if "sample_idx" in cands else [])]
    tagged = cands.assign(mode=cands["mode"].str.cat([cands[c] for c in split], sep="\t"))  # vectorised
    out = pair_outcomes(tagged, reference)
    out[["mode", *split]] = out["mode"].str.split("\t", expand=True)
    return out[[*PAIR, *split, "outcome"]]


def _flip_rates(pairs: pd.DataFrame, by: list[str], prefix: str) -> pd.DataFrame:
    """Per `by` group of verdict pairs (`outcome`, `outcome_other`): flips, their share and its Wilson CI."""
    pairs = pairs.assign(flip=pairs["outcome"] != pairs["outcome_other"])
    out = pairs.groupby(by, observed=True)["flip"].agg(**{f"n_{prefix}": "size", f"{prefix}_flips": "sum"})
    out = out.reset_index()
    out[f"{prefix}_flip_rate"] = out[f"{prefix}_flips"] / out[f"n_{prefix}"]
    out[f"{prefix}_lo"], out[f"{prefix}_hi"] = wilson_interval(
        out[f"{prefix}_flips"].to_numpy(), out[f"n_{prefix}"].to_numpy()
    )
    return out


def resample_flips(results: pd.DataFrame, reference: str = "reference") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the judge's resample flip rate per judge × mode × dimension: the `none` run's sample 0 vs sample 1
    verdicts; the single-sample flip rate per perturbation: perturbed sample 0 vs original sample 1), each with
    a Wilson CI over (candidate, dimension) pairs; empty where no run has two samples."""
    if "sample_idx" not in results:
        return pd.DataFrame(), pd.DataFrame()
    verdicts = _verdicts(_scores(results, reference, by_sample=True), reference)
    verdicts = verdicts.loc[verdicts["source"] != reference]
    second = verdicts.loc[
        (verdicts["perturbation"] == ORIGINAL) & (verdicts["sample_idx"] == "1"), [*PAIR, "outcome"]
    ].rename(columns={"outcome": "outcome_other"})
    first = verdicts.loc[verdicts["sample_idx"] == "0"].merge(second, on=PAIR)
    if first.empty:
        return pd.DataFrame(), pd.DataFrame()
    by = ["judge", "mode", "dimension"]
    floor = _flip_rates(first.loc[first["perturbation"] == ORIGINAL], by, "resample")
    moved = _flip_rates(first.loc[first["perturbation"] != ORIGINAL], [*by[:2], "perturbation", by[2]], "one")
    moved = moved.rename(
        columns={"one_flip_rate": "flip_rate_1", "one_lo": "flip_1_lo", "one_hi": "flip_1_hi", "n_one": "n_1"}
    )
    return floor.drop(columns="resample_flips"), moved.drop(columns="one_flips")


def robustness_table(
    results: pd.DataFrame, reference: str = "reference", n_boot: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """Shift (CI) and flip rate (CI) per judge × mode × perturbation × dimension; empty without a `none`
    run and a perturbed one."""
    if "perturbation" not in results or results["perturbation"].isna().all():
        return pd.DataFrame()
    cands = _scores(results, reference)
    if ORIGINAL not in set(cands["perturbation"]) or cands["perturbation"].nunique() < 2:
        return pd.DataFrame()
    gen = cands.loc[cands["source"] != reference]
    base = gen.loc[gen["perturbation"] == ORIGINAL, [*PAIR, "score"]].rename(columns={"score": "original"})
    moved = gen.loc[gen["perturbation"] != ORIGINAL].merge(base, on=PAIR, how="inner")
    moved["diff"] = moved["score"] - moved["original"]
    moved["abs_diff"] = moved["diff"].abs()
    by = ["judge", "mode", "perturbation", "dimension"]
    table = grouped_mean_ci(moved, by, {"diff": "shift", "abs_diff": "abs_shift"}, "n", n_boot, seed)
    table = table.drop(columns=["shift_n", "abs_shift_n", "abs_shift_lo", "abs_shift_hi"])
    verdicts = _verdicts(cands, reference)
    before = verdicts.loc[verdicts["perturbation"] == ORIGINAL, [*PAIR, "outcome"]]
    after = verdicts.loc[verdicts["perturbation"] != ORIGINAL].merge(
        before, on=PAIR, suffixes=("", "_original")
    )
    after["flip"] = after["outcome"] != after["outcome_original"]
    flips = after.groupby(by, observed=True)["flip"].agg(n_verdicts="size", n_flips="sum").reset_index()
    flips["flip_rate"] = flips["n_flips"] / flips["n_verdicts"]
    flips["flip_lo"], flips["flip_hi"] = wilson_interval(
        flips["n_flips"].to_numpy(), flips["n_verdicts"].to_numpy()
    )
    out = table.merge(flips, on=by, how="left")
    floor, moved = resample_flips(results, reference)
    if floor.empty:  # one sample per prompt: no noise floor (the CLI says why in one line)
        floor = pd.DataFrame(columns=["judge", "mode", "dimension", *RESAMPLE_COLUMNS])
        moved = pd.DataFrame(columns=[*by, *SINGLE_COLUMNS])
    out = out.merge(moved.astype({k: str for k in by}), on=by, how="left")
    out = out.merge(
        floor.astype({k: str for k in ("judge", "mode", "dimension")}),
        on=["judge", "mode", "dimension"],
        how="left",
    )
    return out.sort_values(by, ignore_index=True)


# the noise floor's columns, beside each perturbation's flip rate (`resample_flips`)
SINGLE_COLUMNS = ("n_1", "flip_rate_1", "flip_1_lo", "flip_1_hi")
RESAMPLE_COLUMNS = ("n_resample", "resample_flip_rate", "resample_lo", "resample_hi")


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: the robustness table of a multirun of experiment=robustness."""
    parser = argparse.ArgumentParser(prog="python -m analysis.robustness", description=__doc__.split("\n")[0])
    parser.add_argument("root", help="the multirun folder of experiment=robustness")
    parser.add_argument("--out", help="output folder (default: <root>)")
    parser.add_argument("--reference", default="reference")
    parser.add_argument("--n-boot", type=positive_int, default=1000)
    args = parser.parse_args(argv)
    try:
        results = load_results(args.root)
        check_reference(results, args.reference, args.root)
        table = robustness_table(results, args.reference, args.n_boot)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if table.empty:
        print(
            "error: no perturbation=none run together with a perturbed one below this folder", file=sys.stderr
        )
        return 2
    if table["resample_flip_rate"].isna().all():
        print(
            "note: no resample flip rate (the judge's own noise floor): the perturbation=none run needs "
            "n_samples >= 2 (samples 0 and 1 of each prompt)",
            file=sys.stderr,
        )
    out = Path(args.out) if args.out else Path(args.root)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(table, out / "robustness.csv")
    with pd.option_context("display.width", 200):
        print(table.round(3).to_string(index=False))
    print(f"-> {out / 'robustness.csv'}", file=sys.stderr)
    return 0


ROBUSTNESS: TableSpec = TableSpec(  # card-only: the perturbed rows (experiment=robustness)
    "robustness",
    lambda s, _: robustness_table(s.results, n_boot=s.n_boot, seed=s.seed),
    ("judge", "mode", "perturbation", "dimension", "n", "shift", "flip_rate"),
    card=CardField(
        "Robustness (score shift under perturbation, flip rate)",
        ("mode", "perturbation", "dimension", "n", "shift", "shift_lo", "shift_hi", "flip_rate"),
        "no experiment=robustness run",
        order=70,
    ),
    report=False,
)


if __name__ == "__main__":
    raise SystemExit(main())
