"""The report's sections, in order: title, explanation, tables, figure, and the sentence shown when empty.

Kept apart from `analysis.report.render` (which writes report.md / report.html) so that the catalogue of what the
report says can be read and edited without the rendering code around it.
"""

from __future__ import annotations

from dataclasses import dataclass

from analysis import latent
from analysis.stats.spec import Section as Part
from analysis.tables.declarations import (  # the declarations these sections show
    section_figure,
    section_tables,
)

NO_HUMANS = "No human labels were given (`--humans FILE`)."
#: NO_HUMANS's place when labels were given (`human_agreement` is present) but leave this table empty.
HUMANS_UNPAIRED = (
    "Human labels were given, but none of them enters this table (no usable pair with the judges)."
)
ONE_RATER = "Only one rater (a single judge in a single mode, and no human labels): agreement needs two."


#: A table longer than this is folded (`<details>`) under a one-line summary with its headline number.
FOLD_ROWS = 8


@dataclass(frozen=True)
class Section:
    """A section's words; its tables and figure are the declarations that name it (`TableSpec.section`)."""

    part: Part
    text: str
    missing: str = "Nothing to report for these runs."

    @property
    def title(self) -> str:
        return self.part.value

    @property
    def tables(self) -> tuple[str, ...]:
        return section_tables(self.part)

    @property
    def figure(self) -> str | None:
        return section_figure(self.part)


