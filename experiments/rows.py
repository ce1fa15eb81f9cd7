"""From one judge answer to rows of the results table (one row per candidate x dimension).

Parsing happens here, from the raw text, so a stored table can always be re-derived offline.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from core.schema import COLUMNS
from experiments.prompt import Prompt
from judge.client import CallResult
from judge.expected import expected_scores
from judge.parse import Parsed, parse_labelled, parse_object
from judge.rubric import Rubric


def parse_answer(prompt: Prompt, rubric: Rubric, result: CallResult) -> dict[str, Parsed]:
    """Parsed values per shown label (or per candidate id when there are no labels)."""
    keys = [s.label or s.candidate.candidate_id for s in prompt.shown]
    if result.completion is None:
        return {k: Parsed(False, error=result.error or "no completion") for k in keys}
    raw = result.completion.text
    if prompt.labels is not None:
        parsed = parse_labelled(raw, prompt.labels, rubric.fields)
    else:
        one = parse_object(raw, rubric.fields)
        parsed = {k: one for k in keys}
    if result.completion.finish_reason == "length":
        parsed = {
            k: p
            if p.ok
            else Parsed(False, error=f"truncated (finish_reason=length): {p.error}", salvaged=p.salvaged)
            for k, p in parsed.items()
        }
    return parsed


def expected_by_key(prompt: Prompt, rubric: Rubric, result: CallResult) -> dict[str, dict[str, float]]:
    """G-Eval expected scores per shown label (or candidate id), from the answer's token log-probabilities
    (empty without them: `expected_scores=true` asks for them)."""
    comp = result.completion
    if comp is None or not comp.logprobs or prompt.asks_preference:
        return {}
    keys = [s.label or s.candidate.candidate_id for s in prompt.shown]
    if prompt.labels is not None:
        return expected_scores(comp.text, comp.logprobs, rubric.fields, list(prompt.labels))
    one = expected_scores(comp.text, comp.logprobs, rubric.fields).get("", {})
    return {k: one for k in keys}


def _values(rubric: Rubric, parsed: Parsed) -> dict[str, Any]:
    """Dimension -> value; "overall" (mean of the dimensions) added where the rubric asks for it."""
    values: dict[str, Any] = {
        d.name: parsed.values.get(d.name) if parsed.ok else None for d in rubric.dimensions
    }
    if rubric.add_overall:
        values["overall"] = sum(values.values()) / len(values) if parsed.ok else None
    return values


def _flip(choice: str | None, order: str | None) -> str | None:
    """Map a shown-order preference back to (candidate_id vs other_id)."""
    if choice is None or order == "ab" or choice == "tie":
        return choice
    return {"a": "b", "b": "a"}[choice]


def call_cost(result: CallResult) -> float | None:
    """What the call cost, as the manifest's `Tally` counts it: nothing for a call that got no completion or
    shared another call's answer (no request of its own); a completion's price, None when unknown."""
    if result.completion is None or result.shared:
        return 0.0
    return result.completion.cost_usd


def rows_for(
    prompt: Prompt, sample_idx: int, result: CallResult, rubric: Rubric, meta: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Rows for one sample of one prompt; `meta` holds the run-level columns."""
    parsed_by_key = parse_answer(prompt, rubric, result)
    expected_by = expected_by_key(prompt, rubric, result)
    comp = result.completion
    account = {
        "raw": comp.text if comp else "",
        "finish_reason": comp.finish_reason if comp else None,
        "prompt_tokens": comp.prompt_tokens if comp else 0,
        "completion_tokens": comp.completion_tokens if comp else 0,
        "cost_usd": call_cost(result),
        # a cached replay records its original call's latency (the cache keeps it): a rerun's latency is known
        "latency_s": 0.0 if result.shared or not comp else comp.latency_s,
        "cached": result.cached,
        "retries": result.retries,
    }
    rows = []
    higher = rubric.directions()
    ranges = rubric.bounds()
    is_pref = prompt.asks_preference
    for judged in prompt.judged:
        shown, other = judged.shown, judged.against
        parsed = parsed_by_key[shown.label or shown.candidate.candidate_id]
        expected = expected_by.get(shown.label or shown.candidate.candidate_id, {}) if parsed.ok else {}
        for dim, value in _values(rubric, parsed).items():
            rows.append(
                {
                    **meta,
                    "prompt_id": prompt.prompt_id,
                    "instance_id": prompt.instance_id,
                    "candidate_id": shown.candidate.candidate_id,
                    "source": shown.candidate.source,
                    "other_id": other.candidate.candidate_id if other else None,
                    "order": prompt.order,
                    "dimension": dim,
                    "higher_is_better": higher[dim],
                    "score_min": ranges[dim][0],
                    "score_max": ranges[dim][1],
                    "sample_idx": sample_idx,
                    "position": shown.position,
                    "label": shown.label,
                    "score": math.nan if is_pref or value is None else float(value),
                    "score_expected": expected.get(dim, math.nan),
                    "preference": _flip(value, prompt.order) if is_pref else None,
                    "inconsistent": None,
                    "parse_ok": parsed.ok,
                    "salvaged": parsed.salvaged,
                    "error": parsed.error,
                    "rationale": parsed.rationale,
                    "candidate_text": shown.candidate.text,
                    **account,
                }
            )
    return rows


def to_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The results table with its columns in contract order and pairwise flips marked."""
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["position"] = frame["position"].astype("Int64")
    frame["higher_is_better"] = frame["higher_is_better"].astype("boolean")
    frame["salvaged"] = frame["salvaged"].astype(bool)
    # float even when unknown
    for col in ("score", "score_expected", "score_min", "score_max", "cost_usd", "latency_s", "temperature"):
        frame[col] = frame[col].astype(float)
    return mark_inconsistent(frame)


def mark_inconsistent(frame: pd.DataFrame) -> pd.DataFrame:
    """Pairwise: a preference that differs between the two orders (same sample) is inconsistent."""
    pair = frame[frame["preference"].notna() & frame["other_id"].notna() & frame["order"].notna()]
    if pair.empty:
        return frame
    keys = ["judge", "instance_id", "candidate_id", "other_id", "dimension", "sample_idx"]
    parsed = pair[pair["preference"].notna()]
    n_distinct = parsed.groupby(keys)["preference"].transform("nunique")
    n_orders = parsed.groupby(keys)["order"].transform("nunique")
    flag = pd.Series(pd.NA, index=frame.index, dtype="boolean")
    flag.loc[parsed.index] = (n_distinct > 1) & (n_orders == 2)
    flag.loc[parsed.index[(n_orders < 2).to_numpy()]] = pd.NA  # the other order is unscored: unknown
    frame = frame.copy()
    frame["inconsistent"] = flag
    return frame
