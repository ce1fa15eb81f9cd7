"""The table registry (issue 23 item 3): a new statistic is its computation plus one declaration, and it then
appears in the written report (its CSV and its section), in the leaderboard and on every judge's card."""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
from pathlib import Path
from typing import Any, cast

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from analysis import stats as stats_package
from analysis.card import build as card
from analysis.card.markdown import card_markdown
from analysis.load.collect import load_results
from analysis.report import build as report
from analysis.report import paper_tables
from analysis.report import sections as sections_mod
from analysis.report.sections import SECTIONS
from analysis.stats.spec import Inputs, Section
from analysis.tables import declarations, registry
from analysis.tables.registry import CardField, StudyInputs, Tables, TableSpec
from analysis.view.data import Study
from analysis.view.server import create_app
from tests.support.report_run import report_without_figures
from tests.support.study_folders import DIMENSIONS, sample_candidates, write_fake_run


def _score(judge: str, cand: str, dim: str, k: int) -> float:
    """A planted score per candidate; judge-b one lower, so the two judges disagree."""
    return float(max(0, sum(map(ord, cand + dim)) % 4 - (judge == "judge-b")))


def _write_study(root: Path, modes: tuple[str, ...]) -> None:
    """judge-a (1 sample) and judge-b (2 samples) in each of `modes`."""
    for judge, samples in (("judge-a", 1), ("judge-b", 2)):
        for mode in modes:
            write_fake_run(root / f"{judge}-{mode}", judge, mode, _score, n_samples=samples, cost_usd=0.1)


@pytest.fixture()
def study(tmp_path: Path) -> tuple[Path, Path]:
    """Two judges in both modes, and three annotators' labels."""
    root = tmp_path / "multirun"
    _write_study(root, ("independent", "comparative"))
    rows = [
        (a, inst, cand, src, dim, float(sum(map(ord, cand + dim)) % 4))
        for a in ("h1", "h2", "h3")
        for inst, cand, src, _ in sample_candidates()
        for dim in DIMENSIONS
    ]
    humans = tmp_path / "humans.csv"
    columns = ["annotator", "instance_id", "candidate_id", "source", "dimension", "score"]
    pd.DataFrame(rows, columns=columns).to_csv(humans, index=False)
    return root, humans


def rows_per_judge(inputs: Inputs, _: Tables) -> pd.DataFrame:
    """The toy statistic: the number of results rows per judge, and a planted p-value (0.001 for judge-a)."""
    counts = inputs.results.groupby(inputs.results["judge"].astype(str)).size()
    table = counts.rename("n_rows").rename_axis("judge").reset_index()
    return table.assign(p_toy=[0.001 if j == "judge-a" else 0.9 for j in table["judge"]])


TOY: TableSpec = TableSpec(
    "rows_per_judge",
    rows_per_judge,
    ("judge", "n_rows", "p_toy"),
    section=Section.runs,
    p_column="p_toy",
    meanings={"n_rows": "toy: results rows of the judge", "p_toy": "toy: a planted p-value"},
    card=CardField("Rows per judge (toy)", ("n_rows",), "no rows", order=15),
    leaderboard=lambda tables: TOY.need(tables).rename(columns={"n_rows": "toy_rows"}),
)


def _section(md: str, title: str) -> str:
    """The text of one `## title` section of report.md."""
    start = md.index(f"## {title}\n")
    end = md.find("\n## ", start + 1)
    return md[start : end if end >= 0 else len(md)]


