"""Where a study's results files are: light (the standard library only), so that the viewer finds them
without importing the analysis (`analysis.load.collect` re-exports these)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["RESULTS_FILES", "find_results", "symlinked_runs"]

RESULTS_FILES = ("results.parquet", "results.csv")  # a run's table, in the order of preference


def find_results(root: str | Path) -> list[Path]:
    """Every run's results file below `root` (or `root` itself): results.parquet, else results.csv. Symlinked
    folders and results files below `root` are not followed (`symlinked_runs` names them): a link to a run
    that is also there, such as a `latest` link to a sweep, would count every judgment twice."""
    root = Path(root)
    if root.is_file():
        return [root]
    found = []
    for folder, _, files in os.walk(root):  # os.walk follows no symlinked folder
        here = Path(folder)
        real = [name for name in RESULTS_FILES if name in files and not (here / name).is_symlink()]
        if real:
            found.append(here / real[0])
    return sorted(found, key=lambda path: path.parent)


def symlinked_runs(root: str | Path) -> list[Path]:
    """The symlinked folders and results files below `root` that `find_results` leaves out."""
    root = Path(root)
    if root.is_file():
        return []
    links = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        links += [here / d for d in dirs if (here / d).is_symlink()]
        links += [here / f for f in files if f in RESULTS_FILES and (here / f).is_symlink()]
    return sorted(links)
