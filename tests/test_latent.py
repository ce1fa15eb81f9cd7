"""Latent-truth aggregation: planted raters with known confusion matrices, and the study wiring."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis import latent
from analysis.load.synthetic import synthetic_humans, synthetic_results
from analysis.stats import latent_models
from analysis.tables.registry import StudyInputs
from tests.support.cli import run as run_cli

LABELS = np.array([-1, 0, 1])


def _confusion(acc: float, k: int = 3) -> np.ndarray:
    """Rows = true label, columns = given label: `acc` on the diagonal, the rest spread evenly."""
    m = np.full((k, k), (1 - acc) / (k - 1))
    np.fill_diagonal(m, acc)
    return m


def _adversary(p_wrong: float, k: int = 3) -> np.ndarray:
    """Says the next label (true -1 -> 0, 0 -> 1, 1 -> -1) with probability `p_wrong`."""
    m = np.full((k, k), (1 - p_wrong) / (k - 1))
    for t in range(k):
        m[t, (t + 1) % k] = p_wrong
        m[t, t] = (1 - p_wrong) / (k - 1)
    return m


def _simulate(confusions: dict[str, np.ndarray], n_items: int, seed: int) -> tuple[pd.DataFrame, pd.Series]:
    rng = np.random.default_rng(seed)
    truth = rng.choice(3, size=n_items, p=[0.3, 0.3, 0.4])
    frames = []
    for name, m in confusions.items():
        given = np.array([rng.choice(3, p=m[t]) for t in truth])
        frames.append(
            pd.DataFrame({"task": [f"i{i}" for i in range(n_items)], "worker": name, "label": LABELS[given]})
        )
    labels = pd.concat(frames, ignore_index=True).assign(
        kind="judge", instance_id="x", source="g", dimension="d"
    )
    labels["instance_id"] = labels["task"]
    return labels, pd.Series(LABELS[truth], index=[f"i{i}" for i in range(n_items)])


def _true_accuracy(m: np.ndarray, prior=(0.3, 0.3, 0.4)) -> float:
    return float(np.dot(prior, np.diag(m)))


def test_dawid_skene_recovers_planted_accuracies_within_tolerance() -> None:
    confusions = {"a": _confusion(0.9), "b": _confusion(0.75), "c": _confusion(0.6), "d": _confusion(0.5)}
    labels, truth = _simulate(confusions, 400, seed=1)
    fit = latent_models.dawid_skene(labels)
    # tolerance 0.06: a binomial SE of ~0.025 at 400 items, plus EM's estimation error
    for name, m in confusions.items():
        assert abs(fit.parameter[name] - _true_accuracy(m)) < 0.06, name
        assert abs(fit.accuracy[name] - _true_accuracy(m)) < 0.06, name
    # the confusion matrix itself: P(given = t | true = t) per class within 0.1
    for name, m in confusions.items():
        for t, lab in enumerate(LABELS):
            assert abs(fit.confusion.loc[(name, lab), lab] - m[t, t]) < 0.1
    assert (fit.labels.reindex(truth.index) == truth).mean() > 0.85


def test_latent_models_beat_majority_vote_with_an_adversarial_rater() -> None:
    confusions = {
        "good": _confusion(0.8),
        "fair": _confusion(0.65),
        "weak": _confusion(0.55),
        "adversary": _adversary(0.9),
        "adversary2": _adversary(0.8),
    }
    labels, truth = _simulate(confusions, 400, seed=2)
    mv = latent_models.majority_fit(labels)
    ds = latent_models.dawid_skene(labels)
    acc = {f.method: float((f.labels.reindex(truth.index) == truth).mean()) for f in (mv, ds)}
    assert acc["Dawid-Skene"] > acc["majority vote"] + 0.1, acc
    # DS sees through the adversaries: their accuracy vs the latent label is ~their true (low) accuracy
    assert abs(ds.accuracy["adversary"] - _true_accuracy(confusions["adversary"])) < 0.06
    assert abs(ds.accuracy["good"] - _true_accuracy(confusions["good"])) < 0.06
    # MACE ranks the good rater above the adversaries (competence = P(not spamming))
    m = latent_models.mace(labels)
    assert m.parameter["good"] > max(m.parameter["adversary"], m.parameter["adversary2"])


def _crowdkit_fits(labels: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.Series, pd.Series]:
    """crowd-kit 1.4's own Dawid–Skene (posteriors, errors on every rater × label, model accuracy) and
    majority-vote skills: the reference `latent_models` reproduces without importing crowd-kit."""
    from crowdkit.aggregation import DawidSkene, MajorityVote

    data = labels[["task", "worker", "label"]]
    with latent_models._quiet():
        ds, mv = DawidSkene(n_iter=100).fit(data), MajorityVote().fit(data)
    prior, raw = ds.priors_, ds.errors_
    workers = raw.index.get_level_values("worker").unique()
    full = pd.MultiIndex.from_product([workers, prior.index], names=["worker", "label"])
    errors = raw.reindex(index=full, columns=prior.index, fill_value=0.0)
    accuracy = pd.Series({w: sum(prior[c] * errors.loc[(w, c), c] for c in prior.index) for w in workers})
    return ds.probas_, errors, accuracy, mv.skills_


@pytest.mark.parametrize("case", ["planted", "missing labels", "repeated answers", "two labels"])
def test_dawid_skene_and_majority_are_crowdkit_s(case: str) -> None:
    """Known value: the array EM gives crowd-kit's fit (same posteriors, confusion matrices, model accuracy,
    row and column orders, to 1e-12) and majority vote its agreement, ties broken alike."""
    confusions = {"a": _confusion(0.8), "b": _confusion(0.6), "c": _adversary(0.7), "d": _confusion(0.45)}
    labels, _ = _simulate(confusions, 60, seed=7)
    if case == "missing labels":
        labels = labels.sample(frac=0.7, random_state=1).reset_index(drop=True)
    elif case == "repeated answers":
        labels = pd.concat([labels, labels.iloc[::5]], ignore_index=True)
    elif case == "two labels":
        labels = labels.assign(label=labels["label"].clip(lower=0))
    probas, errors, accuracy, skills = _crowdkit_fits(labels)
    ds, mv = latent_models.dawid_skene(labels), latent_models.majority_fit(labels)
    assert list(ds.posteriors.index) == list(probas.index)
    assert list(ds.posteriors.columns) == list(probas.columns)
    np.testing.assert_allclose(ds.posteriors.to_numpy(), probas.to_numpy(), rtol=0, atol=1e-12)
    assert ds.confusion is not None and list(ds.confusion.index) == list(errors.index)
    assert list(ds.confusion.columns) == list(errors.columns)
    np.testing.assert_allclose(ds.confusion.to_numpy(), errors.to_numpy(), rtol=0, atol=1e-12)
    assert ds.parameter is not None
    np.testing.assert_allclose(ds.parameter.to_numpy(), accuracy.reindex(ds.parameter.index), atol=1e-12)
    assert mv.parameter is not None
    np.testing.assert_allclose(mv.parameter.to_numpy(), skills.reindex(mv.parameter.index), atol=1e-12)


def test_expected_accuracy_known_value() -> None:
    labels = pd.DataFrame({"task": ["t1", "t1", "t2"], "worker": ["a", "b", "a"], "label": [1, 0, 0]})
    post = pd.DataFrame({1: [0.8, 0.5], 0: [0.2, 0.5]}, index=["t1", "t2"])
    acc = latent_models.expected_accuracy(labels, post)
    assert acc["a"] == pytest.approx((0.8 + 0.5) / 2)
    assert acc["b"] == pytest.approx(0.2)


def test_majority_fit_posterior_is_vote_share() -> None:
    labels = pd.DataFrame({"task": ["t"] * 4, "worker": list("abcd"), "label": [1, 1, 1, 0]})
    fit = latent_models.majority_fit(labels)
    assert fit.posteriors.loc["t", 1] == pytest.approx(0.75)
    assert fit.labels["t"] == 1


def test_competence_ci_covers_truth() -> None:
    confusions = {"a": _confusion(0.85), "b": _confusion(0.7), "c": _confusion(0.6), "d": _confusion(0.6)}
    labels, _ = _simulate(confusions, 300, seed=3)
    table = latent.competence_table(labels, latent_models.dawid_skene(labels), None, n_boot=2000).set_index(
        "rater"
    )
    for name, m in confusions.items():
        lo, hi = table.loc[name, ["accuracy_lo", "accuracy_hi"]]
        assert lo <= table.loc[name, "accuracy"] <= hi
        assert lo - 0.02 < _true_accuracy(m) < hi + 0.02, name  # 95% CI (+ EM slack) covers the truth
        assert 0.04 < hi - lo < 0.2  # a binomial-sized interval at 300 items


def test_fixed_posterior_bootstrap_known_value() -> None:
    """Two items, one rater who matches the posterior fully on t1 and not at all on t2: replicates are
    0, 0.5 or 1 with probabilities 1/4, 1/2, 1/4 (both draws t2, one each, both t1)."""
    labels = pd.DataFrame({"task": ["t1", "t2"], "worker": ["a", "a"], "label": [1, 1], "kind": "judge"})
    fit = latent_models.LatentFit(
        "x", pd.DataFrame({1: [1.0, 0.0], 0: [0.0, 1.0]}, index=["t1", "t2"]), pd.Series({"a": 0.5})
    )
    boot = latent._fixed_posterior_boot(labels, fit, pd.Index(["a"]), 4000, 0)[:, 0]
    assert set(np.unique(boot)) == {0.0, 0.5, 1.0}
    assert np.mean(boot == 0.5) == pytest.approx(0.5, abs=0.03)


def test_fixed_posterior_boots_share_one_weight_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several fits from one draw of the item weights, drawn in chunks of replicates, give each fit the
    replicates of the one-draw formula (weights w ~ Multinomial(n, 1/n), Σ w P / Σ w) it had alone."""
    labels, _ = _simulate({"a": _confusion(0.9), "b": _confusion(0.7), "c": _confusion(0.6)}, 80, seed=2)
    fits = [latent_models.dawid_skene(labels), latent_models.majority_fit(labels)]
    monkeypatch.setattr(latent, "FIXED_CELLS", 80 * 7)  # chunks of 7 replicates
    got = latent._fixed_posterior_boots(labels, [(f, pd.Index(f.accuracy.index)) for f in fits], 50, 4)
    tasks, task_idx = np.unique(labels["task"].to_numpy(), return_inverse=True)
    w = np.random.default_rng(4).multinomial(len(tasks), np.full(len(tasks), 1 / len(tasks)), size=50)
    for fit, boot in zip(fits, got, strict=True):
        post = fit.posteriors.reindex(index=tasks)
        p = post.fillna(0.0).to_numpy()[task_idx, post.columns.get_indexer(labels["label"])]
        for j, rater in enumerate(fit.accuracy.index):
            mine = (labels["worker"] == rater).to_numpy()
            hit = np.bincount(task_idx[mine], p[mine], len(tasks))
            rated = np.bincount(task_idx[mine], minlength=len(tasks))
            np.testing.assert_allclose(boot[:, j], (w @ hit) / (w @ rated), rtol=1e-12)
    assert not np.allclose(got[0], got[1])  # the fits' posteriors differ, so do their replicates


