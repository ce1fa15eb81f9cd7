"""The results table's schema: the one contract between the study (which writes it) and the analysis.

`experiments.rows` writes exactly `COLUMNS`, in this order; `analysis.collect` reads `ANALYSIS_COLUMNS` and
types them from here. Add a column here (and fill it in `experiments.rows`); nothing else keeps a list.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    """One column of results.parquet / results.csv: its name, its type, whether the analysis reads it
    (`analysis`) and whether it is a repeated string key it groups by (`key`: loaded as a categorical)."""

    name: str
    dtype: str
    doc: str
    analysis: bool = False
    key: bool = False


SCHEMA: tuple[Column, ...] = (
    Column("run_id", "string", "the run's folder name", analysis=True, key=True),
    Column("judge", "string", "judge config name", analysis=True, key=True),
    Column("model", "string", "the provider's model name", analysis=True, key=True),
    Column("mode", "string", "study mode name (independent, comparative, pairwise, ...)", analysis=True, key=True),
    Column("rubric", "string", "rubric name", analysis=True, key=True),
    Column("rubric_version", "string", "hash of the rubric's template and spec", analysis=True, key=True),
    Column("prompt_id", "string", "the prompt the row was judged in (prompts.parquet)", analysis=True, key=True),
    Column("instance_id", "string", "dataset instance", analysis=True, key=True),
    Column("candidate_id", "string", "the judged text", analysis=True, key=True),
    Column("source", "string", "'reference' or the generator's name", analysis=True, key=True),
    Column("other_id", "string", "pairwise: the text it was compared with", analysis=True, key=True),
    Column("order", "string", "pairwise: 'ab' when the judged text was shown first, else 'ba'", analysis=True,
           key=True),
    Column("dimension", "string", "rubric dimension", analysis=True, key=True),
    Column("higher_is_better", "boolean", "the dimension's direction, from the rubric spec", analysis=True),
    # the dimension's range: the analysis checks a score against the rubric the run used, never a config file
    Column("score_min", "float64", "the dimension's lowest score, from the rubric spec (NaN: a preference)",
           analysis=True),
    Column("score_max", "float64", "the dimension's highest score, from the rubric spec (NaN: a preference)",
           analysis=True),
    Column("sample_idx", "int64", "sample index (seed = seed + sample_idx)", analysis=True),
    Column("temperature", "float64", "sampling temperature"),
    Column("position", "Int64", "0-based place of the text in a multi-item prompt", analysis=True),
    Column("label", "string", "neutral label the text was shown under (Q1.., A/B)"),
    Column("score", "float64", "the parsed score (NaN when unscored or a preference)", analysis=True),
    Column("score_expected", "float64", "G-Eval expected score from the answer's log-probabilities (NaN without)",
           analysis=True),
    Column("preference", "string", "pairwise: 'a' (judged text), 'b' (the other) or 'tie'", analysis=True,
           key=True),
    Column("inconsistent", "boolean", "pairwise: the preference flipped with the order", analysis=True),
    Column("parse_ok", "bool", "the answer gave a valid value for this text", analysis=True),
    Column("salvaged", "bool", "the value came from a cut-off answer, repaired (complete entries only)"),
    Column("error", "string", "why the row is unscored"),
    Column("rationale", "string", "the judge's rationale where the rubric asks for one (never parsed)"),
    Column("raw", "string", "the judge's answer as received", analysis=True, key=True),
    # the analysis reads these three to tell a call with no completion (None, 0, 0) from one of unknown price
    Column("finish_reason", "string", "provider finish reason ('length' = cut at max_tokens)", analysis=True,
           key=True),
    Column("prompt_tokens", "int64", "prompt tokens of the call", analysis=True),
    Column("completion_tokens", "int64", "completion tokens of the call", analysis=True),
    Column("cost_usd", "float64", "the call's cost (0 without a completion or for a shared answer; NaN when unknown; "
           "a cached replay: the price of the answer it replays)", analysis=True),
    Column("latency_s", "float64", "the call's latency (0 when cached)", analysis=True),
    Column("cached", "bool", "replayed from the call cache", analysis=True),
    Column("retries", "int64", "transient provider errors retried"),
    Column("candidate_text", "string", "the judged text", analysis=True, key=True),
    Column("perturbation", "string", "robustness: the perturbation applied to the prompt (empty: none)",
           analysis=True, key=True),
)

COLUMNS: list[str] = [c.name for c in SCHEMA]
ANALYSIS_COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA if c.analysis)
KEY_COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA if c.key)
# a CSV writer may print a whole-number float as "3" (Arrow does): read these as floats whatever the text
FLOAT_COLUMNS: dict[str, str] = {c.name: "float64" for c in SCHEMA if c.dtype == "float64" and c.analysis}
# ids and names are text whatever they look like: a CSV cell 007 is the id "007", not the number 7
TEXT_COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA if c.dtype == "string" and c.analysis)
# true/false columns: a CSV holds their text ("False"), which must be parsed, never read by truthiness
FLAG_COLUMNS: tuple[str, ...] = tuple(c.name for c in SCHEMA if c.dtype in ("bool", "boolean") and c.analysis)
# whole-number columns the analysis reads as numbers (the token counts behind analysis.costs)
COUNT_COLUMNS: tuple[str, ...] = ("prompt_tokens", "completion_tokens")
# what the analysis cannot do without
REQUIRED: tuple[str, ...] = ("judge", "mode", "instance_id", "candidate_id", "source", "dimension", "score")
