"""Files a user may receive from others (a run's manifest.json, a cache export's zip): read with a size cap,
their size known before a byte is read, never followed into a device or a folder, refused in one line naming
the file. Only the standard library: every layer may import it."""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path

MB = 2**20


class ReceivedFileError(ValueError):
    """A received file refused before it is read (too large, not a regular file); one line naming it."""


def _mb(size: int) -> str:
    return f"{size / MB:.0f} MB" if size >= MB else f"{size} bytes"


def read_capped(path: Path, cap: int, what: str) -> bytes:
    """The bytes of the regular file `path`, at most `cap` of them (a larger file is refused, not read
    whole); OSError when it cannot be read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO must not block the open
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ReceivedFileError(f"{path}: not a regular file; expected {what}")
        data = handle.read(cap + 1)
    if len(data) > cap:
        raise ReceivedFileError(f"{path}: over {_mb(cap)}, too large for {what}")
    return data


def zip_member(zf: zipfile.ZipFile, source: Path, name: str, cap: int) -> zipfile.ZipInfo:
    """The entry `name` of an opened zip, refused (one line) when missing or when its declared uncompressed
    size exceeds `cap` - before it is decompressed, so a small file that would expand to gigabytes is never
    expanded. Python's zip reader stops at the declared size, so the cap also bounds what a read returns."""
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise ReceivedFileError(f"{source}: no {name} in the zip") from None
    if info.file_size > cap:
        ratio = (
            f", {info.file_size // max(info.compress_size, 1)}x its compressed size"
            if info.compress_size
            else ""
        )
        raise ReceivedFileError(
            f"{source}: {name} expands to {_mb(info.file_size)}{ratio}, over the {_mb(cap)} limit; not read"
        )
    return info