def test_refit_bootstrap_resamples_items() -> None:
    confusions = {"a": _confusion(0.9), "b": _confusion(0.7), "c": _confusion(0.6)}
    labels, _ = _simulate(confusions, 60, seed=5)
    boot = latent._resample(labels, np.random.default_rng(0))
    assert boot["task"].nunique() == 60 and len(boot) == len(labels)
    assert boot["task"].str.replace(r"#\d+$", "", regex=True).nunique() < 60  # some items drawn twice
    fitter = lambda x: latent_models.dawid_skene(x, n_iter=10)  # noqa: E731
    table = latent.competence_table(labels, latent_models.dawid_skene(labels), fitter, n_boot=3).set_index(
        "rater"
    )
    assert (table["ci"] == "refit").all() and table["model_accuracy_lo"].notna().all()


def _study() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two judges and three annotators over 8 instances × 2 generators × 1 dimension; truth planted."""
    rng = np.random.default_rng(4)
    rows, human = [], []
    for i in range(8):
        for g in ("g1", "g2"):
            truth = rng.integers(0, 4)
            for who, noise in (("j1", 0.0), ("j2", 1.0)):
                s = float(np.clip(truth + rng.normal(0, noise), 0, 3).round())
                rows.append(
                    dict(
                        judge=who,
                        mode="independent",
                        instance_id=f"n{i}",
                        candidate_id=f"n{i}:{g}",
                        source=g,
                        dimension="originality",
                        higher_is_better=True,
                        sample_idx=0,
                        score=s,
                        parse_ok=True,
                    )
                )
            for a in ("x", "y", "z"):
                human.append(
                    dict(
                        annotator=a,
                        instance_id=f"n{i}",
                        candidate_id=f"n{i}:{g}",
                        source=g,
                        dimension="originality",
                        score=int(truth),
                    )
                )
        for who in ("j1", "j2"):
            rows.append(
                dict(
                    judge=who,
                    mode="independent",
                    instance_id=f"n{i}",
                    candidate_id=f"n{i}:ref",
                    source="reference",
                    dimension="originality",
                    higher_is_better=True,
                    sample_idx=0,
                    score=1.5,
                    parse_ok=True,
                )
            )
        for a in ("x", "y", "z"):
            human.append(
                dict(
                    annotator=a,
                    instance_id=f"n{i}",
                    candidate_id=f"n{i}:ref",
                    source="reference",
                    dimension="originality",
                    score=1.5,
                )
            )
    return pd.DataFrame(rows), pd.DataFrame(human)


def test_latent_tables_on_a_study() -> None:
    results, humans = _study()
    tables = latent.latent_tables(results, humans, n_boot=50, with_glad=True)
    comp = tables["latent_competence"]
    assert set(comp["method"]) == {"Dawid-Skene", "majority vote", "MACE", "GLAD"}
    ds = comp.loc[comp["method"] == "Dawid-Skene"].set_index("rater")
    assert set(ds.index) == {"j1 [independent]", "j2 [independent]", "human:x", "human:y", "human:z"}
    assert ds.loc["j1 [independent]", "accuracy"] >= ds.loc["j2 [independent]", "accuracy"]
    post = tables["latent_posteriors"]
    assert len(post) == 16 and post["entropy_bits"].between(0, np.log2(3) + 1e-9).all()
    wr = tables["latent_winrate"]
    lat = wr.loc[wr["rater"] == "latent"]
    assert (lat["delta_win"] == 0).all()
    assert set(wr["rater"]) >= {"latent", "j1 [independent]"}


def test_latent_tables_need_three_raters_and_cli(tmp_path) -> None:
    results, humans = _study()
    assert latent.latent_tables(results, None) == {}
    run = tmp_path / "run"
    run.mkdir()
    results.to_csv(run / "results.csv", index=False)
    humans.to_csv(tmp_path / "h.csv", index=False)
    assert (
        latent.main([str(run), "--humans", str(tmp_path / "h.csv"), "--n-boot", "3", "--refit-boot", "2"])
        == 0
    )
    assert (run / "latent" / "latent_competence.csv").exists()
    assert latent.main([str(tmp_path / "nowhere")]) == 2
    assert latent.main([str(run), "--refit-boot", "-5"]) == 2  # was "negative dimensions" from numpy
    # labels on no dimension the judges scored: one line naming the file (was a traceback)
    humans.assign(dimension=humans["dimension"].str.upper()).to_csv(tmp_path / "upper.csv", index=False)
    assert latent.main([str(run), "--humans", str(tmp_path / "upper.csv"), "--n-boot", "3"]) == 2
    assert latent.main([str(run), "--reference", "nosuch", "--n-boot", "3"]) == 2  # was an empty table


def test_latent_winrate_delta_uses_only_the_raters_own_items() -> None:
    """Planted: the latent labels are win on items 0-1 and loss on items 2-3; rater `a` labelled all four
    (2 wins), rater `b` only items 0-1 (1 win). b's delta is 1/2 - 2/2 = -0.5 (its own items), not 1/2 - 2/4."""
    tasks = [f"t{i}" for i in range(4)]
    latent_outcome = [1, 1, -1, -1]
    rows = [(t, "a", o) for t, o in zip(tasks, [1, 1, -1, -1], strict=True)]
    rows += [(t, "b", o) for t, o in zip(tasks[:2], [1, 0], strict=True)]
    labels = pd.DataFrame(rows, columns=["task", "worker", "label"])
    labels = labels.assign(instance_id=labels["task"], source="gen", dimension="originality")
    post = pd.DataFrame(0.0, index=pd.Index(tasks, name="task"), columns=[-1, 0, 1])
    for t, o in zip(tasks, latent_outcome, strict=True):
        post.loc[t, o] = 1.0
    fit = latent_models.LatentFit("planted", post, pd.Series({"a": 1.0, "b": 0.5}))
    rates = latent.latent_winrate(labels, fit, n_boot=20).set_index("rater")
    assert rates.loc["latent", "win"] == 0.5 and rates.loc["latent", "delta_win"] == 0.0
    assert rates.loc["a", "delta_win"] == pytest.approx(0.0)
    assert rates.loc["b", "win"] == 0.5 and rates.loc["b", "delta_win"] == pytest.approx(-0.5)
    assert rates.loc["b", "delta_tie"] == pytest.approx(0.5)