#: A new statistic the way CONTRIBUTING.md says ("A statistic: 1 or 2 files"): one module, its computation and,
#: at its bottom, its declaration registered through the public hook. Written outside the package (a plug-in).
TOY_MODULE = '''"""A toy statistic: the number of results rows per judge, and a planted p-value (0.001 for judge-a)."""

from __future__ import annotations

import pandas as pd

from analysis.stats.spec import CardField, Section, TableSpec
from analysis.tables.registry import register


def rows_per_judge(results: pd.DataFrame) -> pd.DataFrame:
    counts = results.groupby(results["judge"].astype(str)).size()
    table = counts.rename("n_rows").rename_axis("judge").reset_index()
    return table.assign(p_toy=[0.001 if j == "judge-a" else 0.9 for j in table["judge"]])


ROWS_PER_JUDGE: TableSpec = register(
    TableSpec(
        "rows_per_judge",
        lambda s, _: rows_per_judge(s.results),
        ("judge", "n_rows", "p_toy"),
        section=Section.runs,
        card=CardField("Rows per judge (toy)", ("n_rows",), "no rows", order=15),
        leaderboard=lambda t: ROWS_PER_JUDGE.need(t)[["judge", "n_rows"]].rename(columns={"n_rows": "toy_rows"}),
        p_column="p_toy",
        meanings={"n_rows": "toy: results rows of the judge", "p_toy": "toy: a planted p-value"},
    )
)
'''


def test_a_statistic_added_in_one_file_reaches_every_view(tmp_path: Path, monkeypatch) -> None:
    """The module above, imported from outside the package, puts its table in tables/, the report's section
    and glossary, the leaderboard, the multiple-testing family, every judge's card (in its declared place)
    and the viewer's report page; unregistered, it is gone again."""
    root, out = tmp_path / "multirun", tmp_path / "multirun" / "report"
    _write_study(root, ("independent",))
    per_sample = len(sample_candidates()) * len(DIMENSIONS)
    expected = {"judge-a": per_sample, "judge-b": 2 * per_sample}
    (tmp_path / "plugin").mkdir()
    (tmp_path / "plugin" / "toy_statistic.py").write_text(TOY_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "plugin"))
    toy = importlib.import_module("toy_statistic")
    try:
        # figures undrawn: the toy declares none, and no view read here shows one
        assert report_without_figures([str(root), "--n-boot", "20", "--out", str(out)]) == 0
        cards = {
            c["judge"]: c for c in card.write_cards(root, tmp_path / "cards", None, n_boot=20, n_null=10)
        }
        card_md = card_markdown(cards["judge-a"])
        viewer = TestClient(create_app(Study(root)), base_url="http://127.0.0.1").get("/report")
    finally:
        registry.unregister(toy.ROWS_PER_JUDGE)
        sys.modules.pop("toy_statistic", None)
    written = pd.read_csv(out / "tables" / "rows_per_judge.csv")
    assert dict(zip(written["judge"], written["n_rows"], strict=True)) == expected
    assert list(written.columns) == ["judge", "n_rows", "p_toy", "p_toy_q"]  # in the multiple-testing family
    family = pd.read_csv(out / "tables" / "multiple_testing.csv").set_index("table")
    assert (
        family.loc["rows_per_judge", "p_column"] == "p_toy" and family.loc["rows_per_judge", "n_tests"] == 2
    )
    runs = _section((out / "report.md").read_text(encoding="utf-8"), "Runs")
    assert "`tables/rows_per_judge.csv`" in runs and f"| judge-b | {2 * per_sample} |" in runs
    assert "rows_per_judge" in (out / "report.html").read_text(encoding="utf-8")
    glossary = _section((out / "report.md").read_text(encoding="utf-8"), "Glossary")
    assert "| n_rows | toy: results rows of the judge | rows_per_judge |" in glossary
    board = pd.read_csv(out / "tables" / "leaderboard.csv").set_index("judge")
    assert board["toy_rows"].to_dict() == expected
    for judge, made in cards.items():  # in the card, in its declared place (after human_agreement)
        assert made["rows_per_judge"] == [{"n_rows": expected[judge]}]
        fields = list(made)
        assert fields.index("rows_per_judge") == fields.index("human_agreement") + 1
    saved = json.loads((tmp_path / "cards" / "judge-a.json").read_text())
    assert saved["rows_per_judge"] == [{"n_rows": expected["judge-a"]}]
    assert "## Rows per judge (toy)\n\n| n_rows |" in card_md
    assert (
        viewer.status_code == 200 and "tables/rows_per_judge.csv" in viewer.text
    )  # the viewer's report page
    # undeclared again: gone from the report, the card and the leaderboard
    assert "rows_per_judge" not in card.card_fields()
    tables = report.compute_tables(load_results(root), n_boot=20)
    assert "rows_per_judge" not in tables and "toy_rows" not in tables["leaderboard"]


