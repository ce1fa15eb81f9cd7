"""A reliability card (the dict of `analysis.card.make_card`) as markdown: the same headings in the same
order for every judge; a missing measure says "not measured" and why, an unknown cost says "unknown"."""

from __future__ import annotations

from typing import Any

SECTIONS: tuple[tuple[str, str], ...] = (
    ("human_agreement", "Agreement with the human consensus (quadratic-weighted κ, Spearman ρ)"),
    ("self_consistency", "Self-consistency across samples"),
    ("position_bias", "Position bias (comparative: the position furthest from the unbiased win rate)"),
    ("length_bias", "Length bias (Spearman ρ of score vs length in words)"),
    ("self_preference", "Self-preference (own model family vs others; p Welch, p_q its BH q-value)"),
    ("mode_shift", "Mode shift (independent → comparative win rate; McNemar p and its BH q-value)"),
    ("robustness", "Robustness (score shift under perturbation, flip rate)"),
    ("latent_competence", "Latent-model competence (accuracy vs the latent label)"),
    ("corrected_estimates", "Corrected estimates (judge-only, human-only and prediction-powered, 95% CIs)"),
    ("calibration", "Calibration to the human scale (error before / after a cross-fitted isotonic map)"),
    (
        "flags",
        "Flags (outside the 95% range an unbiased judge of the same self-consistency shows, simulated)",
    ),
)


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _table(records: list[dict[str, Any]]) -> str:
    cols = list(records[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_fmt(r[c]) for c in cols) + " |" for r in records]
    return "\n".join(lines)


def card_markdown(card: dict[str, Any]) -> str:
    """The card's markdown text."""
    lat = card["latency_s"]
    latency = (
        f"median {lat['median']:.2f} s, p90 {lat['p90']:.2f} s over {lat['calls']} uncached calls"
        if lat["median"] is not None
        else "unknown (no uncached call)"
    )
    versions = ", ".join(f"{k} {'/'.join(v)}" for k, v in card["rubric_versions"].items()) or "unknown"
    cost = f"${card['cost_usd']:.4f}" if card["cost_usd"] is not None else "unknown"
    parse = f"{card['parse_rate']:.1%}" if card["parse_rate"] is not None else "unknown"
    head = [
        f"# Reliability card: {card['judge']}",
        "",
        f"- model: {', '.join(card['models']) or 'unknown'}",
        f"- rubric version: {versions}",
        f"- dataset hash: {', '.join(card['dataset_hashes']) or 'unknown'}",
        f"- modes: {', '.join(card['modes'])}; rows: {card['rows']}",
        f"- parse rate: {parse}",
        f"- cost: {cost}",
        f"- latency: {latency}",
    ]
    flagged = [
        f"{f['field']} {f['mode']} {f['dimension']} {f['group']}".strip() for f in card["flags"] if f["flag"]
    ]
    head.append(f"- flags: {'; '.join(flagged) if flagged else 'none'}")
    body = []
    for field, title in SECTIONS:
        body += ["", f"## {title}", ""]
        body.append(_table(card[field]) if card[field] else "Not measured.")
    notes = ["", "## Notes", "", *(f"- {n}" for n in card["notes"])] if card["notes"] else []
    return "\n".join(head + body + notes) + "\n"
