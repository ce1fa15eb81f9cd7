"""Latent-truth models (crowd-kit) and the label frames they read: one fit per model, no bootstrap.

Raters are judges (labelled ``judge [mode]``) and human annotators (``human:<annotator>``); an item is one
(instance, generator, dimension) with the rater's win / tie / loss vs the reference (`outcome_labels`), or
one (instance, candidate, dimension) with the rater's candidate score rounded to the rubric scale
(`score_labels`). The models are crowd-kit's — Dawid–Skene (a confusion matrix per rater), MACE (a
competence per rater), GLAD (an ability per rater) — next to majority vote as the baseline.

Every fit reports, per rater, `accuracy`: the expected share of the rater's labels that equal the latent
label, Σ_items P(z_i = y_ri) / n_r, which reads the same for every model. Dawid–Skene also gives the model's
own accuracy Σ_c p_c · e_r[c, c] (`model_accuracy`) and the full confusion matrix. The bootstrap tables and
the CLI built on these fits are in `analysis.latent`.

The models assume raters err independently, so a judge enters each fit once: one fit per judge mode
(`mode_groups`), never the same judge in two modes as two raters (its errors would count twice: three
experts at 80% plus a judge that turns every tie into a win, entered twice, put the latent win rate at 41%
where the truth is 29%). Two raters that answer (nearly) alike break the same assumption:
`duplicate_raters` finds them so the tables can warn.

Dawid–Skene, MACE and majority vote run on arrays here (`dawid_skene_em`, `mace_em`: crowd-kit's models,
tested equal to its fits); only GLAD (opt-in) imports crowd-kit, whose `aggregation` package loads nltk
(0.6 s of CPU at a report's start, issue 35, item 4).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import pandas as pd
from scipy import special, stats

from analysis.stats import humans as human_mod
from analysis.stats.scores import candidate_scores, dimension_directions
from analysis.stats.winrate import ITEM_KEYS

SEP = " | "
#: Two raters agreeing on at least this share of at least DUPLICATE_MIN_ITEMS shared items are duplicates.
DUPLICATE_AGREEMENT = 0.95
DUPLICATE_MIN_ITEMS = 5


T = TypeVar("T")


def fitted(value: T | None, what: str) -> T:
    """A fitted model's attribute, which crowd-kit types as optional (None only before `fit`)."""
    if value is None:
        raise RuntimeError(f"{what} is missing after fitting")
    return value


@dataclass(frozen=True)
class LatentFit:
    """One model's answer: item posteriors (task × label), per-rater accuracy, and model parameters."""

    method: str
    posteriors: pd.DataFrame
    accuracy: pd.Series
    parameter: pd.Series | None = None  # DS model accuracy, MACE competence, GLAD ability
    confusion: pd.DataFrame | None = None  # DS: (rater, observed label) × true label

    @property
    def labels(self) -> pd.Series:
        """The most probable latent label per task."""
        return self.posteriors.idxmax(axis=1)


Fitter = Callable[[pd.DataFrame], LatentFit]


