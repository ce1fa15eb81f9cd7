"""Disagreement-driven annotation: planted disagreements are selected, the set is blinded, and a planted
annotator's sheet / Label Studio export comes back as exactly the labels they gave."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest

from analysis import annotate
from analysis.annotate_io import AnnotationError
from tests.study_folders import sample_candidates, write_fake_run

DISPUTED = {c for _, c, s, _ in sample_candidates() if s == "broad_gen" and c.endswith(":1")}


def _truth(cand: str, dim: str) -> int:
    """The planted true score of a candidate on a dimension (0..3)."""
    return int(hashlib.sha256(f"{cand}|{dim}".encode()).hexdigest(), 16) % 4


def _agreeing(judge: str, cand: str, dim: str, k: int) -> float:
    return float(_truth(cand, dim))


def _disputing(judge: str, cand: str, dim: str, k: int) -> float:
    """Agrees with the truth except on the disputed candidates' originality, where it is 3 away."""
    t = _truth(cand, dim)
    return float(3 if t < 2 else 0) if (cand in DISPUTED and dim == "originality") else float(t)


@pytest.fixture()
def study(tmp_path):
    root = tmp_path / "multirun"
    write_fake_run(root / "0_judge-a_independent_novelty", "judge-a", "independent", _agreeing)
    write_fake_run(root / "1_judge-b_independent_novelty", "judge-b", "independent", _disputing)
    write_fake_run(root / "2_judge-b_comparative_novelty", "judge-b", "comparative", _agreeing)
    return root


def test_disagreement_and_flip_select_the_planted_items(study, tmp_path) -> None:
    from analysis.collect import load_results

    table = annotate.uncertainty(load_results(study))
    planted = {f"{c} | originality" for c in DISPUTED}
    for by in ("disagreement", "flip"):
        chosen = annotate.select(table, len(planted), by)
        assert set(chosen["task"]) == planted, by
        assert (chosen[by] >= 2).all()
    top = annotate.select(table, len(planted), "entropy")
    assert table.set_index("task").loc[list(planted), "entropy"].min() > table["entropy"].median()
    assert len(top) == len(planted)


def test_export_is_blinded_and_round_trips_a_planted_annotator(study, tmp_path) -> None:
    out = tmp_path / "set"
    key = annotate.export(study, out, n=12, by="disagreement", seed=3)
    sheet = pd.read_csv(out / "sheet.csv", dtype=str, keep_default_na=False)
    assert len(sheet) == 12 and sorted(sheet["position"].astype(int)) == list(range(1, 13))
    everything = "".join(
        (out / f).read_text() for f in ("sheet.csv", "labelstudio_tasks.json", "labelstudio_config.xml")
    )
    for secret in ("judge-a", "judge-b", "_gen:", ":ref", "inst-"):  # judges, candidate and instance ids
        assert secret not in everything, secret
    assert not {"source", "judge", "candidate_id", "instance_id"} & set(sheet.columns)
    assert not sheet.isin(["broad_gen", "narrow_gen", "reference"]).any().any()
    assert "originality - is the question new relative to the background papers?" in everything
    assert "0: restates a question the background papers already ask or answer" in everything
    # the order is randomised (not the ranking order) and recorded in the key
    assert list(key["item"]) == list(sheet["item"])
    tasks = json.loads((out / "labelstudio_tasks.json").read_text())
    assert [t["data"]["item"] for t in tasks] == list(sheet["item"])

    # a planted annotator gives the true score; their sheet comes back as exactly those labels
    by_item = key.set_index("item")
    sheet["score"] = [
        str(_truth(by_item.loc[i, "candidate_id"], by_item.loc[i, "dimension"])) for i in sheet["item"]
    ]
    sheet.loc[0, "score"] = ""  # not yet done: skipped
    sheet.to_csv(tmp_path / "done.csv", index=False)
    labels = annotate.ingest(tmp_path / "done.csv", out / "key.csv", annotator="planted")
    assert len(labels) == 11 and set(labels["annotator"]) == {"planted"}
    assert all(r.score == _truth(r.candidate_id, r.dimension) for r in labels.itertuples())
    assert set(labels["source"]) <= {"broad_gen", "narrow_gen", "reference"}

    # the same annotator through Label Studio: export JSON in Label Studio's shape
    ls = [dict(t, id=n, annotations=[{"completed_by": {"id": 7, "email": "p@lab.org"}, "was_cancelled": False,
               "result": [{"from_name": "score", "to_name": "text", "type": "choices",
                           "value": {"choices": [str(_truth(by_item.loc[t["data"]["item"], "candidate_id"],
                                                            by_item.loc[t["data"]["item"], "dimension"]))]}}]},
                                      {"completed_by": 8, "was_cancelled": True, "result": []}])
          for n, t in enumerate(tasks)]  # fmt: skip
    (tmp_path / "ls.json").write_text(json.dumps(ls))
    from_ls = annotate.ingest(tmp_path / "ls.json", out / "key.csv")
    assert len(from_ls) == 12 and set(from_ls["annotator"]) == {"p@lab.org"}
    assert all(r.score == _truth(r.candidate_id, r.dimension) for r in from_ls.itertuples())


