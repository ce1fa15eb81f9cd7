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

from experiments.extract import classification_metrics, run_extract
from tests.openai_server import ScriptedServer, Step

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


def test_extract_run_against_labels(server: ScriptedServer, tmp_path: Path) -> None:
    intro = ["Parsing is hard.", "We propose a new parser.", "We propose nothing garbled.", "Prior work used CRFs."]
    paper = {"paper_id": 7, "title": "P", "abstract": "A.", "decision": "Accept", "introduction_sentences": intro,
             "review_novelty_sentences": [], "reviews": [{"review_text": "r", "scores": {"Originality": 3}}]}
    novelty = {"id": "7", "title": "P", "abstract": "A.", "decision": "Accept", "review_novelty": [],
               "paper_novelty": ["We propose a new parser.", "Prior work used CRFs."], "output_format": "Positive:\n- x"}
    (tmp_path / "papers.jsonl").write_text(json.dumps(paper) + "\n")
    (tmp_path / "novelty.jsonl").write_text(json.dumps(novelty) + "\n")
    judge = yaml.safe_load((ROOT / "conf" / "judge" / "qwen.yaml").read_text()) | {"api_base": server.api_base}
    rubric = yaml.safe_load((ROOT / "conf" / "rubric" / "novelty_sentence.yaml").read_text())
    cfg = {"judge": judge, "rubric": rubric, "papers": str(tmp_path / "papers.jsonl"),
           "novelty": str(tmp_path / "novelty.jsonl"), "temperature": 0.0, "max_tokens": 40, "seed": 0,
           "limit": None, "cache_dir": str(tmp_path / "cache"), "progress": False}
    metrics = run_extract(cfg, tmp_path / "out")
    # labels 0 1 0 1; predictions no, yes, (unscored), no -> scored y = 0 1 1, p = 0 1 0
    assert (metrics["n"], metrics["n_unscored"]) == (3, 1)
    assert metrics["accuracy"] == pytest.approx(2 / 3) and metrics["precision"] == 1.0
    assert metrics["recall"] == pytest.approx(0.5) and metrics["f1"] == pytest.approx(2 / 3)
    preds = pd.read_csv(tmp_path / "out" / "extraction_predictions.csv")
    assert preds["label"].tolist() == [0, 1, 0, 1] and preds["raw"].iloc[2] == "I am not sure."
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["calls_made"] == 4 and manifest["unscored"] == 1
    again = run_extract(cfg, tmp_path / "out2")  # every call cached
    assert again == metrics
    assert json.loads((tmp_path / "out2" / "manifest.json").read_text())["calls_cached"] == 4
    from experiments.inputs import StudyError

    asked = len(server.requests)
    for bad, message in (({"template": "nope.jinja"}, r"^rubric\.template=nope\.jinja: "),
                         ({"dimensions": []}, r"^rubric\.dimensions: ")):  # refused before any call
        with pytest.raises(StudyError, match=message):
            run_extract({**cfg, "rubric": {**rubric, **bad}}, tmp_path / "bad")
    assert len(server.requests) == asked
