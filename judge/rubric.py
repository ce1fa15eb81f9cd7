"""Rubrics: a declared spec (dimensions, ranges, direction, output JSON) plus a Jinja2 template.

The spec lives in `conf/rubric/<name>.yaml` and is the one place both the prompt's output format and the
parser read from. Templates render with StrictUndefined, so a missing variable raises instead of silently
producing a prompt with a hole in it.
"""

from __future__ import annotations

import enum
import functools
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta

from judge.parse import Field
from judge.shapes import Probe

BEGIN, END = "<<<", ">>>"
# the output budget: never below the old fixed default; a short rationale adds this much per judged item
MIN_ANSWER_TOKENS = 160
RATIONALE_TOKENS = 120
RATIONALE_INSTRUCTION = (
    'Before the scores, give a short rationale (at most two sentences): make "rationale" the first key of '
    'each JSON object in your answer, e.g. {"rationale": "<why>", ...}.'
)
_DELIMITER_RUN = re.compile(r"<{3,}|>{3,}")  # any run, so "<<<<<" cannot leave a "<<<" behind


class RubricKind(enum.Enum):
    """What a rubric asks the judge for: scores per dimension, a preference between two texts, or a match."""

    scores = "scores"
    preference = "preference"
    match = "match"


@dataclass(frozen=True)
class Dimension:
    """One thing the judge rates: a score in [low, high] or a choice among `choices` (a rubric YAML's
    `dimensions:` item; also the typed config's, experiments.config)."""

    name: str
    description: str = ""
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    higher_is_better: bool = True

    def __post_init__(self) -> None:
        # a composed config hands a list: a tuple keeps the rubric hashable and its `version` (a repr) stable
        object.__setattr__(self, "choices", tuple(str(c) for c in self.choices))

    @property
    def field(self) -> Field:
        return Field(self.name, self.low, self.high, self.choices)


@dataclass(frozen=True, kw_only=True)
class Rubric:
    """A rubric spec (conf/rubric/<name>.yaml): its template, what it asks for and its dimensions. The one
    rubric model: the typed config (experiments.config) declares `rubric` with it, so a study's rubric is this
    object from the moment its config is loaded."""

    name: str
    template: str
    kind: RubricKind = RubricKind.scores
    system: str
    dimensions: tuple[Dimension, ...] = ()
    add_overall: bool = False  # EchoReview: also report the mean of the dimensions as "overall"
    item_noun: str = "QUESTION"  # how the template names what is judged (pairwise / comparative)
    rationale: bool = False  # the judge writes a short rationale before its scores (stored, never scored)

    def __post_init__(self) -> None:
        # a composed config hands lists (and a mapping's kind may be its name): tuples keep `version` stable
        object.__setattr__(self, "kind", RubricKind(getattr(self.kind, "value", self.kind)))
        object.__setattr__(self, "dimensions", tuple(self.dimensions))

    @functools.cached_property
    def fields(self) -> tuple[Field, ...]:
        """The parser's view of the dimensions (built once: every parsed answer uses it)."""
        return tuple(d.field for d in self.dimensions)

    @functools.cached_property
    def _sources(self) -> dict[str, str]:
        """The template and the macros it imports, read once per Rubric: the prompts and `version` both come
        from this text, so a template edited during a run can never get the other's version."""
        return {name: _template_source(name) for name in (self.template, "_common.jinja")}

    @functools.cached_property
    def version(self) -> str:
        """Hash of the template text and everything else that shapes the prompt or its parsing."""
        parts = [*self._sources.values(), self.system, self.item_noun, repr(self.dimensions)]
        blob = "\n".join(parts + ([RATIONALE_INSTRUCTION] if self.rationale else []))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]

    @functools.cached_property
    def _compiled(self) -> jinja2.Template:
        """Compiled once per Rubric from `_sources` (no file look-up per render, not even for the import)."""
        return _make_environment(jinja2.DictLoader(self._sources), auto_reload=False).get_template(
            self.template
        )

    @functools.cached_property
    def inputs(self) -> frozenset[str]:
        """The variables the template needs (its input contract), read from the template itself."""
        env = _make_environment(jinja2.DictLoader(self._sources))
        needed = jinja2.meta.find_undeclared_variables(env.parse(self._sources[self.template]))
        return frozenset(needed) - {"rubric"} - set(env.globals)

    def render(self, **variables: Any) -> list[dict[str, str]]:
        """The chat messages for one prompt."""
        text = self._compiled.render(rubric=self, **variables).strip() + "\n"
        if self.rationale:
            text += RATIONALE_INSTRUCTION + "\n"
        return [{"role": "system", "content": self.system}, {"role": "user", "content": text}]

    def answer_tokens(self, labels: Sequence[str] | None) -> int:
        """The output budget a complete answer needs: the longest answer the spec allows, pretty-printed in
        a code fence (as models often write it), at 2 characters per token, plus the rationales."""
        one: dict[str, Any] = {
            d.name: max(d.choices, key=len) if d.choices else int(d.high or 0) for d in self.dimensions
        }
        answer = {label: one for label in labels} if labels else one
        text = "```json\n" + json.dumps(answer, indent=2) + "\n```"
        rationales = RATIONALE_TOKENS * (len(labels) if labels else 1) if self.rationale else 0
        return max(MIN_ANSWER_TOKENS, len(text) // 2 + 32 + rationales)


def _value_schema(d: Dimension) -> dict[str, Any]:
    if d.choices:
        return {"type": "string", "enum": list(d.choices)}
    assert d.low is not None and d.high is not None, f"{d.name}: a score needs low and high"
    return {"type": "integer", "enum": list(range(int(d.low), int(d.high) + 1))}


def _object_schema(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties),
        "additionalProperties": False,
    }


