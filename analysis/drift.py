"""`python -m analysis.drift RUN RUN [RUN ...] [--out DIR]`: has the judge changed under the same prompts?

A provider can update a model behind the same name. Rerun a study with `cache.refresh=true` (the provider is
asked again; the answers are cached under the date, the old ones kept), then compare the runs. The first run
(by its manifest's refresh date, else the order given) is the baseline; per judge × mode × dimension:

- each later run against the baseline on the candidates both scored: the mean score shift with its t CI
  (paired over candidates), the verdict flip rate (win / tie / loss against the same-prompt reference
  changes), and the quadratic-weighted κ between the runs' rounded scores;
- a control chart over every run: the anchor set is the candidates every run scored; a run's point is their
  mean score. The limits are the baseline's mean ± 3 σ, with σ from the baseline's own sample spread (each
  candidate's variance over its samples / samples, summed over the anchor set, / anchor set², doubled: a
  later point and the baseline both carry sampling noise). A point outside the limits is flagged. A baseline
  with no within-candidate spread (one sample per candidate, or every sample equal: a deterministic judge)
  says nothing about its noise; σ then uses the stated floor `SD_FLOOR` per candidate score instead of 0
  (which would flag any change), and the chart's `sigma_basis` and the command's output say so.

Runs are told apart by their position, never by their labels (two folders named alike are two runs); runs of
different datasets (their manifests' dataset hash) are refused. The CSVs go to `--out`, else to `drift/`
inside the latest run's folder (never beside the baseline, in a folder the user did not name).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.load.collect import load_results
from analysis.robustness import unperturbed
from analysis.stats.agreement import pair_agreement
from analysis.stats.humans import pair_outcomes
from analysis.stats.scores import CONTEXT_KEYS, candidate_scores
from core.cells import write_csv  # drift CSVs are opened in spreadsheets: no formulas
from core.intervals import t_interval
from core.schema import MANIFEST_NAME, read_manifest

KEYS = ["judge", "mode", "dimension"]
ITEM = ["instance_id", "candidate_id", "context"]
SIGMAS = 3.0
#: The sd of one candidate's score assumed when the baseline shows none (one sample per candidate, or a
#: deterministic judge): half a rubric step, the resolution of an integer score.
SD_FLOOR = 0.5
#: How a chart's σ was obtained (`sigma_basis`).
FROM_SAMPLES = "baseline samples"
ONE_SAMPLE = f"floor {SD_FLOOR:g}: one sample per candidate, no within-candidate variance"
DETERMINISTIC = f"floor {SD_FLOOR:g}: deterministic baseline (every sample equal, σ = 0)"
SHIFT_COLUMNS = [
    *KEYS,
    "run",
    "n",
    "mean_shift",
    "mean_shift_lo",
    "mean_shift_hi",
    "n_pairs",
    "flip_rate",
    "kappa_w",
    "kappa_w_lo",
    "kappa_w_hi",
]
CHART_COLUMNS = [
    *KEYS,
    "run",
    "n_anchor",
    "anchor_mean",
    "center",
    "lower",
    "upper",
    "sigma_basis",
    "flagged",
]


def _cands(results: pd.DataFrame, reference: str) -> pd.DataFrame:
    out = candidate_scores(unperturbed(results), CONTEXT_KEYS, reference)
    return out.astype({c: str for c in [*KEYS, *ITEM]})


def run_shift(
    base: pd.DataFrame, later: pd.DataFrame, reference: str, n_boot: int, seed: int
) -> pd.DataFrame:
    """The later run against the baseline, per judge × mode × dimension (both already candidate scores)."""
    both = base.merge(later, on=[*KEYS, *ITEM, "source"], suffixes=("_old", "_new"))
    old, new = pair_outcomes(base, reference), pair_outcomes(later, reference)
    on = [c for c in [*KEYS, *ITEM, "source"] if c in old and c in new]
    flips = old.merge(new, on=on, suffixes=("_old", "_new"))
    rows = []
    for key, part in both.groupby(KEYS, sort=True):
        diff = (part["score_new"] - part["score_old"]).to_numpy(float)
        lo, hi = t_interval(diff.mean(), diff.std(ddof=1) if len(diff) > 1 else np.nan, len(diff))
        agree = pair_agreement(
            np.floor(part["score_old"] + 0.5), np.floor(part["score_new"] + 0.5), n_boot, seed
        )
        f = flips.loc[(flips[KEYS] == list(key)).all(axis=1)]
        flip = float((f["outcome_old"] != f["outcome_new"]).mean()) if len(f) else np.nan
        rows.append(
            dict(zip(KEYS, key, strict=True))
            | {
                "n": len(diff),
                "mean_shift": float(diff.mean()),
                "mean_shift_lo": float(lo),
                "mean_shift_hi": float(hi),
                "n_pairs": len(f),
                "flip_rate": flip,
                "kappa_w": agree["kappa_w"],
                "kappa_w_lo": agree["kappa_w_lo"],
                "kappa_w_hi": agree["kappa_w_hi"],
            }
        )
    return pd.DataFrame(rows, columns=[c for c in SHIFT_COLUMNS if c != "run"])


def _sigma_of_mean(sd: np.ndarray, n_scored: np.ndarray) -> tuple[float, str]:
    """The variance of the baseline's anchor mean from its candidates' sample spread, and its basis; the
    floor `SD_FLOOR` per candidate where the baseline shows no spread at all."""
    var_mean = float(np.nansum(sd**2 / n_scored)) / len(sd) ** 2
    if var_mean > 0:
        return var_mean, FROM_SAMPLES
    basis = ONE_SAMPLE if (n_scored <= 1).all() else DETERMINISTIC
    return SD_FLOOR**2 / len(sd), basis


def _mean(x: np.ndarray) -> float:
    """`Series.mean` on an array (NaN skipped), to the last bit, without a Series per call."""
    missing = np.isnan(x)
    with np.errstate(invalid="ignore", divide="ignore"):  # every score missing: NaN, as pandas gives
        return float(np.where(missing, 0.0, x).sum() / (len(x) - missing.sum()))


def control_chart(runs: Sequence[tuple[str, pd.DataFrame]]) -> pd.DataFrame:
    """Per judge × mode × dimension and run: the anchor set's mean score against the baseline's limits.
    Runs are keyed by position (the first is the baseline), so two runs with the same label stay two.

    The anchor set (the items every run scored) is found for every judge × mode × dimension at once, and each
    group is then read from arrays: one pass, however many judges."""
    labels = [label for label, _ in runs]
    stacked = pd.concat([c.assign(_run=i) for i, (_, c) in enumerate(runs)], ignore_index=True)
    items = stacked.groupby([*KEYS, *ITEM], sort=False, dropna=False)
    item = items.ngroup().to_numpy()
    in_anchor = (items["_run"].transform("nunique") == len(labels)).to_numpy()
    group = stacked.groupby(KEYS, sort=True).ngroup().to_numpy()  # NaN (or -1): a missing key, never charted
    keys = [stacked[k].to_numpy() for k in KEYS]
    run, score = stacked["_run"].to_numpy(), stacked["score"].to_numpy(float)
    sd, n_scored = stacked["sd"].to_numpy(float), stacked["n_scored"].to_numpy(float)
    charted = np.flatnonzero(in_anchor & (group >= 0))  # rows of an anchor item with every key present
    by_group = charted[np.argsort(group[charted], kind="stable")]  # each group's rows together, in row order
    rows = []
    for at in np.split(by_group, np.flatnonzero(np.diff(group[by_group])) + 1):
        if not len(at):  # no item common to every run (or a run without this judge × mode × dimension)
            continue
        base = at[run[at] == 0]
        center = _mean(score[base])
        var_mean, basis = _sigma_of_mean(sd[base], n_scored[base])
        half = SIGMAS * np.sqrt(2 * var_mean)
        key = {k: v[at[0]] for k, v in zip(KEYS, keys, strict=True)}
        n_anchor = len(np.unique(item[at]))
        for i, label in enumerate(labels):
            point = _mean(score[at[run[at] == i]])
            rows.append(
                key
                | {
                    "run": label,
                    "n_anchor": n_anchor,
                    "anchor_mean": point,
                    "center": center,
                    "lower": center - half,
                    "upper": center + half,
                    "sigma_basis": basis,
                    "flagged": bool(i > 0 and not (center - half <= point <= center + half)),
                }
            )
    return pd.DataFrame(rows, columns=CHART_COLUMNS)


def drift_tables(
    runs: Sequence[tuple[str, pd.DataFrame]], reference: str = "reference", n_boot: int = 1000, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(each later run's shift against the first; the control chart) from (label, results) in date order."""
    cands = [(label, _cands(results, reference)) for label, results in runs]
    shifts = [run_shift(cands[0][1], c, reference, n_boot, seed).assign(run=label) for label, c in cands[1:]]
    shift = pd.concat(shifts, ignore_index=True) if shifts else pd.DataFrame(columns=SHIFT_COLUMNS)
    return shift[SHIFT_COLUMNS], control_chart(cands)


