"""What a reader of the report sees first: agreement with the experts per judge and dimension, a judge
leaderboard, and short sentences with numbers and CIs that answer the study's questions.

Everything here is computed from the report's tables (and, for parse rate, cost and latency, from the
results rows), so a sentence can never disagree with the table it summarises.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from analysis.load.checks import LabelCoverage
from analysis.stats import multiplicity
from analysis.stats.humans import HUMAN_AGREEMENT, HUMAN_UNMATCHED
from analysis.stats.illusion import PREFERENCE_GAP
from analysis.tables.combined import MODE_SHIFT
from analysis.tables.declarations import leaderboard  # with every declared table's leaderboard columns
from analysis.tables.leaderboard import (
    AGREEMENT,
    CALL_KEYS,
    LEADERBOARD,
    MULTIPLE_TESTING,
    judge_names,
    parse_rate,
)
from core.intervals import BOOT_MIN_N
from experiments import power

ALPHA = 0.05
#: κ_w values closer than this are equal (a tie, not a best judge).
TIE_TOL = 1e-9
#: the leaderboard and its columns are the tables' (`analysis.tables.leaderboard`); read here by their views
__all__ = ["AGREEMENT", "CALL_KEYS", "judge_names", "leaderboard", "parse_rate"]


def power_sentence(n: int, family: int = 1) -> str:
    """The mode-shift test's power on `n` paired instances by the design `plan=true` uses (experiments.power:
    its assumed discordance, the mode-shift family's size and the BH level), never the observed discordance:
    power computed from the data it is meant to judge says nothing the p-value did not."""
    note = power.power_note(n, power.DISCORDANCE, alpha=multiplicity.ALPHA, family=max(family, 1))
    return f" Power by design: {note.sentence()}."


KAPPA_GROUP = "κ_w with the experts"


def leaderboard_display(board: pd.DataFrame) -> pd.DataFrame:
    """The leaderboard as shown: numbers to 3 decimals and blank where there is none (never NaN), cost
    "unknown" where a call's cost is, and two header rows: the κ_w columns grouped under one `KAPPA_GROUP`
    (each named by its dimension and mode), every other column under its own name."""
    shown = board.astype(object).where(board.notna(), "")
    for col in board.columns:
        if col != "judge" and pd.api.types.is_numeric_dtype(board[col]):
            shown[col] = [("" if pd.isna(v) else f"{v:.3f}") for v in board[col]]
    if "cost_per_1k" in board:
        shown["cost_per_1k"] = [("unknown" if pd.isna(v) else f"{v:.4f}") for v in board["cost_per_1k"]]
    shown.columns = pd.MultiIndex.from_tuples(
        [
            (KAPPA_GROUP, c.removeprefix("kappa_w:")) if c.startswith("kappa_w:") else ("", c)
            for c in board.columns
        ]
    )
    return shown


def _num(value: float) -> str:
    return f"{round(value, 2) or 0.0:.2f}"  # -0.00 reads 0.00


def _ci(value: float, lo: float, hi: float) -> str:
    return f"{_num(value)} [{_num(lo)}, {_num(hi)}]"


def unmatched_line(unmatched: pd.DataFrame | None) -> list[str]:
    """How many human labels are on dimensions no judge scored (left out of every comparison)."""
    if unmatched is None or unmatched.empty:
        return []
    counts = unmatched.set_index("dimension")["n_labels"].astype(int)
    names = ", ".join(counts.index) if len(counts) == 1 else ", ".join(f"{d}: {n}" for d, n in counts.items())
    return [f"{counts.sum()} human labels on dimensions no judge scored ({names}) were not compared."]


def agreement_lines(agree: pd.DataFrame | None, unmatched: pd.DataFrame | None = None) -> list[str]:
    """Which judge agrees most with the experts, per dimension; then the labels no judge could be compared
    with. `agree` is None when no labels were given, empty when they share no candidate with the judges.
    A best judge is named only when its κ_w beats the runner-up's and their CIs are apart: equal values
    read "tie", overlapping CIs "CIs overlap" (issue 24 item 12)."""
    if agree is None:
        return [
            "No human labels were given, so agreement with the experts is not measured (`--humans FILE`)."
        ]
    lines = []
    agree = agree.assign(judge=_rater(agree))
    for dim, part in agree.dropna(subset=["kappa_w"]).groupby("dimension", sort=True):
        ranked = part.sort_values(["kappa_w", "judge"], ascending=[False, True])
        lines.append(f"**{dim}**: {_best_judge(ranked)}.")
    return (lines or ["The experts' labels share no candidate with the judges' scores."]) + unmatched_line(
        unmatched
    )


def _kappa(row: pd.Series) -> str:
    return f"κ_w = {_ci(row['kappa_w'], row['kappa_w_lo'], row['kappa_w_hi'])}, n = {int(row['n'])}"


def _bound(row: pd.Series, column: str) -> float:
    """A κ_w bound, or κ_w itself where every bootstrap replicate was equal (enough items, no spread: the
    CI is left out, `core.intervals.trusted_bootstrap`); NaN below `BOOT_MIN_N` items."""
    value = row[column]
    return float(row["kappa_w"]) if pd.isna(value) and row["n"] >= BOOT_MIN_N else float(value)


def _best_judge(ranked: pd.DataFrame) -> str:
    """The sentence for one dimension's judges, sorted by κ_w (highest first): the only judge, a tie (equal
    κ_w), CIs that overlap (no judge named best), or the best judge with the runner-up beside it."""
    top = ranked.iloc[0]
    if len(ranked) == 1:
        return f"{top['judge']} (the only judge), {_kappa(top)}"
    tied = ranked.loc[(top["kappa_w"] - ranked["kappa_w"]).abs().to_numpy() <= TIE_TOL]
    if len(tied) > 1:
        names = " and ".join(tied["judge"])
        return f"tie: {names} agree equally with the experts, " + "; ".join(
            f"{r['judge']} {_kappa(r)}" for _, r in tied.iterrows()
        )
    second = ranked.iloc[1]
    low, high = _bound(top, "kappa_w_lo"), _bound(second, "kappa_w_hi")
    no_ci = pd.isna(low) or pd.isna(high)  # too few items for a CI: none is named best
    if no_ci or low <= high:
        why = "too few items for a CI" if no_ci else "CIs overlap"
        return (
            f"no clear best judge ({why}): {top['judge']} {_kappa(top)}; {second['judge']} {_kappa(second)}"
        )
    return (
        f"{top['judge']} agrees most with the experts, {_kappa(top)} (next: {second['judge']} "
        f"{_num(second['kappa_w'])})"
    )


def _rater(agree: pd.DataFrame) -> pd.Series:
    """``judge [mode]`` for an agreement row where the table has several modes, else the judge."""
    judge = agree["judge"].astype(str)
    several = "mode" in agree and agree["mode"].nunique() > 1
    return judge + " [" + agree["mode"].astype(str) + "]" if several else judge


def shift_lines(shift: pd.DataFrame | None, family: pd.DataFrame | None = None) -> list[str]:
    """Is the independent → comparative shift significant: per judge, the largest |Δwin|, its test, p and
    (when the report corrected its p-values, `analysis.stats.multiplicity`) the BH q that `significant` reads."""
    if shift is None or shift.empty:
        return ["No judge ran both independent and comparative mode: the novelty illusion is not measured."]
    lines = []
    n_sig = int(shift["significant"].sum())
    corrected = "mcnemar_p_q" in shift
    rule = "BH q" if corrected else "p"
    lines.append(
        f"{n_sig} of {len(shift)} judge × generator × dimension shifts are significant "
        f"(McNemar's exact test on win / not-win, {rule} < {ALPHA})."
    )
    if corrected and family is not None:
        lines.append(multiplicity.family_sentence(family))
    for judge, part in shift.groupby(shift["judge"].astype(str), sort=True):
        top = part.loc[part["delta_win"].abs().idxmax()]
        verdict = "significant" if top["significant"] else "not significant"
        line = (
            f"{judge}: largest shift Δwin = {_ci(top['delta_win'], top['delta_win_lo'], top['delta_win_hi'])} "
            f"({top['source']}, {top['dimension']}; win {_num(top['win_before'])} → {_num(top['win_after'])} "
            f"on the {int(top['n'])} instances in both modes), p = {top['mcnemar_p']:.3g}"
        )
        if corrected:
            line += f", q = {top['mcnemar_p_q']:.3g}"
        line += f", {verdict}."
        smallest = part.loc[part["n"].idxmin()]
        size = multiplicity.family_size(family, "mode_shift") or int(shift["mcnemar_p"].notna().sum())
        line += power_sentence(int(smallest["n"]), size)
        lines.append(line)
    return lines


def _pairwise_part(row: dict[str, Any]) -> str | None:
    """Pairwise mode's position bias in words: how often the first-shown text wins a decided verdict, how
    often the judge says tie, how often a verdict flips."""
    first, tie, flip = row.get("first_rate"), row.get("tie_rate"), row.get("flip_rate")
    if first is None or pd.isna(first):
        return None if tie is None or pd.isna(tie) else f"pairwise ties {tie:.0%}"
    ties = "" if tie is None or pd.isna(tie) else f" (ties {tie:.0%})"
    flips = "" if flip is None or pd.isna(flip) else f", flips {flip:.0%}"
    return f"pairwise first-shown preferred in {first:.0%} of decided verdicts{ties}{flips}"


def _failed_part(row: dict[str, Any]) -> str | None:
    """The calls the provider failed (no answer: not a parse failure), where there were any."""
    failed = row.get("provider_failed")
    if failed is None or pd.isna(failed) or not failed:
        return None
    calls = f"{int(failed)} call{'s' if failed != 1 else ''}"
    return f"{calls} failed at the provider (no answer: not in the parse rate; the banner says why)"


def judge_lines(board: pd.DataFrame) -> list[str]:
    """Self-consistency, position and length bias, parse rate and cost per judge."""
    lines = []
    for r in board.to_dict("records"):
        cost = "unknown" if pd.isna(r.get("cost_per_1k")) else f"${r['cost_per_1k']:.4f}"
        parts = [
            f"self-consistency α = {r['self_alpha']:.2f}" if pd.notna(r.get("self_alpha")) else None,
            f"position bias {r['position_bias']:+.2f}" if pd.notna(r.get("position_bias")) else None,
            _pairwise_part(r),
            f"length ρ = {r['length_rho']:+.2f}" if pd.notna(r.get("length_rho")) else None,
            f"parse rate {r['parse_rate']:.0%}" if pd.notna(r.get("parse_rate")) else None,
            _failed_part(r),
            f"cost per 1,000 judgments {cost}",
        ]
        lines.append(f"{r['judge']}: " + ", ".join(p for p in parts if p) + ".")
    return lines


def gap_lines(gap: pd.DataFrame | None) -> list[str]:
    """The second half of the novelty illusion: do the judges prefer the generated question where the experts
    prefer the reference? Per generator and dimension, the experts' (majority) win rate for the generated
    question on the pairs they rated, and each judge's on the same pairs with the gap, its paired bootstrap
    CI, n, p and (when the report corrected its p-values) the BH q that `significant` reads. The numbers are
    the `preference_gap` table's (`analysis.stats.illusion.preference_gap`), computed once."""
    if gap is None:
        return [
            "No expert labels were given, so the experts-vs-judges preference gap is not measured (`--humans FILE`)."
        ]
    if gap.empty:
        return [
            "The experts' labels share no pair (generated vs reference) with the judges: no gap to measure."
        ]
    corrected = "mcnemar_p_q" in gap
    rule = "BH q" if corrected else "p"
    n_sig = int(gap["significant"].sum()) if "significant" in gap else 0
    lines = [
        f"Experts vs judges: {n_sig} of {len(gap)} judge × generator × dimension gaps (judge's win rate for "
        f"the generated question − the experts' majority's, same pairs) are significant (McNemar's exact "
        f"test, {rule} < {ALPHA})."
    ]
    rater = gap["judge"].astype(str) + (
        " [" + gap["mode"].astype(str) + "]" if gap["mode"].nunique() > 1 else ""
    )
    frame = gap.assign(_rater=rater)
    for (source, dim), part in frame.groupby(
        [frame["source"].astype(str), frame["dimension"].astype(str)], sort=True
    ):
        judges = []
        for _, r in part.sort_values("_rater").iterrows():
            test = f"p = {r['mcnemar_p']:.3g}" + (f", q = {r['mcnemar_p_q']:.3g}" if corrected else "")
            judges.append(
                f"{r['_rater']} {r['judge_win']:.0%} vs the experts' {r['human_win']:.0%} (gap "
                f"{_ci(r['gap_win'], r['gap_win_lo'], r['gap_win_hi'])}, n = {int(r['n'])}, {test})"
            )
        lines.append(f"**{source} · {dim}**: the generated question preferred by " + "; ".join(judges) + ".")
    return lines


