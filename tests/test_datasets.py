"""Tests for the instance format and its loaders: the sample data, every validation message, fuzzing."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from experiments.datasets.loader import (
    LABEL_COLUMNS,
    Candidate,
    DatasetError,
    HumanLabel,
    Instance,
    Paper,
    dataset_hash,
    human_labels_frame,
    load_dataset,
    load_instances,
)
from experiments.datasets.novbench import load_novbench, load_novbench_records
from experiments.datasets.rqbench import load_rqbench, paper_passage
from tests.support.studies import public_data

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "data" / "sample"
DIMENSIONS = {"originality", "gap_addressing", "non_obviousness", "source_boundedness"}
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
DROP = object()  # record(key=DROP) removes the key


def record(**overrides: Any) -> dict[str, Any]:
    """A valid instance record; overrides replace keys (or remove them, with DROP)."""
    base: dict[str, Any] = {
        "instance_id": "i1",
        "field": "nlp",
        "background": [{"title": "T", "text": "Some background."}],
        "reference": {"candidate_id": "i1:ref", "text": "A reference question?"},
        "candidates": [
            {"candidate_id": "i1:g:1", "source": "g", "text": "Question one?"},
            {"candidate_id": "i1:g:2", "source": "g", "text": "Question two?"},
            {"candidate_id": "i1:g:3", "source": "g", "text": "Question three?"},
        ],
        "human_labels": [
            {"annotator": "ann", "candidate_id": "i1:g:1", "dimension": "originality", "score": 2}
        ],
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not DROP}


def write_lines(path: Path, lines: Sequence[str | dict[str, Any]]) -> Path:
    """Write JSONL lines (dicts are dumped, strings written as-is)."""
    path.write_text(
        "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8"
    )
    return path


def problems_of(path: Path) -> list[str]:
    """The problems load_instances reports for a file (failing the test if it loads)."""
    with pytest.raises(DatasetError) as info:
        load_instances(path)
    return info.value.problems


# --- the shipped sample ---------------------------------------------------------------------------------


def test_sample_instances_have_the_promised_shape() -> None:
    instances = load_instances(SAMPLE / "instances.jsonl")
    assert len(instances) >= 6
    assert len({inst.field for inst in instances}) >= 3
    for inst in instances:
        assert 2 <= len(inst.background) <= 3
        assert inst.reference is not None and inst.reference.source == "reference"
        assert inst.reference.candidate_id == f"{inst.instance_id}:ref"
        assert len(inst.candidates) == 10
        assert sorted(c.source for c in inst.candidates) == ["broad_gen"] * 5 + ["narrow_gen"] * 5
        known = {c.candidate_id for c in inst.all_candidates()}
        assert {lab.candidate_id for lab in inst.human_labels} == known
        assert {lab.annotator for lab in inst.human_labels} == {"expert_a", "expert_b", "expert_c"}
        assert {lab.dimension for lab in inst.human_labels} == DIMENSIONS
        assert len(inst.human_labels) == 3 * 11 * 4
        assert all(0 <= lab.score <= 3 for lab in inst.human_labels)


def test_sample_labels_separate_the_generator_styles() -> None:
    frame = human_labels_frame(load_instances(SAMPLE / "instances.jsonl"))
    means = frame.pivot_table(index="source", columns="dimension", values="score", aggfunc="mean")
    assert means.loc["narrow_gen", "source_boundedness"] > means.loc["broad_gen", "source_boundedness"] + 1
    assert means.loc["narrow_gen", "non_obviousness"] < means.loc["broad_gen", "non_obviousness"]


def test_humans_csv_is_the_flattened_jsonl_labels() -> None:
    expected = human_labels_frame(load_instances(SAMPLE / "instances.jsonl"))
    on_disk = pd.read_csv(SAMPLE / "humans.csv", dtype={"score": float})
    assert list(on_disk.columns) == list(LABEL_COLUMNS)
    pd.testing.assert_frame_equal(on_disk, expected)


def test_sample_reviews() -> None:
    instances = load_instances(SAMPLE / "reviews.jsonl")
    assert len(instances) == 3
    for inst in instances:
        assert len(inst.background) == 1 and inst.reference is not None
        assert any(line.startswith("- ") for line in inst.reference.text.splitlines())
        assert [c.source for c in inst.candidates] == ["gen_a", "gen_b"]
        assert all(80 <= len(c.text.split()) <= 150 for c in inst.all_candidates())


# --- the format -------------------------------------------------------------------------------------------


def test_valid_record_loads_with_types(tmp_path: Path) -> None:
    [inst] = load_instances(write_lines(tmp_path / "x.jsonl", [record()]))
    assert inst.reference == Candidate("i1:ref", "reference", "A reference question?")
    assert inst.background == (Paper("T", "Some background."),)
    assert inst.all_candidates()[0] == inst.reference and inst.all_candidates()[1:] == inst.candidates
    assert inst.human_labels == (HumanLabel("ann", "i1:g:1", "originality", 2.0),)


def test_optional_keys_default(tmp_path: Path) -> None:
    rec = record(field=DROP, reference=DROP, human_labels=DROP, candidates=[])
    inst, other = load_instances(
        write_lines(tmp_path / "x.jsonl", [rec, record(instance_id="i2", reference=None)])
    )
    assert (inst.field, inst.reference, inst.candidates, inst.human_labels) == ("", None, (), ())
    assert other.reference is None and len(other.all_candidates()) == 3


def test_reference_source_is_forced(tmp_path: Path) -> None:
    rec = record(reference={"candidate_id": "r", "source": "gpt", "text": "Q?"})
    [inst] = load_instances(write_lines(tmp_path / "x.jsonl", [rec]))
    assert inst.reference is not None and inst.reference.source == "reference"


BAD_RECORDS: list[tuple[Any, str]] = [
    ('{"instance_id": "a" "field": "x"}', "<json>: invalid JSON (Expecting ',' delimiter at col 21)"),
    ("[1, 2]", "<record>: must be a JSON object"),
    (record(instance_id=DROP), "instance_id: is required"),
    (record(instance_id=""), "instance_id: must be a non-empty string"),
    (record(field=3), "field: must be a string"),
    (record(background=[]), "background: must be a non-empty list"),
    (record(background=DROP), "background: is required"),
    (record(background=["text"]), "background[0]: must be an object with title and text"),
    (record(background=[{"title": "T"}]), "background[0].text: is required"),
    (record(reference="Q?"), "reference: must be an object or null"),
    (record(reference={"candidate_id": "r", "text": " "}), "reference.text: must be a non-empty string"),
    (record(candidates=DROP), "candidates: is required"),
    (record(candidates={"a": 1}), "candidates: must be a list"),
    (record(candidates=[{"candidate_id": "c", "source": "g"}]), "candidates[0].text: is required"),
    (
        record(candidates=[{}, {}, {"candidate_id": "c", "source": "g", "text": ""}]),
        "candidates[2].text: must be a non-empty string",
    ),
    (
        record(candidates=[{"candidate_id": "c", "source": "reference", "text": "Q?"}]),
        "candidates[0].source: 'reference' is reserved for the instance's reference",
    ),
    (
        record(candidates=[{"candidate_id": "c", "source": "g", "text": "Q?"}] * 2),
        "candidates[1].candidate_id: duplicate candidate_id 'c' (also at candidates[0])",
    ),
    (
        record(candidates=[{"candidate_id": "i1:ref", "source": "g", "text": "Q?"}]),
        "candidates[0].candidate_id: duplicate candidate_id 'i1:ref' (also at reference)",
    ),
    (
        record(human_labels=[{"annotator": "a", "candidate_id": "nope", "dimension": "d", "score": 1}]),
        "human_labels[0].candidate_id: unknown candidate_id 'nope'",
    ),
    (
        record(human_labels=[{"annotator": "a", "candidate_id": "i1:ref", "dimension": "d", "score": "2"}]),
        "human_labels[0].score: must be a finite number",
    ),
    (
        record(human_labels=[{"annotator": "a", "candidate_id": "i1:ref", "dimension": "d", "score": True}]),
        "human_labels[0].score: must be a finite number",
    ),
    (
        '{"instance_id": "i1", "background": [{"title": "", "text": "b"}], "candidates": [], "human_labels": '
        '[{"annotator": "a", "candidate_id": "i1:ref", "dimension": "d", "score": NaN}],'
        ' "reference": {"candidate_id": "i1:ref", "text": "Q"}}',
        "human_labels[0].score: must be a finite number",
    ),
    (
        record(human_labels=[{"annotator": "a", "candidate_id": "i1:ref", "dimension": "d"}]),
        "human_labels[0].score: is required",
    ),
    (
        record(human_labels=[{"annotator": "a", "candidate_id": "i1:ref", "dimension": "d", "score": 1}] * 2),
        "human_labels[1]: duplicate label for ('a', 'i1:ref', 'd') (first at human_labels[0])",
    ),
    (record(human_labels="none"), "human_labels: must be a list"),
    (
        record(candidate=[]),
        "candidate: unknown key (expected one of instance_id, field, background, reference, "
        "candidates, human_labels, meta)",
    ),
]


@pytest.mark.parametrize(("line", "message"), BAD_RECORDS)
def test_each_problem_is_reported_with_file_line_field(tmp_path: Path, line: Any, message: str) -> None:
    path = write_lines(tmp_path / "x.jsonl", ["", record(instance_id="ok"), line])  # blank line 1 is skipped
    assert message and f"{path}:3: {message}" in problems_of(path)


def test_all_problems_are_collected_and_nothing_is_returned(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "x.jsonl", [record(), "{", record(instance_id=""), record(), "7"])
    problems = problems_of(path)
    assert problems == [
        f"{path}:2: <json>: invalid JSON (Expecting property name enclosed in double quotes at col 2)",
        f"{path}:3: instance_id: must be a non-empty string",
        f"{path}:4: instance_id: duplicate instance_id 'i1' (first on line 1)",
        f"{path}:5: <record>: must be a JSON object",
    ]
    with pytest.raises(DatasetError) as info:
        load_instances(path)
    assert str(info.value) == f"{problems[0]} (and 3 more problems)"
    assert isinstance(info.value, ValueError)


def test_duplicate_id_is_reported_even_on_an_invalid_line(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "x.jsonl", [record(), record(background=[])])
    assert problems_of(path) == [
        f"{path}:2: background: must be a non-empty list",
        f"{path}:2: instance_id: duplicate instance_id 'i1' (first on line 1)",
    ]


def test_file_level_problems(tmp_path: Path) -> None:
    assert problems_of(tmp_path / "missing.jsonl") == [
        f"{tmp_path / 'missing.jsonl'}: <file>: does not exist"
    ]
    assert problems_of(tmp_path) == [f"{tmp_path}: <file>: is a directory, not a JSONL file"]
    empty = write_lines(tmp_path / "empty.jsonl", ["", "   "])
    assert problems_of(empty) == [f"{empty}: <file>: no instances (the file is empty)"]
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(json.dumps(record()).encode() + b"\n\xff\xfe{}\n")
    assert problems_of(binary) == [f"{binary}:2: <utf-8>: not valid UTF-8 (byte 0xff at col 1)"]


def test_utf8_bom_and_crlf_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(record()).encode() + b"\r\n\r\n")
    assert [inst.instance_id for inst in load_instances(path)] == ["i1"]


def test_dataset_error_message_with_one_problem() -> None:
    assert str(DatasetError(["f:1: x: bad"])) == "f:1: x: bad"
    assert str(DatasetError(["a", "b"])) == "a (and 1 more problem)"


# --- fuzzing: bad content raises DatasetError and nothing else ------------------------------------------

JSON_LEAF = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
KEYS = [
    "instance_id",
    "field",
    "background",
    "reference",
    "candidates",
    "human_labels",
    "title",
    "text",
    "candidate_id",
    "source",
    "annotator",
    "dimension",
    "score",
    "id",
    "paper_novelty",
    "question",
    "grounded_in_refs",
    "arxiv_id",
    "abstract",
    "output_format",
]
JSON_VALUE = st.recursive(
    JSON_LEAF,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(KEYS) | st.text(max_size=4), inner, max_size=6)
    ),
    max_leaves=10,
)


def assert_only_dataset_error(path: Path) -> None:
    """Every loader either returns instances/records or raises DatasetError."""
    for loader in (load_instances, load_dataset, load_novbench_records):
        try:
            result = loader(path)
        except DatasetError as exc:
            assert exc.problems and all(isinstance(p, str) for p in exc.problems)
        else:
            assert isinstance(result, list) and result


@FUZZ
@given(st.binary(max_size=400))
def test_fuzz_random_bytes(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(data)
    assert_only_dataset_error(path)


@FUZZ
@given(st.lists(JSON_VALUE | st.text(max_size=20), min_size=0, max_size=5))
def test_fuzz_random_json_lines(tmp_path: Path, values: list[Any]) -> None:
    path = tmp_path / "fuzz.jsonl"
    lines = [v if isinstance(v, str) and not v.startswith("{") else json.dumps(v) for v in values]
    path.write_text("\n".join(lines), encoding="utf-8", errors="surrogatepass")
    assert_only_dataset_error(path)


@FUZZ
@given(st.dictionaries(st.sampled_from(list(record())), JSON_VALUE, max_size=6))
def test_fuzz_mutated_records(tmp_path: Path, mutation: dict[str, Any]) -> None:
    path = write_lines(tmp_path / "fuzz.jsonl", [record(**mutation)])
    assert_only_dataset_error(path)


TEXT = st.text(st.characters(codec="utf-8"), min_size=1, max_size=12).filter(str.strip)


@FUZZ
@given(st.lists(TEXT, min_size=1, max_size=4, unique=True), st.lists(st.integers(0, 3), max_size=4))
def test_fuzz_valid_records_round_trip(tmp_path: Path, ids: list[str], scores: list[int]) -> None:
    cands = [{"candidate_id": cid, "source": "g", "text": cid} for cid in ids]
    labels = [
        {"annotator": f"a{i}", "candidate_id": ids[0], "dimension": "d", "score": s}
        for i, s in enumerate(scores)
    ]
    path = write_lines(tmp_path / "ok.jsonl", [record(reference=None, candidates=cands, human_labels=labels)])
    [inst] = load_instances(path)
    assert [c.candidate_id for c in inst.candidates] == ids
    assert [lab.score for lab in inst.human_labels] == [float(s) for s in scores]


# --- RQ-Bench layout --------------------------------------------------------------------------------------


def rqbench_folder(root: Path, extra_lines: Sequence[dict[str, Any]] = ()) -> Path:
    """A tiny folder in RQ-Bench's published layout (rq_dataset.jsonl + cited_papers/<arxiv_id>.json)."""
    folder = root / "rq"
    (folder / "cited_papers").mkdir(parents=True)
    lines: list[dict[str, Any]] = [
        {
            "id": "rq-a",
            "question": "Does A fix B?",
            "category": "cs.CL",
            "target_arxiv_id": "2502.00009",
            "grounded_in_refs": [
                {"arxiv_id": "2401.00001", "title": "A (from the ref)"},
                {"arxiv_id": None},
                {"arxiv_id": "2401.00002"},
            ],
        },
        {
            "question": "Why does C fail?",
            "grounded_in_refs": [
                {"arxiv_id": "2401.00002"},
                {"arxiv_id": "cs/0601001v2"},
                {"arxiv_id": "2401.00002"},
            ],
        },
        *extra_lines,
    ]
    write_lines(folder / "rq_dataset.jsonl", lines)
    papers = {
        "2401.00001": {"title": "Paper A", "abstract": "Abstract of A.", "sections": [{"text": "ignored"}]},
        "2401.00002": {
            "title": "Paper B",
            "sections": [{"heading": "1 Introduction", "text": "intro words " * 400}],
        },
        "cs_0601001": {"text": "Old-style full text."},
    }
    for name, doc in papers.items():
        (folder / "cited_papers" / f"{name}.json").write_text(json.dumps(doc), encoding="utf-8")
    return folder