def run_date(folder: Path) -> str | None:
    """The refresh date a run's manifests record (`cache_refresh`), if any."""
    for path in sorted(folder.rglob(MANIFEST_NAME)):
        date = read_manifest(path).cache_refresh  # an unreadable manifest: one line (the order depends on it)
        if date:
            return date
    return None


def run_datasets(folder: Path) -> set[str]:
    """The dataset hashes a run's manifests record (empty when none says)."""
    hashes = set()
    for path in sorted(folder.rglob(MANIFEST_NAME)):
        value = read_manifest(path).dataset_hash  # an unreadable manifest: one line (ManifestError)
        if value:
            hashes.add(value)
    return hashes


def check_same_dataset(folders: Sequence[Path]) -> None:
    """A ValueError in one line when two runs' manifests record different datasets: their candidates are not
    the same prompts, and a drift between them would measure the data, not the judge."""
    seen = [(f, run_datasets(f)) for f in folders]
    known = [(f, h) for f, h in seen if h]
    for f, h in known[1:]:
        if h != known[0][1]:
            raise ValueError(
                f"{known[0][0]} and {f} are runs of different datasets (dataset hash "
                f"{', '.join(sorted(known[0][1]))} vs {', '.join(sorted(h))}): drift compares runs of the same prompts"
            )


