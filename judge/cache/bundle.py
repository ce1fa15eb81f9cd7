"""Publish a study's cache: `python -m judge.cache export <run-or-multirun-dir> <file>` and `... import <file>`.

Export writes exactly the cache entries the runs below a folder used (each run lists its keys in
cache_keys.txt) into one zip file: `entries.jsonl` (key, checksum, completion JSON - the checksum is the one
the cache stores) and `manifest.json` (models, rubric versions, runs, counts, the SHA-256 of entries.jsonl).
Import checks the whole file first - the manifest's hash and count, every entry's checksum and completion -
and writes nothing unless all of it is sound, and nothing if an entry would replace a different answer the
cache already holds (the conflicts are listed; `--overwrite` replaces them); then a rerun of the study makes 0
provider calls. Entries are checked by the cache's one entry schema (`judge.cache.store.entry_completion`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import stat
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from core.received import MB, ReceivedFileError, zip_member
from core.schema import Manifest, ManifestError, read_manifest
from judge.cache.backends import open_cache
from judge.cache.store import CacheError, CallCache, EntryError, _checksum, parse_entry
from judge.types import Completion

FORMAT = "judgescope-cache-export/1"
ENTRIES, MANIFEST = "entries.jsonl", "manifest.json"
# what an import reads from a received file before anything is decompressed: the bundle's own manifest (models,
# versions, runs: kilobytes) and its entries (about 2 kB a call); `--max-mb` raises the entries' limit
MANIFEST_MAX_BYTES = 16 * MB
ENTRIES_MAX_BYTES = 1024 * MB
# what a zip reader may raise on a damaged or hostile file
_ZIP_ERRORS = (
    OSError,
    zipfile.BadZipFile,
    ValueError,
    NotImplementedError,
    RuntimeError,
    EOFError,
    zlib.error,
)


class BundleError(RuntimeError):
    """An export or import that cannot be done; one line naming the file and the problem."""


@dataclass(frozen=True)
class Run:
    """A run folder that used the cache: its keys and its manifest."""

    folder: Path
    keys: list[str]
    manifest: Manifest


def find_runs(root: Path) -> list[Run]:
    """Every run below `root` (or `root` itself) that lists the cache keys it used."""
    lists = (
        [root / "cache_keys.txt"]
        if (root / "cache_keys.txt").exists()
        else sorted(root.rglob("cache_keys.txt"))
    )
    if not lists:
        raise BundleError(
            f"{root}: no run folder with cache_keys.txt below it (runs of `python -m experiments.run`)"
        )
    runs = []
    for path in lists:
        try:  # the one reader of a run's manifest: typed, versioned, size-capped (core.schema)
            manifest = read_manifest(path.parent / MANIFEST)
        except ManifestError as exc:
            raise BundleError(str(exc)) from None
        try:
            keys = path.read_text().split()
        except (OSError, UnicodeDecodeError) as exc:  # a folder, unreadable, not text
            raise BundleError(f"{path}: cannot read the run's cache keys ({_reason(exc)})") from None
        runs.append(Run(path.parent, keys, manifest))
    return runs


def _reason(exc: BaseException) -> str:
    """An OS error's reason without the path the message already names."""
    return str(getattr(exc, "strerror", None) or exc)


def _entry_line(key: str, completion: Completion) -> bytes:
    payload = json.dumps(completion.to_dict(), ensure_ascii=False, separators=(",", ":"))  # as CallCache.set
    return (
        json.dumps({"key": key, "checksum": _checksum(key, payload), "completion": payload}).encode() + b"\n"
    )


def export_runs(root: Path, target: Path, cache: CallCache, *, replace: bool = False) -> dict[str, Any]:
    """Write the entries the runs below `root` used to `target`; returns the manifest written.

    A key without an entry is allowed only for calls the runs never got answered (their provider errors);
    more missing entries mean this is not the cache the runs used. An existing `target` is refused unless
    `replace` says to replace it, and then only a regular file (never a folder, a link, a device or a pipe)."""
    runs = find_runs(root)
    owner: dict[str, Run] = {}
    for run in runs:
        for key in run.keys:
            owner.setdefault(key, run)
    _check_target(target, replace)
    partial: Path | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
        os.close(handle)
        partial = Path(name)
        manifest = _write(root, runs, owner, cache, partial)
        _publish(partial, target, replace)
    except OSError as exc:  # unwritable, no space, a folder in the way
        raise BundleError(f"{target}: cannot write the export ({_reason(exc)})") from None
    finally:
        if partial is not None and partial.is_file():
            partial.unlink()
    return manifest


