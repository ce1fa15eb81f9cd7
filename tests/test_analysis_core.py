"""One analysis core (issue 23): the human consensus, the per-context candidate scores, the same-prompt
verdicts, one rater per judge in the latent models, judge–judge between different judges, duplicate raters
flagged (issue 24 item 11); each with planted numbers. The views (report, paper tables, card, viewer) then
show one value per statistic on the sample study (tests/test_analysis_views_agree.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis import latent
from analysis.card import build as card
from analysis.report.build import compute_tables
from analysis.robustness import robustness_table
from analysis.stats.humans import consensus_scores, human_agreement
from analysis.stats.illusion import agreement_by_kind, agreement_matrix


def planted_latent_study(n: int = 400, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame, float]:
    """Per instance one generated candidate against the reference, outcome win / tie / loss on 29% / 40% /
    31% of the instances (shuffled); three experts give it right on 80% of the instances (on a fifth each, another outcome at random); judge
    `judge` turns every tie into a win, in independent and in comparative mode. Returns the results, the
    human labels and the planted win rate."""
    rng = np.random.default_rng(seed)
    wins, ties = round(0.29 * n), round(0.40 * n)
    truth = rng.permutation(np.repeat([1, 0, -1], [wins, ties, n - wins - ties]))
    rows, humans = [], []
    for i, t in enumerate(truth):
        said = 1 if t == 0 else int(t)
        item = dict(instance_id=f"i{i}", dimension="originality")
        for mode in ("independent", "comparative"):
            for cand, source, score in (("ref", "reference", 2.0), ("c", "gen", 2.0 + said)):
                rows.append(
                    item
                    | dict(
                        judge="judge",
                        mode=mode,
                        candidate_id=cand,
                        source=source,
                        higher_is_better=True,
                        sample_idx=0,
                        score=score,
                        parse_ok=True,
                    )
                )
        for a in range(3):
            wrong = i % 5 == a  # each expert wrong on a fifth of the items, never two on one item
            label = int(rng.choice([o for o in (1, 0, -1) if o != t])) if wrong else int(t)
            for cand, source, score in (("ref", "reference", 2), ("c", "gen", 2 + label)):
                humans.append(item | dict(annotator=f"e{a}", candidate_id=cand, source=source, score=score))
    return pd.DataFrame(rows), pd.DataFrame(humans), float((truth == 1).mean())


def as_run(rows: pd.DataFrame) -> pd.DataFrame:
    """Planted rows with the run columns a results table has (one run per judge × mode)."""
    return rows.assign(run_id=rows["judge"] + "-" + rows["mode"], model="fake/model", rubric="novelty")


def test_one_human_consensus_the_annotators_mean_in_card_and_report() -> None:
    """Three annotators per candidate: (1, 1, 4), (2, 2, 5), (1, 4, 4), (3, 3, 3) -> mean 2, 3, 3, 3 (median
    1, 2, 4, 3). The judge gives the mean, so agreement with the consensus is perfect (κ_w = 1, 4 of 4); the
    card compared it with the median (1 of 4 equal) while the report used the mean."""
    labels = [(1, 1, 4), (2, 2, 5), (1, 4, 4), (3, 3, 3)]
    rows, humans = [], []
    for k, given in enumerate(labels):
        cand = dict(instance_id="i1", candidate_id=f"c{k}", source="gen", dimension="originality")
        rows.append(
            cand
            | dict(
                judge="j",
                mode="independent",
                higher_is_better=True,
                sample_idx=0,
                score=float(np.mean(given)),
                parse_ok=True,
                prompt_id=f"p{k}",
            )
        )
        humans += [cand | {"annotator": f"a{a}", "score": s} for a, s in enumerate(given)]
    results, humans_frame = as_run(pd.DataFrame(rows)), pd.DataFrame(humans)
    consensus = consensus_scores(humans_frame).set_index("candidate_id")
    assert consensus["human"].tolist() == [2.0, 3.0, 3.0, 3.0] and (consensus["n_annotators"] == 3).all()
    report = compute_tables(results, humans_frame, n_boot=20)["human_agreement"].iloc[0]
    on_card = card.study_tables(results, humans_frame, 20, 0)["human_agreement"].iloc[0]
    for col in ("n", "kappa_w", "rho", "percent"):
        assert on_card[col] == pytest.approx(report[col])
    assert (report["n"], report["percent"], report["kappa_w"]) == (4, 1.0, 1.0)


def _comparative_contexts() -> tuple[pd.DataFrame, pd.DataFrame]:
    """40 instances, generators gA and gB each in its own comparative prompt with the reference; the judge
    scores the reference 2 in gA's prompt and 3 in gB's, so its average (2.5) is nobody's context. Three
    annotators score the reference 2 and each candidate 2 + its planted outcome (one in five flipped)."""
    rng = np.random.default_rng(7)
    rows, humans = [], []
    for i in range(40):
        for g, ref in (("gA", 2.0), ("gB", 3.0)):
            truth = int(rng.choice([1, 0, -1]))
            prompt = f"i{i}:{g}"
            base = dict(
                judge="j",
                mode="comparative",
                instance_id=f"i{i}",
                dimension="originality",
                higher_is_better=True,
                sample_idx=0,
                parse_ok=True,
                prompt_id=prompt,
            )
            rows.append(base | dict(candidate_id="ref", source="reference", score=ref))
            rows.append(base | dict(candidate_id=f"c{g}", source=g, score=ref + truth))
            for a in range(3):
                said = truth if rng.random() < 0.8 else int(rng.choice([o for o in (1, 0, -1) if o != truth]))
                humans.append(
                    dict(
                        annotator=f"a{a}",
                        instance_id=f"i{i}",
                        candidate_id=f"c{g}",
                        source=g,
                        dimension="originality",
                        score=2 + said,
                    )
                )
        for a in range(3):
            humans.append(
                dict(
                    annotator=f"a{a}",
                    instance_id=f"i{i}",
                    candidate_id="ref",
                    source="reference",
                    dimension="originality",
                    score=2,
                )
            )
    return as_run(pd.DataFrame(rows)), pd.DataFrame(humans)


def test_card_latent_accuracy_reads_the_reports_per_context_scores() -> None:
    """The card dropped the prompt context, so its latent model compared each generator with the reference
    averaged over both prompts (2.5): another judge verdict, another Dawid–Skene accuracy than the report's."""
    results, humans = _comparative_contexts()
    report = compute_tables(results, humans, n_boot=20)["latent_competence"]
    on_card = card.study_tables(results, humans, 20, 0)["latent_competence"]
    cols = ["method", "mode", "rater"]
    both = report.merge(on_card, on=cols, suffixes=("_report", "_card"))
    assert len(both) == len(report) == len(on_card) > 0
    assert both["accuracy_card"].to_numpy() == pytest.approx(both["accuracy_report"].to_numpy())


