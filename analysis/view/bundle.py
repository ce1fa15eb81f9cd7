"""`python -m analysis.view bundle RUN OUT/ [--humans FILE]`: the viewer as a folder of static files.

A co-author opens OUT/index.html from `file://` or any static host, with no Python and no server: the list
(filters, sorting by each disagreement, paging) is drawn by a small script from the data embedded in
`data.js` (a script, since pages opened from `file://` may not fetch files), and each item page is the served
viewer's own template rendered once per candidate (`items/<n>.html`). The numbers are the served viewer's:
the same DuckDB tables (analysis.view.data) give both.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import numpy as np
import pandas as pd

from analysis.load.collect import load_humans
from analysis.view.data import DEFAULT_SORT, FILTERS, ITEM, PAGE_SIZE, SORTS, Study, ViewError
from analysis.view.item import item_context
from analysis.view.sql import DISAGREEMENTS

DATA_SCRIPT = "data.js"


def _plain(value: Any) -> Any:
    """A JSON value for numpy scalars (the rest as text)."""
    return value.item() if isinstance(value, np.generic) else str(value)


def _records(frame: pd.DataFrame, pages: dict[tuple[str, str], int]) -> list[dict[str, Any]]:
    """The list's rows as JSON objects (NaN as null), each with the number of its item page."""
    frame = frame.assign(
        page=[
            pages[(str(i), str(c))] for i, c in zip(frame["instance_id"], frame["candidate_id"], strict=True)
        ]
    )
    return list(frame.astype(object).where(frame.notna(), None).to_dict("records"))


def write_bundle(study: Study, out: Path) -> int:
    """The static viewer of `study` in `out` (created; a folder holding anything but an earlier bundle is
    refused); returns how many item pages it wrote."""
    if out.exists() and any(out.iterdir()) and not (out / DATA_SCRIPT).is_file():
        raise ViewError(f"{out}: not empty and not a viewer bundle; give a new or empty folder")
    items = study.all_items()
    keys = sorted(
        {(str(i), str(c)) for i, c in zip(items["instance_id"], items["candidate_id"], strict=True)}
    )
    pages = {key: n for n, key in enumerate(keys)}
    choices = study.choices()
    payload = {
        "root": str(study.root),
        "sorts": SORTS,
        "default_sort": DEFAULT_SORT,
        "disagreements": list(DISAGREEMENTS),
        "keys": list(ITEM),
        "filters": list(FILTERS),
        "choices": choices,
        "page_size": PAGE_SIZE,
        "items": _records(items, pages),
        "by_dimension": {d: _records(study.all_items(d), pages) for d in choices["dimension"]},
    }
    assets = resources.files("analysis.view")
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(assets / "templates")), autoescape=jinja2.select_autoescape()
    )
    report = study.root / "report"
    has_report = (report / "report.html").is_file()
    (out / "items").mkdir(parents=True, exist_ok=True)
    (out / "static").mkdir(exist_ok=True)
    for name in ("view.css", "bundle.js"):
        (out / "static" / name).write_bytes((assets / "static" / name).read_bytes())
    if has_report:
        shutil.copytree(report, out / "report", dirs_exist_ok=True)
    links = {"base": "", "list_url": "index.html", "report_url": "report/report.html" if has_report else ""}
    # `</` cannot end a script element here (a file of its own), but is escaped anyway for a host inlining it
    script = json.dumps(payload, default=_plain, ensure_ascii=False).replace("</", "<\\/")
    (out / DATA_SCRIPT).write_text(f"window.JUDGESCOPE = {script};\n", encoding="utf-8")
    (out / "index.html").write_text(
        env.get_template("view_bundle.html").render(root=str(study.root), sorts=SORTS, **links),
        encoding="utf-8",
    )
    item_links = {"base": "../", **{k: f"../{v}" if v else "" for k, v in links.items() if k != "base"}}
    template = env.get_template("view_item.html")
    for (instance_id, candidate_id), n in pages.items():
        html = template.render(**item_context(study, instance_id, candidate_id), **item_links)
        (out / "items" / f"{n}.html").write_text(html, encoding="utf-8")
    return len(pages)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point of `python -m analysis.view bundle`."""
    parser = argparse.ArgumentParser(
        prog="python -m analysis.view bundle",
        description="Write the viewer of a study as static files (open OUT/index.html; no server needed).",
    )
    parser.add_argument("root", help="a run folder or a multirun folder (searched recursively)")
    parser.add_argument("out", help="the folder to write (new or empty, or an earlier bundle to replace)")
    parser.add_argument(
        "--humans", help="human labels CSV (annotator, instance_id, candidate_id, source, dimension, score)"
    )
    args = parser.parse_args(argv)
    try:
        humans = load_humans(args.humans) if args.humans else None
        with Study(args.root, humans) as study:
            n = write_bundle(study, Path(args.out))
    except (ViewError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        f"viewer bundle of {args.root}: {Path(args.out) / 'index.html'} ({n} item pages; open it in a browser)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
