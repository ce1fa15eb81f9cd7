"""Expected scores from token probabilities (the G-Eval scoring rule).

A judge asked for log-probabilities (`expected_scores=true`: OpenAI-compatible `logprobs` + `top_logprobs`,
which vLLM and the embedded model also return) gives, at the token where it wrote a score, the probability
of every alternative token. The expected score of a dimension is Σ_v v · p(v) over the allowed integer
values v of the rubric's range, p normalised over those values (tokens that are not an allowed value, e.g.
a quote or a letter, are left out, as in G-Eval). It sits next to the sampled integer: finer-grained scores
from one call, and a calibration view (how sure the judge was of the integer it wrote).

The score's token is found by locating the value in the raw JSON text (`"<dimension>": <value>`, inside
the label's object in comparative answers) and mapping its character offset to the token that covers it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from judge.parse import Field
from judge.types import TokenLogprob

TOP_LOGPROBS = 20  # alternatives asked per token (the OpenAI maximum)
# the answer from a score's first token on: a number a non-digit (not a decimal point) has ended, or one
# still being written
_CLOSED = re.compile(r'^[\s:"]*(-?\d+)[^\d.][^\d]*$')
_OPEN = re.compile(r'^[\s:"]*(-?\d*)$')


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def from_response(choice_logprobs: Any) -> tuple[TokenLogprob, ...] | None:
    """The tokens of an OpenAI-compatible `choice.logprobs` (`content: [{token, logprob, top_logprobs}]`),
    as an object or a dict; None when the provider sent none."""
    content = _get(choice_logprobs, "content") if choice_logprobs is not None else None
    if not content:
        return None
    out = []
    for item in content:
        token, logprob = str(_get(item, "token") or ""), _get(item, "logprob")
        top = [(str(_get(t, "token")), float(_get(t, "logprob"))) for t in (_get(item, "top_logprobs") or [])]
        if logprob is not None and token not in {t for t, _ in top}:
            top.append((token, float(logprob)))
        out.append(TokenLogprob(token, tuple(top)))
    return tuple(out)


def _allowed(low: float, high: float) -> list[int]:
    return list(range(math.ceil(low), math.floor(high) + 1))


def _extends(written: str, allowed: Sequence[int]) -> bool:
    """Whether an allowed value other than the one spelled so far starts with `written` ("1" on 0-10: 10)."""
    return any(str(v).startswith(written) and str(v) != written for v in allowed)


def _spelled(text: str) -> tuple[str, int | None]:
    """What `text` (the answer from the value's first token on) spells: ("closed", value) when a non-digit
    ended the number, ("open", value or None) while more digits may follow, ("none", None) otherwise."""
    closed = _CLOSED.match(text)
    if closed:
        return "closed", int(closed.group(1))
    open_ = _OPEN.match(text)
    if open_:
        digits = open_.group(1)
        return "open", int(digits) if digits.lstrip("-") else None
    return "none", None


def value_distribution(
    path: TokenLogprob | Sequence[TokenLogprob], low: float, high: float
) -> dict[int, float] | None:
    """P(value) over the allowed integers, normalised; None if no alternative spells one.

    `path` is the answer's tokens from the score's first token on (a single token for the old one-token
    reading). A whole value can take several tokens when the tokenizer splits numbers into digits (Qwen2.5
    writes 10 as "1", "0"): the sampled path is followed digit by digit, and each alternative at a position
    adds the probability of the path to it (the product of the sampled tokens before it and its own). An
    alternative that ends the number, or that no allowed value extends, is that value. One the answer never
    continues and an allowed value could extend (a "1" on 0-10 when the judge wrote 9: 1 or 10?) is left out,
    like a token that is not a value - unless the position offers multi-digit tokens, so the tokenizer writes
    a 10 as one token and the "1" is a 1.
    """
    tokens = [path] if isinstance(path, TokenLogprob) else list(path)
    allowed = _allowed(low, high)
    mass: dict[int, float] = {}
    written, carry = "", 1.0  # the sampled text of the value so far, and its probability
    for i, tok in enumerate(tokens):
        # multi-digit alternatives: this tokenizer writes a 10 as one token, so a "1" is a 1
        merged = any(len(re.sub(r"\D", "", t)) > 1 for t, _ in tok.top)
        sampled: float | None = None
        for text, logprob in tok.top:
            if not math.isfinite(logprob):
                continue
            if text == tok.token:
                sampled = math.exp(logprob)
                continue
            state, value = _spelled(written + text)
            if value is None or value not in allowed:
                continue
            if state == "open" and _extends(str(value), allowed) and not merged:
                continue  # the answer does not say how this one goes on
            mass[value] = mass.get(value, 0.0) + carry * math.exp(logprob)
        if sampled is None:
            break
        written, carry = written + tok.token, carry * sampled
        state, value = _spelled(written)
        if state == "none":
            break
        if value is None:
            continue  # only a sign or a space so far: the digits follow
        if state == "closed" or not _extends(str(value), allowed) or i == len(tokens) - 1:
            if value in allowed:
                mass[value] = mass.get(value, 0.0) + carry
            break
    total = sum(mass.values())
    return {v: p / total for v, p in sorted(mass.items())} if total > 0 else None


def expected_value(path: TokenLogprob | Sequence[TokenLogprob], low: float, high: float) -> float | None:
    """Σ v · p(v) over the allowed integer values (G-Eval), or None."""
    dist = value_distribution(path, low, high)
    return sum(v * p for v, p in dist.items()) if dist else None


def _token_at(tokens: Sequence[TokenLogprob], text: str, offset: int) -> int | None:
    """Index of the token covering character `offset` of `text`; None when the tokens do not spell the text."""
    joined = "".join(t.token for t in tokens)
    shift = joined.find(text) if joined != text else 0
    if shift < 0:
        return None
    pos = 0
    for i, tok in enumerate(tokens):
        if pos <= offset + shift < pos + len(tok.token):
            prefix = tok.token[: offset + shift - pos]
            return i if re.fullmatch(r'[\s:"]*', prefix) else None  # the value starts this token
        pos += len(tok.token)
    return None


def _regions(text: str, labels: Sequence[str] | None) -> dict[str, tuple[int, int]]:
    """Character span of each label's object (comparative), or the whole text under the key ""."""
    if not labels:
        return {"": (0, len(text))}
    starts = {}
    for label in labels:
        match = re.search(rf'"{re.escape(label)}"\s*:\s*\{{', text)
        if match:
            starts[label] = match.end()
    ordered = sorted(starts.items(), key=lambda kv: kv[1])
    ends = [s for _, s in ordered[1:]] + [len(text)]
    return {label: (start, end) for (label, start), end in zip(ordered, ends, strict=True)}


def expected_scores(
    text: str, tokens: Sequence[TokenLogprob], fields: Sequence[Field], labels: Sequence[str] | None = None
) -> dict[str, dict[str, float]]:
    """Per label ("" without labels) and numeric dimension: the expected score, where it can be computed."""
    out: dict[str, dict[str, float]] = {}
    for label, (start, end) in _regions(text, labels).items():
        region = text[start:end]
        values: dict[str, float] = {}
        for f in fields:
            if f.choices or f.low is None or f.high is None:
                continue
            match = re.search(rf'"{re.escape(f.name)}"\s*:\s*', region)
            at = _token_at(tokens, text, start + match.end()) if match else None
            value = expected_value(tokens[at:], f.low, f.high) if at is not None else None
            if value is not None:
                values[f.name] = value
        out[label] = values
    return out
