"""Structured output for the embedded model: the schema skeleton, and real constrained answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from judge.local.schema import Choice, UnsupportedSchema, schema_segments
from judge.parse import parse_labelled, parse_object
from judge.rubric import response_format, rubric_from_config

CONF = Path(__file__).resolve().parent.parent / "conf" / "rubric"


def rubric(name: str):  # type: ignore[no-untyped-def]
    return rubric_from_config(yaml.safe_load((CONF / f"{name}.yaml").read_text()))


def test_segments_of_a_flat_schema() -> None:
    schema = response_format(rubric("narrowness"))["json_schema"]["schema"]
    assert schema_segments(schema) == [
        '{"source_boundedness": ',
        Choice(("0", "1", "2", "3")),
        ', "diagnostic_framing": ',
        Choice(("0", "1", "2", "3")),
        "}",
    ]


def test_segments_of_nested_and_string_enums() -> None:
    nested = response_format(rubric("pairwise"), ["Q1", "Q2"])["json_schema"]["schema"]
    segs = schema_segments(nested)
    assert segs[0] == '{"Q1": {"novelty": ' and segs[1] == Choice(('"a"', '"b"', '"tie"'))
    assert segs[2] == '}, "Q2": {"novelty": ' and segs[-1] == "}}"


def test_unsupported_schema_is_refused() -> None:
    with pytest.raises(UnsupportedSchema):
        schema_segments({"type": "object", "properties": {"x": {"type": "string"}}})


@pytest.mark.slow
def test_real_structured_answers_parse_through_litellm() -> None:
    """Real calls to the embedded model via litellm: every answer parses and stays in range."""
    import litellm

    from judge.local.provider import register

    register()
    rq = rubric("review_quality")
    background = [{"title": "A new parser", "text": "We present a parser for noisy text."}]
    items = [
        {"label": "Q1", "text": "Good paper."},
        {"label": "Q2", "text": "The evaluation lacks baselines."},
    ]
    messages = rq.render(background=background, items=items, comparative=True)
    fmt = response_format(rq, ["Q1", "Q2"])
    texts = []
    for seed in (0,):  # one seed, asked twice below: parsing and determinism need no second sampled answer
        resp = litellm.completion(
            model="local/smollm2-135m",
            messages=messages,
            temperature=0.1,
            seed=seed,
            max_tokens=200,
            response_format=fmt,
        )
        texts.append(resp.choices[0].message.content)
        assert resp.usage.prompt_tokens > 100 and resp.usage.completion_tokens > 0
    parsed = parse_labelled(texts[0], ["Q1", "Q2"], rq.fields)
    assert all(p.ok for p in parsed.values()), texts[0]
    assert set(json.loads(texts[0])) == {"Q1", "Q2"}
    again = litellm.completion(
        model="local/smollm2-135m",
        messages=messages,
        temperature=0.1,
        seed=0,
        max_tokens=200,
        response_format=fmt,
    )
    assert again.choices[0].message.content == texts[0]  # same seed, same answer
    nov = rubric("novelty")
    one = nov.render(background=background, items=[{"label": "", "text": "Does X help?"}], comparative=False)
    resp = litellm.completion(
        model="local/smollm2-135m",
        messages=one,
        temperature=0.0,
        max_tokens=64,
        response_format=response_format(nov),
    )
    assert parse_object(resp.choices[0].message.content, nov.fields).ok


@pytest.mark.slow
def test_prefix_reuse_gives_the_same_answer_as_a_cold_start() -> None:
    """The reused KV state must be exactly the shared prefix: sampled answers match a cold computation."""
    from judge.local import schema as local_schema

    nov = rubric("novelty")
    background = [{"title": "A new parser", "text": "We present a parser for noisy text."}]
    prompt_a, prompt_b = (
        nov.render(background=background, items=[{"label": "", "text": t}], comparative=False)
        for t in ("Does X help?", "Why does the parser fail on tweets?")
    )
    schema = response_format(nov)["json_schema"]["schema"]
    # two seeds cover both reuses: seed 0 starts from prompt_a's KV cut back to the shared prefix, seed 1 from
    # prompt_b's own (all but its last token); a KV not exactly the prefix (left uncut) changes these answers
    local_schema.PREFIX_CACHE.entries.clear()
    cold = [
        local_schema.generate_structured(prompt_b, schema, temperature=1.0, seed=s).text for s in range(2)
    ]
    local_schema.PREFIX_CACHE.entries.clear()
    local_schema.generate_structured(prompt_a, schema, temperature=1.0, seed=0)  # shares the long prefix
    warm = [
        local_schema.generate_structured(prompt_b, schema, temperature=1.0, seed=s).text for s in range(2)
    ]
    assert warm == cold