def test_score_labels_keep_instances_apart() -> None:
    """Candidate id `c1` in two instances: three judges give 0 in i1 and 3 in i2. Two items, each with
    a unanimous vote (posterior 1.0); keyed by candidate id alone they were one item split 3 : 3."""
    rows = [
        dict(
            judge=j,
            mode="independent",
            instance_id=inst,
            candidate_id="c1",
            source="gen",
            dimension="originality",
            higher_is_better=True,
            sample_idx=0,
            score=score,
            parse_ok=True,
        )
        for j in ("j1", "j2", "j3")
        for inst, score in (("i1", 0.0), ("i2", 3.0))
    ]
    labels = latent_models.score_labels(pd.DataFrame(rows))
    assert labels["task"].nunique() == 2
    fit = latent_models.majority_fit(labels)
    assert sorted(fit.labels.tolist()) == [0, 3] and (fit.posteriors.max(axis=1) == 1.0).all()
    assert set(labels.drop_duplicates("task")["instance_id"]) == {"i1", "i2"}


def test_drop_rater_leaves_a_duplicate_out_through_the_command_line(tmp_path) -> None:
    """Issue 37 friction: the duplicate warning said "keep one of them" and the CLI had no way to. j2 is a
    copy of j1: the warning names `--drop-rater 'j2 [independent]'`, and with it j2 is in no fit and the
    warning is gone; a name matching no rater is one line listing the raters (exit 2)."""
    import subprocess
    import sys

    from tests.support.studies import cli_env

    results, humans = _study()
    twin = results.loc[results["judge"] == "j1"].assign(judge="j2")
    results = pd.concat([results.loc[results["judge"] != "j2"], twin], ignore_index=True)
    run = tmp_path / "run"
    run.mkdir()
    results.to_csv(run / "results.csv", index=False)
    humans.to_csv(tmp_path / "h.csv", index=False)

    def cli(*extra: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "analysis.latent", str(run), "--humans", str(tmp_path / "h.csv")]
        return run_cli(
            [*command, "--n-boot", "5", *extra], capture_output=True, text=True, env=cli_env(tmp_path)
        )

    before = cli()
    assert before.returncode == 0, before.stderr
    pair = "j1 [independent] and j2 [independent] (independent) give the same label"
    assert pair in before.stderr and "keep one of them: --drop-rater 'j2 [independent]'" in before.stderr
    after = cli("--drop-rater", "j2 [independent]")
    assert after.returncode == 0, after.stderr
    assert pair not in after.stderr and "j2" not in after.stderr
    comp = pd.read_csv(run / "latent" / "latent_competence.csv")
    assert set(comp["rater"]) == {"j1 [independent]", "human:x", "human:y", "human:z"}
    both = cli("--drop-rater", "j2", "--drop-rater", "human:z")  # a judge's name: every mode of it
    assert both.returncode == 0, both.stderr
    comp = pd.read_csv(run / "latent" / "latent_competence.csv")
    assert set(comp["rater"]) == {"j1 [independent]", "human:x", "human:y"}
    typo = cli("--drop-rater", "j3")
    assert typo.returncode == 2 and typo.stderr.count("\n") == 1
    assert "--drop-rater j3: no such rater; the raters are human:x, human:y, human:z, j1 [independent]" in (
        typo.stderr
    )


def test_latent_tables_reuse_the_registry_s_rater_outcomes() -> None:
    """The report passes the outcomes it already made (`StudyInputs.outcomes`); the latent tables are those
    computed from the candidates themselves."""
    study = synthetic_results(n_instances=6, seed=4)
    inputs = StudyInputs(study, synthetic_humans(study, seed=5), n_boot=5)
    own = latent.latent_tables(inputs.cands, inputs.humans, n_boot=5)
    given = latent.latent_tables(inputs.cands, inputs.humans, n_boot=5, outcomes=inputs.outcomes)
    assert own and own.keys() == given.keys()
    for name, table in own.items():
        pd.testing.assert_frame_equal(table, given[name])
