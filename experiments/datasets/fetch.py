"""The public data, one command away: `python -m experiments.data fetch coling2020|novbench|novbench_human`.

The COLING 2020 reviews, NovBench's COLING records and the NovBench human pairs are third-party files from the
NovBench authors' public repository (github.com/njust-winchy/llm4novelty, folder `rebuttal_result/`). They are
not shipped: `fetch` downloads them at a pinned commit, checks each file's SHA-256 and stores them in the data
folder (`$JUDGESCOPE_DATA_DIR`, else `~/.cache/judgescope/data`). Configs name such a file as `data:<file>`
(e.g. `dataset.path=data:coling2020_reviews.jsonl`); `data_file` resolves it to the data folder, checking the
same SHA-256, so a run reads exactly the files the statistics were written for, or says which command fetches
them.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from core.paths import sha256_of, user_cache

REPOSITORY = "njust-winchy/llm4novelty"
COMMIT = "c34448edaecfa7143d672dbeabd69bec4e796824"
BASE_URL = f"https://raw.githubusercontent.com/{REPOSITORY}/{COMMIT}/rebuttal_result/"
PREFIX = "data:"  # a config value `data:<file>` is a file of the data folder


@dataclass(frozen=True)
class DataFile:
    """One pinned upstream file: its name in `rebuttal_result/` and in the data folder, and its SHA-256."""

    name: str
    sha256: str


DATASETS: dict[str, tuple[DataFile, ...]] = {
    "coling2020": (
        DataFile(
            "coling2020_reviews.jsonl", "5e1b8c9e9af4ca5a836aae68949b9600f223ededa6fde7d8d6ea127fe8545b46"
        ),
    ),
    "novbench": (
        DataFile(
            "novbench_coling2020.jsonl", "250228746cb007928946cf9fb0925fb8bf4978a2d5bc6452a73b3baea02ff598"
        ),
    ),
    "novbench_human": (
        DataFile(
            "novbench_human_pairs_dev.jsonl",
            "b1094bf6252b79947708779ae6930fc10589e3fee2fde2b0cf501b8e0bb4d07e",
        ),
    ),
}
FILES: dict[str, tuple[str, DataFile]] = {f.name: (key, f) for key, files in DATASETS.items() for f in files}


class DataError(ValueError):
    """A data file that is missing, altered or cannot be fetched; the message is one line for the user (a
    ValueError, so the analysis commands' one-line handlers answer it too)."""


def data_dir() -> Path:
    """Where fetched files live: `$JUDGESCOPE_DATA_DIR`, else `~/.cache/judgescope/data` (core.paths, so
    `$XDG_CACHE_HOME` moves it with every other cache)."""
    configured = os.environ.get("JUDGESCOPE_DATA_DIR")
    return Path(configured).expanduser() if configured else user_cache("data")


def fetch_command(name: str) -> str:
    """The one command that brings file `name` into the data folder."""
    return f"python -m experiments.data fetch {FILES[name][0]}"


def data_file(name: str, folder: Path | None = None) -> Path:
    """The checked path of pinned file `name` in the data folder, or a DataError naming the fetch command."""
    if name not in FILES:
        known = ", ".join(f"{PREFIX}{n}" for n in FILES)
        raise DataError(f"{PREFIX}{name}: no such data file (known: {known})")
    folder = folder or data_dir()
    path, expected = folder / name, FILES[name][1].sha256
    if not path.is_file():
        raise DataError(
            f"{PREFIX}{name}: not in {folder}; run `{fetch_command(name)}` (or copy {name} there)"
        )
    if sha256_of(path) != expected:
        raise DataError(
            f"{path}: its SHA-256 is not the pinned upstream file's ({expected[:12]}...); run "
            f"`{fetch_command(name)}` to replace it"
        )
    return path


def resolve_data(value: str) -> Path | None:
    """`data:<file>` as a checked path of the data folder; None for any other value (a path as given)."""
    return data_file(value[len(PREFIX) :]) if value.startswith(PREFIX) else None


def data_or_path(value: str | Path) -> Path:
    """A command-line file argument: `data:<file>` from the data folder (checked), anything else as given."""
    fetched = resolve_data(str(value))
    return fetched if fetched is not None else Path(value)


def _download(url: str, timeout_s: float) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 (https or a test's 127.0.0.1)
        return bytes(response.read())


def fetch(
    dataset: str, folder: Path | None = None, base_url: str = BASE_URL, timeout_s: float = 60.0
) -> list[Path]:
    """Download `dataset`'s files from `base_url`, refuse any whose SHA-256 differs, store the rest in `folder`.
    A file already there with the right checksum is kept (no download)."""
    if dataset not in DATASETS:
        raise DataError(f"{dataset}: not a dataset to fetch (choose {', '.join(DATASETS)})")
    folder = folder or data_dir()
    stored: list[Path] = []
    for item in DATASETS[dataset]:
        target = folder / item.name
        if target.is_file() and sha256_of(target) == item.sha256:
            stored.append(target)
            continue
        url = base_url.rstrip("/") + "/" + item.name
        try:
            data = _download(url, timeout_s)
        except urllib.error.HTTPError as exc:
            raise DataError(f"{url}: the server answered {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            reason = getattr(exc, "reason", exc)
            raise DataError(
                f"no network: cannot reach {urlsplit(url).netloc} ({reason}); copy "
                f"{', '.join(f.name for f in DATASETS[dataset])} from github.com/{REPOSITORY} "
                f"(commit {COMMIT[:7]}, rebuttal_result/) into {folder}"
            ) from None
        got = hashlib.sha256(data).hexdigest()
        if got != item.sha256:
            raise DataError(
                f"{url}: SHA-256 {got[:12]}... is not the pinned {item.sha256[:12]}...; refused, nothing "
                "stored"
            )
        try:
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{item.name}.", delete=False) as handle:
                handle.write(data)
            Path(handle.name).replace(target)
        except OSError as exc:
            raise DataError(
                f"{folder}: cannot store {item.name} ({exc.strerror}); set JUDGESCOPE_DATA_DIR to a "
                "writable folder"
            ) from None
        stored.append(target)
    return stored


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.data", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    get = sub.add_parser("fetch", help="download and check a public dataset")
    get.add_argument("datasets", nargs="+", choices=sorted(DATASETS), metavar="|".join(DATASETS))
    get.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="the data folder (default: $JUDGESCOPE_DATA_DIR or ~/.cache/judgescope/data)",
    )
    get.add_argument(
        "--url",
        default=os.environ.get("JUDGESCOPE_DATA_URL", BASE_URL),
        help="where the files are (default: the pinned upstream commit)",
    )
    args = parser.parse_args(argv)
    try:
        for dataset in dict.fromkeys(args.datasets):
            for path in fetch(dataset, args.dir, args.url):
                print(f"{dataset}: {path} (SHA-256 checked)")
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
