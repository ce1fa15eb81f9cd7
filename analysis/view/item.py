"""The viewer's item page: one candidate's rows from every judge, mode and sample, its prompts as sent and the
human labels, as pandas frames (analysis.view.server imports this module when an item page is first asked
for, so the list page serves without pandas; the static bundle renders the same context)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from analysis.stats.scores import perturbation_names
from analysis.view.data import Study
from core.spellings import ORIGINAL

BACKGROUND = re.compile(r"<<<PAPER 1>>>.*<<<END PAPER \d+>>>\n?", re.DOTALL)
RUN_KEYS = ["judge", "rubric", "mode", "run_id", "prompt_id"]


def split_background(text: str) -> tuple[str, str, str]:
    """(before, background papers, after) of a prompt message, so the page can fold the long middle."""
    match = BACKGROUND.search(text)
    if not match:
        return text, "", ""
    return text[: match.start()], match.group(0), text[match.end() :]


def _cell(values: pd.Series) -> str:
    """A score cell: the mean over samples and each sample's value."""
    scores = values.dropna()
    if scores.empty:
        return "–"
    each = ", ".join(f"{v:g}" for v in scores)
    return f"{scores.mean():.2f} ({each})" if len(scores) > 1 else f"{scores.iloc[0]:g}"


def _value_cell(part: pd.DataFrame) -> str:
    """A rater's cell: its scores (`_cell`) of answers that parsed, as the list and the analysis count them,
    with an unparsed answer's score shown apart; or a pairwise rater's preferences (a: this text, b: the
    other, tie), one per sample, since a pairwise row has a preference and no score."""
    if part["score"].notna().any():
        unparsed = pd.Series(False, index=part.index)
        if "parse_ok" in part:  # unknown (NA) counts as parsed, as in analysis.stats.scores.usable_mask
            unparsed = part["parse_ok"].astype("boolean").eq(False).fillna(False).astype(bool)
        cell = _cell(part.loc[~unparsed, "score"])
        apart = part.loc[unparsed, "score"].dropna()
        return cell + (f" [unparsed: {', '.join(f'{v:g}' for v in apart)}]" if len(apart) else "")
    preferences = part["preference"].dropna().astype(str)
    return "/".join(preferences) if len(preferences) else "–"


def perturbed(values: pd.Series) -> np.ndarray:
    """Each row's robustness perturbation (`robustness.perturbation_names`, the analysis's one spelling), ""
    when unperturbed."""
    names = perturbation_names(values)
    return np.where(names == ORIGINAL, "", names)


def score_grid(rows: pd.DataFrame, humans: pd.DataFrame) -> pd.DataFrame:
    """Dimension × (judge · rubric · mode [· perturbed: p], then each annotator): every rater's score side by
    side; a robustness perturbation is a column of its own, never pooled with the unperturbed scores."""
    shown = pd.Series(perturbed(rows["perturbation"]) if "perturbation" in rows else "", index=rows.index)
    judged = rows.assign(
        rater=rows["judge"]
        + " · "
        + rows["rubric"].fillna("")
        + " · "
        + rows["mode"]
        + shown.map(lambda p: f" · perturbed: {p}" if p else "")
    )
    cells = {key: _value_cell(part) for key, part in judged.groupby(["dimension", "rater"], sort=True)}
    grid = pd.Series(cells, dtype=object).unstack() if cells else pd.DataFrame()
    grid = grid.rename_axis(index="dimension", columns="rater")
    for annotator, part in humans.groupby(
        "annotator"
    ):  # repeated labels (refused at ingest) shown, not a 500
        shown = part.groupby("dimension")["score"].agg(
            lambda s: " / ".join(f"{v:g}" for v in s.dropna()) or None
        )
        grid["human:" + str(annotator)] = shown.reindex(grid.index)
    return grid.fillna("–")


def _text(value: Any) -> str:
    return "" if value is None or pd.isna(value) else str(value)


def _sample(part: pd.DataFrame) -> dict[str, Any]:
    """One sample of one prompt: parse status, its values for this candidate, and the raw answer."""
    first = part.iloc[0]
    values = part["score"].where(part["score"].notna(), part["preference"])
    return {
        "sample_idx": int(first["sample_idx"]),
        "parse_ok": _text(first["parse_ok"]) != "False",
        "error": _text(first["error"]),
        "finish_reason": _text(first["finish_reason"]),
        "raw": _text(first["raw"]),
        "values": " · ".join(
            f"{d} {v:g}" if isinstance(v, float) else f"{d} {v}"
            for d, v in zip(part["dimension"], values, strict=True)
            if pd.notna(v)
        ),
    }


def judgments(rows: pd.DataFrame, study: Study) -> list[dict[str, Any]]:
    """One block per prompt that showed this candidate: where it was shown, the messages, the samples."""
    keys = {(_text(r), _text(p)) for r, p in zip(rows["run_id"], rows["prompt_id"], strict=True)}
    messages = study.prompt_messages(sorted(keys))  # a row without run_id (optional): no prompt to match
    references = study.reference_scores(rows) if len(rows) else {}
    blocks = []
    for key, part in rows.groupby(RUN_KEYS, dropna=False, sort=True):
        first = part.iloc[0]
        sent = messages.get((_text(first["run_id"]), _text(first["prompt_id"])), [])
        blocks.append(
            {
                # the reference's scores in the same prompt, beside this candidate's (none: not shown there)
                "reference": ""
                if first["source"] == "reference"
                else references.get(tuple(map(_text, key)), ""),
                **{k: (_text(v) or None) for k, v in zip(RUN_KEYS, key, strict=True)},  # NaN: None
                "label": _text(first["label"]),
                "order": _text(first["order"]),
                "perturbation": perturbed(part["perturbation"].iloc[:1])[0],
                "position": None if pd.isna(first["position"]) else int(first["position"]),
                "messages": [
                    {"role": m.get("role", ""), "parts": split_background(str(m.get("content", "")))}
                    for m in sent
                ],
                "samples": [_sample(s) for _, s in part.groupby("sample_idx", sort=True)],
            }
        )
    return blocks


def item_context(study: Study, instance_id: str, candidate_id: str) -> dict[str, Any]:
    """Everything an item page shows (the served page and the static bundle's render the same template)."""
    rows = study.item_rows(instance_id, candidate_id)
    humans = study.human_rows(instance_id, candidate_id)
    return {
        "instance_id": instance_id,
        "candidate_id": candidate_id,
        "found": len(rows) > 0,
        "source": rows["source"].iloc[0] if len(rows) else "",
        "text": rows["candidate_text"].iloc[0] if len(rows) else "",
        "grid": score_grid(rows, humans) if len(rows) else pd.DataFrame(),
        "blocks": judgments(rows, study),
        "has_prompts": study.has_prompts,
        "root": str(study.root),
    }
