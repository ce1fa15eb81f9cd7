"""From one judge answer to rows of the results table (one row per candidate x dimension).

Parsing happens here, from the raw text, so a stored table can always be re-derived offline. What an answer
parsed to is kept in the call cache beside it (`keep`), tagged with the parser's version, this prompt's
labels and the rubric's fields, so a replay reads it back instead of parsing again; anything else (an older
parser, other labels) is parsed again from the raw text.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from core.schema import COLUMNS
from experiments.prompt import Prompt
from judge.client import CallResult
from judge.expected import expected_scores
from judge.parse import PARSER_VERSION, Field, Parsed, parse_labelled, parse_object
from judge.rubric import Rubric


def parse_answer(prompt: Prompt, rubric: Rubric, result: CallResult) -> dict[str, Parsed]:
    """Parsed values per shown label (or per candidate id when there are no labels)."""
    return parsed_answer(prompt, rubric, result)[0]


def parsed_answer(prompt: Prompt, rubric: Rubric, result: CallResult) -> tuple[dict[str, Parsed], Any]:
    """`parse_answer`, read from the parsed scores the cache keeps beside the answer when they fit, and what
    to keep there (None: nothing new, they were read from there or there is no answer)."""
    keys = [s.label or s.candidate.candidate_id for s in prompt.shown]
    comp = result.completion
    if comp is None:
        return {k: Parsed(False, error=result.error or "no completion") for k in keys}, None
    labels = prompt.labels
    tag = _fields_tag(rubric.fields)
    stored = _stored(result.stored_parse, labels, tag)
    keep = None
    if stored is None:
        if labels is not None:
            stored = list(parse_labelled(comp.text, labels, rubric.fields).values())
        else:
            stored = [parse_object(comp.text, rubric.fields)]
        if comp.finish_reason == "length":
            stored = [
                p
                if p.ok
                else Parsed(False, error=f"truncated (finish_reason=length): {p.error}", salvaged=p.salvaged)
                for p in stored
            ]
        keep = {
            "v": PARSER_VERSION,
            "fields": tag,
            "labels": None if labels is None else list(labels),
            "items": [[p.ok, dict(p.values), p.error, p.salvaged, p.rationale] for p in stored],
        }
    if labels is not None:
        return dict(zip(labels, stored, strict=True)), keep
    return {k: stored[0] for k in keys}, keep


_FIELD_TAGS: dict[int, tuple[tuple[Field, ...], str]] = {}


def _fields_tag(fields: tuple[Field, ...]) -> str:
    """A short digest of the fields an answer was parsed against (memoised per fields tuple: a rubric's)."""
    known = _FIELD_TAGS.get(id(fields))
    if known is None or known[0] is not fields:
        digest = hashlib.sha256(repr(fields).encode()).hexdigest()[:12]
        known = _FIELD_TAGS[id(fields)] = (fields, digest)
    return known[1]


def _stored(value: Any, labels: tuple[str, ...] | None, tag: str) -> list[Parsed] | None:
    """The parsed scores kept in the cache, when they are this parser version's for these labels and fields
    (anything else, or a malformed record, is None: parse the raw answer again)."""
    if type(value) is not dict or value.get("v") != PARSER_VERSION or value.get("fields") != tag:
        return None
    items = value.get("items")
    want = 1 if labels is None else len(labels)
    if value.get("labels") != (None if labels is None else list(labels)) or type(items) is not list:
        return None
    if len(items) != want:
        return None
    out = []
    for item in items:
        if type(item) is not list or len(item) != 5:
            return None
        ok, values, error, salvaged, rationale = item
        if type(ok) is not bool or type(values) is not dict or type(salvaged) is not bool:
            return None
        out.append(Parsed(ok, values, error, salvaged, rationale))
    return out


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
    prompt: Prompt,
    sample_idx: int,
    result: CallResult,
    rubric: Rubric,
    meta: Mapping[str, Any],
    answer: Mapping[str, Parsed] | None = None,
) -> list[dict[str, Any]]:
    """Rows for one sample of one prompt; `meta` holds the run-level columns; `answer`: the answer's
    `parse_answer` when the caller has it."""
    parsed_by_key = parse_answer(prompt, rubric, result) if answer is None else answer
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


# the columns a prompt fixes (the same for each of its samples), in the order RowColumns keeps them
_PROMPT_COLUMNS = (
    "prompt_id",
    "instance_id",
    "candidate_id",
    "source",
    "other_id",
    "order",
    "dimension",
    "higher_is_better",
    "score_min",
    "score_max",
    "position",
    "label",
    "candidate_text",
)
# the columns one answer fills, per row or per call (`account`)
_ANSWER_COLUMNS = ("score", "score_expected", "preference", "parse_ok", "salvaged", "error", "rationale")
_ACCOUNT_COLUMNS = (
    "raw",
    "finish_reason",
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "latency_s",
    "cached",
    "retries",
)


