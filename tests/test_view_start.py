"""Issue 35 (viewer, start to first page): the first page does not wait for the whole-table disagreement build,
says so and is in item order meanwhile; once built the sorted pages are the disagreement order a waiting
study gives; a second open of unchanged files reads the built tables from the sidecar, a changed file never."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import duckdb
import pytest
from starlette.testclient import TestClient

from analysis.view.data import INDEX_DIR, SORTS, Study, ViewError
from analysis.view.server import create_app
from tests.support.studies import cli_env
from tests.support.view_study import LOCAL, one_human_label, write_synthetic

ALL = 10_000  # a page size holding the whole synthetic list
KEYS = ("instance_id", "candidate_id", "judge", "mode", "rubric")


class FakeSlowBuildStudy(Study):
    """A fake for these tests: its disagreement build waits until the test opens `gate`."""

    def __init__(self, root: Path, index: bool = True) -> None:
        self.gate = threading.Event()
        super().__init__(root, index=index)

    def _before_build(self) -> None:
        self.gate.wait(60)


class FakeFailingBuildStudy(Study):
    """A fake for these tests: its disagreement build fails."""

    def _before_build(self) -> None:
        raise duckdb.OutOfMemoryException("planted: out of memory")


def keys(rows: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return [tuple(r[k] for k in KEYS) for r in rows]


def waited(
    root: Path, filters: dict[str, str], sort: str, study: Study | None = None
) -> list[dict[str, object]]:
    """The list as a study that waits for its build gives it (no sidecar read or written); `study`: one such
    study already open on `root`, asked again (each open reads the files and builds every table anew)."""
    if study is not None:
        return study.page(filters, sort, size=ALL).rows
    with Study(root, index=False) as opened:
        return opened.page(filters, sort, size=ALL).rows


def test_first_page_answers_before_the_build_then_the_disagreement_order(tmp_path: Path) -> None:
    write_synthetic(tmp_path)
    # every expected list from one waiting study (was one opened per list: 20 opens)
    with FakeSlowBuildStudy(tmp_path, index=False) as study, Study(tmp_path, index=False) as reference:
        client = TestClient(create_app(study), base_url=LOCAL)
        first = client.get("/")  # the default sort (judge–judge) while its table is not built
        assert first.status_code == 200 and not study.ready
        assert (
            'id="pending"' in first.text
            and "judge–judge order of all 140 items is being computed" in first.text
        )
        assert 'http-equiv="refresh"' in first.text
        page = study.page({}, "judge_judge", size=ALL, wait=False)
        assert page.pending == "judge_judge" and page.total == 140
        item_order = waited(tmp_path, {}, "item", reference)
        assert page.rows == item_order  # the stable order, with every figure of each row
        # filters on the key columns answer from the files too, equal to the built tables' item order
        keyed = ({"judge": "judge_a"}, {"dimension": "originality"}, {"instance_id": "inst00003"})
        before = [(f, study.page(f, "mode_shift", size=ALL, wait=False)) for f in keyed]
        assert not study.ready
        study.gate.set()
        study.wait()
        for filters, shown in before:
            assert shown.pending == "mode_shift" and shown.rows == waited(
                tmp_path, filters, "item", reference
            )
        after = client.get("/")
        assert after.status_code == 200 and 'id="pending"' not in after.text and "refresh" not in after.text
        for sort in SORTS:
            for filters in ({}, {"judge": "judge_b"}, {"dimension": "originality"}, {"source": "reference"}):
                shown = study.page(filters, sort, size=ALL, wait=False)
                assert shown.pending is None and shown.rows == waited(tmp_path, filters, sort, reference), (
                    sort,
                    filters,
                )
        top = study.page({}, "judge_judge", size=1, wait=False).rows[0]
        assert (top["instance_id"], top["candidate_id"]) == ("inst00003", "narrow_gen_2")  # the planted one


def test_a_second_open_sorts_at_once_from_the_sidecar(tmp_path: Path) -> None:
    write_synthetic(tmp_path)
    with Study(tmp_path) as study:
        assert not study.from_index
        study.wait()
    assert len(list((tmp_path / INDEX_DIR).glob("*.parquet"))) == 2
    with FakeSlowBuildStudy(tmp_path) as again:  # its build would block: the sidecar must serve
        assert again.from_index and again.ready
        for sort in SORTS:
            shown = again.page({"judge": "judge_a"}, sort, size=ALL, wait=False)
            assert shown.pending is None and shown.rows == waited(tmp_path, {"judge": "judge_a"}, sort), sort


def test_a_changed_results_file_is_never_served_the_old_order(tmp_path: Path) -> None:
    """The file is rewritten and its mtime set back: the sidecar's fingerprint still differs (ctime, and the
    size or inode), so the order is built again from the new scores."""
    frame = write_synthetic(tmp_path)
    with Study(tmp_path) as study:
        study.wait()
        old_top = study.page({}, "judge_judge", size=1).rows[0]
    path = tmp_path / "judge_a-comparative" / "results.parquet"
    before = path.stat()
    part = frame[(frame["judge"] == "judge_a") & (frame["mode"] == "comparative")].copy()
    planted = (part["instance_id"] == "inst00001") & (part["candidate_id"] == part["candidate_id"].iloc[0])
    part.loc[planted, "score"] = 99.0
    part.to_parquet(path, index=False)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with FakeSlowBuildStudy(tmp_path) as changed:
        assert not changed.from_index
        assert changed.page({}, "judge_judge", wait=False).pending == "judge_judge"  # never the old order
        changed.gate.set()
        changed.wait()
        new = changed.page({}, "judge_judge", size=ALL).rows
    assert new == waited(tmp_path, {}, "judge_judge") and keys(new)[0] != keys([old_top])[0]
    assert (new[0]["instance_id"], new[0]["candidate_id"], new[0]["mode"]) == (
        "inst00001",
        part.loc[planted, "candidate_id"].iloc[0],
        "comparative",
    )
    with FakeSlowBuildStudy(tmp_path) as reopened:  # the new order was kept in turn
        assert reopened.from_index and reopened.page({}, "judge_judge", size=ALL).rows == new


def test_human_labels_are_part_of_the_fingerprint(tmp_path: Path) -> None:
    write_synthetic(tmp_path)
    with Study(tmp_path) as plain:
        plain.wait()
    humans = one_human_label()
    with Study(tmp_path, humans) as labelled:
        assert not labelled.from_index
        assert labelled.index is not None and plain.index is not None and labelled.index != plain.index


def test_the_viewer_serves_its_first_page_without_pandas_or_fastapi(tmp_path: Path) -> None:
    """The list page, opened and served in a fresh interpreter, loads neither FastAPI and pydantic nor pandas,
    numpy and scipy (issue 35: importing the viewer took 1.5 s with them, 0.5 s without)."""
    write_synthetic(tmp_path / "study")
    heavy = ["fastapi", "pydantic", "pandas", "numpy", "scipy"]
    code = (
        "import sys\n"
        "from starlette.testclient import TestClient\n"
        "from analysis.view.data import Study\n"
        "from analysis.view.server import create_app\n"
        f"study = Study({str(tmp_path / 'study')!r})\n"
        f"client = TestClient(create_app(study), base_url={LOCAL!r})\n"
        "page = client.get('/?sort=judge_judge')\n"
        "assert page.status_code == 200 and 'judged items' in page.text, page.text\n"
        f"print(sorted(set({heavy!r}) & set(sys.modules)))\n"
        "study.close()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=cli_env(tmp_path), capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_a_failed_build_is_one_line_not_a_page_pending_for_ever(tmp_path: Path) -> None:
    write_synthetic(tmp_path)
    with FakeFailingBuildStudy(tmp_path, index=False) as study:
        study.start_build()
        study._builder.join()
        with pytest.raises(ViewError, match="could not be built: planted: out of memory"):
            study.page({}, "judge_judge", wait=False)
        response = TestClient(create_app(study), base_url=LOCAL).get("/")
        assert response.status_code == 409 and len(response.text.splitlines()) == 1
        assert study.page({}, "item", wait=False).total == 140  # the item order needs no build
    assert not (tmp_path / INDEX_DIR).exists()
