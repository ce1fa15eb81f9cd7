"""Files a user receives from others (issue 34, breaks 7, 10, 11): a run's manifest.json and a cache export
are read through one reader (core.received, core.schema.read_manifest, judge.cache.bundle) with size caps,
schema versions and types checked, refused in one line naming the file.

Each CLI test fails on the code before the fix: an export that crashed on a manifest of the wrong shape, read
a newer manifest without a word, or replaced an existing file; an import that expanded a 2 MB zip to 2 GB."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.schema import MANIFEST_VERSION, Manifest, ManifestError, read_manifest
from judge.cache.bundle import FORMAT, BundleError, _entry_line, import_bundle, main
from judge.cache.store import CallCache
from judge.types import Completion
from tests.support.cli import run as run_cli
from tests.support.studies import cli_env

ROOT = Path(__file__).resolve().parent.parent
KEY = "a" * 64
ANSWER = Completion("3", "stop", 12, 7, 0.001, 0.5)


def cache_cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m judge.cache ...` in a subprocess (this checkout's code)."""
    return run_cli(
        [sys.executable, "-m", "judge.cache", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp,
        env=cli_env(tmp),
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    err = done.stderr.strip()
    assert done.returncode == 2 and err.startswith("error: ") and "\n" not in err, done.stderr[-2000:]
    return err


def run_folder(tmp: Path, manifest: str) -> Path:
    """A run folder that used one cache entry, with `manifest` as its manifest.json text."""
    run = tmp / "run"
    run.mkdir(parents=True, exist_ok=True)
    (run / "manifest.json").write_text(manifest)
    (run / "cache_keys.txt").write_text(KEY + "\n")
    cache = CallCache(tmp / "cache")
    cache.set(KEY, ANSWER)
    cache.close()
    return run


def current_manifest(**changes: Any) -> str:
    return json.dumps(Manifest(judge="j", model="openai/judge", provider_errors=0).to_json() | changes)


# break 10: a manifest of the wrong shape; break 7: a newer schema -------------------------------------------


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (
            "1e999",
            "a JSON float, not an object",
        ),  # was: AttributeError: 'float' object has no attribute 'get'
        (
            current_manifest(schema_version=MANIFEST_VERSION + 1),
            "newer than this judgescope reads",
        ),  # was: read
    ],
    ids=["1e999", "newer-schema"],
)
def test_export_refuses_a_manifest_it_cannot_read_in_one_line(text: str, why: str, tmp_path: Path) -> None:
    run = run_folder(tmp_path, text)
    err = one_line(cache_cli(tmp_path, "export", str(run), str(tmp_path / "out.zip")))
    assert str(run / "manifest.json") in err and why in err, err
    assert not (tmp_path / "out.zip").exists()


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[]", "a JSON list, not an object"),
        ('"manifest"', "a JSON str, not an object"),
        ('{"schema_version": 1, "judge": "j"}', "missing model"),  # a current manifest always has them all
        (current_manifest(provider_errors=1e999), "provider_errors: expected a whole number"),
        (current_manifest(cost_usd=float("nan")), "cost_usd: expected a finite number"),
        (current_manifest(first_provider_errors=[{"x": 1}]), "first_provider_errors: expected text"),
        ('{"a": ' * 100_000 + "1" + "}" * 100_000, "not a readable manifest"),
    ],
)
def test_every_manifest_flaw_is_one_line_naming_the_file(
    text: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_folder(tmp_path, text)
    assert main(["export", str(run), str(tmp_path / "out.zip"), "--cache-dir", str(tmp_path / "cache")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {run / 'manifest.json'}: ") and why in err and "\n" not in err, err


def test_a_manifest_that_is_no_regular_file_or_too_large_is_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo" / "manifest.json"
    fifo.parent.mkdir()
    os.mkfifo(fifo)  # opening it to read would block for ever
    with pytest.raises(ManifestError, match=r"manifest\.json: not a regular file"):
        read_manifest(fifo)
    big = tmp_path / "manifest.json"
    big.write_text(current_manifest(padding="x" * (17 * 2**20)))
    with pytest.raises(ManifestError, match=r"manifest\.json: over 16 MB"):
        read_manifest(big)


# break 10: export to an existing path -------------------------------------------------------------------------


def test_export_never_replaces_an_existing_file_without_replace(tmp_path: Path) -> None:
    run = run_folder(tmp_path, current_manifest())
    target = tmp_path / "study-cache.zip"
    target.write_text("the user's own file")
    err = one_line(
        cache_cli(tmp_path, "export", str(run), str(target), "--cache-dir", str(tmp_path / "cache"))
    )
    assert f"{target}: exists; nothing written (--replace replaces it" in err, err
    assert target.read_text() == "the user's own file"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_export_replaces_only_a_regular_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = run_folder(tmp_path, current_manifest())
    cache = ["--cache-dir", str(tmp_path / "cache")]
    target = tmp_path / "study-cache.zip"
    target.write_text("old")
    assert main(["export", str(run), str(target), "--replace", *cache]) == 0
    assert zipfile.is_zipfile(target)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("kept")
    for special in (tmp_path / "link.zip", tmp_path / "pipe.zip"):
        if special.name == "link.zip":
            special.symlink_to(elsewhere)
        else:
            os.mkfifo(special)
        capsys.readouterr()
        assert main(["export", str(run), str(special), "--replace", *cache]) == 2
        err = capsys.readouterr().err.strip()
        assert (
            err
            == f"error: {special}: exists and is not a regular file (a link, device or pipe); not replaced"
        )
    assert elsewhere.read_text() == "kept" and (tmp_path / "pipe.zip").is_fifo()


# break 11: a zip bomb -------------------------------------------------------------------------------------------


def bomb(path: Path, expands_to: int) -> Path:
    """A cache export whose entries.jsonl is `expands_to` bytes of newlines, deflated to about 1/1000 (the zip
    written by hand from one compressed block repeated: building it takes milliseconds, not the 2 GB)."""
    block = 2**20
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = comp.compress(b"\n" * block) + comp.flush(zlib.Z_FULL_FLUSH)  # independent of what came before
    count = expands_to // block
    data = chunk * count + zlib.compressobj(9, zlib.DEFLATED, -15).flush()
    crc = 0
    ones = b"\n" * block
    for _ in range(count):
        crc = zlib.crc32(ones, crc)
    manifest = json.dumps({"format": FORMAT, "entries": 0, "entries_sha256": "0" * 64}).encode()
    members = [
        (b"manifest.json", manifest, manifest, 0, zlib.crc32(manifest)),
        (b"entries.jsonl", data, None, 8, crc),
    ]
    out, central = bytearray(), bytearray()
    for name, stored, raw, method, checksum in members:
        size = len(raw) if raw is not None else count * block
        offset = len(out)
        out += struct.pack(
            "<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0, checksum, len(stored), size, len(name), 0
        )
        out += name + stored
        central += struct.pack(
            "<IHHHHHHIIIHHHHHII",
            0x02014B50,
            20,
            20,
            0,
            method,
            0,
            0,
            checksum,
            len(stored),
            size,
            len(name),
            0,
            0,
            0,
            0,
            0,
            offset,
        )
        central += name
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 2, 2, len(central), len(out), 0)
    path.write_bytes(bytes(out + central + end))
    return path


def test_import_refuses_a_zip_bomb_before_expanding_it(tmp_path: Path) -> None:
    """A 2 MB file whose entries expand to 2 GB: refused in one line, with memory bounded (was: 5.6 GB and
    MemoryError)."""
    path = bomb(tmp_path / "bomb.zip", 2 * 2**30)
    assert path.stat().st_size < 4 * 2**20
    with zipfile.ZipFile(path) as zf:  # a well-formed zip: the declared size is what it expands to
        assert zf.getinfo("entries.jsonl").file_size == 2 * 2**30
    # the command's own peak memory: measured by a parent process that has no other child (this test
    # process's RUSAGE_CHILDREN also holds every earlier test's subprocesses, the embedded model's included)
    watch = (
        "import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "sys.stderr.write(done.stderr); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); "
        "sys.exit(done.returncode)"
    )
    args = [sys.executable, "-m", "judge.cache", "import", str(path), "--cache-dir", str(tmp_path / "cache")]
    done = run_cli(
        [sys.executable, "-c", watch, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=cli_env(tmp_path),
    )
    err = one_line(done)
    peak_mb = int(done.stdout.strip().splitlines()[-1]) / 1024
    assert f"{path}: entries.jsonl expands to 2048 MB" in err and "over the 1024 MB limit; not read" in err, (
        err
    )
    assert peak_mb < 1024  # the command never held the expanded file
    assert len(CallCache(tmp_path / "cache")) == 0


def test_a_lower_limit_and_a_lying_size_are_still_bounded(tmp_path: Path) -> None:
    """--max-mb lowers the cap; zip's reader stops at the declared size, so a header that under-declares
    cannot expand past it (a CRC error: one line, nothing written)."""
    path = bomb(tmp_path / "b.zip", 8 * 2**20)
    assert main(["import", str(path), "--cache-dir", str(tmp_path / "c"), "--max-mb", "4"]) == 2
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("entries.jsonl")
    central = raw.rindex(b"\x50\x4b\x01\x02")  # the entries' central record: declare 1 MB instead of 8
    struct.pack_into("<I", raw, central + 24, 2**20)
    struct.pack_into("<I", raw, info.header_offset + 22, 2**20)
    path.write_bytes(bytes(raw))
    with pytest.raises(
        BundleError, match=r"b\.zip: (not a judgescope cache export|entries\.jsonl does not match)"
    ):
        import_bundle(path, CallCache(tmp_path / "c"))
    assert len(CallCache(tmp_path / "c")) == 0


# property tests: any manifest, any bundle --------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)
FIELDS = [f for f in Manifest().to_json() if f != "schema_version"]


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    base=st.booleans(),
    version=st.one_of(st.integers(-1, MANIFEST_VERSION + 2), JSON),
    spoiled=st.dictionaries(st.sampled_from(FIELDS), JSON, max_size=3),
    dropped=st.lists(st.sampled_from(FIELDS), max_size=2),
    whole=JSON,
)
def test_any_manifest_is_read_typed_or_refused_in_one_line(
    base: bool, version: Any, spoiled: dict[str, Any], dropped: list[str], whole: Any, tmp_path_factory: Any
) -> None:
    """Whatever a manifest.json holds: a Manifest whose fields have their types (and every core field present
    at version >= 1), or one ManifestError line naming the file - never another exception."""
    data: Any = (
        Manifest(judge="j", calls_total=4).to_json() | {"schema_version": version} | spoiled
        if base
        else whole
    )
    for name in dropped if base else ():
        data.pop(name, None)
    path = tmp_path_factory.mktemp("m") / "manifest.json"
    path.write_text(json.dumps(data))
    try:
        manifest = read_manifest(path)
    except ManifestError as exc:
        assert str(exc).startswith(f"{path}: ") and "\n" not in str(exc)
        return
    assert isinstance(data, dict)
    assert 0 <= manifest.schema_version <= MANIFEST_VERSION
    if manifest.schema_version >= 1:
        assert all(f in data for f in FIELDS if f in Manifest().to_json())
    for name in ("calls_total", "calls_made", "rows", "instances"):
        assert getattr(manifest, name) is None or type(getattr(manifest, name)) is int
    for name in ("cost_usd", "parse_rate", "temperature", "wall_time_s"):
        value = getattr(manifest, name)
        assert value is None or (type(value) is float and value == value and abs(value) != float("inf"))
    assert manifest.first_provider_errors is None or all(
        type(e) is str for e in manifest.first_provider_errors
    )


@settings(
    max_examples=80, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    manifest=st.one_of(
        JSON, st.fixed_dictionaries({"format": st.just(FORMAT), "entries": JSON, "entries_sha256": JSON})
    ),
    lines=st.lists(st.one_of(st.binary(max_size=20), st.just(_entry_line(KEY, ANSWER).rstrip())), max_size=3),
    honest=st.booleans(),
)
def test_any_bundle_is_imported_whole_or_refused_in_one_line(
    manifest: Any, lines: list[bytes], honest: bool, tmp_path_factory: Any
) -> None:
    """Any manifest, any entries: every entry imported, or one BundleError line naming the file and nothing
    written."""
    data = b"\n".join(lines) + b"\n"
    if honest and isinstance(manifest, dict):
        manifest = manifest | {"entries_sha256": hashlib.sha256(data).hexdigest()}
    tmp = tmp_path_factory.mktemp("b")
    path = tmp / "bundle.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("entries.jsonl", data)
        zf.writestr("manifest.json", json.dumps(manifest))
    cache = CallCache(tmp / "cache")
    try:
        written, present = import_bundle(path, cache)
    except BundleError as exc:
        assert str(exc).startswith(f"{path}: ") and "\n" not in str(exc)
        assert len(cache) == 0
        return
    finally:
        cache.close()
    assert written + present == len([x for x in data.split(b"\n") if x.strip()]) == manifest["entries"]