class RowColumns:
    """The results table built column by column: what `rows_for` + `to_frame` give for the same calls, without
    a 35-key dict per row (a replay's largest cost outside cache reads and table writes once answers are
    not parsed again). A prompt's fixed columns are worked out once for all its samples; rows may arrive in
    any call order (`index`: the call's place in the run) and come out in call order."""

    def __init__(self, rubric: Rubric, meta: Mapping[str, Any]) -> None:
        self.rubric = rubric
        self.meta = dict(meta)
        self.columns: dict[str, list[Any]] = {
            c: [] for c in (*_PROMPT_COLUMNS, "sample_idx", *_ANSWER_COLUMNS, *_ACCOUNT_COLUMNS)
        }
        self.calls: list[tuple[int, int]] = []  # (call index, rows of the call), in arrival order
        self._prompts: dict[int, tuple[Prompt, dict[str, list[Any]], list[str]]] = {}
        self._dims = [d.name for d in rubric.dimensions]
        self._all_dims = [*self._dims, "overall"] if rubric.add_overall else self._dims
        self._higher, self._ranges = rubric.directions(), rubric.bounds()

    def _fixed(self, prompt: Prompt) -> tuple[dict[str, list[Any]], list[str]]:
        """A prompt's fixed columns, and the answer key of each judged text (its rows: one per dimension)."""
        known = self._prompts.get(id(prompt))
        if known is not None and known[0] is prompt:
            return known[1], known[2]
        dims = self._all_dims
        n = len(dims)
        fixed: dict[str, list[Any]] = {c: [] for c in _PROMPT_COLUMNS}
        keys: list[str] = []
        for judged in prompt.judged:
            shown, other = judged.shown, judged.against
            keys.append(shown.label or shown.candidate.candidate_id)
            for col, value in (
                ("prompt_id", prompt.prompt_id),
                ("instance_id", prompt.instance_id),
                ("candidate_id", shown.candidate.candidate_id),
                ("source", shown.candidate.source),
                ("other_id", other.candidate.candidate_id if other else None),
                ("order", prompt.order),
                ("position", shown.position),
                ("label", shown.label),
                ("candidate_text", shown.candidate.text),
            ):
                fixed[col].extend([value] * n)
            fixed["dimension"].extend(dims)
            fixed["higher_is_better"].extend([self._higher[d] for d in dims])
            fixed["score_min"].extend([self._ranges[d][0] for d in dims])
            fixed["score_max"].extend([self._ranges[d][1] for d in dims])
        self._prompts[id(prompt)] = (prompt, fixed, keys)
        return fixed, keys

    def add(
        self,
        index: int,
        prompt: Prompt,
        sample_idx: int,
        result: CallResult,
        answer: Mapping[str, Parsed] | None = None,
    ) -> bool:
        """The rows of one call (`rows_for`'s); whether every one of them parsed."""
        fixed, keys = self._fixed(prompt)
        cols = self.columns
        dims = self._all_dims
        k = len(dims)
        n = k * len(keys)
        for col, values in fixed.items():
            cols[col].extend(values)
        cols["sample_idx"].extend([sample_idx] * n)
        parsed_by_key = parse_answer(prompt, self.rubric, result) if answer is None else answer
        expected_by = expected_by_key(prompt, self.rubric, result)
        is_pref = prompt.asks_preference
        all_ok = True
        for key in keys:
            parsed = parsed_by_key[key]
            values = _values(self.rubric, parsed)
            if is_pref:
                cols["score"].extend([math.nan] * k)
                cols["preference"].extend([_flip(values[d], prompt.order) for d in dims])
            else:
                cols["score"].extend([math.nan if values[d] is None else float(values[d]) for d in dims])
                cols["preference"].extend([None] * k)
            if parsed.ok:
                expected = expected_by.get(key, {})
                cols["score_expected"].extend([expected.get(d, math.nan) for d in dims])
            else:
                all_ok = False
                cols["score_expected"].extend([math.nan] * k)
            cols["parse_ok"].extend([parsed.ok] * k)
            cols["salvaged"].extend([parsed.salvaged] * k)
            cols["error"].extend([parsed.error] * k)
            cols["rationale"].extend([parsed.rationale] * k)
        comp = result.completion
        for col, value in (
            ("raw", comp.text if comp else ""),
            ("finish_reason", comp.finish_reason if comp else None),
            ("prompt_tokens", comp.prompt_tokens if comp else 0),
            ("completion_tokens", comp.completion_tokens if comp else 0),
            ("cost_usd", call_cost(result)),
            ("latency_s", 0.0 if result.shared or not comp else comp.latency_s),
            ("cached", result.cached),
            ("retries", result.retries),
        ):
            cols[col].extend([value] * n)
        self.calls.append((index, n))
        return all_ok

    def frame(self) -> pd.DataFrame:
        """`to_frame` of the rows, in call order."""
        n = sum(k for _, k in self.calls)
        if n == 0:
            return to_frame([])
        order = [i for i, _ in self.calls]
        data: dict[str, Any] = self.columns
        if any(a > b for a, b in zip(order, order[1:], strict=False)):  # some calls answered out of order
            starts = np.cumsum([0] + [k for _, k in self.calls])[:-1]
            take = np.concatenate(
                [np.arange(starts[j], starts[j] + self.calls[j][1]) for j in np.argsort(order, kind="stable")]
            )
            data = {c: [values[t] for t in take.tolist()] for c, values in self.columns.items()}
        columns = {**{c: [v] * n for c, v in self.meta.items()}, "inconsistent": [None] * n, **data}
        return _typed(pd.DataFrame(columns, columns=COLUMNS))


def to_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The results table with its columns in contract order and pairwise flips marked."""
    return _typed(pd.DataFrame(rows, columns=COLUMNS))


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """The contract's column types, then `mark_inconsistent`."""
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
