"""The viewer's sidecar (`.judgescope-view/`) under hostile conditions: a sidecar folder this user cannot
enter, a sidecar in use by an older viewer while another fingerprint's viewer cleans up, a temporary file a
killed viewer left behind."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pandas as pd
import pytest

from analysis.view.data import INDEX_DIR, Study, ViewError
from tests.support.view_study import one_human_label, write_synthetic

DAYS_AGO = 3 * 86_400


def test_a_sidecar_folder_that_cannot_be_entered_is_built_past_not_a_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another user's `.judgescope-view` (umask 077): `Path.is_file` raises PermissionError there (root ignores
    permissions, so the test fakes what a plain user gets). The study opened and sorted; before, the viewer
    refused it with '[Errno 13] Permission denied' on a file the user never named."""
    write_synthetic(tmp_path)
    (tmp_path / INDEX_DIR).mkdir()
    real = Path.is_file

    def fake_is_file(self: Path) -> bool:
        if self.parent.name == INDEX_DIR:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "is_file", fake_is_file)
    with Study(tmp_path) as study:
        assert not study.from_index
        assert study.page({}, "judge_judge", size=1).rows  # built, sorted


def test_a_sidecar_in_use_is_not_removed_by_another_fingerprints_clean_up(tmp_path: Path) -> None:
    write_synthetic(tmp_path)
    with Study(tmp_path) as first:
        first.wait()
    kept = sorted((tmp_path / INDEX_DIR).glob("*.parquet"))
    assert len(kept) == 2
    for path in kept:  # written days ago, read every day since
        os.utime(path, (time.time() - DAYS_AGO, time.time() - DAYS_AGO))
    leftover = tmp_path / INDEX_DIR / f"{kept[0].name}.999.1.tmp"  # a viewer killed mid-write, days ago
    leftover.write_bytes(b"PAR1 half")
    os.utime(leftover, (time.time() - DAYS_AGO, time.time() - DAYS_AGO))
    humans = one_human_label()
    with Study(tmp_path) as reader:  # opened today from the sidecar, still open
        assert reader.from_index
        with Study(tmp_path, humans) as labelled:  # another fingerprint: builds and cleans up
            labelled.wait()
        assert all(path.is_file() for path in kept), "the open viewer's sidecar was removed"
        assert reader.page({}, "judge_judge", size=1).rows
    assert not leftover.exists()
    assert len(list((tmp_path / INDEX_DIR).glob("*.parquet"))) == 4


def test_a_sidecar_with_other_columns_is_built_again(tmp_path: Path) -> None:
    """A valid parquet file under the sidecar's name but not the build's columns (a bit flip in the footer
    renamed a column: the views opened and every page failed): built again, not read."""
    write_synthetic(tmp_path)
    with Study(tmp_path) as first:
        first.wait()
    items = next((tmp_path / INDEX_DIR).glob("*-items.parquet"))
    frame = pd.read_parquet(items).rename(columns={"spread": "spreae"})
    frame.to_parquet(items, index=False)
    with Study(tmp_path) as again:
        assert not again.from_index
        assert again.page({}, "spread", size=1).rows


def test_a_sidecar_that_fails_a_page_is_removed_and_named(tmp_path: Path) -> None:
    """A sidecar that opened but cannot be read (damaged pages): the page's one line names the saved tables and
    they are removed, so the restart it asks for builds them again (before: 'restart the viewer', and every
    restart read the same damaged file)."""
    write_synthetic(tmp_path)
    with Study(tmp_path) as first:
        first.wait()
    kept = sorted((tmp_path / INDEX_DIR).glob("*.parquet"))
    with Study(tmp_path) as damaged:
        assert damaged.from_index
        for path in kept:
            path.write_bytes(b"PAR1" + b"\0" * 64 + b"PAR1")
        with pytest.raises(ViewError, match=r"the tables the viewer saved in .*\.judgescope-view.*restart"):
            damaged.page({}, "judge_judge", size=1)
    assert not any(path.exists() for path in kept)
    with Study(tmp_path) as restarted:
        assert not restarted.from_index and restarted.page({}, "judge_judge", size=1).rows
