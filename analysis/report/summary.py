"""What a reader of the report sees first: agreement with the experts per judge and dimension, a judge
leaderboard, and short sentences with numbers and CIs that answer the study's questions.

Everything here is computed from the report's tables (and, for parse rate, cost and latency, from the
results rows), so a sentence can never disagree with the table it summarises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from analysis.report.costs import NO_COMPLETION, call_costs, per_1k
from analysis.stats import multiplicity
from analysis.stats.scores import usable_mask
from experiments import power

ALPHA = 0.05
#: κ_w values closer than this are equal (a tie, not a best judge).
TIE_TOL = 1e-9
CALL_KEYS = ["run_id", "prompt_id", "sample_idx"]  # one judgment = one call (a prompt's sample)


def power_sentence(n: int, discordance: float) -> str:
    """The mode-shift test's power on `n` paired instances (experiments.power, the computation `plan=true`
    uses), at the observed discordance (or the plan's default when none was observed)."""
    psi = discordance if np.isfinite(discordance) and discordance > 0 else power.DISCORDANCE
    mde = power.minimum_detectable_effect(n, psi)
    where = f"n = {n} instances, discordance {psi:.2f}"
    if mde is None:
        return f" Power: {where}: no shift can be detected with 80% power at α = {ALPHA}."
    return f" Power: {where}: the smallest shift detected with 80% power at α = {ALPHA} is {mde:.2f}."


def _calls(results: pd.DataFrame) -> pd.DataFrame:
    """One row per judgment (call) with its judge, parse status, cost, latency and cached flag. A call is
    parsed only when every one of its rows is (experiments.manifest counts it so), so the parse rate here
    equals the manifest's; a row of unknown status (NaN parse_ok: a run whose table lacks the column) counts
    as parsed, as scores.usable_mask uses it. Cost, latency and the cached flag are the call's."""
    keys = [c for c in CALL_KEYS if c in results]
    results = results.assign(cost_usd=call_costs(results))
    cols = [
        c
        for c in ("judge", "parse_ok", "cost_usd", "latency_s", "cached", *NO_COMPLETION, "raw")
        if c in results
    ]  # raw: part of the no-completion evidence (costs.no_completion)
    if not keys:
        return results[cols]
    call = ["judge", *keys]
    if "parse_ok" in results:
        parsed = pd.Series(usable_mask(results), index=results.index)
        every = parsed.groupby([results[k] for k in call], observed=True, dropna=False).transform("all")
        results = results.assign(parse_ok=every)
    return results.drop_duplicates(call)[cols]


def parse_rate(results: pd.DataFrame) -> float | None:
    """Share of calls whose every row parsed (`_calls`: the manifest's rule); None without a parse_ok column.
    The leaderboard and the judge card both report this number."""
    if "parse_ok" not in results or not len(results):
        return None
    return float(usable_mask(_calls(results)).mean())


def _per_judge_usage(results: pd.DataFrame) -> pd.DataFrame:
    """Parse rate, cost per 1,000 paid judgments (costs.per_1k; NaN = unknown), median latency and time per
    1,000 judgments (1,000 × the mean latency, alpaca_eval's "time per 1,000") of the calls sent and the
    cached replays that carry their original call's latency (older results recorded 0 s for a replay: not a
    latency, left out; the judge card counts the same calls)."""
    calls = _calls(results)
    out = []
    for judge, part in calls.groupby("judge", observed=True, sort=True):
        latency = part["latency_s"].astype(float) if "latency_s" in part else pd.Series(dtype=float)
        cached = part["cached"].fillna(False).astype(bool) if "cached" in part else False
        latency = latency.loc[(~cached | latency.gt(0)).to_numpy()]
        parsed = float(usable_mask(part).mean()) if "parse_ok" in part else np.nan
        out.append(
            {
                "judge": str(judge),
                "judgments": len(part),
                "parse_rate": parsed,
                "cost_per_1k": per_1k(part),
                "median_latency_s": latency.median() if len(latency) else np.nan,
                "time_per_1k_s": 1000 * latency.mean() if len(latency) else np.nan,
            }
        )
    return pd.DataFrame(out)


def _mean_by_judge(table: pd.DataFrame | None, value: str, name: str) -> pd.DataFrame:
    if table is None or table.empty or value not in table:
        return pd.DataFrame(columns=["judge", name])
    frame = table.assign(judge=table["judge"].astype(str))
    return frame.groupby("judge", as_index=False)[value].mean().rename(columns={value: name})


def _position_by_judge(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Position bias per judge: comparative mode, the largest |win rate − expected| over shown positions
    (averaged over dimensions); pairwise mode, first_rate − 0.5, first_rate being the share of decided (not
    tie) verdicts that prefer the first-shown text (consistency.pairwise_bias; averaged over dimensions, NaN
    when every verdict is a tie); a judge that ran both shows the one further from 0 (a max would hide a
    pairwise preference for the second-shown text)."""
    frames = []
    pos = tables.get("position_bias")
    if pos is not None and len(pos):
        gap = pos.assign(judge=pos["judge"].astype(str), _gap=(pos["win_rate"] - pos["expected"]).abs())
        per_dim = gap.groupby(["judge", "dimension"], observed=True)["_gap"].max().reset_index()
        frames.append(per_dim.groupby("judge", as_index=False)["_gap"].mean())
    pair = tables.get("pairwise_bias")
    if pair is not None and len(pair):
        first = pair.assign(judge=pair["judge"].astype(str), _gap=pair["first_rate"] - 0.5)
        frames.append(first.groupby("judge", as_index=False)["_gap"].mean())
    if not frames:
        return pd.DataFrame(columns=["judge", "position_bias"])
    both = pd.concat(frames, ignore_index=True).dropna(subset=["_gap"])  # all ties: no pairwise gap
    largest = both.loc[both["_gap"].abs().groupby(both["judge"]).idxmax()]  # signed: < 0 favours the second
    return largest.rename(columns={"_gap": "position_bias"})[["judge", "position_bias"]]


def leaderboard(
    results: pd.DataFrame,
    tables: dict[str, pd.DataFrame],
    extra: Sequence[Callable[[dict[str, pd.DataFrame]], pd.DataFrame]] = (),
) -> pd.DataFrame:
    """One row per judge: κ_w with the experts per dimension, self-consistency α, position bias (pairwise:
    also the first-shown preference among decided verdicts, tie and flip rates, from consistency.pairwise_bias), length / self-preference
    bias, parse rate, cost per 1,000 judgments (NaN: unknown), median latency, then the `extra` columns (a
    frame of judge and columns per part: the leaderboard columns tables declare, `analysis.tables.registry`). κ_w is
    per dimension and mode (``kappa_w:<dimension> [<mode>]``); the rows are sorted by its mean over the
    columns."""
    board = _per_judge_usage(results)
    agree = tables.get("human_agreement")
    if agree is not None and len(agree):
        wide = agree.pivot_table(
            index="judge", columns=["dimension", "mode"], values="kappa_w", aggfunc="first"
        )
        wide.columns = [f"kappa_w:{d} [{m}]" for d, m in wide.columns]  # each mode its own: never averaged
        board = wide.reset_index().merge(board, on="judge", how="outer")
    for part in (
        _mean_by_judge(tables.get("self_consistency"), "alpha", "self_alpha"),
        _position_by_judge(tables),
        _mean_by_judge(tables.get("pairwise_bias"), "first_rate", "first_rate"),
        _mean_by_judge(tables.get("pairwise_bias"), "tie_rate", "tie_rate"),
        _mean_by_judge(tables.get("pairwise_bias"), "flip_rate", "flip_rate"),
        _mean_by_judge(tables.get("length_bias"), "rho_better", "length_rho"),
        _mean_by_judge(tables.get("self_preference"), "favours_own", "self_preference"),
    ):
        board = board.merge(part, on="judge", how="left")
    for make in extra:
        board = board.merge(make(tables).astype({"judge": str}), on="judge", how="left")
    kappas = [c for c in board.columns if c.startswith("kappa_w:")]
    board[AGREEMENT] = board[kappas].mean(axis=1) if kappas else np.nan
    sort = AGREEMENT if kappas else "parse_rate"
    board = board.sort_values(sort, ascending=False, na_position="last").reset_index(drop=True)
    board.attrs["sort_key"] = sort
    return board[_board_order(list(board.columns))]


#: the sort key: the mean of a judge's κ_w columns (every dimension × mode it was compared with the experts on)
AGREEMENT = "agreement"
#: alpaca_eval's per-annotator columns, in its order (human agreement, price and time per 1,000, position
#: and length bias), then the κ_w group, then the rest; `provider_failures` has its place once it exists
LEADING: tuple[str, ...] = (
    "judge",
    AGREEMENT,
    "cost_per_1k",
    "time_per_1k_s",
    "position_bias",
    "length_rho",
)
TRAILING: tuple[str, ...] = ("parse_rate", "provider_failures", "self_alpha", "judgments", "median_latency_s")
KAPPA_GROUP = "κ_w with the experts"


def _board_order(columns: Sequence[str]) -> list[str]:
    """judge, the alpaca_eval columns, the κ_w columns together, then parse rate and the rest."""
    kappas = [c for c in columns if c.startswith("kappa_w:")]
    rest = [c for c in columns if c not in (*LEADING, *TRAILING) and c not in kappas]
    return [*[c for c in LEADING if c in columns], *kappas, *[c for c in TRAILING if c in columns], *rest]


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
    if top["kappa_w_lo"] <= second["kappa_w_hi"]:  # NaN bounds compare False: no CI, no overlap claimed
        return (
            f"no clear best judge (CIs overlap): {top['judge']} {_kappa(top)}; {second['judge']} "
            f"{_kappa(second)}"
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
        line += power_sentence(int(smallest["n"]), float(smallest.get("discordance", np.nan)))
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
            f"cost per 1,000 judgments {cost}",
        ]
        lines.append(f"{r['judge']}: " + ", ".join(p for p in parts if p) + ".")
    return lines


def summary_lines(tables: dict[str, pd.DataFrame]) -> dict[str, list[str]]:
    """The report's opening: sentences per question, from the tables."""
    return {
        "Which judge agrees with the experts?": agreement_lines(
            tables.get("human_agreement"), tables.get("human_unmatched")
        ),
        "Is there a novelty illusion (independent → comparative)?": shift_lines(
            tables.get("mode_shift"), tables.get("multiple_testing")
        ),
        "How consistent and how biased is each judge?": judge_lines(
            tables.get("leaderboard", pd.DataFrame())
        ),
    }


def judge_names(labels: Iterable[str]) -> list[str]:
    """Distinct judges behind rater labels: ``judge/rubric`` and ``judge [mode]`` count once."""
    return sorted({str(x).split(" [", 1)[0].split("/", 1)[0] for x in labels})