def test_a_table_is_declared_once() -> None:
    with registry.registered(TOY), pytest.raises(ValueError, match="declared twice"):
        registry.register(TOY)
    assert "rows_per_judge" not in [s.key for s in registry.REGISTRY]


def test_every_declared_section_exists() -> None:
    """Sections are typed (`Section`), in the report's order, each with its words once; every section shows
    some declared table."""
    assert [s.part for s in SECTIONS] == list(Section)
    assert {s.section for s in registry.REGISTRY if s.section} <= set(Section)
    assert all(s.tables for s in SECTIONS)


def test_an_unknown_section_or_a_taken_card_order_is_refused_in_one_line() -> None:
    """A section the report does not have (a misspelt title) or a card order another field holds: refused
    when the table is declared, in one line naming the table."""
    misspelt = dataclasses.replace(TOY, section=cast(Any, "Run"))  # a plug-in passing a string
    with pytest.raises(
        ValueError, match=r"^table 'rows_per_judge': unknown report section 'Run' \(the sections: "
    ):
        registry.register(misspelt)
    assert TOY.card is not None
    taken = dataclasses.replace(TOY, card=dataclasses.replace(TOY.card, order=10))
    with pytest.raises(
        ValueError, match="^table 'rows_per_judge': card order 10 is already the place of 'human_agreement'"
    ):
        registry.register(taken)
    assert "rows_per_judge" not in [s.key for s in registry.REGISTRY]
    assert "\n" not in str(pytest.raises(ValueError, registry.register, misspelt).value)


def test_the_report_s_sections_are_checked_at_import() -> None:
    """A section without its words (or with two) stops `analysis.report.sections` at import, in one line."""
    with pytest.raises(ValueError, match=r"^report sections: no words for \['Runs'\], words twice for \[\]"):
        sections_mod._in_order(tuple(s for s in SECTIONS if s.part is not Section.runs))


def test_declared_columns_are_in_the_computed_tables(study) -> None:
    """Each table the study computes has the columns its declaration names (card-only tables included)."""
    root, humans = study
    labels = pd.read_csv(humans)
    inputs = StudyInputs(load_results(root), labels, n_boot=20, n_null=10, root=root)
    tables = registry.compute_tables(inputs, report_only=False)
    assert len(tables) >= 20
    for spec in registry.REGISTRY:
        if spec.key in tables and len(tables[spec.key]):
            missing = set(spec.columns) - set(map(str, tables[spec.key].columns))
            assert not missing, (spec.key, missing)


def test_paper_tables_read_declared_tables_only() -> None:
    """The paper tables read the tables through their handles (`TableSpec.of`), so a renamed or removed
    declaration fails at import instead of emptying its paper table; on no tables each has nothing to show."""
    assert paper_tables.paper_tables({}) == []


def test_a_new_module_of_the_statistics_is_collected_without_editing_the_collector(
    tmp_path: Path, monkeypatch
) -> None:
    """A built-in statistic's module (its computation and, at its bottom, its `TableSpec` constant) is found
    by the collector (`declarations.declared_in`), so adding one touches that module and docs/statistics.md
    only; the handles it imports from other modules are not counted again."""
    package = tmp_path / "toystats"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "rows.py").write_text(
        "from analysis.stats.spec import Section, TableSpec\n"
        "from analysis.stats.winrate import WINRATE\n\n\n"
        "def count(results):\n    return results.groupby('judge', as_index=False).size()\n\n\n"
        "ROWS = TableSpec('toy_rows', lambda s, _: count(s.results), ('judge', 'size'), section=Section.runs)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        found = declarations.declared_in(importlib.import_module("toystats"))
    finally:
        for name in ("toystats", "toystats.rows"):
            sys.modules.pop(name, None)
    assert [s.key for s in found] == ["toy_rows"] and found[0].section is Section.runs
    assert declarations.declared_in(stats_package) == []  # every shipped one is listed in BUILTIN