_WORDS: tuple[Section, ...] = (
    Section(
        Part.leaderboard,
        "One row per judge, sorted by agreement (the mean of its κ_w with the experts over the dimension × mode "
        "columns; by parse rate without experts): alpaca_eval's columns first (agreement, cost and time per "
        "1,000 judgments, position and length bias), then κ_w per dimension and mode under one group, parse "
        "rate, self-consistency α and the rest; cost is unknown when any call's cost is, a blank cell has no "
        "value. Click a column's name to sort by it.",
    ),
    Section(
        Part.humans,
        "Per judge, mode and dimension: quadratic-weighted κ and Spearman ρ between the judge's candidate scores "
        "and the experts' mean score (both rounded to the rubric scale), 95% CIs; each expert item counts once "
        "per judge and mode.",
        NO_HUMANS,
    ),
    Section(
        Part.runs,
        "One row per run: rows, prompts, share of rows with a verdict, cost (each call once), cached share; then every request "
        "parameter a provider did not receive as asked (dropped or changed by litellm's mapping).",
    ),
    Section(
        Part.winrate,
        "Per judge, mode, generator and dimension: share of instances where the generator's best-of-K "
        "beats, ties or loses to the reference, with 95% bootstrap CIs over instances.",
    ),
    Section(
        Part.combined,
        "Candidate scores averaged over judges (`mean`), or per-judge verdicts "
        "combined (`unanimous`, `majority`). `n_excluded`: instances left out because some judge left them "
        "unscored (a vote needs every judge's verdict; `mean` takes best-of-K over the candidates every judge "
        "scored, with the reference); `n_judges_min`: the fewest judges behind any instance. A "
        "combination is over the judges it names in each mode: where judges ran different modes, each mode's "
        "judges and those that ran both modes are combined apart.",
        "Only one judge (or judges that are one rater, named in the summary): there is nothing to combine.",
    ),
    Section(
        Part.mode_shift,
        "Independent → comparative, same judge and instances: Δwin and Δtie with paired bootstrap CIs, "
        "McNemar's exact test on win / not-win. `n`, `win_before` / `win_after`: the instances scored in both "
        "modes and the rates on them, so Δ = after − before (each mode's rates on all its instances: the "
        "win-rate table).",
        "No judge ran both independent and comparative mode, so there is no mode shift to measure.",
    ),
    Section(
        Part.experts,
        "Per rater and dimension, over every pair that rater rated (a candidate the humans rated vs the "
        "instance's reference): `gt_win` the reference preferred, `gen_win` the candidate, `tie` neither. One "
        "row per expert (every pair, disagreements kept), per judge [mode], and the strict human majority "
        "(pairs without one left out). Then each judge's win rate minus the majority's on the same pairs, "
        "with paired CIs.",
        NO_HUMANS,
    ),
    Section(
        Part.score_agreement,
        "Candidate scores rounded to the rubric scale; raters are "
        "judge [mode] and human annotators. Last row: Krippendorff's α (ordinal) over all raters.",
        ONE_RATER,
    ),
    Section(
        Part.winners,
        "Win / tie / loss per (instance, generator, dimension), by pair kind "
        "(expert–expert, expert–judge, judge–judge: two different judges in one mode; a judge across modes "
        "is `judge-self`, two judges in different modes `judge-other-mode`), then every "
        "pair.",
        ONE_RATER,
    ),
    Section(
        Part.human_reliability,
        "Fleiss' κ and Krippendorff's α (ordinal) among annotators, per dimension.",
        NO_HUMANS,
    ),
    Section(
        Part.alignment,
        "Each expert's and the human majority's winner on one dimension vs a judge's winner on "
        "another (e.g. non-obviousness vs source-boundedness).",
        NO_HUMANS,
    ),
    Section(Part.latent, latent.SECTION_TEXT, latent.SECTION_MISSING),
    Section(
        Part.scores,
        "Candidate scores (mean over samples) per judge, mode, source, dimension; the figure shows each "
        "generator apart from the reference and from the other generators.",
    ),
    Section(
        Part.self_consistency,
        "Over the samples of one prompt: mean sd, share of prompts whose samples "
        "disagree, Krippendorff's α with samples as raters.",
    ),
    Section(
        Part.position,
        "Comparative: mean score and win rate by shown position (vs the "
        "rate expected without bias). Pairwise: share of decided (not tie) verdicts preferring the first-shown "
        "text, ties, flips with the order.",
        "No comparative or pairwise runs.",
    ),
    Section(
        Part.length,
        "Spearman ρ of candidate score vs length in words (`rho_better` > 0: longer judged better).",
        "The results have no candidate_text column.",
    ),
    Section(
        Part.self_preference,
        "A judge's mean score for its own model family's generations vs others'.",
        "No judge scored generations from its own model family (see analysis.stats.consistency.model_family).",
    ),
    Section(
        Part.corrected,
        "First the labels file's design: how its items were chosen, and whether a corrected estimate is valid "
        "under it (why not, in one line). Then per judge, mode, generator and dimension: the win rate (best-of-K "
        "against the same-prompt reference, as in the win table) and the mean score of the generator's "
        "candidates, estimated from the judge on every instance (judge-only), from the experts on the instances "
        "they rated in full (human-only), and corrected: the judge on every instance with its bias measured on "
        "the rated ones, by PPI++ (ppi-python) for a random design, by inverse-probability weighting (active "
        "inference) for known unequal inclusion probabilities; each with its 95% CI, rates within [0, 1]. "
        "Labels chosen by a top-k rule get no corrected estimate. `n_no_majority`: rated win units without a "
        "strict expert majority (no majority win); `n_effective`: the expert labels a human-only estimate would "
        "need for the corrected CI's width; `why_no_estimate`: why a group has nothing to correct.",
        NO_HUMANS,
    ),
    Section(
        Part.calibration,
        "Per judge, mode and dimension: an isotonic map from the judge's candidate score to the experts' mean, "
        "cross-fitted (5 folds), with the mean absolute error before and after; for win verdicts, the expected "
        "calibration error (10 bins) of the judge's 0/1 verdict and of the calibrated probability of an expert "
        "win. No other table uses calibrated scores.",
        NO_HUMANS,
    ),
    Section(
        Part.multiple_testing,
        "Each p-value gets its Benjamini–Hochberg q-value within its test family, fixed by the design (mode shift; "
        "combined-judge mode shift; bias; human agreement), beside it (`*_q`), and `significant` reads q < 0.05. "
        "Per table: its family, the p-value column and the number of tests.",
        "No test was run.",
    ),
)


def _in_order(words: tuple[Section, ...]) -> tuple[Section, ...]:
    """The sections in the report's order (`analysis.stats.spec.Section`), each with its words once; a part
    without words, or with two, stops the import in one line."""
    parts = [w.part for w in words]
    missing = [p.value for p in Part if p not in parts]
    twice = sorted({p.value for p in parts if parts.count(p) > 1})
    if missing or twice:
        raise ValueError(
            f"report sections: no words for {missing}, words twice for {twice} (analysis.report.sections)"
        )
    return tuple(sorted(words, key=lambda w: list(Part).index(w.part)))


#: The report's sections, in the order `analysis.stats.spec.Section` declares.
SECTIONS: tuple[Section, ...] = _in_order(_WORDS)
