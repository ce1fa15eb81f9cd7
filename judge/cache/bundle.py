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
import sys
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge.cache.backends import open_cache
from judge.cache.store import CacheError, CallCache, EntryError, _checksum, parse_entry
from judge.completer import Completion

FORMAT = "judgescope-cache-export/1"
ENTRIES, MANIFEST = "entries.jsonl", "manifest.json"


class BundleError(RuntimeError):
    """An export or import that cannot be done; one line naming the file and the problem."""


@dataclass(frozen=True)
class Run:
    """A run folder that used the cache: its keys and its manifest."""

    folder: Path
    keys: list[str]
    manifest: dict[str, Any]


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
        try:
            manifest = json.loads((path.parent / "manifest.json").read_text())
        except (OSError, ValueError) as exc:
            raise BundleError(
                f"{path.parent / 'manifest.json'}: cannot read the run's manifest ({exc})"
            ) from None
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


def export_runs(root: Path, target: Path, cache: CallCache) -> dict[str, Any]:
    """Write the entries the runs below `root` used to `target`; returns the manifest written.

    A key without an entry is allowed only for calls the runs never got answered (their provider errors);
    more missing entries mean this is not the cache the runs used."""
    runs = find_runs(root)
    owner: dict[str, Run] = {}
    for run in runs:
        for key in run.keys:
            owner.setdefault(key, run)
    if target.is_dir():
        raise BundleError(f"{target}: is a folder; name the file to write, e.g. {target / 'study-cache.zip'}")
    partial = target.with_name(f".{target.name}.partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        manifest = _write(root, runs, owner, cache, partial)
        os.replace(partial, target)
    except OSError as exc:  # unwritable, no space, a folder in the way
        if partial.is_file():
            partial.unlink()
        raise BundleError(f"{target}: cannot write the export ({_reason(exc)})") from None
    return manifest


def _write(
    root: Path, runs: Sequence[Run], owner: dict[str, Run], cache: CallCache, partial: Path
) -> dict[str, Any]:
    """The zip at `partial`: every entry the runs used, then the manifest; BundleError if too many are missing."""
    unanswered = sum(int(r.manifest.get("provider_errors") or 0) for r in runs)
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
                model = str(run.manifest.get("model"))
                models[model] = models.get(model, 0) + 1
        if missing > unanswered:
            partial.unlink()
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
        for rubric, version in (run.manifest.get("rubric_versions") or {}).items():
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
                    k: r.manifest.get(k)
                    for k in ("judge", "model", "mode", "rubric", "study_id", "shard", "dataset_hash")
                },
                "calls": len(r.keys),
            }
            for r in runs
        ],
    }


def read_bundle(source: Path) -> tuple[dict[str, Any], list[tuple[str, Completion]]]:
    """The manifest and every entry of an exported file, each one verified; BundleError on the first flaw."""
    try:
        with zipfile.ZipFile(source) as zf:
            manifest = json.loads(zf.read(MANIFEST))
            data = zf.read(ENTRIES)
    except (OSError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise BundleError(f"{source}: not a judgescope cache export ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(f"{source}: {MANIFEST}: format is not {FORMAT}")
    if hashlib.sha256(data).hexdigest() != manifest.get("entries_sha256"):
        raise BundleError(f"{source}: {ENTRIES} does not match the SHA-256 in {MANIFEST} (damaged or edited)")
    entries = list(_verified(source, data.splitlines()))
    if len(entries) != manifest.get("entries"):
        raise BundleError(f"{source}: {len(entries)} entries, but {MANIFEST} says {manifest.get('entries')}")
    return manifest, entries


def _verified(source: Path, lines: Sequence[bytes]) -> Iterator[tuple[str, Completion]]:
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
        except ValueError as exc:  # EntryError, or a line that is not JSON
            raise BundleError(f"{source}: {ENTRIES}:{number}: bad entry ({exc})") from None


SHOWN_CONFLICTS = 5  # keys listed in the refusal; the count covers all of them


def import_bundle(source: Path, cache: CallCache, *, overwrite: bool = False) -> tuple[int, int]:
    """Load a verified export into `cache`: (entries written, entries it already held unchanged).

    A key the cache already holds with a different answer is a conflict: the user's own answer is kept and
    the import refused (nothing written, the conflicting keys listed) unless `overwrite` says to replace it."""
    _, entries = read_bundle(source)
    new, conflicts, present = [], [], 0
    for key, completion in entries:
        held = cache.get(key)
        if held == completion:
            present += 1
        elif held is None:
            new.append((key, completion))
        else:
            conflicts.append((key, completion))
    if conflicts and not overwrite:
        shown = ", ".join(k for k, _ in conflicts[:SHOWN_CONFLICTS])
        more = f" (+{len(conflicts) - SHOWN_CONFLICTS} more)" if len(conflicts) > SHOWN_CONFLICTS else ""
        raise BundleError(
            f"{source}: {len(conflicts)} entries differ from the answers {cache.location} already holds "
            f"({shown}{more}); nothing imported; --overwrite replaces them"
        )
    for key, completion in [*new, *conflicts]:
        cache.set(key, completion)
    return len(new) + len(conflicts), present


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: one line on success, one line (exit code 2) on any problem."""
    parser = argparse.ArgumentParser(prog="python -m judge.cache", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    exp = sub.add_parser("export", help="write the entries the runs below a folder used to one file")
    exp.add_argument("root", type=Path, help="a run or multirun folder")
    exp.add_argument("file", type=Path, help="the file to write (a zip: manifest.json + entries.jsonl)")
    imp = sub.add_parser("import", help="load an exported file into a cache, verifying every entry")
    imp.add_argument("file", type=Path)
    imp.add_argument(
        "--overwrite",
        action="store_true",
        help="replace cached answers that differ from the file's (refused by default)",
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
                manifest = export_runs(args.root, args.file, cache)
                print(
                    f"{manifest['entries']} entries of {len(manifest['runs'])} run(s) -> {args.file}",
                    file=sys.stderr,
                )
            else:
                written, present = import_bundle(args.file, cache, overwrite=args.overwrite)
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
