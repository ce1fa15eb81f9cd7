"""Latent-truth aggregation: each item's latent label and each rater's reliability, from the labels alone.

This module turns the model fits into the report's tables (rater accuracy with bootstrap CIs, item
posteriors, latent win rates) and runs the CLI; the fits themselves (Dawid–Skene, MACE, GLAD and majority
vote on crowd-kit) and the label frames they read are in `analysis.stats.latent_models`. Bootstrap CIs resample
items; by default the posteriors stay at the full-data fit (vectorised, any `n_boot`), and on request the
model is refitted per replicate (crowd-kit's EM takes seconds per fit on small studies, so that is opt-in).

`python -m analysis.latent <run-or-multirun-dir> --humans FILE [--out DIR]` writes the tables as CSV.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.load.collect import load_humans, load_results
from analysis.robustness import note_perturbed, unperturbed
from analysis.stats import humans as human_mod
from analysis.stats.latent_models import (
    Fitter,
    LatentFit,
    dawid_skene,
    duplicate_raters,
    fitted,
    glad,
    mace,
    mace_em,
    majority_fit,
    mode_groups,
    outcome_labels,
)
from analysis.stats.scores import distinct_mask, map_distinct, split_groups
from analysis.stats.spec import CardField, Headline, Inputs, Section, Tables, TableSpec
from analysis.stats.winrate import ITEM_KEYS, check_reference, outcome_rates
from core.cells import write_csv
from core.intervals import percentile_ci, positive_int, trusted_bootstrap

#: Replicates × labels × classes per vectorised MACE refit (`_mace_refit_boot`): about 100 MB of float64.
REFIT_CELLS = 4_000_000


def _resample(labels: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    """Items drawn with replacement; a repeated item becomes distinct tasks (``task#k``)."""
    tasks = labels["task"].unique()
    drawn = rng.choice(len(tasks), size=len(tasks), replace=True)
    pos = pd.Series(np.arange(len(labels))).groupby(pd.Categorical(labels["task"], categories=tasks)).indices
    idx = [(pos[tasks[t]], k) for k, t in enumerate(drawn)]
    take = np.concatenate([p for p, _ in idx])
    copy = np.concatenate([np.full(len(p), k) for p, k in idx])
    out = labels.iloc[take].copy()
    out["task"] = out["task"].to_numpy() + "#" + copy.astype(str)
    return out


#: Replicates × items of item weights held at once by `_fixed_posterior_boots` (about 200 MB as float64): the
#: replicates are drawn in chunks of rows from one generator, the same stream as one draw of all of them.
FIXED_CELLS = 25_000_000


def _fixed_posterior_boot(
    labels: pd.DataFrame, fit: LatentFit, raters: pd.Index, n_boot: int, seed: int
) -> np.ndarray:
    """Accuracy replicates with items resampled and the posteriors held at the full-data fit: per replicate,
    item weights w ~ Multinomial(n, 1/n) and accuracy_r = Σ w_i P(z_i = y_ri) / Σ_{i rated by r} w_i."""
    return _fixed_posterior_boots(labels, [(fit, raters)], n_boot, seed)[0]


def _fixed_posterior_boots(
    labels: pd.DataFrame, fits: Sequence[tuple[LatentFit, pd.Index]], n_boot: int, seed: int
) -> list[np.ndarray]:
    """`_fixed_posterior_boot` for several fits of the same labels (n_boot × raters each) from one draw of
    the item weights: the weights of a seed are the same for every fit, so drawing them once (the draw is
    most of the cost: n binomials per replicate) gives each fit the replicates it would get alone. The
    weights come in chunks of replicates (`FIXED_CELLS`), so memory stays bounded at 10^5–10^6 items."""
    tasks, task_idx = np.unique(labels["task"].to_numpy(), return_inverse=True)
    columns, blocks = [], []
    for fit, raters in fits:
        rater_idx = raters.get_indexer(labels["worker"])
        post = fit.posteriors.reindex(
            index=tasks, columns=sorted(set(fit.posteriors.columns) | set(labels["label"]))
        )
        p = post.fillna(0.0).to_numpy()[task_idx, post.columns.get_indexer(labels["label"])]
        hit = np.zeros((len(tasks), len(raters)))
        rated = np.zeros_like(hit)
        np.add.at(hit, (task_idx, rater_idx), p)
        np.add.at(rated, (task_idx, rater_idx), 1.0)
        blocks += [hit, rated]
        columns.append(len(raters))
    sums = np.hstack(blocks)  # items × (hit, rated per fit)
    rng = np.random.default_rng(seed)
    share = np.full(len(tasks), 1 / len(tasks))
    step = max(1, FIXED_CELLS // max(1, len(tasks)))
    totals = np.concatenate(
        [
            rng.multinomial(len(tasks), share, size=min(step, n_boot - start)).astype(float) @ sums
            for start in range(0, n_boot, step)
        ]
    )
    out, at = [], 0
    with np.errstate(invalid="ignore", divide="ignore"):
        for r in columns:
            out.append(totals[:, at : at + r] / totals[:, at + r : at + 2 * r])
            at += 2 * r
    return out


def _mace_refit_boot(
    labels: pd.DataFrame, raters: pd.Index, n_boot: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(accuracy, competence) replicates (n_boot × raters) of MACE refitted on items resampled with
    replacement, all replicates in one vectorised EM: item weights w ~ Multinomial(n, 1/n) stand for the
    repeated items (`_resample`), and accuracy_r = Σ w_i P_b(z_i = y_ri) / Σ_{i rated by r} w_i."""
    workers, names = pd.factorize(labels["worker"], sort=True)
    codes, label_names = pd.factorize(labels["label"], sort=True)
    tasks, task_names = pd.factorize(labels["task"], sort=True)
    n = len(task_names)
    w = np.random.default_rng(seed).multinomial(n, np.full(n, 1 / n), size=n_boot).astype(float)
    shape = (n, len(names), len(label_names))
    step = max(1, REFIT_CELLS // max(1, len(tasks) * len(label_names)))  # replicates per EM: bounded memory
    fits = [
        mace_em(tasks, workers, codes, shape, seed, weights=w[i : i + step]) for i in range(0, n_boot, step)
    ]
    post = np.concatenate([f.posteriors for f in fits])
    p = post[:, tasks, codes] * w[:, tasks]  # B × labels
    flat = (np.arange(n_boot)[:, None] * len(names) + workers).ravel()
    hit = np.bincount(flat, p.ravel(), n_boot * len(names)).reshape(n_boot, len(names))
    rated = np.bincount(flat, w[:, tasks].ravel(), n_boot * len(names)).reshape(n_boot, len(names))
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = hit / rated
    competence = np.where(rated > 0, np.concatenate([f.spamming for f in fits])[:, :, 1], np.nan)
    order = names.get_indexer(raters)
    return acc[:, order], competence[:, order]


def competence_table(
    labels: pd.DataFrame,
    fit: LatentFit,
    fitter: Fitter | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    replicates: np.ndarray | None = None,
) -> pd.DataFrame:
    """Per rater: n items, accuracy vs the latent label (and the model's parameter), with bootstrap CIs
    over items. With a `fitter` every replicate refits the model (the parameter gets a CI too); without,
    the posteriors are held at the full-data fit (fast; ignores the model's own estimation error), or
    `replicates` gives those replicates already drawn (`_fixed_posterior_boots`, several fits at once)."""
    raters = pd.Index(fit.accuracy.index)
    par = np.full((n_boot if fitter else 0, len(raters)), np.nan)
    if fitter is None:
        acc = _fixed_posterior_boot(labels, fit, raters, n_boot, seed) if replicates is None else replicates
    elif fitter is mace:  # every replicate refitted at once (latent_models.mace_em)
        acc, par = _mace_refit_boot(labels, raters, n_boot, seed)
    else:
        rng = np.random.default_rng(seed)
        acc = np.full((n_boot, len(raters)), np.nan)
        for b in range(n_boot):
            boot = fitter(_resample(labels, rng))
            acc[b] = boot.accuracy.reindex(raters).to_numpy()
            if boot.parameter is not None:
                par[b] = boot.parameter.reindex(raters).to_numpy()
    kind = labels.drop_duplicates("worker").set_index("worker")["kind"]
    out = pd.DataFrame({"method": fit.method, "rater": raters, "kind": kind.reindex(raters).to_numpy()})
    out["n_items"] = labels.groupby("worker")["task"].nunique().reindex(raters).to_numpy()
    out["accuracy"] = fit.accuracy.to_numpy()
    out["accuracy_lo"], out["accuracy_hi"] = trusted_bootstrap(*percentile_ci(acc), out["n_items"])
    if fit.parameter is not None:
        name = str(fit.parameter.name)
        out[name] = fit.parameter.reindex(raters).to_numpy()
        out[f"{name}_lo"], out[f"{name}_hi"] = percentile_ci(par)
    out["ci"] = "refit" if fitter else "posteriors fixed"
    return out.sort_values("accuracy", ascending=False, ignore_index=True)


def posterior_table(labels: pd.DataFrame, fit: LatentFit) -> pd.DataFrame:
    """Per item: its keys, P(each label), the latent label, posterior entropy (bits) and the raters' votes."""
    items = labels.drop_duplicates("task").set_index("task")[list(ITEM_KEYS)]
    post = fit.posteriors.reindex(items.index).fillna(0.0)
    p = post.to_numpy(dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        entropy = -np.nansum(np.where(p > 0, p * np.log2(p), 0.0), axis=1)
    out = items.reset_index()
    for col in post.columns:
        out[f"p[{col}]"] = post[col].to_numpy()
    out["latent"] = post.idxmax(axis=1).to_numpy()
    out["entropy_bits"] = entropy
    out["votes"] = _votes(labels).reindex(out["task"]).to_numpy()
    return out.sort_values("entropy_bits", ascending=False, ignore_index=True)


def _votes(labels: pd.DataFrame) -> pd.Series:
    """task -> its labels in row order, joined by spaces: each distinct label turned to text once, one join
    per task (no pandas callback per group)."""
    text = map_distinct(labels["label"], str, missing="nan")  # a missing label reads "nan"
    groups = split_groups(labels, ["task"])
    return pd.Series(
        [" ".join(text[rows]) for _, rows in groups], index=[k[0] for k, _ in groups], dtype=object
    )


def latent_winrate(labels: pd.DataFrame, fit: LatentFit, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """Win / tie / loss rates on the latent labels next to every single rater's, per generator and
    dimension, with `delta_win` / `delta_tie` = rater minus latent on the items that rater labelled."""
    items = labels.drop_duplicates("task").set_index("task")[list(ITEM_KEYS)]
    latent = items.assign(outcome=fit.labels.reindex(items.index).astype(int).to_numpy(), rater="latent")
    per_rater = labels.rename(columns={"worker": "rater", "label": "outcome"})
    both = pd.concat([latent.reset_index(drop=True), per_rater[["rater", *ITEM_KEYS, "outcome"]]])
    rates = outcome_rates(both, ["rater", "source", "dimension"])
    # each rater is compared with the latent labels of the items it rated itself, never of other items
    paired = per_rater.assign(latent=fit.labels.reindex(per_rater["task"]).astype(int).to_numpy())
    own = paired.groupby(["rater", "source", "dimension"])["latent"].agg(
        win=lambda s: float((s == 1).mean()), tie=lambda s: float((s == 0).mean())
    )
    key = pd.MultiIndex.from_frame(rates[["rater", "source", "dimension"]])
    for name in ("win", "tie"):
        ref = own[name].reindex(key).to_numpy()
        rates[f"delta_{name}"] = np.where(rates["rater"] == "latent", 0.0, rates[name].to_numpy() - ref)
    rates.insert(0, "method", fit.method)
    return rates


def latent_tables(
    results: pd.DataFrame,
    humans: pd.DataFrame | None = None,
    reference: str = "reference",
    n_boot: int = 1000,
    seed: int = 0,
    refit_boot: int = 0,
    with_glad: bool = False,
    drop: Sequence[str] = (),
    outcomes: pd.DataFrame | None = None,
) -> dict[str, pd.DataFrame]:
    """The report's latent-model tables on win / tie / loss outcomes, one fit per judge mode (every judge of
    that mode and every annotator; `latent_models.mode_groups`), each table with its `mode`; a mode with
    fewer than three raters has no fit, and none at all is {}. `latent_duplicates` lists rater pairs that
    answer (nearly) alike (`note_duplicates` warns). `refit_boot` > 0 adds Dawid–Skene CIs from that many
    refits (slow: a full EM per replicate); GLAD is opt-in (`with_glad`: minutes on 10^4 items, where
    Dawid–Skene takes a second and MACE tens). `drop`: raters left out of every fit (`dropped`), e.g. one of a
    duplicate pair. `outcomes`: the `rater_outcomes` of these (unperturbed) results, when already made."""
    # perturbed rows: analysis.robustness
    labels = outcome_labels(unperturbed(results), humans, reference, outcomes)
    labels = labels.loc[~dropped(labels["worker"], drop)].reset_index(drop=True)
    parts: dict[str, list[pd.DataFrame]] = {}
    for mode, group in mode_groups(labels):
        if group["worker"].nunique() < 3 or group.empty:
            continue
        for name, table in _fit_tables(group, n_boot, seed, refit_boot, with_glad).items():
            parts.setdefault(name, []).append(table.assign(mode=mode))
    tables = {name: _mode_first(pd.concat(frames, ignore_index=True)) for name, frames in parts.items()}
    if tables and LATENT_DUPLICATES.need(tables).empty:
        del tables[LATENT_DUPLICATES.key]
    return tables


def _fit_tables(
    labels: pd.DataFrame, n_boot: int, seed: int, refit_boot: int, with_glad: bool
) -> dict[str, pd.DataFrame]:
    """The latent tables of one fit group (one rater per judge)."""
    ds = dawid_skene(labels)
    fits = [ds, majority_fit(labels), mace(labels, seed, restarts=1)] + ([glad(labels)] if with_glad else [])
    fixed = _fixed_posterior_boots(labels, [(f, pd.Index(f.accuracy.index)) for f in fits], n_boot, seed)
    competence = [
        competence_table(labels, f, None, n_boot, seed, acc) for f, acc in zip(fits, fixed, strict=True)
    ]
    if refit_boot:
        competence.append(competence_table(labels, ds, dawid_skene, refit_boot, seed))
        competence.append(competence_table(labels, fits[2], mace, refit_boot, seed))
    confusion = fitted(ds.confusion, "Dawid-Skene confusion")
    return {
        "latent_competence": pd.concat(competence, ignore_index=True),
        "latent_confusion": confusion.rename_axis(index=["rater", "observed"]).reset_index(),
        "latent_posteriors": posterior_table(labels, ds),
        "latent_winrate": latent_winrate(labels, ds, n_boot, seed),
        "latent_duplicates": duplicate_raters(labels),
    }


def _mode_first(table: pd.DataFrame) -> pd.DataFrame:
    """`mode` as the first column (after `method` where there is one)."""
    front = [c for c in ("method", "mode") if c in table]
    return table[[*front, *(c for c in table.columns if c not in front)]]


def dropped(workers: pd.Series, names: Sequence[str]) -> np.ndarray:
    """Which labels belong to a rater named in `names`: its label as the tables show it (``j2 [independent]``,
    ``human:x``), a judge's name (every mode of it) or an annotator's name."""
    wanted = set(names)

    def named(worker: object) -> bool:
        label = str(worker)
        return bool({label, label.split(" [", 1)[0], label.removeprefix("human:")} & wanted)

    return distinct_mask(workers, named)  # once per rater, not per label


def unknown_raters(workers: pd.Series, names: Sequence[str]) -> list[str]:
    """The names in `names` that match none of `workers` (a typo would otherwise drop nothing, silently)."""
    return [n for n in names if not dropped(workers, [n]).any()]


def duplicate_lines(tables: dict[str, pd.DataFrame]) -> list[str]:
    """One warning per pair of raters that answer (nearly) alike, saying what it does to the latent model."""
    dup = LATENT_DUPLICATES.of(tables)
    if dup is None or dup.empty:
        return []
    return [
        f"{r.rater_a} and {r.rater_b} ({r.mode}) give the same label on {r.share_equal:.0%} of {r.n} items: "
        "the latent models take raters as independent, so this answer counts twice and both look more "
        f"accurate than they are (their latent accuracy is not evidence); keep one of them: "
        f"--drop-rater {shlex.quote(str(r.rater_b))}"
        for r in dup.itertuples(index=False)
    ]


def note_duplicates(tables: dict[str, pd.DataFrame]) -> None:
    """The `duplicate_lines` as `warning:` lines on stderr (nothing when there are none)."""
    for line in duplicate_lines(tables):
        print(f"warning: {line}", file=sys.stderr)


SECTION_TITLE: str = Section.latent
SECTION_TEXT = (
    "One fit per judge mode: its raters are that mode's judges (each judge once) and the human annotators; "
    "an item is (instance, generator, dimension) with the rater's win / tie / loss vs the reference. "
    "Pairs of raters that answer (nearly) alike are listed: the models count their answer twice. "
    "`accuracy` = expected share of a rater's labels equal to the "
    "latent label, with bootstrap CIs over items (posteriors fixed, or `refit`). "
    "Posteriors: most uncertain items first. Win rates on latent labels vs each single rater (delta = rater − latent)."
)
SECTION_MISSING = "Fewer than three raters (judges of one mode and annotators): no latent model."


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: fit the latent models on a study's outcomes and write one CSV per table."""
    parser = argparse.ArgumentParser(prog="python -m analysis.latent", description=__doc__.split("\n")[0])
    parser.add_argument("root", help="a run or multirun folder (searched recursively)")
    parser.add_argument("--humans", help="human labels CSV (annotator, instance_id, candidate_id, ...)")
    parser.add_argument("--out", help="output folder (default: <root>/latent)")
    parser.add_argument("--reference", default="reference")
    parser.add_argument(
        "--n-boot", type=positive_int, default=1000, help="bootstrap replicates (posteriors fixed)"
    )
    parser.add_argument(
        "--refit-boot", type=int, default=0, help="also Dawid-Skene CIs from this many refits"
    )
    parser.add_argument("--glad", action="store_true", help="also fit GLAD (slow on large studies)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--drop-rater",
        action="append",
        default=[],
        metavar="NAME",
        help="leave this rater out of the fits (as the tables name it, e.g. 'j2 [independent]' or 'human:x', "
        "or a judge's or annotator's name); repeatable",
    )
    args = parser.parse_args(argv)
    if args.refit_boot < 0:
        print(f"error: --refit-boot {args.refit_boot}: need --refit-boot >= 0", file=sys.stderr)
        return 2
    try:
        results = load_results(args.root)
        check_reference(results, args.reference, args.root)
        humans = load_humans(args.humans) if args.humans else None
        if humans is not None:  # labels on no judge's dimension: one line here, not a traceback below
            human_mod.check_dimensions(humans, results["dimension"].dropna().unique(), args.humans)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    workers = outcome_labels(unperturbed(results), humans, args.reference)["worker"].drop_duplicates()
    unknown = unknown_raters(workers, args.drop_rater)
    if unknown:
        print(
            f"error: --drop-rater {', '.join(unknown)}: no such rater; the raters are "
            f"{', '.join(sorted(map(str, workers)))}",
            file=sys.stderr,
        )
        return 2
    note_perturbed(results, unperturbed(results))
    tables = latent_tables(
        results,
        humans,
        args.reference,
        args.n_boot,
        args.seed,
        refit_boot=args.refit_boot,
        with_glad=args.glad,
        drop=args.drop_rater,
    )
    if not tables:
        print(
            "error: the latent model needs at least three raters (judges of one mode and annotators)",
            file=sys.stderr,
        )
        return 2
    note_duplicates(tables)
    out = Path(args.out) if args.out else Path(args.root) / "latent"
    out.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        write_csv(table, out / f"{name}.csv")
    for _, part in LATENT_COMPETENCE.need(tables).groupby("method", sort=False):
        print(part.dropna(axis=1, how="all").round(3).to_string(index=False), end="\n\n")
    print(f"{len(tables)} tables -> {out}", file=sys.stderr)
    return 0


def _latent(key: str) -> Callable[[Inputs, Tables], pd.DataFrame | None]:
    """One table of the latent fits (`latent_tables`: one fit per study, shared by the latent tables)."""

    def compute(s: Inputs, _: Tables) -> pd.DataFrame | None:
        fits: dict[str, pd.DataFrame] = s.shared(
            "latent",
            lambda: latent_tables(s.cands, s.humans, s.reference, s.n_boot, s.seed, outcomes=s.outcomes),
        )
        return fits.get(key)

    return compute


def _rater_judge(table: pd.DataFrame) -> pd.DataFrame:
    """A latent table with the judge of each rater label ``judge [mode]`` (a ``human:`` name stays)."""
    if "rater" not in table:
        return table
    return table.assign(judge=table["rater"].astype(str).str.replace(r" \[[^\]]*\]$", "", regex=True))


LATENT_COMPETENCE: TableSpec = TableSpec(
    "latent_competence",
    _latent("latent_competence"),
    ("method", "mode", "rater", "accuracy", "accuracy_lo", "accuracy_hi"),
    section=Section.latent,
    headline=Headline("accuracy", "max", "highest accuracy"),
    card=CardField(
        "Latent-model competence (accuracy vs the latent label)",
        ("method", "mode", "rater", "accuracy", "accuracy_lo", "accuracy_hi"),
        "fewer than 3 raters (judges of one mode and annotators)",
        order=80,
        read=_rater_judge,
    ),
    meanings={
        "method": "latent-truth model (Dawid-Skene, MACE, GLAD, majority vote)",
        "ci": "95% CI",
        "accuracy": "share matching the latent label",
        "competence": "latent-model competence of the rater",
        "model_accuracy": "accuracy from the model's confusion",
        "mv_agreement": "agreement with the majority vote",
    },
)
LATENT_CONFUSION: TableSpec = TableSpec(
    "latent_confusion",
    _latent("latent_confusion"),
    ("mode", "rater", "observed"),
    section=Section.latent,
    meanings={
        "observed": "rater's label (row) vs the latent label (columns)",
    },
)
LATENT_POSTERIORS: TableSpec = TableSpec(
    "latent_posteriors",
    _latent("latent_posteriors"),
    ("mode", "latent", "entropy_bits"),
    section=Section.latent,
    meanings={
        "instance_id": "dataset instance",
        "task": "item of the latent model",
        "latent": "the latent model's most probable label",
        "votes": "the raters' labels",
        "entropy_bits": "posterior entropy (bits)",
    },
)
LATENT_WINRATE: TableSpec = TableSpec(
    "latent_winrate",
    _latent("latent_winrate"),
    ("method", "mode", "rater", "source", "dimension", "n", "win", "delta_win"),
    section=Section.latent,
    headline=Headline("win", "max", "highest win rate"),
)
LATENT_DUPLICATES: TableSpec = TableSpec(
    "latent_duplicates",
    _latent("latent_duplicates"),
    ("rater_a", "rater_b", "mode"),
    section=Section.latent,
    meanings={
        "share_equal": "share of the items both raters labelled on which they give the same label (≥ 0.95: the latent models count one answer twice)",
    },
)


if __name__ == "__main__":
    raise SystemExit(main())
