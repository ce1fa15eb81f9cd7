"""Write the report: report.md, report.html (figures embedded as PNG), tables/*.csv, figures/*.png.

A section whose table or figure is absent or empty says why in a sentence instead of showing an empty
table or heatmap (e.g. a run with a single judge has no judge–judge agreement).
"""

from __future__ import annotations

import base64
import html
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis import latent

MD_ROWS = 60  # longer tables are cut in report.md (never in the CSV or the HTML)
NO_HUMANS = "No human labels were given (`--humans FILE`)."
ONE_RATER = "Only one rater (a single judge in a single mode, and no human labels): agreement needs two."


@dataclass(frozen=True)
class Section:
    title: str
    text: str
    tables: tuple[str, ...]
    figure: str | None = None
    missing: str = "Nothing to report for these runs."


SECTIONS: tuple[Section, ...] = (
    Section(
        "Runs",
        "One row per run: rows, prompts, share of rows with a verdict, cost, cached share.",
        ("overview",),
    ),
    Section(
        "Win / tie / loss against the reference",
        "Per judge, mode, generator and dimension: share of instances where the generator's best-of-K "
        "beats, ties or loses to the reference, with 95% bootstrap CIs over instances.",
        ("winrate",),
        "winrate",
    ),
    Section(
        "Judges combined",
        "Candidate scores averaged over judges (`mean`), or per-judge verdicts "
        "combined (`unanimous`, `majority`).",
        ("winrate_combined",),
        None,
        "Only one judge: there is nothing to combine.",
    ),
    Section(
        "Mode shift (the novelty illusion)",
        "Independent → comparative, same judge and instances: Δwin and Δtie with paired bootstrap CIs, "
        "McNemar's exact test on win / not-win.",
        ("mode_shift",),
        "mode_shift",
        "No judge ran both independent and comparative mode, so there is no mode shift to measure.",
    ),
    Section(
        "Judge vs human preference",
        "Judge win rate minus the human majority's on the same "
        "(instance, generator, dimension), with paired CIs.",
        ("preference_gap",),
        None,
        NO_HUMANS,
    ),
    Section(
        "Agreement on candidate scores",
        "Candidate scores rounded to the rubric scale; raters are "
        "judge [mode] and human annotators. Last row: Krippendorff's α (ordinal) over all raters.",
        ("score_agreement",),
        "score_agreement",
        ONE_RATER,
    ),
    Section(
        "Agreement on winners",
        "Win / tie / loss per (instance, generator, dimension), by pair kind "
        "(expert–expert, expert–judge, judge–judge), then every pair.",
        ("winner_agreement_by_kind", "winner_agreement"),
        "winner_agreement",
        ONE_RATER,
    ),
    Section(
        "Human reliability",
        "Fleiss' κ and Krippendorff's α (ordinal) among annotators, per dimension.",
        ("human_reliability",),
        None,
        NO_HUMANS,
    ),
    Section(
        "Cross-dimension alignment",
        "Human majority winner on one dimension vs a judge's winner on "
        "another (e.g. non-obviousness vs source-boundedness).",
        ("alignment",),
        None,
        NO_HUMANS,
    ),
    Section(latent.SECTION_TITLE, latent.SECTION_TEXT, latent.SECTION_TABLES, None, latent.SECTION_MISSING),
    Section(
        "Score summaries",
        "Candidate scores (mean over samples) per judge, mode, source, dimension.",
        ("score_summary",),
        "score_distributions",
    ),
    Section(
        "Self-consistency",
        "Over the samples of one prompt: mean sd, share of prompts whose samples "
        "disagree, Krippendorff's α with samples as raters.",
        ("self_consistency",),
    ),
    Section(
        "Position and order bias",
        "Comparative: mean score and win rate by shown position (vs the "
        "rate expected without bias). Pairwise: first-shown preferred, ties, flips with the order.",
        ("position_bias", "pairwise_bias"),
        None,
        "No comparative or pairwise runs.",
    ),
    Section(
        "Length bias",
        "Spearman ρ of candidate score vs length in words (`rho_better` > 0: longer judged better).",
        ("length_bias",),
        None,
        "The results have no candidate_text column.",
    ),
    Section(
        "Self-preference",
        "A judge's mean score for its own model family's generations vs others'.",
        ("self_preference",),
        None,
        "No judge scored generations from its own model family (see analysis.consistency.model_family).",
    ),
)


def _fmt(value: object) -> str:
    if isinstance(value, float | np.floating):
        return "" if np.isnan(value) else f"{value:.3f}"
    return str(value).replace("|", "\\|")


def markdown_table(frame: pd.DataFrame, max_rows: int = MD_ROWS) -> str:
    """A GitHub-markdown table, floats to 3 decimals, cut after `max_rows` with a note."""
    head = frame.head(max_rows)
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in head.itertuples(index=False)]
    if len(frame) > max_rows:
        lines.append(f"\n*{max_rows} of {len(frame)} rows shown; the CSV has all.*")
    return "\n".join(lines)


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


def _section(section: Section, tables: dict[str, pd.DataFrame], pngs: dict[str, bytes]) -> tuple[str, str]:
    """(markdown, html) of one section."""
    present = [t for t in section.tables if t in tables and len(tables[t])]
    md, out = (
        [f"## {section.title}", "", section.text, ""],
        [f"<h2>{html.escape(section.title)}</h2>", f"<p>{html.escape(section.text)}</p>"],
    )
    if not present:
        return "\n".join([*md, section.missing, ""]), "\n".join([*out, f"<p><em>{section.missing}</em></p>"])
    if section.figure and section.figure in pngs:
        md += [f"![{section.title}](figures/{section.figure}.png)", ""]
        data = base64.b64encode(pngs[section.figure]).decode()
        out.append(f'<img alt="{html.escape(section.title)}" src="data:image/png;base64,{data}">')
    for name in present:
        md += [f"`tables/{name}.csv`", "", markdown_table(tables[name]), ""]
        out += [
            f"<p><code>tables/{name}.csv</code></p>",
            tables[name].to_html(index=False, na_rep="", float_format=lambda v: f"{v:.3f}", border=0),
        ]
    return "\n".join(md), "\n".join(out)


def write_report(tables: dict[str, pd.DataFrame], figures: dict[str, Figure | None], out_dir: str | Path,
                 source: str = "") -> tuple[Path, Path]:  # fmt: skip
    """Write report.md, report.html, tables/*.csv and figures/*.png under `out_dir`; return both reports."""
    out = Path(out_dir)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    (out / "figures").mkdir(exist_ok=True)
    for name, table in tables.items():
        table.to_csv(out / "tables" / f"{name}.csv", index=False)
    pngs = {name: _png(fig) for name, fig in figures.items() if fig is not None}
    for name, data in pngs.items():
        (out / "figures" / f"{name}.png").write_bytes(data)
    parts = [_section(s, tables, pngs) for s in SECTIONS]
    title = f"judgescope report — {source}" if source else "judgescope report"
    md_path, html_path = out / "report.md", out / "report.html"
    md_path.write_text(f"# {title}\n\n" + "\n".join(p[0] for p in parts), encoding="utf-8")
    style = (
        "body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:collapse;"
        "font-size:12px}td,th{padding:2px 6px;border-bottom:1px solid #ddd}img{max-width:100%}"
    )
    body = "\n".join(p[1] for p in parts)
    html_path.write_text(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{style}</style></head><body><h1>{html.escape(title)}</h1>\n{body}</body></html>",
        encoding="utf-8",
    )
    return md_path, html_path
