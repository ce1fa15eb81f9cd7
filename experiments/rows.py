"""From one judge answer to rows of the results table (one row per candidate x dimension).

Parsing happens here, from the raw text, so a stored table can always be re-derived offline. What an answer
parsed to is kept in the call cache beside it (`keep`), tagged with the parser's version, this prompt's
labels and the rubric's fields, so a replay reads it back instead of parsing again; anything else (an older
parser, other labels) is parsed again from the raw text.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from core.schema import COLUMNS
from experiments.prompt import Prompt
from judge.client import CallResult
from judge.expected import expected_scores
from judge.parse import PARSER_VERSION, Field, Parsed, parse_labelled, parse_object, parser_dependencies
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
            "deps": parser_dependencies(),
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
    if (
        type(value) is not dict
        or value.get("v") != PARSER_VERSION
        or value.get("fields") != tag
        or value.get("deps")
        != parser_dependencies()  # another json-repair (or parsed before it was recorded)
    ):
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


# the columns a judged text fixes, the same on each of its rows (one per dimension) and in each sample
_TEXT_COLUMNS = (
    "prompt_id",
    "instance_id",
    "candidate_id",
    "source",
    "other_id",
    "order",
    "position",
    "label",
    "candidate_text",
)
# the columns an answer fixes per judged text, and per call (`rows_for`'s `account`)
_VERDICT_COLUMNS = ("sample_idx", "parse_ok", "salvaged", "error", "rationale")
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
    not parsed again). A call adds one entry per judged text and one per call; the rows (one per judged text
    and dimension) are spread out once, in `frame`. Calls may arrive in any order (`index`: the call's place
    in the run); the rows come out in call order."""

    def __init__(self, rubric: Rubric, meta: Mapping[str, Any]) -> None:
        self.rubric = rubric
        self.meta = dict(meta)
        self.calls: list[int] = []  # call index, in arrival order
        self.texts_per_call: list[int] = []
        self.account: dict[str, list[Any]] = {c: [] for c in _ACCOUNT_COLUMNS}  # per call
        self.texts: list[tuple[Any, ...]] = []  # per judged text: its _TEXT_COLUMNS
        self.verdicts: dict[str, list[Any]] = {c: [] for c in _VERDICT_COLUMNS}  # per judged text
        self.scores: list[list[float]] = []  # per judged text: one per dimension
        self.expected: list[list[float]] = []
        self.preferences: list[list[str | None]] = []
        self._dims = [*(d.name for d in rubric.dimensions), *(["overall"] if rubric.add_overall else [])]
        self._nans = [math.nan] * len(self._dims)
        self._nones: list[str | None] = [None] * len(self._dims)
        self._prompts: dict[int, tuple[Prompt, list[tuple[Any, ...]], list[str]]] = {}

    def _fixed(self, prompt: Prompt) -> tuple[list[tuple[Any, ...]], list[str]]:
        """A prompt's judged texts: their fixed columns and answer keys (worked out once for all samples)."""
        known = self._prompts.get(id(prompt))
        if known is not None and known[0] is prompt:
            return known[1], known[2]
        texts, keys = [], []
        for judged in prompt.judged:
            shown, other = judged.shown, judged.against
            keys.append(shown.label or shown.candidate.candidate_id)
            texts.append(
                (
                    prompt.prompt_id,
                    prompt.instance_id,
                    shown.candidate.candidate_id,
                    shown.candidate.source,
                    other.candidate.candidate_id if other else None,
                    prompt.order,
                    shown.position,
                    shown.label,
                    shown.candidate.text,
                )
            )
        self._prompts[id(prompt)] = (prompt, texts, keys)
        return texts, keys

    def add(
        self,
        index: int,
        prompt: Prompt,
        sample_idx: int,
        result: CallResult,
        answer: Mapping[str, Parsed] | None = None,
    ) -> bool:
        """The rows of one call (`rows_for`'s); whether every one of them parsed."""
        texts, keys = self._fixed(prompt)
        parsed_by_key = parse_answer(prompt, self.rubric, result) if answer is None else answer
        expected_by = expected_by_key(prompt, self.rubric, result)
        is_pref, dims, rubric = prompt.asks_preference, self._dims, self.rubric
        verdicts = self.verdicts
        all_ok = True
        for key in keys:
            parsed = parsed_by_key[key]
            if parsed.ok:
                values = _values(rubric, parsed)
                if is_pref:
                    self.scores.append(self._nans)
                    self.preferences.append([_flip(values[d], prompt.order) for d in dims])
                else:
                    self.scores.append([math.nan if values[d] is None else float(values[d]) for d in dims])
                    self.preferences.append(self._nones)
                expected = expected_by.get(key)
                self.expected.append([expected.get(d, math.nan) for d in dims] if expected else self._nans)
            else:
                all_ok = False
                self.scores.append(self._nans)
                self.preferences.append(self._nones)
                self.expected.append(self._nans)
            verdicts["sample_idx"].append(sample_idx)
            verdicts["parse_ok"].append(parsed.ok)
            verdicts["salvaged"].append(parsed.salvaged)
            verdicts["error"].append(parsed.error)
            verdicts["rationale"].append(parsed.rationale)
        self.texts.extend(texts)
        comp, account = result.completion, self.account
        account["raw"].append(comp.text if comp else "")
        account["finish_reason"].append(comp.finish_reason if comp else None)
        account["prompt_tokens"].append(comp.prompt_tokens if comp else 0)
        account["completion_tokens"].append(comp.completion_tokens if comp else 0)
        account["cost_usd"].append(call_cost(result))
        account["latency_s"].append(0.0 if result.shared or not comp else comp.latency_s)
        account["cached"].append(result.cached)
        account["retries"].append(result.retries)
        self.calls.append(index)
        self.texts_per_call.append(len(keys))
        return all_ok

    def frame(self) -> pd.DataFrame:
        """`to_frame` of the rows, in call order."""
        k = len(self._dims)
        n = len(self.texts) * k
        if n == 0:
            return to_frame([])
        chain = itertools.chain.from_iterable
        per_call = [t * k for t in self.texts_per_call]  # rows of each call
        data: dict[str, list[Any]] = {}
        for name, column in zip(_TEXT_COLUMNS, zip(*self.texts, strict=True), strict=True):
            data[name] = _spread(column, k)
        for name, per_text in self.verdicts.items():
            data[name] = _spread(per_text, k)
        for name, per_call_values in self.account.items():
            data[name] = _spread(per_call_values, per_call)
        data["dimension"] = self._dims * len(self.texts)
        higher, ranges = self.rubric.directions(), self.rubric.bounds()
        data["higher_is_better"] = [higher[d] for d in self._dims] * len(self.texts)
        data["score_min"] = [ranges[d][0] for d in self._dims] * len(self.texts)
        data["score_max"] = [ranges[d][1] for d in self._dims] * len(self.texts)
        data["score"] = list(chain(self.scores))
        data["score_expected"] = list(chain(self.expected))
        data["preference"] = list(chain(self.preferences))
        order = self.calls
        if any(a > b for a, b in zip(order, order[1:], strict=False)):  # some calls answered out of order
            starts = np.cumsum([0, *per_call])[:-1]
            take = np.concatenate(
                [np.arange(starts[j], starts[j] + per_call[j]) for j in np.argsort(order, kind="stable")]
            ).tolist()
            data = {c: [values[t] for t in take] for c, values in data.items()}
        columns = {**{c: [v] * n for c, v in self.meta.items()}, "inconsistent": [None] * n, **data}
        return _typed(pd.DataFrame(columns, columns=COLUMNS))


def _spread(values: Sequence[Any], times: int | list[int]) -> list[Any]:
    """Each value repeated `times` (one count, or one per value), as a list of the same objects
    (`np.fromiter` keeps every value an object, whatever it holds)."""
    held = np.fromiter(values, dtype=object, count=len(values))
    return list(np.repeat(held, times).tolist())


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