#: The paper's question, its two halves (the mode shift, the experts-vs-judges gap) and their figures.
ILLUSION = "Is there a novelty illusion?"
ILLUSION_FIGURES: tuple[str, ...] = ("mode_shift", "preference_gap")


def summary_lines(tables: dict[str, pd.DataFrame]) -> dict[str, list[str]]:
    """The report's opening: sentences per question, from the tables."""
    shift = [
        "Independent → comparative: " + line if i == 0 else line
        for i, line in enumerate(shift_lines(MODE_SHIFT.of(tables), MULTIPLE_TESTING.of(tables)))
    ]
    return {
        "Which judge agrees with the experts?": agreement_lines(
            HUMAN_AGREEMENT.of(tables), HUMAN_UNMATCHED.of(tables)
        ),
        ILLUSION: shift + gap_lines(PREFERENCE_GAP.of(tables)),
        "How consistent and how biased is each judge?": judge_lines(
            tables.get(LEADERBOARD.key, pd.DataFrame())
        ),
    }


#: The banner's heading, first in the summary.
BANNER = "Is the study complete?"
#: How the banner names each cause of an unscored call (`analysis.load.completeness.CAUSES`).
CAUSE_WORDS: dict[str, str] = {
    "provider_error": "provider error",
    "rate_limit": "rate limit (429)",
    "timeout": "timeout",
    "cut_off": "cut off at max_tokens",
    "unparseable": "unparseable answer",
}
MAX_RUN_LINES = 10  # a sweep of many stopped runs: the first ten named, the rest counted


