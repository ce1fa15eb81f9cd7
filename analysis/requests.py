"""Parameters a provider did not receive as asked (dropped or changed by litellm's mapping), per run.

Read from each run's manifest (`request.changes`, written by the study from `judge.quirks`), so the report
can flag e.g. a reasoning model that ran at temperature 1 although the study asked for 0.1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from analysis.collect import find_results

COLUMNS = ["run_id", "judge", "model", "parameter", "asked", "sent", "note"]


def request_changes(root: str | Path) -> pd.DataFrame:
    """One row per (run, parameter) that was dropped or changed; empty when every request went as asked."""
    rows = []
    for path in find_results(root):
        manifest = path.parent / "manifest.json"
        if not manifest.exists():
            continue
        try:
            data = json.loads(manifest.read_text())
        except ValueError:
            continue  # an unreadable manifest is reported by the loaders that need it
        for change in (data.get("request") or {}).get("changes") or []:
            rows.append({"run_id": path.parent.name, "judge": data.get("judge"), "model": data.get("model"),
                         "parameter": change.get("param"), "asked": _text(change.get("asked")),
                         "sent": _text(change.get("sent")), "note": change.get("note", "")})  # fmt: skip
    return pd.DataFrame(rows, columns=COLUMNS)


def _text(value: object) -> str:
    return "not sent" if value is None else str(value)
