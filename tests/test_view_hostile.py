"""Issue 34 break 14: the viewer on results without the optional run_id, a results file removed while the
sorted list is served, and a results.csv holding a 5 MB cell."""

from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path

import pandas as pd
import pytest
from starlette.testclient import TestClient

from analysis.view import sql
from analysis.view.data import Study, ViewError
from analysis.view.server import create_app
from tests.support.view_study import LOCAL, write_synthetic

MESSAGES = '[{"role": "user", "content": "the prompt as sent"}]'


def without_run_id(root: Path) -> pd.DataFrame:
    """The synthetic study with prompts.parquet beside each run, then run_id dropped from its results."""
    frame = write_synthetic(root)
    for path in root.glob("*/results.parquet"):
        part = pd.read_parquet(path)
        prompts = part[["run_id", "prompt_id"]].drop_duplicates().assign(messages=MESSAGES)
        prompts.to_parquet(path.parent / "prompts.parquet", index=False)
        part.drop(columns="run_id").to_parquet(path, index=False)
    return frame


def test_item_pages_work_without_run_id(tmp_path: Path) -> None:
    """Before: every item page was a 409 "Conversion Error" (the missing run_id matched as a number)."""
    frame = without_run_id(tmp_path)
    first = frame.iloc[0]
    with Study(tmp_path) as study:
        client = TestClient(create_app(study), base_url=LOCAL, raise_server_exceptions=False)
        page = client.get(
            "/item", params={"instance_id": first.instance_id, "candidate_id": first.candidate_id}
        )
        assert page.status_code == 200, page.text
        assert "judge_a · " in page.text and "These results have no run_id" in page.text


def test_the_sorted_list_is_one_line_when_a_results_file_disappears(tmp_path: Path) -> None:
    """Before: HTTP 500 with DuckDB's IOException; now 409 and one line saying what to do."""
    write_synthetic(tmp_path)
    with Study(tmp_path) as study:
        client = TestClient(create_app(study), base_url=LOCAL, raise_server_exceptions=False)
        assert client.get("/?sort=judge_judge").status_code == 200
        shutil.rmtree(tmp_path / "judge_a-independent")
        for query in ("/?sort=judge_judge", "/?sort=spread&judge=judge_b", "/"):
            response = client.get(query)
            assert response.status_code == 409, (query, response.text)
            assert len(response.text.splitlines()) == 1 and "could not be read now" in response.text


class FakeHeldBuildStudy(Study):
    """A fake for this test: its disagreement build waits for `go` before reading the files."""

    def __init__(self, root: Path) -> None:
        self.go = threading.Event()
        super().__init__(root, index=False)

    def _before_build(self) -> None:
        self.go.wait(60)


def test_a_file_removed_during_the_build_is_the_same_one_line(tmp_path: Path) -> None:
    """The build the first page starts, reading a file removed meanwhile: the sorted list said "the
    disagreement tables could not be built: IO Error ..." (the suite saw it when the build lost that race);
    now the line a page gives for a file it cannot read, with what to do."""
    write_synthetic(tmp_path)
    with FakeHeldBuildStudy(tmp_path) as study:
        client = TestClient(create_app(study), base_url=LOCAL, raise_server_exceptions=False)
        assert client.get("/?sort=judge_judge").status_code == 200  # pending: the build is held
        shutil.rmtree(tmp_path / "judge_a-independent")
        study.go.set()
        study._builder.join()
        response = client.get("/?sort=judge_judge")
        assert response.status_code == 409, response.text
        assert len(response.text.splitlines()) == 1 and "could not be read now" in response.text
        assert "restart the viewer" in response.text


def csv_with_a_long_cell(root: Path, size: int) -> Path:
    frame = write_synthetic(root / "parquet")
    run = root / "csv" / "run"
    run.mkdir(parents=True)
    part = frame.iloc[:40].copy()
    part.loc[part.index[3], "raw"] = "x" * size
    part.to_csv(run / "results.csv", index=False)
    return run / "results.csv"


def test_a_5_mb_cell_in_results_csv_opens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: DuckDB's 2 MB line limit refused the study ("CSV Error on Line: 1", no file, no limit)."""
    path = csv_with_a_long_cell(tmp_path, 5_000_000)
    with Study(tmp_path / "csv") as study:
        row = pd.read_csv(path).iloc[3]
        rows = study.item_rows(str(row["instance_id"]), str(row["candidate_id"]))
        assert rows["raw"].str.len().max() == 5_000_000
    # a line past the (raised) limit is named with its file and the limit, in one line
    monkeypatch.setattr(sql, "MAX_CSV_LINE", 1_000_000)
    with pytest.raises(ViewError) as refused:
        Study(tmp_path / "csv")
    line = rf"{path}: a line of 5,0\d\d,\d\d\d bytes, over the viewer's limit of 1,000,000 bytes \(DuckDB"
    assert re.search(line, str(refused.value)), refused.value
    assert len(str(refused.value).splitlines()) == 1
