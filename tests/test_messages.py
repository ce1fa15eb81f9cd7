"""Messages people read (issue 28): the reasons a run lists for its unscored calls carry real numbers and
count calls, and no message template in the package has a placeholder left unfilled."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pandas as pd
import pytest

from core.schema import Manifest
from experiments.inputs import ParseRateError
from experiments.manifest import check_parse_rate, error_reasons

ROOT = Path(__file__).resolve().parents[1]
RATE_LIMITED = "provider: RateLimitError after 3 attempts: litellm.RateLimitError: slow down"


def calls(errors: list[str | None], rows_per_call: int = 3) -> pd.DataFrame:
    """One call per error (None: scored), each with `rows_per_call` rows (candidates x dimensions)."""
    rows = [
        {
            "prompt_id": f"p{i}",
            "sample_idx": 0,
            "candidate_id": f"c{r}",
            "parse_ok": error is None,
            "error": error,
        }
        for i, error in enumerate(errors)
        for r in range(rows_per_call)
    ]
    return pd.DataFrame(rows)


def test_the_top_reasons_count_calls_and_keep_their_numbers() -> None:
    """7 of 11 calls rate-limited, 3 rows each: the line said `after N attempts ... (21)`."""
    frame = calls([RATE_LIMITED] * 7 + [None] * 4)
    manifest = Manifest(parse_rate=4 / 11, calls_total=11, unscored_calls=7)
    with pytest.raises(ParseRateError) as raised:
        check_parse_rate(manifest, frame, 0.9)
    assert str(raised.value) == (
        "parse rate 0.364 is below min_parse_rate=0.9 (7 of 11 calls unscored; outputs "
        f"written); top reasons: {RATE_LIMITED} (7)"
    )


def test_a_reason_whose_numbers_differ_gives_their_range() -> None:
    frame = calls(
        [
            "originality: a 401-digit number is not a score",
            "originality: a 5000-digit number is not a score",
            "originality: a 401-digit number is not a score",
            "gap: '7x' is not a number",
            None,
        ]
    )
    assert error_reasons(frame) == [
        ("originality: a 401–5000-digit number is not a score", 3),
        ("gap: '7x' is not a number", 1),
    ]
    one = calls(["originality: a 401-digit number is not a score"])
    assert error_reasons(one) == [("originality: a 401-digit number is not a score", 1)]


def test_rows_without_call_columns_are_counted_as_rows() -> None:
    frame = calls([RATE_LIMITED] * 2).drop(columns=["prompt_id", "sample_idx"])
    assert error_reasons(frame) == [(RATE_LIMITED, 6)]


# A `{name}` in a string literal that is not an f-string: a message that prints its placeholder. `${oc.env:X}`
# (an instruction to the user) and `{{`-escapes are not placeholders.
PLACEHOLDER = re.compile(
    r"(?<![$\\{])\{[A-Za-z_]\w*(\.\w+|\[[^\]]*\])*(![rsa])?(:[<>=^+\- #0-9.,_%a-z]*)?\}(?!\})"
)
# the templates that are filled later on purpose: .format(...) SQL, and CSS rules that look like `{x:y}`
FILLED_LATER = {
    ("analysis/view/sql.py", "{where}"),
    ("analysis/view/sql.py", "{dims}"),
    ("analysis/view/sql.py", "{largest}"),  # ITEM_SQL.replace("{largest}", _LARGEST), at import
    ("analysis/report/render.py", "{columns:2}"),
    ("analysis/report/render.py", "{margin:.2rem 0}"),
    ("analysis/report/render.py", "{margin:0}"),
    # LaTeX arguments, not placeholders: \label{tab:judgescope-<key>}, \input{paper_tables}, \end{table},
    # \usepackage{booktabs}
    ("analysis/report/paper_tables.py", "{tab:judgescope-<key>}"),
    ("analysis/report/paper_tables.py", "{paper_tables}"),
    ("analysis/report/paper_tables.py", "{table}"),
    ("analysis/report/paper_tables.py", "{booktabs}"),
}


def unfilled_placeholders(source: str) -> list[tuple[int, str]]:
    """(line, placeholder) of every `{name}` in a plain (non-f) string literal that is not a docstring."""
    tree = ast.parse(source)
    docstrings = {
        node.body[0].value.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.STRING or token.start[0] in docstrings:
            continue
        prefix = re.match(r"[A-Za-z]*", token.string)
        if prefix and "f" in prefix.group().lower():
            continue
        found += [(token.start[0], m.group()) for m in PLACEHOLDER.finditer(token.string)]
    return found


def test_the_sweep_finds_a_missing_f_prefix() -> None:
    planted = 'def f(path):\n    """{doc} is fine."""\n    raise ValueError(f"{path}: bad, " "see {path}")\n'
    assert unfilled_placeholders(planted) == [(3, "{path}")]
    assert unfilled_placeholders('x = "read ${oc.env:NAME} or {{literal}}"\n') == []


def test_no_message_template_has_an_unfilled_placeholder() -> None:
    found = {
        (path.relative_to(ROOT).as_posix(), placeholder)
        for folder in ("judge", "experiments", "analysis")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for _, placeholder in unfilled_placeholders(path.read_text(encoding="utf-8"))
    }
    assert found - FILLED_LATER == set()
