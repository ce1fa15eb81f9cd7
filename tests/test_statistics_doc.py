"""docs/statistics.md is the one page that says what every printed statistic is, assumes and where it is
computed (issue 32 item 7): a table declared without a line there, or a module path there that no longer
exists, fails here, so the page cannot silently fall behind the code."""

from __future__ import annotations

import re
from pathlib import Path

from analysis import stats
from analysis.tables.declarations import BUILTIN, declared_in

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "statistics.md"
#: a repository path to a Python module, e.g. analysis/stats/winrate.py (at least one folder)
MODULE_PATH = re.compile(r"(?<![\w/.-])((?:[A-Za-z_][\w-]*/)+[A-Za-z_]\w*\.py)\b")


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def test_every_declared_table_is_documented() -> None:
    text = _doc()
    missing = [s.key for s in (*BUILTIN, *declared_in(stats)) if f"`{s.key}`" not in text]
    assert not missing, f"docs/statistics.md does not describe the declared table(s) {missing}"


def test_every_module_path_named_exists() -> None:
    paths = sorted(set(MODULE_PATH.findall(_doc())))
    assert len(paths) >= 20, f"expected the doc to name where each statistic is computed, found {paths}"
    absent = [p for p in paths if not (ROOT / p).is_file()]
    assert not absent, f"docs/statistics.md names module path(s) that do not exist: {absent}"


def test_module_path_pattern_finds_a_missing_path() -> None:
    """The check above can fail: a made-up path in a sentence is found and reported absent."""
    found = MODULE_PATH.findall("computed in `analysis/stats/nowhere.py: f` and core/intervals.py.")
    assert found == ["analysis/stats/nowhere.py", "core/intervals.py"]
    assert not (ROOT / found[0]).is_file()