def _count(frame: pd.DataFrame, column: str) -> int:
    return int(pd.to_numeric(frame[column], errors="coerce").fillna(0).sum()) if column in frame else 0


def banner_lines(
    status: pd.DataFrame | None,
    coverage: LabelCoverage | None = None,
    duplicates: pd.DataFrame | None = None,
) -> list[str]:
    """The completeness banner, the first thing a reader sees: whether every run finished (and if not, which
    stopped and why), the calls never started, the unscored calls by cause per judge, the instances covered
    against the dataset, the expert labels that match a judged candidate, and judges that are one rater.
    `status`: `analysis.load.completeness.run_status`."""
    if status is None or status.empty:
        return ["**Nothing to report**: no run below this folder wrote results."]
    total, not_started = _count(status, "calls_total"), _count(status, "calls_not_started")
    answered = _count(status, "calls_answered")
    unscored = {c: _count(status, c) for c in CAUSE_WORDS}
    stopped = status.loc[status["stopped"].notna()]
    unmatched = coverage.unmatched if coverage is not None else 0
    dups = 0 if duplicates is None else len(duplicates)
    complete = stopped.empty and not not_started and not any(unscored.values()) and not unmatched and not dups
    head = f"{answered} of {total} calls answered, {not_started} not started"
    if not stopped.empty:
        head += f"; {len(stopped)} of {len(status)} run{'s' if len(status) != 1 else ''} stopped early"
    lines = [f"**{'Complete' if complete else 'Incomplete'}**: {head}."]
    if not answered:
        lines.append("Nothing was answered: there is no judgment to analyse, and no table below.")
    for _, run in stopped.head(MAX_RUN_LINES).iterrows():
        who = " ".join(str(run[c]) for c in ("judge", "mode") if pd.notna(run.get(c)))
        calls = (
            f": {int(run['calls_answered'])} of {int(run['calls_total'])} calls answered, "
            f"{int(run['calls_not_started'])} not started"
            if pd.notna(run.get("calls_total"))
            else ""
        )
        lines.append(f"Stopped: {run['stopped']} — {who or 'a run'} ({run['run']}){calls}.")
    if len(stopped) > MAX_RUN_LINES:
        lines.append(f"… and {len(stopped) - MAX_RUN_LINES} more stopped runs.")
    lines += _cause_lines(status)
    lines += _instance_lines(status)
    if coverage is not None:
        lines.append(coverage_line(coverage))
    lines += duplicate_lines(duplicates)
    return lines


