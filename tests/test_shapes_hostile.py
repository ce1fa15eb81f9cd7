"""A prompt shape's skeleton (judge.shapes) is used only where it gives the full render: a user template that
changes a neutralised text after the filter (`| neutral | replace(...)`, a `{% filter %}` or `{% set %}` block,
a macro's output) renders in full. Before, the skeleton wrote such a text out unchanged: the prompts whose
texts held the replaced string were sent other than the template says, and the stride check (the first
prompt, every 32nd) did not see it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from judge.rubric import Rubric, neutralise
from judge.shapes import PromptShapes
from tests.support.rubrics import load

TEXTS = [f"question {i}" + (" ```code```" if i == 5 else "") for i in range(10)]  # only the 6th has ```


def _rubric(tmp_path: Path, body: str) -> Rubric:
    template = tmp_path / "mine.jinja"
    template.write_text(f"Rate the question below.\n{body}\nAnswer in JSON.\n")
    return dataclasses.replace(load("novelty"), template=str(template))


def _shaped(rubric: Rubric) -> tuple[PromptShapes, list[list[dict[str, str]]], list[list[dict[str, str]]]]:
    shapes = PromptShapes(rubric.render, neutralise)

    def build(texts: list[str]) -> dict[str, object]:
        return {"background": (), "items": [{"label": "", "text": texts[0]}], "comparative": False}

    got = [shapes.render("one shape", [t], build) for t in TEXTS]  # type: ignore[arg-type]
    full = [rubric.render(**build([t])) for t in TEXTS]
    return shapes, got, full


@pytest.mark.parametrize(
    "body",
    [
        '<<<{{ items[0].text | neutral | replace("```", "~~~") }}>>>',
        '<<<{% filter replace("```", "~~~") %}{{ items[0].text | neutral }}{% endfilter %}>>>',
        '{% set shown %}{{ items[0].text | neutral }}{% endset %}<<<{{ shown | replace("```", "~~~") }}>>>',
        '{% macro show(t) %}{{ t | neutral }}{% endmacro %}<<<{{ show(items[0].text) | replace("```", "~~~") }}>>>',
        '<<<{{ "%s" | format(items[0].text | neutral) | replace("```", "~~~") }}>>>',
    ],
)
def test_a_text_changed_after_the_filter_is_rendered_in_full(tmp_path: Path, body: str) -> None:
    shapes, got, full = _shaped(_rubric(tmp_path, body))
    assert "~~~" in full[5][1]["content"]
    assert got == full
    assert shapes._skeletons["one shape"] is None


@pytest.mark.parametrize(
    "body",
    [
        "<<<{{ items[0].text | neutral }}>>>",
        "{% set shown %}{{ items[0].text | neutral }}{% endset %}<<<{{ shown }}>>>",
        "{% macro show(t) %}{{ t | neutral }}{% endmacro %}<<<{{ show(items[0].text) }}>>>",
    ],
)
def test_a_text_only_written_out_keeps_its_skeleton(tmp_path: Path, body: str) -> None:
    shapes, got, full = _shaped(_rubric(tmp_path, body))
    assert got == full
    assert shapes._skeletons["one shape"] is not None and not shapes.broken
