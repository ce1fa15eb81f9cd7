"""NovBench's extraction stage: known-value metrics and a run through litellm to a local scripted server."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from experiments.stages.extract import classification_metrics, run_extract
from tests.support.openai_server import ScriptedServer, Step
from tests.support.studies import typed

ROOT = Path(__file__).resolve().parent.parent


def test_classification_metrics_by_hand() -> None:
    labels = [1, 1, 1, 0, 0, 0, 0, 1]
    predicted = [1, 1, 0, 1, 0, 0, None, None]  # the last two unscored: left out and counted
    m = classification_metrics(labels, predicted)
    # scored: y = 1 1 1 0 0 0, p = 1 1 0 1 0 0 -> TP 2, FN 1, FP 1, TN 2
    assert (m["n"], m["n_unscored"], m["n_positive"]) == (6, 2, 3)
    assert m["accuracy"] == pytest.approx(4 / 6) and m["precision"] == pytest.approx(2 / 3)
    assert m["recall"] == pytest.approx(2 / 3) and m["f1"] == pytest.approx(2 / 3)
    assert m["baseline_all_no_accuracy"] == pytest.approx(0.5)
    none = classification_metrics([1, 0], [None, None])
    assert none["n"] == 0 and math.isnan(none["accuracy"])
    assert classification_metrics([1, 0], [0, 0])["f1"] == 0.0  # no positive predicted: F1 0, not an error


def test_macro_f1_beside_the_positive_class_f1() -> None:
    """NovBench App. A reports Macro F1; at 23% positives it differs from the positive-class F1 (issue 24, 6)."""
    from sklearn.metrics import f1_score

    # 108 sentences, 25 positive (23%): TP 22, FN 3, FP 13, TN 70
    labels = [1] * 25 + [0] * 83
    predicted = [1] * 22 + [0] * 3 + [1] * 13 + [0] * 70
    m = classification_metrics(labels, predicted)
    # F1(1) = 2*22 / (2*22 + 13 + 3) = 44/60; F1(0) = 2*70 / (2*70 + 3 + 13) = 140/156
    assert m["f1"] == pytest.approx(44 / 60) and round(m["f1"], 3) == 0.733
    assert m["macro_f1"] == pytest.approx((44 / 60 + 140 / 156) / 2) and round(m["macro_f1"], 3) == 0.815
    assert m["macro_f1"] == pytest.approx(f1_score(labels, predicted, average="macro"))
    assert m["accuracy"] == pytest.approx(92 / 108)
    # unscored answers stay out of both F1s: the six below add nothing
    more = classification_metrics([*labels, 1, 1, 1, 0, 0, 0], [*predicted, *[None] * 6])
    assert more["macro_f1"] == m["macro_f1"] and more["n_unscored"] == 6
    assert math.isnan(classification_metrics([1, 0], [None, None])["macro_f1"])


def answer(body: dict[str, Any]) -> str:
    """A fake classifier: 'yes' for sentences that say "we propose", unparsable for "garbled"."""
    prompt = body["messages"][-1]["content"]
    sentence = prompt.split("<<<SENTENCE>>>")[1].split("<<<END SENTENCE>>>")[0]
    if "garbled" in sentence:
        return "I am not sure."
    return json.dumps({"novelty_description": "yes" if "we propose" in sentence.lower() else "no"})


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    srv = ScriptedServer(lambda body: Step(200, answer(body)))
    with srv.running():
        yield srv


INTRO = [
    "Parsing is hard.",
    "We propose a new parser.",
    "We propose nothing garbled.",
    "Prior work used CRFs.",
]


def config(
    server: ScriptedServer, tmp_path: Path, chosen: list[str], novelty_id: str = "7", intro: list[str] = INTRO
) -> dict[str, Any]:
    """Paper 7 with `intro` and a NovBench record `novelty_id` choosing `chosen`, and a run config on them."""
    paper = {
        "paper_id": 7,
        "title": "P",
        "abstract": "A.",
        "decision": "Accept",
        "introduction_sentences": intro,
        "review_novelty_sentences": [],
        "reviews": [{"review_text": "r", "scores": {"Originality": 3}}],
    }
    novelty = {
        "id": novelty_id,
        "title": "P",
        "abstract": "A.",
        "decision": "Accept",
        "review_novelty": [],
        "paper_novelty": chosen,
        "output_format": "Positive:\n- x",
    }
    (tmp_path / "papers.jsonl").write_text(json.dumps(paper) + "\n")
    (tmp_path / "novelty.jsonl").write_text(json.dumps(novelty) + "\n")
    judge = yaml.safe_load((ROOT / "conf" / "judge" / "qwen.yaml").read_text()) | {
        "api_base": server.api_base
    }
    rubric = yaml.safe_load((ROOT / "conf" / "rubric" / "novelty_sentence.yaml").read_text())
    return {
        "judge": judge,
        "rubric": rubric,
        "papers": str(tmp_path / "papers.jsonl"),
        "novelty": str(tmp_path / "novelty.jsonl"),
        "temperature": 0.0,
        "max_tokens": 40,
        "seed": 0,
        "limit": None,
        "cache_dir": str(tmp_path / "cache"),
        "progress": False,
    }


def test_extract_run_against_labels(server: ScriptedServer, tmp_path: Path) -> None:
    cfg = config(server, tmp_path, ["We propose a new parser.", "Prior work used CRFs."])
    rubric = cfg["rubric"]
    metrics = run_extract(typed(cfg, "extract"), tmp_path / "out")
    # labels 0 1 0 1; predictions no, yes, (unscored), no -> scored y = 0 1 1, p = 0 1 0
    assert (metrics["n"], metrics["n_unscored"]) == (3, 1)
    assert metrics["accuracy"] == pytest.approx(2 / 3) and metrics["precision"] == 1.0
    assert metrics["recall"] == pytest.approx(0.5) and metrics["f1"] == pytest.approx(2 / 3)
    assert metrics["macro_f1"] == pytest.approx((2 / 3 + 2 / 3) / 2)  # class 0: TP 1, FP 1, FN 0 -> 2/3
    preds = pd.read_csv(tmp_path / "out" / "extraction_predictions.csv")
    assert preds["label"].tolist() == [0, 1, 0, 1] and preds["raw"].iloc[2] == "I am not sure."
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["calls_made"] == 4 and manifest["unscored"] == 1 and manifest["schema_version"] == 1
    again = run_extract(typed(cfg, "extract"), tmp_path / "out2")  # every call cached
    assert again == metrics
    assert json.loads((tmp_path / "out2" / "manifest.json").read_text())["calls_cached"] == 4
    from experiments.inputs import StudyError

    asked = len(server.requests)
    for bad, message in (
        ({"template": "nope.jinja"}, r"^rubric\.template=nope\.jinja: "),
        ({"dimensions": []}, r"^rubric\.dimensions: "),
    ):  # refused before any call
        with pytest.raises(StudyError, match=message):
            run_extract(typed({**cfg, "rubric": {**rubric, **bad}}, "extract"), tmp_path / "bad")
    assert len(server.requests) == asked


def test_nan_and_missing_predictions_are_unscored_not_negatives() -> None:
    """Review F3: NaN (float) and pd.NA (nullable integer) predictions are unscored: left out and counted, never
    read as "no" and never a traceback."""
    labels = [1, 1, 0, 0]
    for predicted in (
        [1, math.nan, 0, math.nan],
        pd.array([1, None, 0, None], dtype="Int64"),
        pd.Series([1.0, math.nan, 0.0, math.nan]),
    ):
        m = classification_metrics(labels, predicted)
        # scored: y = 1 0, p = 1 0 -> all right; the two NaN (one a positive) are not FN/TN
        assert (m["n"], m["n_unscored"], m["n_positive"]) == (2, 2, 1), predicted
        assert m["accuracy"] == 1.0 and m["recall"] == 1.0 and m["f1"] == 1.0


def test_no_paper_joined_is_one_error_before_any_call(server: ScriptedServer, tmp_path: Path) -> None:
    """Review F3: a NovBench file whose ids join no paper gave NaN metrics and empty files; now one error line
    naming both files and the keys joined, and no call is made."""
    from experiments.inputs import StudyError

    cfg = config(server, tmp_path, ["We propose a new parser."], novelty_id="99")
    asked = len(server.requests)
    with pytest.raises(StudyError) as err:
        run_extract(typed(cfg, "extract"), tmp_path / "out")
    text = str(err.value)
    assert "\n" not in text and cfg["papers"] in text and cfg["novelty"] in text, text
    assert "paper_id" in text and "'99'" in text and "'7'" in text, text
    assert len(server.requests) == asked and not (tmp_path / "out").exists()


def test_no_chosen_sentence_matched_is_one_error(server: ScriptedServer, tmp_path: Path) -> None:
    """Review F3: when no chosen sentence matches an introduction sentence every label is 0 and recall/F1 read
    0.0 about nothing; now one error line saying so, before any call."""
    from experiments.inputs import StudyError

    cfg = config(server, tmp_path, ["A sentence from another paper.", "And another."])
    asked = len(server.requests)
    with pytest.raises(StudyError, match=r"none of the 2 chosen sentences") as err:
        run_extract(typed(cfg, "extract"), tmp_path / "out")
    assert "\n" not in str(err.value) and cfg["novelty"] in str(err.value)
    assert len(server.requests) == asked


def test_labels_match_after_whitespace_normalisation_and_count_the_unmatched() -> None:
    """Review F4: a chosen sentence differing from the introduction's only in spacing (double spaces, a newline,
    leading/trailing blanks) was unmatched, a positive silently lost; now it matches, and what still matches
    nothing is listed."""
    from experiments.datasets.coling import extraction_labels, unmatched_chosen

    papers = [
        {
            "paper_id": 3,
            "title": "T",
            "introduction_sentences": ["Background.", "We  propose\nX.", " Y is new. "],
        }
    ]
    novelty = [{"id": "3", "paper_novelty": ["We propose X.", "Y  is\tnew.", "Z is nowhere."]}]
    assert extraction_labels(papers, novelty)["label"].tolist() == [0, 1, 1]
    assert extraction_labels(papers, novelty)["sentence"].tolist()[1] == "We  propose\nX."  # shown as written
    lost = unmatched_chosen(papers, novelty)
    assert lost.to_dict("records") == [{"paper_id": "3", "sentence": "Z is nowhere."}]


def test_run_reports_unmatched_chosen_sentences(
    server: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Review F4: the run counts chosen sentences that matched no introduction sentence (n_unmatched_labels)
    and says so in one note line; the whitespace variant counts as a positive."""
    cfg = config(server, tmp_path, ["We propose  a new\nparser. ", "Not in this paper.", "Nor this."])
    metrics = run_extract(typed(cfg, "extract"), tmp_path / "out")
    # labels 0 1 0 0; predictions no, yes, (unscored), no -> scored y = 0 1 0, p = 0 1 0
    assert (metrics["n"], metrics["n_unscored"], metrics["n_positive"], metrics["n_unmatched_labels"]) == (
        3,
        1,
        1,
        2,
    )
    assert metrics["accuracy"] == 1.0 and metrics["recall"] == 1.0
    err = capsys.readouterr().err
    assert err.count("note:") == 1 and "2 of the 3 chosen sentences" in err and cfg["novelty"] in err, err
    assert json.loads((tmp_path / "out" / "extraction_metrics.json").read_text())["n_unmatched_labels"] == 2


def test_run_counts_novbench_records_of_no_paper(
    server: ScriptedServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A NovBench record whose id names no paper of the papers file was dropped without a word; it is counted
    (n_unjoined_records) and named in one note line."""
    cfg = config(server, tmp_path, ["We propose a new parser.", "Prior work used CRFs."])
    other = {
        "id": "99",
        "title": "Q",
        "abstract": "B.",
        "decision": "Reject",
        "review_novelty": [],
        "paper_novelty": ["Q is new."],
        "output_format": "Positive:\n- y",
    }
    with open(cfg["novelty"], "a") as f:
        f.write(json.dumps(other) + "\n")
    metrics = run_extract(typed(cfg, "extract"), tmp_path / "out")
    assert metrics["n_unjoined_records"] == 1 and metrics["n"] == 3
    err = capsys.readouterr().err
    assert err.count("note:") == 1 and "1 record(s) name no paper" in err and "'99'" in err, err