def unique_labels(folders: Sequence[Path], dates: Sequence[str | None]) -> list[str]:
    """One label per run, ``<refresh date> <folder name>``; where two coincide, the folders' paths tell them
    apart (and, for the same path given twice, the position)."""
    labels = [f"{d or ''} {f.name}".strip() for f, d in zip(folders, dates, strict=True)]
    if len(set(labels)) < len(labels):
        labels = [f"{d or ''} {f}".strip() for f, d in zip(folders, dates, strict=True)]
    if len(set(labels)) < len(labels):
        labels = [f"{label} (#{i + 1})" for i, label in enumerate(labels)]
    return labels


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point."""
    parser = argparse.ArgumentParser(prog="python -m analysis.drift", description=__doc__.splitlines()[0])
    parser.add_argument(
        "runs",
        nargs="+",
        help="run folders of the same prompts, the baseline first (a run "
        "with a refresh date in its manifest is ordered by it)",
    )
    parser.add_argument("--out", help="output folder (default: drift/ inside the latest run's folder)")
    parser.add_argument("--reference", default="reference")
    parser.add_argument("--n-boot", type=int, default=1000)
    args = parser.parse_args(argv)
    if len(args.runs) < 2:
        print("error: drift needs at least two runs of the same prompts", file=sys.stderr)
        return 2
    try:
        folders = [Path(r) for r in args.runs]
        dates = [run_date(f) for f in folders]
        if all(dates):  # every run dated: in date order (a stable sort keeps the given order within a date)
            folders = [f for _, f in sorted(zip(dates, folders, strict=True), key=lambda t: str(t[0]))]
        check_same_dataset(folders)
        labels = unique_labels(folders, [run_date(f) for f in folders])
        runs = [(label, load_results(f)) for label, f in zip(labels, folders, strict=True)]
        shift, chart = drift_tables(runs, args.reference, args.n_boot)
        if chart.empty:
            raise ValueError(
                f"nothing to compare: no judge × mode × dimension has a candidate scored in every run of "
                f"{', '.join(map(str, folders))}"
            )
        out = Path(args.out) if args.out else folders[-1] / "drift"
        out.mkdir(parents=True, exist_ok=True)
        write_csv(shift, out / "drift_shift.csv")
        write_csv(chart, out / "drift_chart.csv")
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    floors = chart.loc[chart["sigma_basis"] != FROM_SAMPLES].drop_duplicates(KEYS)
    for r in floors.to_dict("records"):
        print(
            f"note: {r['judge']} [{r['mode']}] {r['dimension']}: σ uses the {r['sigma_basis']}",
            file=sys.stderr,
        )
    flagged = chart.loc[chart["flagged"]]
    for r in shift.to_dict("records"):
        print(
            f"{r['judge']} [{r['mode']}] {r['dimension']}, {r['run']}: mean shift {r['mean_shift']:+.3f} "
            f"[{r['mean_shift_lo']:+.3f}, {r['mean_shift_hi']:+.3f}] over {r['n']} candidates, flip rate "
            f"{r['flip_rate']:.2f}, κ_w {r['kappa_w']:.2f}",
            file=sys.stderr,
        )
    print(
        f"{len(flagged)} of {int((chart['run'] != labels[0]).sum())} control-chart points outside the "
        f"baseline's ±{SIGMAS:g}σ limits -> {out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