def test_ingest_rejects_bad_rows_with_one_line(study, tmp_path, capsys) -> None:
    out = tmp_path / "set"
    annotate.export(study, out, n=4, by="disagreement")
    sheet = pd.read_csv(out / "sheet.csv", dtype=str, keep_default_na=False)
    sheet["annotator"] = "x"
    sheet["score"] = ["1", "2", "7", "0"]
    sheet.to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(AnnotationError, match=r"bad.csv: row 3: score: '7' .* integer from 0 to 3"):
        annotate.ingest(tmp_path / "bad.csv", out / "key.csv")
    sheet["score"] = "1"
    sheet.loc[1, "item"] = "item-999"
    sheet.to_csv(tmp_path / "bad2.csv", index=False)
    code = annotate.main(
        [
            "ingest",
            str(tmp_path / "bad2.csv"),
            "--key",
            str(out / "key.csv"),
            "--out",
            str(tmp_path / "h.csv"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "row 2: item: 'item-999'" in err and "Traceback" not in err


def test_cli_round_trip_recomputes_reliability_and_latent(study, tmp_path, capsys) -> None:
    out = tmp_path / "set"
    assert annotate.main(["export", str(study), "--out", str(out), "--n", "20", "--by", "entropy"]) == 0
    key = pd.read_csv(out / "key.csv")
    frames = []
    for who, noise in (("ann1", 0), ("ann2", 0), ("ann3", 1)):
        sheet = pd.read_csv(out / "sheet.csv", dtype=str, keep_default_na=False)
        sheet["annotator"] = who
        sheet["score"] = [
            str(min(3, _truth(c, d) + noise))
            for c, d in zip(key["candidate_id"], key["dimension"], strict=True)
        ]
        frames.append(sheet)
    pd.concat(frames).to_csv(tmp_path / "done.csv", index=False)
    args = [
        "ingest",
        str(tmp_path / "done.csv"),
        "--key",
        str(out / "key.csv"),
        "--out",
        str(tmp_path / "h.csv"),
        "--root",
        str(study),
    ]
    assert annotate.main(args) == 0
    labels = pd.read_csv(tmp_path / "h.csv")
    assert len(labels) == 60 and set(labels["annotator"]) == {"ann1", "ann2", "ann3"}
    printed = capsys.readouterr().out
    assert "fleiss_kappa" in printed and "human:ann1" in printed


def test_ingest_refuses_labels_already_given(study, tmp_path, capsys) -> None:
    # the same sheet ingested twice onto one labels file: every label would be a duplicate, which the
    # report and the viewer refuse; ingest refuses it first, in one line, and writes nothing
    out = tmp_path / "set"
    annotate.export(study, out, n=4, by="disagreement")
    sheet = pd.read_csv(out / "sheet.csv", dtype=str, keep_default_na=False)
    sheet["annotator"], sheet["score"] = "x", "1"
    sheet.to_csv(tmp_path / "done.csv", index=False)
    first = ["ingest", str(tmp_path / "done.csv"), "--key", str(out / "key.csv"), "--out", str(tmp_path / "h.csv")]
    assert annotate.main(first) == 0
    again = [*first[:-1], str(tmp_path / "h2.csv"), "--humans", str(tmp_path / "h.csv")]
    capsys.readouterr()
    assert annotate.main(again) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {tmp_path / 'done.csv'}: row 1: "), err
    assert f"{tmp_path / 'h.csv'}:2" in err and "annotator=x" in err and not (tmp_path / "h2.csv").exists()
