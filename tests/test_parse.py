"""Parsing a judge's answer: tolerant of fences and prose, strict on fields and ranges, never a default."""

from __future__ import annotations

from judge.parse import Field, extract_json_object, parse_labelled, parse_object

NOVELTY = [Field("originality", 0, 3), Field("gap_addressing", 0, 3), Field("non_obviousness", 0, 3)]


def test_plain_json() -> None:
    p = parse_object('{"originality": 2, "gap_addressing": 1, "non_obviousness": 3}', NOVELTY)
    assert p.ok and p.values == {"originality": 2.0, "gap_addressing": 1.0, "non_obviousness": 3.0}


def test_code_fence_and_prose() -> None:
    raw = 'Sure! Here is my rating:\n```json\n{"originality": 1, "gap_addressing": "2", "non_obviousness": 0}\n```\nThanks'
    p = parse_object(raw, NOVELTY)
    assert p.ok and p.values["gap_addressing"] == 2.0


def test_prose_around_object_with_braces_before() -> None:
    raw = 'Scores {not json} -> {"originality": 3, "gap_addressing": 3, "non_obviousness": 3} done'
    assert parse_object(raw, NOVELTY).values["originality"] == 3.0


def test_key_spelling_is_normalised() -> None:
    raw = '{"Originality": 1, "Gap-Addressing": 2, "non obviousness": 0}'
    assert parse_object(raw, NOVELTY).ok


def test_out_of_range_is_unscored_with_reason() -> None:
    p = parse_object('{"originality": 4, "gap_addressing": 1, "non_obviousness": 1}', NOVELTY)
    assert not p.ok and p.values == {} and "outside [0, 3]" in (p.error or "")


def test_missing_field_and_non_integer() -> None:
    assert parse_object('{"originality": 1, "gap_addressing": 1}', NOVELTY).error == "missing field 'non_obviousness'"
    p = parse_object('{"originality": 1.5, "gap_addressing": 1, "non_obviousness": 1}', NOVELTY)
    assert not p.ok and "not an integer" in (p.error or "")
    p = parse_object('{"originality": true, "gap_addressing": 1, "non_obviousness": 1}', NOVELTY)
    assert not p.ok


def test_no_json_at_all() -> None:
    p = parse_object("I think it is quite novel, maybe a 2.", NOVELTY)
    assert not p.ok and p.error == "no JSON object in the answer"


def test_truncated_json() -> None:
    assert not parse_object('{"originality": 2, "gap_addr', NOVELTY).ok


def test_choices() -> None:
    fields = [Field("novelty", choices=("a", "b", "tie"))]
    assert parse_object('{"novelty": "A"}', fields).values == {"novelty": "a"}
    assert not parse_object('{"novelty": "both"}', fields).ok
    yes_no = [Field("same_issue", choices=("yes", "no"))]
    assert parse_object('{"same_issue": true}', yes_no).values == {"same_issue": "yes"}


def test_labelled_partial() -> None:
    raw = '{"Q1": {"originality": 1, "gap_addressing": 1, "non_obviousness": 1}, "Q2": {"originality": 9}}'
    out = parse_labelled(raw, ["Q1", "Q2", "Q3"], NOVELTY)
    assert out["Q1"].ok
    assert not out["Q2"].ok and "outside" in (out["Q2"].error or "")
    assert out["Q3"].error == "missing entry 'Q3'"


def test_extract_ignores_arrays_and_deep_nesting() -> None:
    assert extract_json_object("[1, 2]") is None
    assert not parse_object("{" * 5000, NOVELTY).ok
