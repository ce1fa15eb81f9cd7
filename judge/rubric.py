"""Rubrics: a declared spec (dimensions, ranges, direction, wording, output JSON) plus a Jinja2 template.

The spec lives in `conf/rubric/<name>.yaml` (core.rubric.RubricSpec) and is the one place the prompt's prose,
its output format and the parser read from. A template renders in two passes: `[[ ]]` / `[% %]` write the
spec's prose in once per rubric (in the order of its dimensions), `{{ }}` / `{% %}` render each prompt. Both
render with StrictUndefined, so a missing variable raises instead of silently producing a prompt with a hole.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta

from core.rubric import Dimension as Dimension  # the spec's parts, re-exported where a prompt's user looks
from core.rubric import RubricKind as RubricKind
from core.rubric import RubricSpec, spec_from_mapping
from judge.parse import Field
from judge.shapes import Probe, captured, written

BEGIN, END = "<<<", ">>>"
# the output budget: never below the old fixed default; a short rationale adds this much per judged item
MIN_ANSWER_TOKENS = 160
RATIONALE_TOKENS = 120
RATIONALE_INSTRUCTION = (
    'Before the scores, give a short rationale (at most two sentences): make "rationale" the first key of '
    'each JSON object in your answer, e.g. {"rationale": "<why>", ...}.'
)
_DELIMITER_RUN = re.compile(r"<{3,}|>{3,}")  # any run, so "<<<<<" cannot leave a "<<<" behind


@dataclass(frozen=True, kw_only=True)
class Rubric(RubricSpec):
    """A rubric spec (core.rubric.RubricSpec: the one rubric model) with its prompt: the typed config
    (experiments.config) declares `rubric` with it, so a study's rubric is this object from the moment its
    config is loaded. It adds no field: what a run recorded reads back as the same spec (core.run_config)."""

    @functools.cached_property
    def fields(self) -> tuple[Field, ...]:
        """The parser's view of the dimensions (built once: every parsed answer uses it)."""
        return tuple(Field(d.name, d.low, d.high, d.choices) for d in self.dimensions)

    @functools.cached_property
    def _raw_sources(self) -> dict[str, str]:
        """The template and the macros it imports, read once per Rubric: the prompts and `version` both come
        from this text, so a template edited during a run can never get the other's version."""
        return {name: _template_source(name) for name in (self.template, "_common.jinja")}

    @functools.cached_property
    def _sources(self) -> dict[str, str]:
        """The templates with this rubric's prose written in (pass 1, `[[ ]]` / `[% %]`: the dimensions'
        names, ranges, descriptions and anchors from the YAML, in this rubric's order): Jinja text that pass 2
        renders per prompt, and the text `version` hashes."""
        return self._write(self)

    def _write(self, spec: RubricSpec) -> dict[str, str]:
        """Pass 1 of the raw templates for `spec` (this rubric, or it with one dimension's prose left out)."""
        return {
            name: _spec_environment().from_string(text).render(rubric=spec)
            for name, text in self._raw_sources.items()
        }

    @functools.cached_property
    def _hashed_dimensions(self) -> str:
        """The dimensions as `version` hashes them: each text once. A description or anchors that pass 1
        writes into the template are hashed there (the templates' text, as before the prose moved into the
        YAML: every version, and so every cache key, stayed the same); ones a template reads per prompt are
        hashed here."""
        kept, extra = [], []
        for i, d in enumerate(self.dimensions):
            kept.append(replace(d, description="") if d.name in self.written_descriptions else d)
            if d.anchors and not self._written_without(i, anchors={}):
                extra.append(f"{d.name}.anchors={d.anchors!r}")
        return repr(tuple(kept)) + "".join(extra)

    @functools.cached_property
    def written_descriptions(self) -> frozenset[str]:
        """The dimensions whose description pass 1 writes into the template (the template's own text, as it
        was before the prose moved into the YAML; experiments.shard.study_id leaves them out as it leaves out
        template text)."""
        return frozenset(
            d.name
            for i, d in enumerate(self.dimensions)
            if d.description and self._written_without(i, description="")
        )

    def _written_without(self, i: int, **blank: Any) -> bool:
        """Whether pass 1 writes dimension `i`'s field(s) `blank` (the text changes when they are left out)."""
        dims = list(self.dimensions)
        dims[i] = replace(dims[i], **blank)
        return self._write(replace(self, dimensions=tuple(dims))) != self._sources

    @functools.cached_property
    def version(self) -> str:
        """Hash of the template text (prose written in) and everything else that shapes the prompt or its
        parsing."""
        parts = [*self._sources.values(), self.system, self.item_noun, self._hashed_dimensions]
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
        # plain text first: a skeleton's render (judge.shapes) gives a logged `Captured`, `strip` is ours
        text = str.__str__(self._compiled.render(rubric=self, **variables)).strip() + "\n"
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
    rubric = spec_from_mapping(cfg, Rubric)
    assert isinstance(rubric, Rubric)
    return rubric


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
        finalize=written,  # a text neutralised for a prompt shape's skeleton: written out, nothing else
    )
    env.filters["neutral"] = neutralise
    env.globals["example_json"] = example_json
    env.concat = captured  # type: ignore[method-assign]  # a captured text holding one: logged (judge.shapes)
    return env


