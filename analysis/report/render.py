"""Write the report: report.md, report.html (figures embedded as PNG), tables/*.csv, figures/*.png.

A section whose table or figure is absent or empty says why in a sentence instead of showing an empty
table or heatmap (e.g. a run with a single judge has no judge–judge agreement).
"""

from __future__ import annotations

import base64
import html
import io
import re
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.load.collect import rubric_column
from analysis.report import summary
from analysis.report.glossary import describe
from analysis.report.sections import FOLD_ROWS, HUMANS_UNPAIRED, NO_HUMANS, SECTIONS, Section
from analysis.stats.humans import HUMAN_AGREEMENT
from analysis.tables.declarations import headlines
from analysis.tables.leaderboard import LEADERBOARD
from core.cells import md_cell, write_csv

MD_ROWS = 60  # longer tables are cut in report.md (never in the CSV or the HTML)


def _fmt(value: object) -> str:
    if isinstance(value, float | np.floating):
        return "" if np.isnan(value) else f"{value:.3f}"
    return md_cell(value)


def markdown_table(frame: pd.DataFrame, max_rows: int = MD_ROWS) -> str:
    """A GitHub-markdown table, floats to 3 decimals, text as text (`cells.md_cell`), cut after `max_rows`."""
    head = frame.head(max_rows)
    lines = ["| " + " | ".join(map(md_cell, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in head.itertuples(index=False)]
    if len(frame) > max_rows:
        lines.append(f"\n*{max_rows} of {len(frame)} rows shown; the CSV has all.*")
    return "\n".join(lines)


PNG_DPI = 110  # the report's raster figures (report.html embeds the same bytes as figures/*.png)
#: zlib level of the PNGs: the same pixels and within 1% of level 6's bytes on the report's flat-colour
#: figures, at about half the encoding time (0.56 -> 0.32 s of CPU for the sample study's 10 figures)
PNG_SAVE = {"compress_level": 1}


def rendered(fig: Figure) -> tuple[bytes, bytes]:
    """(PNG, PDF) of one figure, laid out once: the constrained layout runs here at the PNG's resolution (as
    `savefig` would before its own draw), then both saves draw with the engine off (restored after), so each
    format costs one draw; a save with the engine on draws twice (a layout pass, then the drawing)."""
    engine = fig.get_layout_engine()
    if engine is not None:
        dpi = fig.get_dpi()
        fig.set_dpi(PNG_DPI)
        try:
            engine.execute(fig)
        finally:
            fig.set_dpi(dpi)
        fig.set_layout_engine(None)
    png, pdf = io.BytesIO(), io.BytesIO()
    try:
        fig.savefig(png, format="png", dpi=PNG_DPI, pil_kwargs=PNG_SAVE)
        fig.savefig(pdf, format="pdf")  # the same positions, as vector graphics
    finally:
        if engine is not None:
            fig.set_layout_engine(engine)
    return png.getvalue(), pdf.getvalue()


def slug(title: str) -> str:
    """The HTML id of a section."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def display_frame(name: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The table as shown: the leaderboard's unknown cost reads "unknown", never 0 or blank."""
    if name == "leaderboard" and "cost_per_1k" in frame:
        cost = frame["cost_per_1k"].astype(float)
        return frame.assign(cost_per_1k=[f"{v:.4f}" if np.isfinite(v) else "unknown" for v in cost])
    return frame


def _titled_headers(table_html: str) -> str:
    """Each column header carries its glossary meaning as a tooltip."""

    def title(match: re.Match[str]) -> str:
        meaning = describe(html.unescape(match.group(1)))
        return f'<th title="{html.escape(meaning)}">{match.group(1)}</th>' if meaning else match.group(0)

    return re.sub(r"<th>([^<]*)</th>", title, table_html)


def _html_table(name: str, frame: pd.DataFrame) -> str:
    """A table inside a box that scrolls sideways; the leaderboard as a sortable DataTable (itables)."""
    shown = display_frame(name, frame)
    if name == "leaderboard":
        from itables import to_html_datatable  # noqa: PLC0415 (only when writing the report)

        # header text not selectable: DataTables then sorts on a click anywhere in the header cell, its name
        # included (selectable text left only the small arrow icon clickable)
        board = summary.leaderboard_display(frame)  # blank, not NaN; the κ_w columns under one group
        # one header row for DataTables (a two-row header with merged cells left its body empty): the group
        # leads each κ_w column's name
        board.columns = [f"{group}: {name}" if group else name for group, name in board.columns]
        datatable = to_html_datatable(
            board,
            connected=False,
            paging=False,
            showIndex=False,  # the judge is the first column
            display_logo_when_loading=False,
            text_in_header_can_be_selected=False,
        )
        return f'<div class="scroll" id="leaderboard">{datatable}</div>'
    table = shown.to_html(index=False, na_rep="", float_format=lambda v: f"{v:.3f}", border=0)
    return f'<div class="scroll">{_titled_headers(table)}</div>'


def _section(section: Section, tables: dict[str, pd.DataFrame], pngs: dict[str, bytes]) -> tuple[str, str]:
    """(markdown, html) of one section."""
    present = [t for t in section.tables if t in tables and len(tables[t])]
    md = [f"## {section.title}", "", section.text, ""]
    out = [
        f'<section id="{slug(section.title)}"><h2>{html.escape(section.title)}</h2>',
        f"<p>{html.escape(section.text)}</p>",
    ]
    if not present:
        given = (
            section.missing == NO_HUMANS and HUMAN_AGREEMENT.key in tables
        )  # labels given, none usable here
        missing = HUMANS_UNPAIRED if given else section.missing
        md.append(missing)
        out.append(f"<p><em>{html.escape(missing)}</em></p></section>")
        return "\n".join([*md, ""]), "\n".join(out)
    if section.figure and section.figure in pngs:
        md += [f"![{section.title}](figures/{section.figure}.png)", ""]
        data = base64.b64encode(pngs[section.figure]).decode()
        out.append(
            f'<figure><img alt="{html.escape(section.title)}" src="data:image/png;base64,{data}"></figure>'
        )
    for name in present:
        frame = tables[name]
        if len(frame) > FOLD_ROWS:  # a long table folded under its headline; the CSV link stays in sight
            line = headline(name, frame)
            summary = f"<summary><code>tables/{name}.csv</code>: {html.escape(line)}</summary>"
            md += [
                f"<details>{summary}",
                "",
                markdown_table(display_frame(name, frame)),
                "",
                "</details>",
                "",
            ]
            out += [f'<details class="table" id="table-{name}">{summary}{_html_table(name, frame)}</details>']
            continue
        md += [f"`tables/{name}.csv`", "", markdown_table(display_frame(name, frame)), ""]
        out += [f"<p><code>tables/{name}.csv</code></p>", _html_table(name, frame)]
    out.append("</section>")
    return "\n".join(md), "\n".join(out)


#: the columns naming a row in a folded table's summary line
ROW_NAMES = (
    "judge",
    "rubric",
    "rater",
    "rater_a",
    "rater_b",
    "method",
    "kind",
    "mode",
    "source",
    "dimension",
    "position",
    "perturbation",
)


def headline(name: str, frame: pd.DataFrame) -> str:
    """A folded table's summary line: its row count and its headline number (`TableSpec.headline`) with the row it
    comes from, e.g. ``24 rows; highest win rate 0.750 (qwen_a · comparative · narrow_gen · originality)``."""
    rows = f"{len(frame)} rows"
    declared = headlines()
    if name not in declared or declared[name][0] not in frame:
        return rows
    column, pick, what = declared[name]
    values = pd.to_numeric(frame[column], errors="coerce").reset_index(drop=True)  # by position
    if "rater_a" in frame:  # a pair table's last row is over all raters: not one pair
        values = values.where(frame["rater_a"].astype(str).to_numpy() != "(all)")
    if values.notna().sum() == 0:
        return rows
    at = {"max": values.idxmax, "min": values.idxmin, "absmax": values.abs().idxmax}[pick]()
    row = frame.iloc[at]
    named = [str(row[c]) for c in ROW_NAMES if c in frame and pd.notna(row[c])]
    return f"{rows}; {what} {_fmt(float(values[at]))}" + (f" ({' · '.join(named)})" if named else "")


def summary_block(
    tables: dict[str, pd.DataFrame], banner: Sequence[str] = (), pngs: Mapping[str, bytes] | None = None
) -> tuple[str, str]:
    """(markdown, html) of the opening summary: the completeness banner (`summary.banner_lines`), then one
    short list of sentences per study question; the novelty-illusion question shows its figures
    (`summary.ILLUSION_FIGURES`, where drawn) under its sentences."""
    md, out = ["## Summary", ""], ['<section id="summary"><h2>Summary</h2>']
    questions = summary.summary_lines(tables)
    if banner:
        questions = {summary.BANNER: list(banner), **questions}
    for question, lines in questions.items():
        md += [f"**{question}**", "", *[f"- {_md_line(line)}" for line in lines], ""]
        items = "".join(f"<li>{_bold(html.escape(line))}</li>" for line in lines)
        out.append(f"<h3>{html.escape(question)}</h3><ul>{items}</ul>")
        shown = [f for f in summary.ILLUSION_FIGURES if question == summary.ILLUSION and f in (pngs or {})]
        for name in shown:
            md += [f"![{name}](figures/{name}.png)", ""]
            data = base64.b64encode((pngs or {})[name]).decode()
            out.append(f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,{data}"></figure>')
    out.append("</section>")
    return "\n".join(md), "\n".join(out)


def _md_line(line: str) -> str:
    """A summary sentence for report.md: names in it shown as text (no raw HTML) on one line."""
    return re.sub(r"\s*[\r\n]+\s*", " ", html.escape(line, quote=False))


def _bold(text: str) -> str:
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)


def glossary_block(tables: dict[str, pd.DataFrame]) -> tuple[str, str]:
    """(markdown, html) of the glossary: every column name of the report's tables and what it means."""
    where: dict[str, list[str]] = {}
    for name, table in tables.items():
        for col in map(str, table.columns):
            where.setdefault(col, []).append(name)
    rows = pd.DataFrame(
        [
            {"column": c, "meaning": describe(c) or "", "tables": ", ".join(t)}
            for c, t in sorted(where.items())
        ]
    )
    md = "## Glossary\n\n" + markdown_table(rows, max_rows=len(rows) + 1) + "\n"
    table = rows.to_html(index=False, border=0, escape=True)
    folded = (
        f'<details class="table" id="table-glossary"><summary>{len(rows)} column names, what each means and '
        f'the tables that have it</summary><div class="scroll">{table}</div></details>'
    )
    return md, f'<section id="glossary"><h2>Glossary</h2>{folded}</section>'


def contents(tables: dict[str, pd.DataFrame]) -> tuple[str, str]:
    """(markdown, html) table of contents: summary, every section, glossary."""
    titles = ["Summary", *[s.title for s in SECTIONS], "Glossary"]
    md = "\n".join(f"- [{t}](#{slug(t)})" for t in titles)
    links = "".join(f'<li><a href="#{slug(t)}">{html.escape(t)}</a></li>' for t in titles)
    return f"## Contents\n\n{md}\n", f'<nav id="contents"><h2>Contents</h2><ol>{links}</ol></nav>'


STYLE = (
    "body{font-family:sans-serif;max-width:1200px;margin:auto;padding:0 1rem}table{border-collapse:collapse;"
    "font-size:12px}td,th{padding:2px 6px;border-bottom:1px solid #ddd;white-space:nowrap}"
    ".scroll{overflow-x:auto;max-width:100%;margin-bottom:1rem}img{max-width:100%}figure{margin:0}"
    "#summary{background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:0 1rem}"
    "#summary li{margin:.2rem 0}nav ol{columns:2}details.table{margin-bottom:1rem}"
    "details.table>summary{cursor:pointer;padding:.2rem 0}"
    "#top{display:flex;justify-content:space-between;align-items:baseline;gap:1rem}#top a{white-space:nowrap}"
)
VIEWER_PORT = 8765  # analysis.view.server's default port

#: served by the viewer (http), "back to the viewer" is the viewer's own list page, whatever its port
VIEWER_LINK_SCRIPT = (
    "<script>if(location.protocol.startsWith('http'))"
    "document.getElementById('viewer-link').setAttribute('href','/')</script>"
)


def viewer_links(source: str) -> str:
    """The link from the report to the study viewer (analysis.view.server), on the title's line; its tooltip says how
    to start the viewer."""
    command = (
        f"python -m analysis.view {source}" if source else "python -m analysis.view <run-or-multirun-dir>"
    )
    return (
        f'<a id="viewer-link" href="http://127.0.0.1:{VIEWER_PORT}/" title="start it with {html.escape(command)}">'
        f"every judgment in the viewer</a>{VIEWER_LINK_SCRIPT}"
    )


def _itables_head() -> str:
    """DataTables (shipped inside the itables wheel) inlined once, so the sortable table works offline."""
    from itables.javascript import generate_init_offline_itables_html  # noqa: PLC0415

    return generate_init_offline_itables_html(str(resources.files("itables") / "html" / "dt_bundle.js"))


def write_report(
    tables: dict[str, pd.DataFrame],
    figures: dict[str, Figure | None],
    out_dir: str | Path,
    source: str = "",
    banner: Sequence[str] = (),
) -> tuple[Path, Path]:
    """Write report.md, report.html, tables/*.csv and figures/*.png and *.pdf under `out_dir`; return both
    reports."""
    out = Path(out_dir)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    (out / "figures").mkdir(exist_ok=True)
    drawn = {name: rendered(fig) for name, fig in figures.items() if fig is not None}
    pngs = {name: png for name, (png, _) in drawn.items()}
    summary = summary_block(tables, banner, pngs)  # sentences name raters by their labels
    tables = {name: rubric_column(table) for name, table in tables.items()}  # judge and rubric: two columns
    for name, table in tables.items():
        write_csv(table, out / "tables" / f"{name}.csv")  # opened in spreadsheets: no formulas
    for name, (
        png,
        pdf,
    ) in drawn.items():  # the PNG as embedded; the same figure as vector graphics, for a paper
        (out / "figures" / f"{name}.png").write_bytes(png)
        (out / "figures" / f"{name}.pdf").write_bytes(pdf)
    parts = [
        summary,
        contents(tables),
        *[_section(s, tables, pngs) for s in SECTIONS],
        glossary_block(tables),
    ]
    title = f"judgescope report — {source}" if source else "judgescope report"
    md_path, html_path = out / "report.md", out / "report.html"
    md_path.write_text(f"# {title}\n\n" + "\n".join(p[0] for p in parts), encoding="utf-8")
    head = _itables_head() if len(tables.get(LEADERBOARD.key, ())) else ""
    body = "\n".join(p[1] for p in parts)
    html_path.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<link rel='icon' href='data:,'><style>{STYLE}</style>{head}</head><body><header id='top'>"
        f"<h1>{html.escape(title)}</h1>{viewer_links(source)}</header>\n"
        f"{body}</body></html>",
        encoding="utf-8",
    )
    return md_path, html_path