def _robustness_rows(perturbation: str, unparsed_prompt: str | None) -> list[dict]:
    """Comparative mode, one instance: gA's prompt shows the reference (2) and a1 (3), a2 (1); gB's prompt
    the reference (4) and b1 (3). `unparsed_prompt`'s answer failed to parse."""
    scored = {
        "gA": [("ref", "reference", 2.0), ("a1", "gA", 3.0), ("a2", "gA", 1.0)],
        "gB": [("ref", "reference", 4.0), ("b1", "gB", 3.0)],
    }
    rows = []
    for prompt, cands in scored.items():
        failed = prompt == unparsed_prompt
        for cand, source, score in cands:
            rows.append(
                dict(
                    judge="j",
                    mode="comparative",
                    prompt_id=prompt,
                    instance_id="i1",
                    candidate_id=cand,
                    source=source,
                    dimension="originality",
                    higher_is_better=True,
                    sample_idx=0,
                    score=None if failed else score,
                    parse_ok=not failed,
                    perturbation=perturbation,
                )
            )
    return rows


def test_robustness_flip_rate_is_zero_when_no_score_moved() -> None:
    """No score moves under padding, but gB's padded prompt failed to parse. Against the same-prompt
    reference a1 wins (3 > 2) and a2 loses in both runs: flip rate 0. Against the reference averaged over
    the prompts (3 unpadded, 2 padded) a1 went from tie to win: flip rate 0.5."""
    results = pd.DataFrame(_robustness_rows("none", None) + _robustness_rows("padding", "gB"))
    table = robustness_table(results, n_boot=20).set_index("perturbation")
    assert table.loc["padding", "shift"] == 0.0
    assert table.loc["padding", "n_verdicts"] == 2 and table.loc["padding", "flip_rate"] == 0.0