def test_rqbench_layout_loads(tmp_path: Path) -> None:
    folder = rqbench_folder(tmp_path)
    first, second = load_rqbench(folder)
    assert (first.instance_id, first.field, second.instance_id, second.field) == ("rq-a", "cs.CL", "rq-2", "")
    assert first.reference == Candidate("rq-a:ref", "reference", "Does A fix B?")
    assert first.candidates == () and first.human_labels == ()
    assert first.background[0] == Paper("Paper A", "Abstract of A.")
    assert first.background[1].title == "Paper B" and len(first.background[1].text) <= 1504
    assert first.background[1].text.startswith("intro words") and first.background[1].text.endswith(" ...")
    assert [p.title for p in second.background] == ["Paper B", "cs/0601001v2"]
    assert second.background[1].text == "Old-style full text."
    assert load_dataset(folder) == [first, second]


def test_rqbench_missing_and_broken_cited_papers_are_reported(tmp_path: Path) -> None:
    folder = rqbench_folder(
        tmp_path,
        [
            {
                "id": "rq-c",
                "question": "Q?",
                "grounded_in_refs": [{"arxiv_id": "2401.00001"}, {"arxiv_id": "2501.99999"}],
            },
            {
                "id": "rq-d",
                "question": "Q?",
                "grounded_in_refs": [{"arxiv_id": "../../secret"}, {"arxiv_id": "bad"}],
            },
            {"id": "rq-a", "question": "", "grounded_in_refs": []},
            {"id": "rq-e", "question": "Q?", "grounded_in_refs": [{"title": "A book"}, 7]},
        ],
    )
    (folder / "cited_papers" / "bad.json").write_text('{"title": "x",\n "abstract": }', encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        load_rqbench(folder)
    rq = folder / "rq_dataset.jsonl"
    assert info.value.problems == [
        f"{rq}:3: grounded_in_refs[1].arxiv_id: no cited_papers/2501.99999.json",
        f"{rq}:4: grounded_in_refs[0].arxiv_id: no cited_papers/../../secret.json",
        f"{folder / 'cited_papers' / 'bad.json'}:2: <json>: invalid JSON (Expecting value at col 14)",
        f"{rq}:5: question: must be a non-empty string",
        f"{rq}:5: grounded_in_refs: must be a non-empty list",
        f"{rq}:6: grounded_in_refs[1]: must be an object with arxiv_id",
    ]


def test_rqbench_record_without_any_arxiv_id(tmp_path: Path) -> None:
    folder = rqbench_folder(tmp_path, [{"question": "Q?", "grounded_in_refs": [{"title": "A book"}]}])
    with pytest.raises(DatasetError) as info:
        load_rqbench(folder)
    assert info.value.problems == [
        f"{folder / 'rq_dataset.jsonl'}:3: grounded_in_refs: no entry has an arxiv_id"
    ]


def test_rqbench_folder_without_question_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="rq_dataset.jsonl: <file>: does not exist"):
        load_rqbench(tmp_path)
    with pytest.raises(DatasetError, match="folder without rq_dataset.jsonl"):
        load_dataset(tmp_path)


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"title": "T", "abstract": "  "}, None),
        (
            {"sections": {"Introduction": "Intro.", "Abstract": "The abstract."}},
            Paper("fallback", "The abstract."),
        ),
        (
            {"sections": [{"section": "Intro", "paragraphs": ["One.", "Two."]}]},
            Paper("fallback", "One. Two."),
        ),
        ({"title": "T", "sections": ["Plain section."]}, Paper("T", "Plain section.")),
        ({"full_text": "Full   text."}, Paper("fallback", "Full text.")),
    ],
)
def test_cited_paper_passage_is_tolerant(doc: dict[str, Any], expected: Paper | None) -> None:
    assert paper_passage(doc, "fallback") == expected