def _cause_lines(status: pd.DataFrame) -> list[str]:
    """Per judge, its unscored calls by cause (the provider's failures first), and its salvaged ones."""
    lines = []
    for judge, part in status.groupby(status["judge"].astype(str), sort=True):
        causes = [f"{CAUSE_WORDS[c]} {_count(part, c)}" for c in CAUSE_WORDS if _count(part, c)]
        salvaged = _count(part, "salvaged")
        if not causes and not salvaged:
            continue
        total = _count(part, "calls_total") - _count(part, "calls_not_started")
        text = f"{judge}: unscored calls of {total} started: " + (", ".join(causes) if causes else "none")
        if salvaged:
            text += f"; {salvaged} scored from a cut-off answer, salvaged"
        lines.append(text + ".")
    return lines


def _instance_lines(status: pd.DataFrame) -> list[str]:
    """Instances judged against the dataset's, and with at least one scored judgment (the fewest over runs)."""
    judged = pd.to_numeric(status["instances_judged"], errors="coerce").dropna()
    if judged.empty:
        return []
    dataset = pd.to_numeric(status["instances_dataset"], errors="coerce").dropna()
    scored = pd.to_numeric(status["instances_scored"], errors="coerce").dropna()
    span = (
        f"{int(judged.min())}" if judged.min() == judged.max() else f"{int(judged.min())}–{int(judged.max())}"
    )
    of = f" of {int(dataset.max())} in the dataset" if len(dataset) else ""
    text = f"Instances: {span}{of} judged per run"
    if len(scored):
        text += f"; the fewest with a scored judgment in a run: {int(scored.min())}"
    return [text + "."]


def coverage_line(coverage: LabelCoverage) -> str:
    """How many expert labels name a judged candidate; the rest are compared with nothing."""
    text = (
        f"Expert labels: {coverage.matched} of {coverage.labels} name a candidate the judges scored "
        f"({coverage.items_matched} of {coverage.items} labelled candidates)"
    )
    if coverage.unmatched:
        text += f"; {coverage.unmatched} match no judged candidate and are compared with nothing"
    return text + "."


def duplicate_lines(duplicates: pd.DataFrame | None) -> list[str]:
    """Judges that are one rater (`experiments.duplicates`), named, with what the report does about it."""
    if duplicates is None or duplicates.empty:
        return []
    return [
        f"{r['judge_a']} and {r['judge_b']} are one rater ({r['reason']}): a tie between them is no "
        "agreement, and the combined-judge tables are left out."
        for _, r in duplicates.iterrows()
    ]
