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
import base64
import errno
import hashlib
import http.client
import os
import re
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

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
    size: int  # bytes: twice this is the download's cap (a body that long is not this file: not read on)


DATASETS: dict[str, tuple[DataFile, ...]] = {
    "coling2020": (
        DataFile(
            "coling2020_reviews.jsonl",
            "5e1b8c9e9af4ca5a836aae68949b9600f223ededa6fde7d8d6ea127fe8545b46",
            928_569,
        ),
    ),
    "novbench": (
        DataFile(
            "novbench_coling2020.jsonl",
            "250228746cb007928946cf9fb0925fb8bf4978a2d5bc6452a73b3baea02ff598",
            257_720,
        ),
    ),
    "novbench_human": (
        DataFile(
            "novbench_human_pairs_dev.jsonl",
            "b1094bf6252b79947708779ae6930fc10589e3fee2fde2b0cf501b8e0bb4d07e",
            420_608,
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


SCHEMES = ("https", "http", "file")
DEADLINE_S = 300.0  # a whole file, connection to last byte: a mirror dripping bytes cannot hold a run forever
CHUNK = 1 << 16
_CREDENTIALS = re.compile(r"(//)[^/@]*@")
_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}  # no room: not a permissions problem


def shown_url(url: str) -> str:
    """`url` as it may be printed: any `user:password@` replaced by `***@` (a token in a mirror's URL is a
    key; keys never appear in anything printed), even in a URL that does not parse."""
    return _CREDENTIALS.sub(r"\1***@", url)


def check_url(url: str) -> str:
    """`url` if it is a URL `download` can read (http(s) with a host, or file), else a DataError in one line."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (a port that is not a number raises here, not mid-download)
    except ValueError as exc:
        raise DataError(f"--url {shown_url(url)}: not a URL ({exc})") from None
    if parts.scheme not in SCHEMES or (parts.scheme != "file" and not parts.hostname):
        raise DataError(
            f"--url {shown_url(url)}: not a URL (give https://host/folder/, http://... or file:///folder/)"
        )
    return url


def _request(url: str) -> urllib.request.Request:
    """A GET of `url` with its `user:password@` sent as HTTP basic auth instead of inside the host name."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return urllib.request.Request(url)
    userinfo, host = parts.netloc.rsplit("@", 1)
    request = urllib.request.Request(urlunsplit(parts._replace(netloc=host)))
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
    request.add_unredirected_header("Authorization", f"Basic {token}")
    return request


@dataclass(frozen=True)
class Got:
    """What `download` stored: the path, its size and SHA-256."""

    path: Path
    size: int
    sha256: str


def download(
    url: str,
    target: Path,
    max_bytes: int,
    deadline_s: float = DEADLINE_S,
    sha256: str | None = None,
) -> Got:
    """`url` into `target`, or a DataError in one line with nothing stored (no partial file, hidden or not).

    The one way the project downloads a file: a total deadline from connection to last byte (a socket timeout
    alone lets a mirror sending one byte a second hold forever), a size cap (`max_bytes`: a longer body is
    refused as soon as it says so or passes the cap, never read whole), a body shorter than its
    Content-Length refused, redirect loops, bad URLs and full disks named, and the URL's credentials never
    printed. With `sha256`, a body with another checksum is refused too."""
    check_url(url)
    shown = shown_url(url)
    started = time.monotonic()
    handle = None
    try:
        with urllib.request.urlopen(_request(url), timeout=deadline_s) as response:  # noqa: S310
            declared = response.headers.get("Content-Length") if response.headers else None
            length = int(declared) if declared and declared.strip().isdigit() else None
            if length is not None and length > max_bytes:
                raise DataError(
                    f"{shown}: the server announces {length:,} bytes where at most {max_bytes:,} are expected; "
                    "refused, nothing read or stored"
                )
            try:
                target.parent.mkdir(parents=True, exist_ok=True)
                handle = tempfile.NamedTemporaryFile(
                    dir=target.parent, prefix=f".{target.name}.", delete=False
                )
            except OSError as exc:
                raise _store_error(exc, target, 0) from None
            digest, got = hashlib.sha256(), 0
            read = getattr(response, "read1", response.read)  # whatever has arrived: the deadline is checked
            while chunk := read(CHUNK):
                got += len(chunk)
                if got > max_bytes:
                    raise DataError(
                        f"{shown}: the body passes {max_bytes:,} bytes, more than the file can be; refused "
                        "after that many, nothing stored"
                    )
                if time.monotonic() - started > deadline_s:
                    raise TimeoutError
                digest.update(chunk)
                _write(handle, chunk, target, got)
            if length is not None and got < length:
                raise DataError(
                    f"{shown}: the download broke off after {got:,} of {length:,} bytes; nothing stored, rerun"
                )
            if sha256 is not None and digest.hexdigest() != sha256:
                raise DataError(
                    f"{shown}: SHA-256 {digest.hexdigest()[:12]}... is not the pinned {sha256[:12]}...; "
                    "refused, nothing stored"
                )
            handle.close()
            _replace(Path(handle.name), target)
            handle = None
            return Got(target, got, digest.hexdigest())
    except DataError:
        raise
    except urllib.error.HTTPError as exc:
        exc.close()
        why_not = str(exc.reason).splitlines()[0] if str(exc.reason) else ""
        if "redirect" in why_not and "loop" in why_not:
            raise DataError(
                f"{shown}: the server redirects in a loop (HTTP {exc.code}); nothing stored"
            ) from None
        raise DataError(f"{shown}: the server answered {exc.code} {why_not}".rstrip()) from None
    except (TimeoutError, urllib.error.URLError, http.client.HTTPException, ConnectionError) as exc:
        if isinstance(exc, TimeoutError) or isinstance(getattr(exc, "reason", None), TimeoutError):
            raise DataError(
                f"{shown}: no complete answer within {deadline_s:g} s; nothing stored (a slow mirror: rerun, "
                "or give --deadline more seconds)"
            ) from None
        if isinstance(exc, http.client.IncompleteRead):
            raise DataError(
                f"{shown}: the download broke off after {len(exc.partial):,} bytes; nothing stored, rerun"
            ) from None
        reason: object = getattr(exc, "reason", None) or exc
        if urlsplit(url).scheme == "file":  # a local mirror: the file's own error (not found, no permission)
            why = reason.strerror if isinstance(reason, OSError) and reason.strerror else reason
            raise DataError(f"{shown}: cannot read it ({why}); nothing stored") from None
        if isinstance(exc, urllib.error.URLError | ConnectionRefusedError):
            raise NoNetwork(urlsplit(url).netloc.rsplit("@", 1)[-1], reason) from None
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DataError(f"{shown}: the download failed ({shown_url(first)}); nothing stored, rerun") from None
    except ValueError as exc:  # urllib's own URL checks (a URL check_url let through)
        raise DataError(f"--url {shown}: not a URL ({shown_url(str(exc).splitlines()[0])})") from None
    finally:
        if handle is not None:
            handle.close()
            Path(handle.name).unlink(missing_ok=True)


class NoNetwork(DataError):
    """The mirror's host cannot be reached at all (the caller says what to copy where)."""

    def __init__(self, host: str, reason: object) -> None:
        super().__init__(f"no network: cannot reach {host} ({reason})")
        self.host, self.reason = host, reason


def _write(handle: object, chunk: bytes, target: Path, got: int) -> None:
    try:
        handle.write(chunk)  # type: ignore[attr-defined]
        handle.flush()  # type: ignore[attr-defined]
    except OSError as exc:
        raise _store_error(exc, target, got) from None


def _replace(temporary: Path, target: Path) -> None:
    try:
        temporary.replace(target)
    except OSError as exc:
        raise _store_error(exc, target, target.stat().st_size if target.exists() else 0) from None


def _store_error(exc: OSError, target: Path, got: int) -> DataError:
    """One line for a file that cannot be written: a full disk (or file size limit) said as such, with what
    it needed; anything else (permissions, read-only) named as not writable."""
    if exc.errno in _FULL:
        return DataError(
            f"{target.parent}: no room to store {target.name} ({exc.strerror} after {got:,} bytes); nothing "
            "stored; free some space or set JUDGESCOPE_DATA_DIR to another folder"
        )
    return DataError(
        f"{target.parent}: cannot store {target.name} ({exc.strerror}); set JUDGESCOPE_DATA_DIR to a "
        "writable folder"
    )


def _wrong_copy(target: Path, item: DataFile) -> str:
    """'' when `target` is absent; else a clause saying that the file there is not the pinned one."""
    if not target.is_file():
        return ""
    size = target.stat().st_size
    return (
        f"; the {target.name} already there is the wrong file ({size:,} bytes, SHA-256 "
        f"{sha256_of(target)[:12]}...; the pinned one has {item.size:,} bytes, {item.sha256[:12]}...): replace it"
    )


def fetch(
    dataset: str, folder: Path | None = None, base_url: str = BASE_URL, deadline_s: float = DEADLINE_S
) -> list[Path]:
    """Download `dataset`'s files from `base_url` (`download`: deadline, the pinned size as cap, the pinned
    SHA-256), store them in `folder`. A file already there with the right checksum is kept (no download)."""
    if dataset not in DATASETS:
        raise DataError(f"{dataset}: not a dataset to fetch (choose {', '.join(DATASETS)})")
    check_url(base_url)
    folder = folder or data_dir()
    stored: list[Path] = []
    for item in DATASETS[dataset]:
        target = folder / item.name
        if target.is_file() and sha256_of(target) == item.sha256:
            stored.append(target)
            continue
        url = base_url.rstrip("/") + "/" + item.name
        try:
            download(url, target, 2 * item.size, deadline_s, item.sha256)  # room for an altered copy
        except NoNetwork as exc:
            raise DataError(
                f"no network: cannot reach {exc.host} ({exc.reason}); copy "
                f"{', '.join(f.name for f in DATASETS[dataset])} from github.com/{REPOSITORY} "
                f"(commit {COMMIT[:7]}, rebuttal_result/) into {folder}{_wrong_copy(target, item)}"
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
        help="where the files are: the pinned upstream commit, or a mirror (https://..., file:///folder/)",
    )
    get.add_argument(
        "--deadline",
        type=float,
        default=DEADLINE_S,
        help=f"seconds for each file, connection to last byte (default {DEADLINE_S:g})",
    )
    args = parser.parse_args(argv)
    if not args.deadline > 0:
        print(f"error: --deadline {args.deadline:g}: give a positive number of seconds", file=sys.stderr)
        return 2
    failed = 0
    for dataset in dict.fromkeys(args.datasets):  # every dataset tried: one missing is not the last word
        try:
            for path in fetch(dataset, args.dir, args.url, args.deadline):
                print(f"{dataset}: {path} (SHA-256 checked)")
        except DataError as exc:
            print(f"error: {exc}", file=sys.stderr)
            failed += 1
    if failed and len(args.datasets) > 1:
        print(f"error: {failed} of {len(dict.fromkeys(args.datasets))} datasets not fetched", file=sys.stderr)
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
