"""What every column of the report's tables means (the report's glossary).

`describe` also reads the families of names: `<x>_lo` / `<x>_hi` (the 95% CI of x), `kappa_w:<dimension> [<mode>]`
(leaderboard), `p[<label>]` (latent posterior) and a bare outcome label (a confusion-matrix count).
"""

from __future__ import annotations

import re

from analysis.tables.registry import meanings

GLOSSARY: dict[str, str] = {
    # identifiers
    "run_id": "the run (one judge × mode × rubric folder)",
    "judge": "judge name (judge/rubric when the study ran several rubrics)",
    "model": "the judge's litellm model",
    "mode": "independent, comparative or pairwise",
    "rubric": "rubric name",
    "source": "generator of the candidate (the reference's source is `reference`)",
    "dimension": "rubric dimension scored",
    "instance_id": "dataset instance",
    "position": "0-based place in the comparative prompt",
    "rater": "a judge [mode] or an annotator (human:<name>)",
    "rater_a": "first rater of the pair",
    "rater_b": "second rater of the pair",
    "dimension_a": "rater A's dimension",
    "dimension_b": "rater B's dimension",
    "kind": "rater kind (expert, judge, majority) or pair kind "
    "(expert-expert, expert-judge, judge-judge: two different judges in one mode, judge-self: one judge across "
    "modes, i.e. consistency, judge-other-mode: two judges in different modes, all)",
    "combine": "how judges are combined: mean score, unanimous or majority verdict",
    "family": "the judge's model family",
    "method": "latent-truth model (Dawid-Skene, MACE, GLAD, majority vote)",
    "task": "item of the latent model",
    "latent": "the latent model's most probable label",
    "votes": "the raters' labels",
    "parameter": "a request parameter the provider did not get as asked",
    "asked": "the value the study asked for",
    "sent": "what the provider received (`not sent` = dropped)",
    "note": "why it was dropped or changed",
    # counts
    "n": "number of items the statistic is computed on",
    "rows": "results rows",
    "prompts": "distinct prompts",
    "judgments": "judge calls (prompt × sample)",
    "n_raters": "raters in the comparison",
    "n_prompts": "prompt × candidate units with ≥ 2 scored samples",
    "n_disagree": "units whose samples differ",
    "n_win": "instances won",
    "n_tie": "instances tied",
    "n_loss": "instances lost",
    "n_first": "verdicts preferring the first-shown text",
    "n_decided": "verdicts that are not a tie",
    "n_flip": "verdicts that change with the order",
    "n_known": "verdicts whose swapped order was scored",
    "n_own": "own-family candidates",
    "n_other": "other candidates",
    "n_items": "items rated by ≥ 2 raters",
    "n_items_all": "items every annotator rated",
    "n_annotators": "annotators",
    "n_pairs": "(instance, generator, dimension) pairs",
    "n_majority": "pairs with a strict human majority",
    "n_excluded": "items left out: pairs without a strict human "
    "majority (human_majority), instances some judge left unscored (unanimous / majority combinations)",
    "n_judges_min": "the fewest judges behind any item of the row (a `mean` combination keeps only "
    "candidates every judge of it scored)",
    "pairs": "rater pairs of this kind",
    "items": "items over all pairs of this kind",
    "n_labels": "human labels on this dimension, which no judge scored (compared with nothing)",
    # scores and rates
    "scored": "share of rows with a verdict",
    "parse_rate": "share of the answered judgments whose answer parsed (a call the provider failed is not "
    "counted: see provider_failed; a row of unknown parse status counts as parsed, as the analysis uses it)",
    "provider_failed": "calls the provider failed after their retries (rate limit, timeout, error): no answer "
    "to parse, so not in the parse rate",
    "cost_usd": "provider cost in USD (empty: unknown); a failed call and a twin (a duplicate request answered "
    "once in the run) cost 0, a cached replay the price of the answer it replays, as the manifest counts it",
    "cost_per_1k": "USD per 1,000 paid judgments: the spend over the calls that got a completion with a price of "
    "their own (failed calls and twins left out, cached replays in; unknown when any call's cost is unknown)",
    "median_latency_s": "median seconds per call (a cache replay counts with its original call's latency)",
    "time_per_1k_s": "seconds per 1,000 judgments: 1,000 × the mean latency of a call (alpaca_eval's time per 1,000)",
    "agreement": "the mean of the judge's κ_w with the experts over its dimension × mode columns: the "
    "leaderboard's sort key",
    "cached": "share of calls replayed from the cache",
    "mean": "mean",
    "sd": "standard deviation",
    "ci": "95% CI",
    "win": "share of instances where the generator's best-of-K beats the reference",
    "tie": "share tied",
    "gt_win": "share of pairs where the reference (ground truth) is preferred",
    "gen_win": "share of pairs where the generated candidate is preferred",
    "loss": "share lost",
    "win_before": "win rate in the first setting (independent), on the n paired items",
    "win_after": "win rate in the second (comparative), on the same n items",
    "tie_before": "tie rate in the first setting",
    "tie_after": "tie rate in the second",
    "delta_win": "Δwin = after − before (paired)",
    "delta_tie": "Δtie = after − before",
    "mcnemar_p": "McNemar's exact p on win / not-win",
    "significant": "Benjamini–Hochberg q < 0.05 (p < 0.05 where no q is beside it)",
    "human_win": "human majority's win rate",
    "human_tie": "human majority's tie rate",
    "judge_win": "judge's win rate on the same pairs",
    "judge_tie": "judge's tie rate",
    "gap_win": "judge win − human win",
    "gap_tie": "judge tie − human tie",
    # agreement
    "percent": "share of items with the same value",
    "kappa": "Cohen's κ",
    "kappa_w": "quadratic-weighted Cohen's κ (ordinal scores)",
    "rho": "Spearman ρ",
    "tau": "Kendall τ",
    "alpha": "Krippendorff's α (ordinal)",
    "alpha_ordinal": "Krippendorff's α (ordinal) among annotators",
    "fleiss_kappa": "Fleiss' κ among annotators",
    "fleiss": "Fleiss' κ",
    "accuracy": "share matching the latent label",
    "competence": "latent-model competence of the rater",
    "model_accuracy": "accuracy from the model's confusion",
    "mv_agreement": "agreement with the majority vote",
    "entropy_bits": "posterior entropy (bits)",
    "observed": "rater's label (row) vs the latent label (columns)",
    "human_consensus": "the annotators' mean score on an item (instance × candidate × dimension), each "
    "annotator once; compared with a judge after rounding both half up to the rubric's scale",
    "human": "the human consensus on the item (human_consensus)",
    "share_equal": "share of the items both raters "
    "labelled on which they give the same label (≥ 0.95: the latent models count one answer twice)",
    # consistency and bias
    "self_alpha": "self-consistency: Krippendorff's α across a prompt's samples (mean over modes × dimensions)",
    "mean_sd": "mean sd of a prompt's samples",
    "disagree": "share of units whose samples differ",
    "mean_score": "mean score at this position",
    "sd_score": "sd of those scores",
    "win_rate": "share of prompts where the candidate at this position scored best",
    "expected": "that share without position bias",
    "position_bias": "comparative: largest |win rate − expected| over positions; pairwise: first_rate − 0.5 "
    "(ties left out; < 0 favours the second-shown text)",
    "first_rate": "n_first / n_decided: share of decided "
    "(not tie) verdicts preferring the first-shown text (0.5 = no order preference; empty when all are ties)",
    "tie_rate": "share of tie verdicts",
    "flip_rate": "share of verdicts that change when the order is swapped",
    "rho_better": "Spearman ρ of score vs length, signed so > 0 means longer is judged better",
    "length_rho": "mean rho_better",
    "mean_length": "mean length in words",
    "mean_own": "mean score of own-family generations",
    "mean_other": "mean score of other generations",
    "diff": "own − other",
    "p": "Welch t-test p",
    "favours_own": "own − other signed so > 0 means the judge favours its own family",
    "self_preference": "mean favours_own",
    # multiple testing and power (analysis.stats.multiplicity, experiments.power)
    "mcnemar_p_q": "Benjamini–Hochberg q-value of mcnemar_p (within its test family, fixed by the design)",
    "p_q": "Benjamini–Hochberg q-value of p (within its test family, fixed by the design)",
    "first_p": "exact binomial p of first_rate = 0.5 (no order preference)",
    "first_p_q": "Benjamini–Hochberg q-value of first_p (within its test family, fixed by the design)",
    "discordance": "share of instances whose win / not-win verdict differs between the two settings (the "
    "power computation's ψ)",
    "quantity": "what is estimated: win_rate (generated preferred over the reference) or mean_score",
    "n_labeled": "items the experts also rated",
    "n_unlabeled": "items only the judge scored",
    "judge_only": "the judge's estimate on every item (biased if the judge is)",
    "human_only": "the experts' estimate on the items they rated",
    "corrected": "prediction-powered (PPI++) estimate: the judge on every "
    "item, its bias measured on the expert-rated ones",
    "n_effective": "expert labels a human-only estimate would need for the corrected CI's width",
    "mae_before": "mean |judge score − experts' mean| on the expert-rated candidates",
    "mae_after": "the same after the cross-fitted isotonic calibration",
    "n_verdicts": "expert-rated pairs with a strict majority",
    "ece_before": "expected calibration error (10 bins) of the judge's 0/1 win verdict against the experts' "
    "majority",
    "ece_after": "the same for the cross-fitted calibrated probability of an expert win",
    "bin": "probability bin (tenths)",
    "mean_predicted": "mean predicted probability in the bin",
    "observed_rate": "share of expert wins in the bin",
    "n_wins": "expert wins in the bin",
    "fit": "before or after calibration",
    "table": "report table",
    "p_column": "the table's p-value column",
    "n_tests": "p-values of that table in the corrected family",
    "test_family": "the family its p-values are corrected within (fixed by the design)",
}
_CI = re.compile(r"^(?P<base>.+)_(?P<end>lo|hi)$")


def describe(column: object) -> str | None:
    """The meaning of a column name, or None when the glossary does not know it."""
    name = str(column)
    if name in GLOSSARY:
        return GLOSSARY[name]
    declared = meanings()  # a table's own columns, from its declaration
    if name in declared:
        return declared[name]
    match = _CI.match(name)
    if match and match.group("base") in GLOSSARY | {"score": "", "sd": ""}:
        end = "lower" if match.group("end") == "lo" else "upper"
        return f"{end} end of the 95% CI of {match.group('base')}"
    if name.startswith("kappa_w:"):
        dim, _, mode = name.split(":", 1)[1].partition(" [")
        return f"κ_w with the experts' mean score on {dim}" + (f", {mode.rstrip(']')} mode" if mode else "")
    if re.fullmatch(r"p\[.+\]", name):
        return f"posterior probability of label {name[2:-1]}"
    if re.fullmatch(r"-?\d+", name):
        return f"count of items whose latent label is {name}"
    return None
