"""Property tests of the hostile harness's newer surfaces (issue 34, "What to build", second bullet).

- LaTeX names: any text through the paper tables' escaper (`paper_tables.tex`) is ASCII built only of plain
  characters and the escapes it knows, and never starts with an unprotected ``[`` or ``*``.
- Label sheets: a sheet of a real export, with any row's item text or dimension changed, is refused by ingest
  in one line naming that row; the unchanged sheet ingests.
- Download bodies: for any (declared size, body length, cap), `fetch.download` against a local server either
  stores exactly the body (complete and within the cap) or refuses in one line and leaves no file at all.

Everything runs in-process (no subprocess per example); the HTTP server and the export are made once.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis.annotate import files as io
from analysis.annotate import select as annotate
from analysis.report.paper_tables import TEX_SPECIAL, tex
from experiments.datasets.fetch import DataError, download
from tests.support.cli import run as run_cli
from tests.support.study_folders import write_fake_run

FAST = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

# ---- LaTeX names ---------------------------------------------------------------------------------------------

#: what `tex` may write: the escapes it knows, a code point in \texttt, or a printable ASCII character that is
#: not special to LaTeX
_ESCAPES = sorted({v for v in TEX_SPECIAL.values() if v.startswith("\\")}, key=len, reverse=True)
_TOKEN = "|".join(
    [*map(re.escape, _ESCAPES), r"\\texttt\{U\+[0-9A-F]{4,6}\}", r"[^\\{}$&#^_%~\x00-\x1f\x7f-\U0010ffff]"]
)
_TEX_OUT = re.compile(rf"(?:\{{\}})?(?:{_TOKEN})*")
HOSTILE = st.text(
    alphabet=st.one_of(
        st.characters(),
        st.sampled_from(list("[*\\{}%&#_^~$<>|") + ["中", "🔥", "é", "ﬁ", "\x00", "\t", "\n", "\u202e"]),
    )
)


@FAST
@given(
    name=st.one_of(HOSTILE, st.builds("".join, st.tuples(st.sampled_from([" [", "[", "*", " *"]), HOSTILE)))
)
def test_any_name_is_escaped_to_plain_ascii_latex(name: str) -> None:
    out = tex(name)
    assert out.isascii(), out
    assert _TEX_OUT.fullmatch(out), f"{name!r} -> {out!r}: an unescaped special character"
    assert not out.lstrip().startswith(("[", "*")), f"{name!r} -> {out!r}: a leading [ or * unprotected"


def test_one_hostile_name_compiles_under_pdflatex_after_a_row_break(tmp_path: Path) -> None:
    """One example (not one per example) set by pdflatex where a leading ``[`` would be read as ``\\\\[..]``."""
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed: the compile of an escaped name is not checked")
    name = "[*] \u4e2d\U0001f525 \u00e9 \ufb01 \\ {}%&#_^~$<>| \u00b1\u00d7\u2264 \x00\t\u202e end"
    doc = f"\\documentclass{{article}}\\begin{{document}}\\begin{{tabular}}{{l}}a\\\\\n{tex(name)}\\\\\n\\end{{tabular}}\\end{{document}}\n"
    (tmp_path / "t.tex").write_text(doc, encoding="ascii")
    run = run_cli(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "t.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout[-2000:]
    assert "Missing" not in run.stdout and "Undefined" not in run.stdout, run.stdout[-2000:]


# ---- label sheets --------------------------------------------------------------------------------------------


def _truth(cand: str, dim: str) -> int:
    return int(hashlib.sha256(f"{cand}|{dim}".encode()).hexdigest(), 16) % 4


def _agreeing(judge: str, cand: str, dim: str, k: int) -> float:
    return float(_truth(cand, dim))


def _off(judge: str, cand: str, dim: str, k: int) -> float:
    return float(min(3, _truth(cand, dim) + 1))


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> tuple[pd.DataFrame, pd.DataFrame, Path]:
    """A real export of a two-judge study: (its sheet filled by a perfect annotator, the key, key.csv)."""
    tmp = tmp_path_factory.mktemp("sheets")
    root = tmp / "multirun"
    write_fake_run(root / "0_judge-a_independent_novelty", "judge-a", "independent", _agreeing)
    write_fake_run(root / "1_judge-b_independent_novelty", "judge-b", "independent", _off)
    annotate.export(root, tmp / "out", n=12, by="random")
    key = io.read_key(tmp / "out" / "key.csv")
    sheet = io.load_sheet(tmp / "out" / "sheet.csv")
    truth = {
        i: _truth(c, d) for i, c, d in zip(key["item"], key["candidate_id"], key["dimension"], strict=True)
    }
    sheet["annotator"] = "perfect"
    sheet["score"] = [str(truth[i]) for i in sheet["item"]]
    return sheet, key, tmp / "out" / "key.csv"


def _ingest(sheet: pd.DataFrame, key_path: Path, folder: Path) -> pd.DataFrame:
    path = Path(tempfile.mkdtemp(dir=folder)) / "done.csv"
    io.write_sheet(sheet, path)
    return annotate.ingest(path, key_path)


def test_the_unchanged_sheet_ingests(export: tuple[pd.DataFrame, pd.DataFrame, Path], tmp_path: Path) -> None:
    sheet, key, key_path = export
    labels = _ingest(sheet, key_path, tmp_path)
    assert len(labels) == len(sheet) == len(key)


@FAST
@given(data=st.data(), field=st.sampled_from(["text", "dimension"]), new=st.text(min_size=1))
def test_a_sheet_with_any_row_changed_is_refused_in_one_line_naming_it(
    export: tuple[pd.DataFrame, pd.DataFrame, Path], tmp_path: Path, data: st.DataObject, field: str, new: str
) -> None:
    sheet, _, key_path = export
    row = data.draw(st.integers(0, len(sheet) - 1), label="row")
    old = str(sheet.at[row, field])
    changed = io.text_digest(new) != io.text_digest(old) if field == "text" else new.strip() != old.strip()
    if not changed:  # outer blanks and line endings are a spreadsheet's doing: not a change
        new = old + "x"
    mutated = sheet.copy()
    mutated.at[row, field] = new
    with pytest.raises(ValueError) as refused:
        _ingest(mutated, key_path, tmp_path)
    line = str(refused.value)
    assert "\n" not in line, line
    assert f": row {row + 1}: {field}: " in line, line


# ---- download bodies -----------------------------------------------------------------------------------------


class Body(BaseHTTPRequestHandler):
    """Sends `self.server.body` with `self.server.declared` as its Content-Length (none when None), then hangs
    up: a declared size above the body's is a body that broke off."""

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        declared, body = self.server.declared, self.server.body  # type: ignore[attr-defined]
        self.send_response(200)
        if declared is not None:
            self.send_header("Content-Length", str(declared))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:  # the client hung up (a cap passed): what it was meant to do
            pass
        self.close_connection = True


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Body)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