def _check_target(target: Path, replace: bool) -> None:
    """An existing target is kept unless `replace`; what is not a regular file is never replaced."""
    try:
        mode = target.lstat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise BundleError(f"{target}: cannot write the export ({_reason(exc)})") from None
    if stat.S_ISDIR(mode):
        raise BundleError(f"{target}: is a folder; name the file to write, e.g. {target / 'study-cache.zip'}")
    if not stat.S_ISREG(mode):
        raise BundleError(
            f"{target}: exists and is not a regular file (a link, device or pipe); not replaced"
        )
    if not replace:
        raise BundleError(f"{target}: exists; nothing written (--replace replaces it, or name another file)")


def _publish(partial: Path, target: Path, replace: bool) -> None:
    """Move the finished export into place: never over a file that appeared meanwhile unless `replace`."""
    if replace:
        _check_target(target, replace)
        os.replace(partial, target)
        return
    try:
        os.link(partial, target)  # fails if the target exists: no check-then-write race
    except FileExistsError:
        raise BundleError(f"{target}: exists; nothing written (--replace replaces it)") from None
    except OSError:  # a filesystem without hard links
        _check_target(target, replace)
        os.replace(partial, target)


def _write(
    root: Path, runs: Sequence[Run], owner: dict[str, Run], cache: CallCache, partial: Path
) -> dict[str, Any]:
    """The zip at `partial`: every entry the runs used, then the manifest; BundleError if too many are missing."""
    unanswered = sum(r.manifest.provider_errors or 0 for r in runs)
    digest, missing = hashlib.sha256(), 0
    models: dict[str, int] = {}
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        with zf.open(ENTRIES, "w") as out:
            for key, run in owner.items():
                completion = cache.get(key)
                if completion is None:
                    missing += 1
                    continue
                line = _entry_line(key, completion)
                digest.update(line)
                out.write(line)
                model = str(run.manifest.model)
                models[model] = models.get(model, 0) + 1
        if missing > unanswered:
            raise BundleError(
                f"{cache.location}: {missing} of the {len(owner)} entries the runs below {root} used "
                "are not in this cache; export from the cache the runs used (--cache-dir or "
                "--redis-url)"
            )
        manifest = build_manifest(root, runs, len(owner) - missing, missing, models, digest.hexdigest())
        zf.writestr(MANIFEST, json.dumps(manifest, indent=2))
    return manifest


def build_manifest(
    root: Path, runs: Sequence[Run], n_entries: int, missing: int, models: dict[str, int], sha256: str
) -> dict[str, Any]:
    """What a reader of the published cache needs: which models and rubric versions, how many entries."""
    versions: dict[str, set[str]] = {}
    for run in runs:
        for rubric, version in (run.manifest.rubric_versions or {}).items():
            versions.setdefault(rubric, set()).add(str(version))
    return {
        "format": FORMAT,
        "entries": n_entries,
        "entries_sha256": sha256,
        "unanswered_calls": missing,
        "models": models,
        "rubric_versions": {k: sorted(v) for k, v in sorted(versions.items())},
        "runs": [
            {
                "run": str(r.folder.relative_to(root)) if r.folder != root else ".",
                **{
                    k: r.manifest.to_json().get(k)
                    for k in ("judge", "model", "mode", "rubric", "study_id", "shard", "dataset_hash")
                },
                "calls": len(r.keys),
            }
            for r in runs
        ],
    }


def read_bundle(
    source: Path, max_bytes: int = ENTRIES_MAX_BYTES
) -> tuple[dict[str, Any], list[tuple[str, Completion]]]:
    """The manifest and every entry of an exported file, each one verified; BundleError on the first flaw."""
    with _Bundle(source, max_bytes) as bundle:
        return bundle.manifest, list(bundle.entries())


