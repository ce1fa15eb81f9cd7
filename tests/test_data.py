"""`python -m experiments.data fetch ...` against a local HTTP server on 127.0.0.1 serving the public files:
the download with its SHA-256 check, the refusal of an altered file, the offline message, and the loader that
configs reach through `data:<file>`."""

from __future__ import annotations

import functools
import shutil
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from experiments.datasets import fetch as data
from experiments.datasets.fetch import DATASETS, DataError, data_file, fetch, main, sha256_of
from experiments.inputs import StudyError, resolve_path
from tests.support.studies import config, public_data


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serving(folder: Path) -> Iterator[str]:
    """`folder` over HTTP on 127.0.0.1 at a free port; yields the base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(folder)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/rebuttal_result/"
    finally:
        httpd.shutdown()
        httpd.server_close()


def upstream_copy(tmp: Path, *names: str) -> Path:
    """A folder laid out like the upstream repository, holding the checked public files `names`."""
    folder = tmp / "upstream" / "rebuttal_result"
    folder.mkdir(parents=True)
    for name in names:
        shutil.copy(public_data(name), folder / name)
    return folder.parent


@contextmanager
def refusing_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections: bound, never listening, held until the test is done (a
    port closed again could be taken by a server of a test running alongside)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def test_the_pinned_checksums_are_those_of_the_shared_files() -> None:
    for files in DATASETS.values():
        for item in files:
            assert sha256_of(public_data(item.name)) == item.sha256, item.name


def test_fetch_downloads_checks_and_stores_every_dataset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    names = [f.name for files in DATASETS.values() for f in files]
    store = tmp_path / "store"
    with serving(upstream_copy(tmp_path, *names)) as url:
        assert (
            main(["fetch", "coling2020", "novbench", "novbench_human", "--dir", str(store), "--url", url])
            == 0
        )
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 3 and all("(SHA-256 checked)" in line for line in out)
    assert sorted(p.name for p in store.iterdir()) == sorted(names)  # no temporary file left behind
    for name in names:
        assert data_file(name, store) == store / name
    # a second fetch finds the files checked in place and downloads nothing (no server now)
    with refusing_port() as port:
        assert fetch("coling2020", store, f"http://127.0.0.1:{port}/") == [store / "coling2020_reviews.jsonl"]


def test_an_altered_download_is_refused_and_nothing_is_stored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = upstream_copy(tmp_path, "novbench_human_pairs_dev.jsonl")
    with (root / "rebuttal_result" / "novbench_human_pairs_dev.jsonl").open("a") as handle:
        handle.write("\n")
    store = tmp_path / "store"
    with serving(root) as url:
        assert main(["fetch", "novbench_human", "--dir", str(store), "--url", url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {url}novbench_human_pairs_dev.jsonl: SHA-256 "), (
        err
    )
    assert "refused, nothing stored" in err
    assert not store.exists() or not any(store.iterdir())


def test_without_network_one_line_names_the_folder_to_copy_into(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    with refusing_port() as port:
        url = f"http://127.0.0.1:{port}/rebuttal_result/"
        assert main(["fetch", "coling2020", "--dir", str(store), "--url", url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: no network: cannot reach 127.0.0.1:{port} ("), err
    assert f"copy coling2020_reviews.jsonl from github.com/{data.REPOSITORY}" in err
    assert err.rstrip().endswith(f"into {store}")


def test_a_missing_server_file_names_the_status(tmp_path: Path) -> None:
    (tmp_path / "empty" / "rebuttal_result").mkdir(parents=True)
    with serving(tmp_path / "empty") as url, pytest.raises(DataError, match=r"the server answered 404"):
        fetch("novbench", tmp_path / "store", url)


def test_configs_resolve_through_the_loader_and_name_the_fetch_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dataset=coling2020 (and experiment=coling_originality) read `data:coling2020_reviews.jsonl`: the checked
    file of the data folder; absent, one line naming the command; altered, one line naming the file."""
    cfg = config(["experiment=coling_originality"])
    assert cfg["dataset"]["path"] == "data:coling2020_reviews.jsonl"
    monkeypatch.setenv("JUDGESCOPE_DATA_DIR", str(tmp_path))
    with pytest.raises(StudyError) as missing:
        resolve_path(cfg["dataset"]["path"])
    assert str(missing.value) == (
        f"data:coling2020_reviews.jsonl: not in {tmp_path}; run `python -m experiments.data "
        "fetch coling2020` (or copy coling2020_reviews.jsonl there)"
    )
    (tmp_path / "coling2020_reviews.jsonl").write_text("{}\n")
    with pytest.raises(
        StudyError, match=r"coling2020_reviews.jsonl: its SHA-256 is not the pinned upstream file"
    ):
        resolve_path(cfg["dataset"]["path"])
    assert resolve_path("data/sample/instances.jsonl").is_file()  # any other path as before


def test_the_human_validation_command_reads_the_fetched_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from analysis import reviewers
    from analysis.novbench import report as novbench_report

    monkeypatch.setenv("JUDGESCOPE_DATA_DIR", str(tmp_path))
    assert novbench_report.main(["--human-pairs", "data:novbench_human_pairs_dev.jsonl"]) == 2
    assert capsys.readouterr().err == (
        "error: data:novbench_human_pairs_dev.jsonl: not in "
        f"{tmp_path}; run `python -m experiments.data fetch novbench_human` (or copy "
        "novbench_human_pairs_dev.jsonl there)\n"
    )
    assert reviewers.main([str(tmp_path)]) == 2  # --reviews defaults to the fetched file
    assert "run `python -m experiments.data fetch coling2020`" in capsys.readouterr().err
