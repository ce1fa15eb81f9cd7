"""Parsing a judge's answer: tolerant of fences and prose, strict on fields and ranges, never a default."""

from __future__ import annotations

from judge import parse
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
    assert (
        parse_object('{"originality": 1, "gap_addressing": 1}', NOVELTY).error
        == "missing field 'non_obviousness'"
    )
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


# --- issue 10/11: duplicates, numbers as JSON reads them, huge integers, salvage of cut-off answers ---------

ONE = '{"originality": 1, "gap_addressing": 2, "non_obviousness": 3}'
TWO = '{"originality": 3, "gap_addressing": 0, "non_obviousness": 1}'


def test_a_label_given_twice_with_different_values_is_unscored() -> None:
    raw = f'{{"Q1": {ONE}, "Q2": {TWO}, "Q1": {TWO}}}'
    out = parse_labelled(raw, ["Q1", "Q2"], NOVELTY)
    assert not out["Q1"].ok and "given twice" in (out["Q1"].error or "")
    assert out["Q2"].ok and out["Q2"].values["originality"] == 3.0
    same = parse_labelled(f'{{"Q1": {ONE}, "Q1": {ONE}}}', ["Q1"], NOVELTY)  # twice, identical: fine
    assert same["Q1"].ok
    spelled = parse_labelled(f'{{"Q1": {ONE}, "q1": {TWO}}}', ["Q1"], NOVELTY)  # same label, other spelling
    assert not spelled["Q1"].ok


def test_a_field_given_twice_with_different_values_is_unscored() -> None:
    p = parse_object(
        '{"originality": 1, "originality": 3, "gap_addressing": 2, "non_obviousness": 0}', NOVELTY
    )
    assert not p.ok and "given twice" in (p.error or "")


def test_numbers_are_read_as_json_reads_them() -> None:
    for bad in ('"1_0"', '"\uff12"', '"\u0662"', '"2 "x', '"0x2"', '"+2"', '"02"', "true"):
        raw = f'{{"originality": {bad}, "gap_addressing": 2, "non_obviousness": 0}}'
        assert not parse_object(raw, NOVELTY).ok, bad
    review = [Field("overall", 0, 10)]
    assert not parse_object('{"overall": "1_0"}', review).ok
    for good, value in (('"2"', 2.0), ('" 2 "', 2.0), ("2.0", 2.0), ('"2e0"', 2.0)):
        p = parse_object(f'{{"originality": {good}, "gap_addressing": 2, "non_obviousness": 0}}', NOVELTY)
        assert p.ok and p.values["originality"] == value, good


def test_huge_integers_are_unscored_with_a_reason_never_an_exception() -> None:
    for digits in (400, 5000):
        raw = f'{{"originality": {"9" * digits}, "gap_addressing": 2, "non_obviousness": 0}}'
        p = parse_object(raw, NOVELTY)
        assert not p.ok and f"{digits}-digit number" in (p.error or "")
        labelled = parse_labelled(f'{{"Q1": {raw}, "Q2": {TWO}}}', ["Q1", "Q2"], NOVELTY)
        assert not labelled["Q1"].ok and labelled["Q2"].ok
        as_text = parse_object(raw.replace("9" * digits, f'"{"9" * digits}"'), NOVELTY)
        assert not as_text.ok
    assert not parse_object('{"originality": 1e400, "gap_addressing": 2, "non_obviousness": 0}', NOVELTY).ok


def test_a_cut_off_answer_keeps_its_complete_entries() -> None:
    full = f'```json\n{{\n  "Q1": {ONE},\n  "Q2": {TWO},\n  "Q3": {ONE}\n}}\n```'
    for cut, kept in (
        (full.index('"Q3"') + 30, ["Q1", "Q2"]),
        (full.index('"Q3"') - 3, ["Q1", "Q2"]),
        (full.index('"Q2"') + 20, ["Q1"]),
        (full.index('"Q1"') + 10, []),
    ):
        out = parse_labelled(full[:cut], ["Q1", "Q2", "Q3"], NOVELTY)
        assert [k for k, p in out.items() if p.ok] == kept, (cut, out)
        assert all(p.salvaged for p in out.values() if p.ok)
        assert all(
            "cut off" in (p.error or "") or "missing" in (p.error or "") for p in out.values() if not p.ok
        )
    # a score cut mid-number ("1" of "10") is never read as complete
    tens = [Field("overall", 0, 10)]
    out = parse_labelled('{"Q1": {"overall": 7}, "Q2": {"overall": 1', ["Q1", "Q2"], tens)
    assert out["Q1"].ok and out["Q1"].values == {"overall": 7.0} and not out["Q2"].ok
    out = parse_labelled('{"Q1": {"overall": 7}, "Q2": {"overall": 10}', ["Q1", "Q2"], tens)  # Q2 closed
    assert out["Q2"].ok and out["Q2"].values == {"overall": 10.0}
    complete = parse_labelled(full, ["Q1", "Q2", "Q3"], NOVELTY)
    assert all(p.ok and not p.salvaged for p in complete.values())


def test_a_cut_off_answer_with_a_repeated_label_does_not_score_it() -> None:
    out = parse_labelled(
        f'{{"Q1": {ONE}, "Q2": {TWO}, "Q1": {TWO}, "Q3": {{"orig', ["Q1", "Q2", "Q3"], NOVELTY
    )
    assert not out["Q1"].ok and out["Q2"].ok and not out["Q3"].ok


def test_rationale_is_kept_and_never_scored() -> None:
    raw = '{"rationale": "originality: 3, clearly {new}", "originality": 1, "gap_addressing": 2, "non_obviousness": 0}'
    p = parse_object(raw, NOVELTY)
    assert p.ok and p.values["originality"] == 1.0 and p.rationale == "originality: 3, clearly {new}"


def test_field_names_are_normalised_once_not_for_every_answer() -> None:
    """A replay parses the same field names in every answer: their normal form is memoised (it was a regex
    substitution per key and per field, ~12% of a replay of the RQ-Bench-sized study); a long key in an odd
    answer is not kept, and still matches."""
    raw = '{"Q1": {"Originality": 1, "Gap-Addressing": 2, "non obviousness": 0, "rationale": "r"}}'
    assert parse_labelled(raw, ["Q1"], NOVELTY)["Q1"].ok
    misses = parse._norm_text.cache_info().misses
    for _ in range(50):
        assert parse_labelled(raw, ["Q1"], NOVELTY)["Q1"].values["gap_addressing"] == 2.0
    assert parse._norm_text.cache_info().misses == misses
    long_key = "non-" + "x" * 100
    odd = f'{{"originality": 1, "gap_addressing": 1, "non_obviousness": 1, "{long_key}": 2}}'
    assert parse_object(odd, NOVELTY).ok
    assert parse._norm_text.cache_info().misses == misses
    assert parse._norm("Non-Obviousness ") == parse._norm("non_obviousness") == "nonobviousness"