# --- NovBench format -----------------------------------------------------------------------------------

NOVBENCH_RECORD: dict[str, Any] = {
    "id": "7",
    "title": "A paper",
    "abstract": "We do X.",
    "decision": "Accept",
    "paper_novelty": ["We are first to do X."],
    "review_novelty": ["X is new."],
    "output_format": "Positive Novelty Evaluations\n- X is new.",
}


def test_novbench_tiny_file_and_dispatch(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "nb.jsonl", ["not json", NOVBENCH_RECORD])
    with pytest.raises(DatasetError) as info:  # the first *valid* record decides the format
        load_dataset(path)
    assert info.value.problems == [f"{path}:1: <json>: invalid JSON (Expecting value at col 1)"]
    [inst] = load_dataset(write_lines(path, [NOVBENCH_RECORD]))
    assert inst == Instance(
        "7",
        "",
        (Paper("A paper", "We do X."),),
        Candidate("7:human_eval", "reference", NOVBENCH_RECORD["output_format"]),
        (),
    )


def test_novbench_record_problems(tmp_path: Path) -> None:
    bad = {**NOVBENCH_RECORD, "paper_novelty": "one sentence", "review_novelty": [1], "id": None}
    del bad["output_format"]
    path = write_lines(tmp_path / "nb.jsonl", [NOVBENCH_RECORD, bad, NOVBENCH_RECORD])
    with pytest.raises(DatasetError) as info:
        load_novbench_records(path)
    assert info.value.problems == [
        f"{path}:2: id: must be a non-empty string or an integer",
        f"{path}:2: output_format: is required",
        f"{path}:2: paper_novelty: must be a non-empty list of strings",
        f"{path}:2: review_novelty[0]: must be a string",
        f"{path}:3: id: duplicate id '7' (first on line 1)",
    ]


