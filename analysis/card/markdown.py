"""A reliability card (the dict of `analysis.card.build.make_card`) as markdown: the same headings in the same
order for every judge; a missing measure says "not measured" and why, an unknown cost says "unknown"."""

from __future__ import annotations

from typing import Any

from analysis.stats.null_ranges import FLAGS
from analysis.tables.declarations import card_specs  # the declared card fields


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
    parse = f"{card['parse_rate']:.1%} of the answered calls" if card["parse_rate"] is not None else "unknown"
    if card.get("provider_failed"):  # no answer to parse: not a parse failure
        parse += f"; {card['provider_failed']} calls failed at the provider"
    head = [f"# Reliability card: {card['judge']}", ""]
    if card.get("completeness"):  # the completeness banner first, as on the report's first screen
        head += [*(f"> {line}  " for line in card["completeness"]), ""]
    head += [
        f"- model: {', '.join(card['models']) or 'unknown'}",
        f"- rubric version: {versions}",
        f"- dataset hash: {', '.join(card['dataset_hashes']) or 'unknown'}",
        f"- modes: {', '.join(card['modes'])}; rows: {card['rows']}",
        f"- parse rate: {parse}",
        f"- cost: {cost}",
        f"- latency: {latency}",
    ]
    flagged = [
        f"{f['field']} {f['mode']} {f['dimension']} {f['group']}".strip()
        for f in card[FLAGS.key]
        if f["flag"]
    ]
    tested = sum(1 for f in card[FLAGS.key] if f.get("p") is not None)
    family = f" (Holm across this card's {tested} tests, family-wise error 5%)" if tested else ""
    head.append(f"- flags: {'; '.join(flagged) if flagged else 'none'}{family}")
    body = []
    for spec in card_specs():  # each declared field under its title (`registry.CardField`)
        assert spec.card is not None
        records = card.get(spec.key) or []
        body += ["", f"## {spec.card.title}", ""]
        body.append(_table(records) if records else "Not measured.")
    notes = ["", "## Notes", "", *(f"- {n}" for n in card["notes"])] if card["notes"] else []
    return "\n".join(head + body + notes) + "\n"
