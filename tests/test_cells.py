"""analysis.cells: hostile names and texts shown as text in Markdown tables (review 7, F5)."""

from __future__ import annotations

import pandas as pd

from analysis.cells import md_cell
from analysis.echoreview_report import pairwise_markdown
from analysis.reviewers import markdown as reviewers_markdown

HOSTILE = "![x](http://evil.example/p.png) **j** a|b <script>x</script> ~~s~~"
SHOWN = r"!\[x\](http://evil.example/p.png) \*\*j\*\* a\|b &lt;script&gt;x&lt;/script&gt; \~\~s\~\~"


def test_md_cell_known_values() -> None:
    assert md_cell(HOSTILE) == SHOWN
    assert md_cell("_gpt_ __init__ broad_gen") == r"\_gpt\_ \_\_init\_\_ broad_gen"  # review 8, F9
    assert md_cell("broad_gen") == "broad_gen" and md_cell("a\\b`c`\r\nd") == "a&#92;b&#96;c&#96;<br>d"


def test_reviewers_and_echoreview_tables_escape_their_name_cells() -> None:
    stats = {f"{k}{s}": 0.5 for k in ("percent", "kappa", "kappa_w", "rho", "tau") for s in ("", "_lo", "_hi")}
    table = pd.DataFrame([{"judge": HOSTILE, "papers": "all 2", "comparison": "judge vs mean reviewer", "n": 2,
                           **stats}])
    text = reviewers_markdown(table, "Originality")
    assert SHOWN in text and "<script>" not in text and text.splitlines()[2].count(" | ") == 9  # 10 cells: no pipe split the judge
    pairs = pd.DataFrame([{"judge": HOSTILE, "dimension": "d", "generator": "g|h", "opponent": "[o](x)",
                           "protocol": "both orders", "n": 2, "n_pairs": 1, "n_flip": 0, "n_both_orders": 2,
                           **{f"{k}{s}": 0.5 for k in ("win", "tie", "loss") for s in ("", "_lo", "_hi")}}])
    row = pairwise_markdown(pairs)[4]
    assert SHOWN in row and r"g\|h" in row and r"\[o\](x)" in row and "<script>" not in row
