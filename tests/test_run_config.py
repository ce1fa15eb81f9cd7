"""A run folder's config.json through its one reader (core.run_config): what a run writes reads back as the
same rubric model, and a damaged file is one line naming it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from core.run_config import RunConfigError, read_run_config
from experiments.config import as_dict
from judge.secrets import redact_config
from tests.support.studies import config, typed


def test_the_config_a_run_writes_reads_back_as_its_rubric_and_judge(tmp_path: Path) -> None:
    cfg = typed(config(["rubric=review_quality", "judge=qwen", "min_parse_rate=0.5"]))
    # as experiments.study writes it
    (tmp_path / "config.json").write_text(json.dumps(redact_config(as_dict(cfg)), indent=2, default=str))
    read = read_run_config(tmp_path)
    assert read is not None and read.rubric is not None and read.judge is not None
    for f in dataclasses.fields(read.rubric):
        assert getattr(read.rubric, f.name) == getattr(cfg.rubric, f.name), f.name
    assert read.rubric.dimensions[0].anchors == {
        0: "covers nothing of substance",
        5: "covers some main aspects",
    } | {10: "covers every main aspect"}
    assert read.rubric.ranges()["overall"] == (0.0, 10.0) and read.rubric.directions()["overall"] is True
    assert (read.judge.name, read.judge.model, read.min_parse_rate) == (cfg.judge.name, cfg.judge.model, 0.5)
    assert read_run_config(tmp_path / "none") is None


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("{not json", "not readable JSON"),
        ("[1, 2]", "a JSON list, not a run's config"),
        (
            '{"rubric": {"name": "x", "dimensions": [{"name": "d", "anchors": {"low": "?"}}]}}',
            "'rubric' entry",
        ),
        ('{"judge": {"name": "j"}}', "'judge' entry"),
        ('{"min_parse_rate": "high"}', "'min_parse_rate' entry"),
    ],
)
def test_a_damaged_config_is_one_line_naming_it(tmp_path: Path, content: str, why: str) -> None:
    (tmp_path / "config.json").write_text(content)
    with pytest.raises(RunConfigError) as caught:
        read_run_config(tmp_path)
    line = str(caught.value)
    assert line.startswith(f"{tmp_path / 'config.json'}: ") and why in line and "\n" not in line