def response_format(rubric: Rubric, labels: Sequence[str] | None = None) -> dict[str, Any]:
    """OpenAI-style structured-output request built from the same spec the parser checks.

    With labels (comparative mode) the answer is one object per label. Providers that support
    structured output (OpenAI, Gemini, Ollama, vLLM, the embedded local model) then return valid JSON.
    """
    values = {d.name: _value_schema(d) for d in rubric.dimensions}
    inner = _object_schema({"rationale": {"type": "string"}, **values} if rubric.rationale else values)
    schema = _object_schema({label: inner for label in labels}) if labels else inner
    return {"type": "json_schema", "json_schema": {"name": rubric.name, "strict": True, "schema": schema}}


def rubric_from_config(cfg: Mapping[str, Any]) -> Rubric:
    """A Rubric from plain data (a rubric YAML read as a mapping); what it leaves out takes the dataclass's own
    defaults, so a default lives in one place."""
    dims = tuple(Dimension(**d) for d in cfg.get("dimensions") or ())
    return Rubric(**{**cfg, "dimensions": dims})


def neutralise(text: str) -> str:
    """Break any delimiter inside untrusted text, so a paper cannot close its block and address the judge.

    The `in` tests skip the regex for the usual text without a delimiter (the regex costs ~50 us per paper).
    A stand-in for a text (judge.shapes: a prompt shape's skeleton) gives its marker."""
    if isinstance(text, Probe):
        return text.neutral_marker()
    text = str(text)
    if BEGIN not in text and END not in text:
        return text
    return _DELIMITER_RUN.sub(lambda m: " ".join(m.group()), text)


def render_template(name: str, **variables: Any) -> str:
    """Render any template under rubrics/ (generation prompts use this; rubrics use Rubric.render)."""
    return _environment().get_template(name).render(**variables).strip() + "\n"


def template_version(*names: str) -> str:
    """Hash of the named templates' text: part of every cache key, so editing a prompt invalidates it."""
    blob = "\n".join(_template_source(n) for n in names)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:12]


def template_text(name: str) -> str:
    """A rubric's template text as the study read it (a packaged name or your own file's absolute path): the
    analysis shows annotators the rubric's own wording, also for a rubric of a `hydra.searchpath` folder."""
    return _template_source(name)


def _template_source(name: str) -> str:
    """A template under rubrics/ by name, or your own template file by absolute path (a new rubric is its
    YAML plus its template; it may still `{% import "_common.jinja" as c %}`)."""
    if Path(name).is_absolute():
        return Path(name).read_text(encoding="utf-8")
    return resources.files("rubrics").joinpath(name).read_text(encoding="utf-8")


def _make_environment(loader: jinja2.BaseLoader, *, auto_reload: bool = True) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        auto_reload=auto_reload,
    )
    env.filters["neutral"] = neutralise
    env.globals["example_json"] = example_json
    return env


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    """Every template under rubrics/ (generation prompts; a Rubric compiles its own from its sources)."""
    return _make_environment(jinja2.PackageLoader("rubrics", ""))


def example_json(dimensions: Sequence[Dimension]) -> str:
    """The output format shown in the prompt, derived from the spec the parser checks."""
    parts = []
    for d in dimensions:
        hint = "|".join(f'"{c}"' for c in d.choices) if d.choices else f"<integer {d.low:g}-{d.high:g}>"
        parts.append(f'"{d.name}": {hint}')
    return "{" + ", ".join(parts) + "}"