@FAST
@given(
    body=st.binary(max_size=3 * 2**16 + 7),
    extra=st.one_of(st.none(), st.just(0), st.integers(1, 2**17)),
    cap=st.integers(0, 3 * 2**16 + 7),
)
def test_a_download_stores_exactly_the_body_or_refuses_and_leaves_no_file(
    server: Any, tmp_path: Path, body: bytes, extra: int | None, cap: int
) -> None:
    declared = None if extra is None else len(body) + extra
    server.declared, server.body = declared, body
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    target = folder / "data.json"
    url = f"http://127.0.0.1:{server.server_address[1]}/data.json"
    complete = declared is None or declared == len(body)
    within = len(body) <= cap and (declared is None or declared <= cap)
    if complete and within:
        got = download(url, target, max_bytes=cap, deadline_s=30)
        assert target.read_bytes() == body and got.size == len(body)
        assert got.sha256 == hashlib.sha256(body).hexdigest()
        assert [p.name for p in folder.iterdir()] == ["data.json"]  # no temporary left beside it
    else:
        with pytest.raises(DataError) as refused:
            download(url, target, max_bytes=cap, deadline_s=30)
        assert "\n" not in str(refused.value) and "nothing" in str(refused.value), str(refused.value)
        assert not any(folder.iterdir()), list(folder.iterdir())