class _Bundle:
    """An opened export whose sizes, manifest and entries' SHA-256 are checked; `entries()` streams and
    verifies them (memory bounded by one line, whatever the file expands to)."""

    def __init__(self, source: Path, max_bytes: int) -> None:
        self.source = source
        try:
            self.zf = zipfile.ZipFile(source)
        except _ZIP_ERRORS as exc:
            raise BundleError(f"{source}: not a judgescope cache export ({_reason(exc)})") from None
        try:
            info = zip_member(self.zf, source, MANIFEST, MANIFEST_MAX_BYTES)
            self.info = zip_member(self.zf, source, ENTRIES, max_bytes)  # both sizes before any byte
            self.manifest = _bundle_manifest(source, self.zf.read(info))
            digest = hashlib.sha256()
            with self.zf.open(self.info) as handle:
                for block in iter(lambda: handle.read(MB), b""):
                    digest.update(block)
        except ReceivedFileError as exc:
            self.zf.close()
            raise BundleError(f"{exc}{_raise_hint(max_bytes)}") from None
        except BundleError:
            self.zf.close()
            raise
        except _ZIP_ERRORS as exc:
            self.zf.close()
            raise BundleError(f"{source}: not a judgescope cache export ({_reason(exc)})") from None
        if digest.hexdigest() != self.manifest["entries_sha256"]:
            self.zf.close()
            raise BundleError(
                f"{source}: {ENTRIES} does not match the SHA-256 in {MANIFEST} (damaged or edited)"
            )

    def __enter__(self) -> _Bundle:
        return self

    def __exit__(self, *_: object) -> None:
        self.zf.close()

    def entries(self) -> Iterator[tuple[str, Completion]]:
        """Every entry, verified, then the count checked against the manifest's."""
        count = 0
        try:
            with self.zf.open(self.info) as handle:
                for pair in _verified(self.source, _lines(handle)):
                    count += 1
                    yield pair
        except BundleError:
            raise
        except _ZIP_ERRORS as exc:
            raise BundleError(f"{self.source}: not a judgescope cache export ({_reason(exc)})") from None
        if count != self.manifest["entries"]:
            raise BundleError(
                f"{self.source}: {count} entries, but {MANIFEST} says {self.manifest['entries']}"
            )


def _raise_hint(max_bytes: int) -> str:
    return "" if max_bytes != ENTRIES_MAX_BYTES else " (--max-mb raises the limit for a file you trust)"


def _lines(handle: IO[bytes]) -> Iterator[bytes]:
    """The file's lines (blank ones skipped, as `splitlines` of the whole did)."""
    for line in handle:
        if line.strip():
            yield line.rstrip(b"\r\n")