def outcome_labels(
    results: pd.DataFrame,
    humans: pd.DataFrame | None = None,
    reference: str = "reference",
    outcomes: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Win / tie / loss labels (1 / 0 / -1) per rater and item, as crowd-kit's task / worker / label frame
    (plus the item's instance_id, source, dimension, the rater's kind and mode: a judge's, or ``human``).
    The human majority is left out: it is an aggregate, not a rater. Fit one `mode_groups` group at a time.
    `outcomes`: `rater_outcomes(results, humans, reference)` when the caller has it (the registry's
    `StudyInputs.outcomes`), so it is not computed twice."""
    out = human_mod.rater_outcomes(results, humans, reference) if outcomes is None else outcomes
    out = out.loc[out["kind"] != "majority"]
    pair = ["candidate_id"] if "candidate_id" in out else []  # with humans: the pairs they rated
    task = out["instance_id"].str.cat([*(out[k] for k in pair), out["source"], out["dimension"]], sep=SEP)
    columns = {"task": task, "worker": out["rater"], "label": out["outcome"].astype(int), "kind": out["kind"]}
    columns |= {"mode": out["mode"]} | {k: out[k] for k in ITEM_KEYS}
    return pd.DataFrame(columns).reset_index(drop=True)


def mode_groups(labels: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """(mode, labels) per judge mode: that mode's judges plus every human, so each judge is one rater of each
    fit; the humans alone (mode ``human``) when no judge is among the labels."""
    if "mode" not in labels:
        return [("", labels)]
    is_judge = (labels["kind"] == "judge").to_numpy()
    modes = sorted(map(str, labels.loc[is_judge, "mode"].unique()))
    if not modes:
        return [(human_mod.HUMAN_MODE, labels)]
    mode = labels["mode"].astype(str).to_numpy()
    return [(m, labels.loc[~is_judge | (mode == m)].reset_index(drop=True)) for m in modes]


def duplicate_raters(
    labels: pd.DataFrame, threshold: float = DUPLICATE_AGREEMENT, min_items: int = DUPLICATE_MIN_ITEMS
) -> pd.DataFrame:
    """Rater pairs whose labels agree on at least `threshold` of the ≥ `min_items` items both labelled:
    `rater_a`, `rater_b`, `n` shared items, `share_equal`. The latent models take raters as
    independent, so a duplicate pair counts one answer twice and both look more reliable than they are."""
    wide = labels.pivot_table(index="task", columns="worker", values="label", aggfunc="first")
    raters = sorted(wide.columns, key=str)
    values = wide[raters].to_numpy(dtype=float)
    rows = []
    for i, a in enumerate(raters):
        for j in range(i + 1, len(raters)):
            both = ~np.isnan(values[:, i]) & ~np.isnan(values[:, j])
            n = int(both.sum())
            agree = float((values[both, i] == values[both, j]).mean()) if n else float("nan")
            if n >= min_items and agree >= threshold:
                rows.append({"rater_a": a, "rater_b": raters[j], "n": n, "share_equal": agree})
    return pd.DataFrame(rows, columns=["rater_a", "rater_b", "n", "share_equal"])


def score_task(frame: pd.DataFrame) -> pd.Series:
    """The item key of a candidate score, ``instance | candidate | dimension``: candidate ids are unique only
    within an instance, so two instances' ``c1`` are two items."""
    ids = frame[["instance_id", "candidate_id", "dimension"]].astype(str)
    return ids["instance_id"].str.cat([ids["candidate_id"], ids["dimension"]], sep=SEP)


def score_labels(results: pd.DataFrame, humans: pd.DataFrame | None = None) -> pd.DataFrame:
    """Candidate scores rounded half up to the rubric's integer scale, per rater and candidate × dimension,
    with the rater's kind and mode (a judge's, or ``human``): fit one `mode_groups` group at a time."""
    frames = [candidate_scores(results)]
    if humans is not None and len(humans):
        frames.append(candidate_scores(human_mod.human_results(humans, dimension_directions(results))))
    cols = ["judge", "mode", "instance_id", "candidate_id", "source", "dimension"]
    c = pd.concat([f[[*cols, "score"]].astype({k: str for k in cols}) for f in frames], ignore_index=True)
    rater = human_mod.rater_label(c["judge"], c["mode"])
    return pd.DataFrame(
        {
            "task": score_task(c),
            "candidate_id": c["candidate_id"],
            "worker": rater,
            "label": np.floor(c["score"].to_numpy() + 0.5).astype(int),
            "kind": np.where(c["mode"] == human_mod.HUMAN_MODE, "expert", "judge"),
            "mode": c["mode"],
        }
        | {k: c[k] for k in ITEM_KEYS}
    )


def expected_accuracy(labels: pd.DataFrame, posteriors: pd.DataFrame) -> pd.Series:
    """Per rater: mean over its items of the posterior probability of the label it gave."""
    post = posteriors.reindex(columns=sorted(set(posteriors.columns) | set(labels["label"])), fill_value=0.0)
    rows = post.index.get_indexer(labels["task"])
    cols = post.columns.get_indexer(labels["label"])
    p = post.to_numpy()[rows, cols]
    return pd.Series(p, index=labels["worker"].to_numpy()).groupby(level=0).mean().rename("accuracy")


def _crowd(labels: pd.DataFrame) -> pd.DataFrame:
    return labels[["task", "worker", "label"]]


@contextmanager
def _quiet() -> Iterator[None]:
    """crowd-kit 1.4 calls pandas APIs that pandas 3 deprecates; its warnings are not the user's business."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


def vote_table(labels: pd.DataFrame) -> pd.DataFrame:
    """Votes per task × label in crowd-kit's label order (its `MajorityVote`: `value_counts().unstack()`, not
    sorted), which breaks majority ties and orders the columns of its fits' tables."""
    return labels[["task", "label"]].value_counts().unstack("label", fill_value=0)


def majority_fit(labels: pd.DataFrame) -> LatentFit:
    """Majority vote as a latent model (the baseline the other fits beat): posterior = each label's share of
    the item's votes; `mv_agreement` per rater: the share of its (task, label) answers, each counted once,
    equal to the item's majority, ties broken as crowd-kit breaks them (`vote_table`; its
    `MajorityVote.skills_`, without importing crowd-kit). The strict human majority of the report is `analysis.stats.humans.majority_vote`."""
    votes = vote_table(labels)
    share = votes.sort_index().sort_index(axis=1)  # the posterior's rows and columns in sorted order
    post = share.div(share.sum(axis=1), axis=0)
    top = votes.idxmax(axis=1)  # ties: the first label in crowd-kit's order
    answers = labels[["task", "worker", "label"]].drop_duplicates()
    agree = answers["label"].to_numpy() == top.reindex(answers["task"]).to_numpy()
    skills = pd.Series(agree.astype(float)).groupby(answers["worker"].to_numpy()).mean()
    skills.index.name = "worker"
    return LatentFit("majority vote", post, expected_accuracy(labels, post), skills.rename("mv_agreement"))


#: crowd-kit's floor on a probability and its stopping tolerance on the evidence bound per label
DS_EPS, DS_TOL = 1e-10, 1e-5


def dawid_skene_em(
    task: np.ndarray, worker: np.ndarray, label: np.ndarray, shape: tuple[int, int, int], n_iter: int = 100
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dawid–Skene EM as crowd-kit 1.4 runs it (`DawidSkene.fit`), on integer codes with array operations
    (crowd-kit's pandas joins and group-bys took 0.4 s a fit on 225 labels): start from the vote shares, then
    E-step (log2 likelihoods shifted by their row maximum), prior = mean posterior, M-step (the posterior mass
    per rater × given label, floored at DS_EPS, normalised per true label over the labels the rater gave),
    until the evidence bound per label rises by less than DS_TOL, with crowd-kit's floors on the prior and
    the returned posteriors. `shape` is (T, W, L); returns (posteriors T × L, prior L, errors W × L × L:
    rater, given label, true label; 0 for a label the rater never gave)."""
    n_tasks, n_workers, n_labels = shape
    cell = worker * n_labels + label  # the (rater, given label) row of the error matrix
    seen = np.bincount(cell, minlength=n_workers * n_labels) > 0

    def by(index: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
        return np.stack([np.bincount(index, values[:, k], size) for k in range(n_labels)], axis=-1)

    def m_step(post: np.ndarray) -> np.ndarray:
        mass = np.where(seen[:, None], np.maximum(by(cell, post[task], n_workers * n_labels), DS_EPS), 0.0)
        mass = mass.reshape(n_workers, n_labels, n_labels)
        return mass / mass.sum(axis=1, keepdims=True)

    def e_step(prior: np.ndarray, errors: np.ndarray) -> np.ndarray:
        logs = np.log2(prior) + by(task, np.log2(errors.reshape(-1, n_labels)[cell]), n_tasks)
        scaled = np.exp2(logs - logs.max(axis=1, keepdims=True))
        return scaled / scaled.sum(axis=1, keepdims=True)

    votes = np.zeros((n_tasks, n_labels))
    np.add.at(votes, (task, label), 1.0)
    post = votes / votes.sum(axis=1, keepdims=True)
    prior, errors, loss = post.mean(axis=0), m_step(post), -np.inf
    for _ in range(n_iter):
        post = e_step(np.maximum(prior, DS_EPS), errors)
        prior = np.maximum(post.mean(axis=0), DS_EPS)
        errors = m_step(post)
        joint = (post[task] * (np.log(errors.reshape(-1, n_labels)[cell]) + np.log(prior))).sum()
        post = np.maximum(post, DS_EPS)
        new_loss = (joint - (np.log(post) * post).sum()) / len(task)
        if new_loss - loss < DS_TOL:
            break
        loss = new_loss
    return post, prior, errors


def dawid_skene(labels: pd.DataFrame, n_iter: int = 100) -> LatentFit:
    """Dawid–Skene EM (crowd-kit's model and defaults, `dawid_skene_em`; equal to crowd-kit's fit to 1e-9,
    tested): a full confusion matrix per rater and a label prior."""
    tasks, task_names = pd.factorize(labels["task"])  # crowd-kit's orders: first appearance
    workers, worker_names = pd.factorize(labels["worker"])
    label_names = vote_table(labels).columns  # crowd-kit's column order
    codes = label_names.get_indexer(labels["label"])
    shape = (len(task_names), len(worker_names), len(label_names))
    post, prior, errors = dawid_skene_em(tasks, workers, codes, shape, n_iter)
    names = pd.Index(label_names, name="label")
    probas = pd.DataFrame(post, index=pd.Index(task_names, name="task"), columns=names)
    full = pd.MultiIndex.from_product([pd.Index(worker_names), names], names=["worker", "label"])
    confusion = pd.DataFrame(errors.reshape(-1, len(names)), index=full, columns=names)
    diag = np.einsum("c,wcc->w", prior, errors)
    model_acc = pd.Series(diag, index=pd.Index(worker_names), name="model_accuracy")
    return LatentFit("Dawid-Skene", probas, expected_accuracy(labels, probas), model_acc, confusion)


#: crowd-kit MACE's defaults, which `mace_em` reproduces: variational M-step with Beta(α, β) priors on the
#: knowing probability and a symmetric Dirichlet(10) on the spamming strategy, uniform(1, 1.5) initial values.
MACE_ALPHA, MACE_BETA, MACE_STRATEGY_PRIOR, MACE_NOISE = 0.5, 0.5, 10.0, 0.5


@dataclass(frozen=True)
class MaceParams:
    """MACE's parameters, with a leading replicate axis (B): P(spamming, knowing) per rater (B × W × 2), the
    spamming strategy (B × W × L) and the item posteriors (B × T × L)."""

    spamming: np.ndarray
    thetas: np.ndarray
    posteriors: np.ndarray


def mace_em(
    task: np.ndarray,
    worker: np.ndarray,
    label: np.ndarray,
    shape: tuple[int, int, int],
    seed: int = 0,
    n_iter: int = 50,
    weights: np.ndarray | None = None,
) -> MaceParams:
    """MACE's variational EM (Hovy et al. 2013, as crowd-kit 1.4 runs it) on integer codes, vectorised over
    observations and over bootstrap replicates: `weights` (B × T, how often each item is drawn) give B fits
    at once, each as if the item were repeated that often (no weights: one fit). `shape` is (T, W, L).

    crowd-kit loops in pandas group-bys (0.1 s per E-step on 1,600 labels) and indexes its strategy counts in
    sorted-name order against factorised codes, which swaps raters' strategies when the two orders differ;
    here codes are used throughout. With the same codes in both orders the fits agree to 1e-9 (tested). Its
    restarts all start from the same values (an integer `random_state` reseeds each), so one run is the fit."""
    n_tasks, n_workers, n_labels = shape
    w_item = np.ones((1, n_tasks)) if weights is None else np.asarray(weights, dtype=float)
    n_rep = w_item.shape[0]
    uniform = stats.uniform(1, 1 + MACE_NOISE)
    spam = uniform.rvs(size=(n_workers, 2), random_state=seed)
    theta = uniform.rvs(size=(n_workers, n_labels), random_state=seed)
    spam = np.broadcast_to(spam / spam.sum(axis=1, keepdims=True), (n_rep, n_workers, 2)).copy()
    theta = np.broadcast_to(theta / theta.sum(axis=1, keepdims=True), (n_rep, n_workers, n_labels)).copy()
    w_obs = w_item[:, task]  # B × n
    rep = np.arange(n_rep)[:, None]
    onehot = label[None, :, None] == np.arange(n_labels)  # 1 × n × L
    flat_t = (rep * n_tasks + task).ravel()
    flat_wl = ((rep * n_workers + worker) * n_labels + label).ravel()
    flat_w = (rep * n_workers + worker).ravel()

    def e_step() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        known = spam[rep, worker, 0] * theta[rep, worker, label]  # B × n: P(spam and this label)
        knows = spam[rep, worker, 1]
        g = known[..., None] + knows[..., None] * onehot  # B × n × L: P(label | truth = k)
        logs = np.stack(
            [np.bincount(flat_t, np.log(g[..., k]).ravel(), n_rep * n_tasks) for k in range(n_labels)], -1
        )
        gold = np.exp(logs).reshape(n_rep, n_tasks, n_labels) / n_labels
        inst = gold.sum(axis=2)
        per_task = gold[rep, task] / g  # B × n × L
        strategy = per_task.sum(axis=2) * known / inst[rep, task] * w_obs
        knowing = gold[rep, task, label] * knows / (known + knows) / inst[rep, task] * w_obs
        counts_s = np.bincount(flat_wl, strategy.ravel(), n_rep * n_workers * n_labels)
        counts_k0 = np.bincount(flat_w, strategy.ravel(), n_rep * n_workers)
        counts_k1 = np.bincount(flat_w, knowing.ravel(), n_rep * n_workers)
        k = np.stack([counts_k0, counts_k1], -1).reshape(n_rep, n_workers, 2)
        return gold, k, counts_s.reshape(n_rep, n_workers, n_labels)

    def normalise(x: np.ndarray, prior: np.ndarray) -> np.ndarray:
        norm = np.exp(special.digamma((x + prior).sum(axis=-1, keepdims=True)))
        return np.exp(special.digamma(x + prior)) / norm

    gold, knowing, strategy = e_step()
    priors = np.array([MACE_ALPHA, MACE_BETA])
    for _ in range(n_iter):
        spam = normalise(knowing, priors)
        theta = normalise(strategy, np.full(n_labels, MACE_STRATEGY_PRIOR))
        gold, knowing, strategy = e_step()
    return MaceParams(spam, theta, gold / gold.sum(axis=2, keepdims=True))


def mace(labels: pd.DataFrame, seed: int = 0, restarts: int = 2) -> LatentFit:
    """MACE: per rater, the probability of answering from knowledge rather than spamming. Fitted by
    `mace_em` (crowd-kit's model and defaults, vectorised; `restarts` is kept for the callers and changes
    nothing: crowd-kit's restarts all start from the same values)."""
    workers, names = pd.factorize(labels["worker"], sort=True)  # sorted: the fit does not depend on row order
    codes, label_names = pd.factorize(labels["label"], sort=True)
    tasks, task_names = pd.factorize(labels["task"], sort=True)
    shape = (len(task_names), len(names), len(label_names))
    fit = mace_em(tasks, workers, codes, shape, seed)
    probas = pd.DataFrame(fit.posteriors[0], index=task_names, columns=label_names)
    competence = pd.Series(fit.spamming[0, :, 1], index=names, name="competence")
    return LatentFit("MACE", probas, expected_accuracy(labels, probas), competence)


def glad(labels: pd.DataFrame) -> LatentFit:
    """GLAD (crowd-kit): per rater an ability α (higher is better, negative is adversarial)."""
    from crowdkit.aggregation import GLAD  # noqa: PLC0415 (crowd-kit loads nltk: only for a fit)

    with _quiet():
        model = GLAD(n_iter=50).fit(_crowd(labels))
    probas = fitted(model.probas_, "GLAD.probas_").rename_axis(columns=None)
    return LatentFit("GLAD", probas, expected_accuracy(labels, probas), model.alphas_.rename("ability"))