@functools.lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    """Every template under rubrics/ (generation prompts; a Rubric compiles its own from its sources)."""
    return _make_environment(jinja2.PackageLoader("rubrics", ""))


@functools.lru_cache(maxsize=1)
def _spec_environment() -> jinja2.Environment:
    """Pass 1: writes a rubric's prose into its template. Its delimiters (`[[ ]]`, `[% %]`, `[# #]`) leave
    the per-prompt Jinja (`{{ }}`, `{% %}`) as text for pass 2."""
    env = jinja2.Environment(
        block_start_string="[%",
        block_end_string="%]",
        variable_start_string="[[",
        variable_end_string="]]",
        comment_start_string="[#",
        comment_end_string="#]",
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.globals.update(criteria=criteria, count=count, scale=scale, alternatives=alternatives)
    return env


_WORDS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def count(dimensions: Sequence[Dimension]) -> str:
    """How many criteria, in words ("three")."""
    return _WORDS[len(dimensions)] if len(dimensions) < len(_WORDS) else str(len(dimensions))


def scale(dimensions: Sequence[Dimension]) -> str:
    """The one range the dimensions share ("0 to 3"); a template that says so needs them to share one."""
    ranges = {(d.low, d.high) for d in dimensions}
    if len(ranges) != 1 or None in next(iter(ranges)):
        raise ValueError(f"dimensions {', '.join(d.name for d in dimensions)}: no one shared score range")
    low, high = next(iter(ranges))
    return f"{low:g} to {high:g}"


def alternatives(choices: Sequence[str]) -> str:
    """A choice's answers as the prompt asks for them: '"yes" or "no"'."""
    quoted = [f'"{c}"' for c in choices]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def criteria(dimensions: Sequence[Dimension], inline: bool = False) -> str:
    """Each dimension's line `name - description` with its anchors, in the order given: below it, indented
    (`  0: ...`), or `inline` after it in parentheses (`(0: ...; 5: ...)`)."""
    lines = []
    for d in dimensions:
        head = f"{d.name} - {d.description}"
        anchors = [f"{k}: {v}" for k, v in d.anchors.items()]
        if inline:
            lines.append(f"{head} ({'; '.join(anchors)})" if anchors else head)
        else:
            lines += [head, *(f"  {a}" for a in anchors)]
    return "\n".join(lines)


def example_json(dimensions: Sequence[Dimension]) -> str:
    """The output format shown in the prompt, derived from the spec the parser checks."""
    parts = []
    for d in dimensions:
        hint = "|".join(f'"{c}"' for c in d.choices) if d.choices else f"<integer {d.low:g}-{d.high:g}>"
        parts.append(f'"{d.name}": {hint}')
    return "{" + ", ".join(parts) + "}"