def test_latent_win_rate_recovers_the_truth_with_a_judge_in_two_modes() -> None:
    """Three experts right 80% of the time and one judge that turns every tie into a win, run in two modes.
    Entered as two raters (judge [independent], judge [comparative]) its errors counted twice: latent win
    rate 0.41 where the truth is 0.29. One rater per judge (one fit per mode) recovers the truth."""
    results, humans, truth = planted_latent_study()
    rates = latent.latent_tables(results, humans, n_boot=20)["latent_winrate"]
    latent_rows = rates.loc[rates["rater"] == "latent"].set_index("mode")
    assert set(latent_rows.index) == {"independent", "comparative"}
    assert truth == pytest.approx(0.29, abs=0.03)
    for mode in ("independent", "comparative"):
        assert latent_rows.loc[mode, "win"] == pytest.approx(truth, abs=0.03)
    competence = latent.latent_tables(results, humans, n_boot=20)["latent_competence"]
    per_fit = competence.loc[competence["method"] == "Dawid-Skene"].groupby("mode")["rater"].agg(list)
    assert all(sum(not r.startswith("human:") for r in raters) == 1 for raters in per_fit)  # the judge once


def test_judge_judge_agreement_is_between_different_judges() -> None:
    """j1 gives the same verdicts in both modes; j2 agrees with j1 on 2 of 4 items in each mode. Judge–judge
    percent agreement is 0.5 (two pairs, one per mode); pooling j1 with itself across modes (1.0) and the
    cross-mode pairs made it (2·1.0 + 4·0.5) / 6 = 0.667 over 6 pairs."""
    j1, j2 = [1, 0, -1, 1], [1, 0, 1, -1]
    rows = [
        dict(
            rater=f"{j} [{m}]",
            kind="judge",
            judge=j,
            mode=m,
            instance_id=f"i{i}",
            source="gen",
            dimension="d",
            outcome=o,
        )
        for m in ("independent", "comparative")
        for j, given in (("j1", j1), ("j2", j2))
        for i, o in enumerate(given)
    ]
    by_kind = agreement_by_kind(agreement_matrix(pd.DataFrame(rows), n_boot=20)).set_index("kind")
    assert by_kind.loc["judge-judge", "pairs"] == 2 and by_kind.loc["judge-judge", "percent"] == 0.5
    assert by_kind.loc["judge-self", "pairs"] == 2 and by_kind.loc["judge-self", "percent"] == 1.0


def test_identical_raters_are_flagged(capsys: pytest.CaptureFixture[str]) -> None:
    """Two judges that answer identically (`twin` copies `judge`): MACE gave both accuracy 1.000, above every
    expert, with no word; now the pair is listed, a warning says what it does to the latent model, and each
    judge's card carries the note."""
    results, humans, _ = planted_latent_study()
    one = results.loc[results["mode"] == "independent"]
    twins = as_run(pd.concat([one, one.assign(judge="twin")], ignore_index=True))
    tables = latent.latent_tables(twins, humans, n_boot=20)
    dup = tables["latent_duplicates"]
    assert dup[["rater_a", "rater_b"]].values.tolist() == [["judge [independent]", "twin [independent]"]]
    assert dup["share_equal"].iloc[0] == 1.0 and dup["n"].iloc[0] == len(one) // 2
    latent.note_duplicates(tables)
    err = capsys.readouterr().err
    assert err.startswith("warning: judge [independent] and twin [independent]") and "counts twice" in err
    card_tables = card.study_tables(twins, humans, 20, 0)
    facts = pd.DataFrame(
        columns=["judge", "run_id", "cost_usd", "latency", "rubric_versions", "model", "dataset_hash"]
    )
    notes = card.make_card("twin", twins, facts, card_tables)["notes"]
    assert any(n.startswith("latent_competence: judge [independent] and twin [independent]") for n in notes)


def test_one_implementation_each() -> None:
    """Human agreement, Fleiss' κ and majority vote had two implementations each, in different modules."""
    from analysis.novbench import human as novbench_human
    from analysis.report import summary
    from analysis.stats import agreement, latent_models

    # the card reads the report's table (issue 27: `card.study_tables` takes `report.compute_tables`'s)
    assert getattr(card, "human_agreement", human_agreement) is human_agreement
    assert not hasattr(summary, "human_agreement")
    assert novbench_human.fleiss_kappa is agreement.fleiss_kappa
    assert not hasattr(latent_models, "majority_vote")
