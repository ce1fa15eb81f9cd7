"""Parameters a provider did not receive as asked (dropped or changed by litellm's mapping), per run.

Read from each run's manifest (`request.changes`, written by the study from `judge.quirks`), so the report
can flag e.g. a reasoning model that ran at temperature 1 although the study asked for 0.1.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.load.collect import find_results
from analysis.stats.spec import Inputs, Section, Tables, TableSpec
from core.schema import ManifestError, run_manifest

COLUMNS = ["run_id", "judge", "model", "parameter", "asked", "sent", "note"]


def request_changes(root: str | Path) -> pd.DataFrame:
    """One row per (run, parameter) that was dropped or changed; empty when every request went as asked."""
    rows = []
    for path in find_results(root):
        try:
            manifest = run_manifest(path.parent)
        except ManifestError:
            continue  # an unreadable manifest is reported by the loaders that need it
        if manifest is None or manifest.request is None:
            continue
        for change in manifest.request.changes:
            rows.append(
                {
                    "run_id": path.parent.name,
                    "judge": manifest.judge,
                    "model": manifest.model,
                    "parameter": change.param,
                    "asked": _text(change.asked),
                    "sent": _text(change.sent),
                    "note": change.note,
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def _text(value: object) -> str:
    return "not sent" if value is None else str(value)


def _request_changes(s: Inputs, _: Tables) -> pd.DataFrame | None:
    """Parameters a provider did not get as asked (judge.quirks), read from the run folder's files."""
    if s.root is None:
        return None
    table = request_changes(s.root)
    return table if len(table) else None


REQUEST_CHANGES: TableSpec = TableSpec(
    "request_changes",
    _request_changes,
    ("run_id", "judge", "model", "parameter", "asked", "sent", "note"),
    section=Section.runs,
    meanings={
        "parameter": "a request parameter the provider did not get as asked",
        "asked": "the value the study asked for",
        "sent": "what the provider received (`not sent` = dropped)",
        "note": "why it was dropped or changed",
    },
)