def test_novbench_reference_data() -> None:
    path = public_data("novbench_coling2020.jsonl")
    records = load_novbench_records(path)
    instances = load_novbench(path)
    assert len(records) == len(instances) == 73
    assert load_dataset(path) == instances
    for rec, inst in zip(records, instances, strict=True):
        assert inst.instance_id == str(rec["id"]) and inst.background == (
            Paper(rec["title"], rec["abstract"]),
        )
        assert inst.reference == Candidate(f"{rec['id']}:human_eval", "reference", rec["output_format"])


# --- dispatch, label frame, hash --------------------------------------------------------------------------


def test_load_dataset_dispatches_to_instances(tmp_path: Path) -> None:
    assert load_dataset(SAMPLE / "instances.jsonl") == load_instances(SAMPLE / "instances.jsonl")
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset(tmp_path / "nope.jsonl")


def test_human_labels_frame_shape() -> None:
    empty = human_labels_frame([])
    assert list(empty.columns) == list(LABEL_COLUMNS) and empty.empty and empty["score"].dtype == float
    inst = Instance(
        "i",
        "",
        (Paper("t", "x"),),
        Candidate("r", "reference", "q"),
        (Candidate("c", "g", "q2"),),
        (HumanLabel("a", "c", "originality", 2), HumanLabel("a", "r", "originality", 3)),
    )
    rows = human_labels_frame([inst]).to_dict("records")
    assert rows == [
        {
            "annotator": "a",
            "instance_id": "i",
            "candidate_id": "c",
            "source": "g",
            "dimension": "originality",
            "score": 2.0,
        },
        {
            "annotator": "a",
            "instance_id": "i",
            "candidate_id": "r",
            "source": "reference",
            "dimension": "originality",
            "score": 3.0,
        },
    ]


def test_dataset_hash(tmp_path: Path) -> None:
    path = SAMPLE / "instances.jsonl"
    assert dataset_hash(path) == hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    first, second = tmp_path / "a", tmp_path / "b"
    for folder, order in ((first, ("x", "sub/y")), (second, ("sub/y", "x"))):
        for name in order:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_text(name, encoding="utf-8")
    assert dataset_hash(first) == dataset_hash(second) and len(dataset_hash(first)) == 16
    (second / "x").write_text("changed", encoding="utf-8")
    assert dataset_hash(first) != dataset_hash(second)
    with pytest.raises(DatasetError):
        dataset_hash(tmp_path / "missing")