def _bundle_manifest(source: Path, raw: bytes) -> dict[str, Any]:
    """The export's manifest.json, its format and the fields an import relies on checked by type."""
    try:
        manifest = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise BundleError(f"{source}: {MANIFEST}: not JSON ({str(exc)[:120] or 'nested too deep'})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(f"{source}: {MANIFEST}: format is not {FORMAT}")
    count, sha = manifest.get("entries"), manifest.get("entries_sha256")
    if type(count) is not int or count < 0:
        raise BundleError(f"{source}: {MANIFEST}: entries must be a whole number >= 0, not {count!r:.40}")
    if not isinstance(sha, str):
        raise BundleError(f"{source}: {ENTRIES} does not match the SHA-256 in {MANIFEST} (damaged or edited)")
    return manifest


def _verified(source: Path, lines: Iterator[bytes] | Sequence[bytes]) -> Iterator[tuple[str, Completion]]:
    """Each line's key and completion, checked by the cache's own entry schema (judge.cache.store.parse_entry)."""
    for number, line in enumerate(lines, 1):
        try:
            item = json.loads(line)
            if not isinstance(item, dict):
                raise EntryError("not a JSON object")
            key, checksum, payload = item.get("key"), item.get("checksum"), item.get("completion")
            if not (isinstance(key, str) and isinstance(checksum, str) and isinstance(payload, str)):
                raise EntryError("key, checksum and completion must be text")
            if checksum != _checksum(key, payload):
                raise EntryError("checksum mismatch")
            yield key, parse_entry(key, f"{checksum}\n{payload}", checksummed=True)
        except (ValueError, RecursionError) as exc:  # EntryError, or a line that is not JSON
            raise BundleError(f"{source}: {ENTRIES}:{number}: bad entry ({str(exc)[:200]})") from None


SHOWN_CONFLICTS = 5  # keys listed in the refusal; the count covers all of them


def import_bundle(
    source: Path, cache: CallCache, *, overwrite: bool = False, max_bytes: int = ENTRIES_MAX_BYTES
) -> tuple[int, int]:
    """Load a verified export into `cache`: (entries written, entries it already held unchanged).

    A key the cache already holds with a different answer is a conflict: the user's own answer is kept and
    the import refused (nothing written, the conflicting keys listed) unless `overwrite` says to replace it.
    The file is read as a stream, twice (checked, then written): memory holds keys, never the whole file."""
    with _Bundle(source, max_bytes) as bundle:
        write: set[str] = set()
        conflicts: list[str] = []
        present = 0
        for key, completion in bundle.entries():
            held = cache.get(key)
            if held == completion:
                present += 1
                continue
            write.add(key)
            if held is not None:
                conflicts.append(key)
        if conflicts and not overwrite:
            shown = ", ".join(conflicts[:SHOWN_CONFLICTS])
            more = f" (+{len(conflicts) - SHOWN_CONFLICTS} more)" if len(conflicts) > SHOWN_CONFLICTS else ""
            raise BundleError(
                f"{source}: {len(conflicts)} entries differ from the answers {cache.location} already holds "
                f"({shown}{more}); nothing imported; --overwrite replaces them"
            )
        written = 0
        for key, completion in bundle.entries():
            if key in write:
                cache.set(key, completion)
                written += 1
    return written, present


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: one line on success, one line (exit code 2) on any problem."""
    parser = argparse.ArgumentParser(prog="python -m judge.cache", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    exp = sub.add_parser("export", help="write the entries the runs below a folder used to one file")
    exp.add_argument("root", type=Path, help="a run or multirun folder")
    exp.add_argument("file", type=Path, help="the file to write (a zip: manifest.json + entries.jsonl)")
    exp.add_argument(
        "--replace", action="store_true", help="replace the file if it exists (a regular file only)"
    )
    imp = sub.add_parser("import", help="load an exported file into a cache, verifying every entry")
    imp.add_argument("file", type=Path)
    imp.add_argument(
        "--overwrite",
        action="store_true",
        help="replace cached answers that differ from the file's (refused by default)",
    )
    imp.add_argument(
        "--max-mb",
        type=float,
        default=ENTRIES_MAX_BYTES / MB,
        help=f"refuse a file whose entries expand to more than this (default {ENTRIES_MAX_BYTES // MB})",
    )
    for p in (exp, imp):
        p.add_argument(
            "--cache-dir", help="the cache folder (default: $JUDGESCOPE_CACHE_DIR or ~/.cache/...)"
        )
        p.add_argument("--redis-url", help="a Redis cache instead of a folder (redis://host:6379/0)")
    args = parser.parse_args(argv)
    try:
        cache = open_cache("redis" if args.redis_url else "disk", args.redis_url, args.cache_dir)
        try:
            if args.command == "export":
                manifest = export_runs(args.root, args.file, cache, replace=args.replace)
                print(
                    f"{manifest['entries']} entries of {len(manifest['runs'])} run(s) -> {args.file}",
                    file=sys.stderr,
                )
            else:
                limit = int(args.max_mb * MB) if args.max_mb > 0 else ENTRIES_MAX_BYTES
                written, present = import_bundle(args.file, cache, overwrite=args.overwrite, max_bytes=limit)
                print(
                    f"{written} entries imported ({present} already there) into {cache.location}",
                    file=sys.stderr,
                )
        finally:
            cache.close()
    except (BundleError, CacheError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
