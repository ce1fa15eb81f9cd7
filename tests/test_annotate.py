"""Disagreement-driven annotation: planted disagreements are selected, the set is blinded, and a planted
annotator's sheet / Label Studio export comes back as exactly the labels they gave."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis.annotate import select as annotate
from analysis.annotate.files import AnnotationError, load_sheet
from core.cells import csv_safe, csv_unescape
from tests.support.hostile import JSON, one_line
from tests.support.study_folders import DIMENSIONS, SAMPLE, sample_candidates, write_fake_run

PLANTED = {(i, c) for i, c, s, _ in sample_candidates() if s == "broad_gen" and c.endswith(":1")}
DISPUTED = {c for _, c in PLANTED}


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
    from analysis.load.collect import load_results

    table = annotate.uncertainty(load_results(study))
    planted = {f"{i} | {c} | originality" for i, c in PLANTED}
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
    ls = [
        dict(
            t,
            id=n,
            annotations=[
                {
                    "completed_by": {"id": 7, "email": "p@lab.org"},
                    "was_cancelled": False,
                    "result": [
                        {
                            "from_name": "score",
                            "to_name": "text",
                            "type": "choices",
                            "value": {
                                "choices": [
                                    str(
                                        _truth(
                                            by_item.loc[t["data"]["item"], "candidate_id"],
                                            by_item.loc[t["data"]["item"], "dimension"],
                                        )
                                    )
                                ]
                            },
                        }
                    ],
                },
                {"completed_by": 8, "was_cancelled": True, "result": []},
            ],
        )
        for n, t in enumerate(tasks)
    ]
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


def _shared_id_study(tmp_path: Path) -> tuple[Path, dict[tuple[str, str], tuple[str, str]]]:
    """The sample study with candidate ids that repeat across instances (`ref`, `broad_gen:1`, ... in every
    instance) and (instance_id, candidate_id) -> (the instance's first background title, the text)."""
    data = tmp_path / "shared_ids.jsonl"
    lines = [
        ln.replace(f"{json.loads(ln)['instance_id']}:", "") for ln in SAMPLE.read_text().splitlines() if ln
    ]
    data.write_text("\n".join(lines) + "\n")
    root = tmp_path / "shared"
    for name, judge, mode, scorer in (
        ("0", "judge-a", "independent", _agreeing),
        ("1", "judge-b", "independent", _disputing),
    ):
        folder = write_fake_run(root / name, judge, mode, scorer, dataset_path=str(data))
        frame = pd.read_csv(folder / "results.csv")
        for col in ("candidate_id", "prompt_id"):
            frame[col] = frame[col].str.replace(r"^inst-[^:]*:", "", regex=True)
        frame.to_csv(folder / "results.csv", index=False)
    texts = {}
    for ln in lines:
        inst = json.loads(ln)
        for c in [inst["reference"], *inst["candidates"]]:
            texts[(inst["instance_id"], c["candidate_id"])] = (inst["background"][0]["title"], c["text"])
    return root, texts


def test_export_sends_each_items_own_instance_text(tmp_path) -> None:
    """Candidate ids shared by 6 instances: every (instance, candidate, dimension) is its own item, and the
    sheet shows the text of the key's instance (a lookup by candidate id showed one instance's text for all)."""
    root, texts = _shared_id_study(tmp_path)
    n_items = len(texts) * 3
    key = annotate.export(root, tmp_path / "set", n=n_items + 5, by="disagreement")
    sheet = pd.read_csv(tmp_path / "set" / "sheet.csv", dtype=str, keep_default_na=False)
    assert len(key) == len(sheet) == n_items == 198
    assert key["instance_id"].nunique() == 6 and key["candidate_id"].nunique() == 11
    shown = sheet.set_index("item")
    wrong = []
    for r in key.itertuples():
        title, text = texts[(r.instance_id, r.candidate_id)]
        if shown.loc[r.item, "text"] != text or title not in shown.loc[r.item, "background"]:
            wrong.append(r.item)
    assert wrong == []


def test_disagreement_is_among_judges_within_one_mode(tmp_path) -> None:
    """judge-a independent and judge-b independent agree everywhere; judge-a comparative disputes the
    planted items by 2 or 3. That is a change of mode (`flip`), not a disagreement between judges: within
    independent the range is 0 on every item, and comparative has one judge (no range)."""
    from analysis.load.collect import load_results

    root = tmp_path / "modes"
    write_fake_run(root / "0", "judge-a", "independent", _agreeing)
    write_fake_run(root / "1", "judge-a", "comparative", _disputing)
    write_fake_run(root / "2", "judge-b", "independent", _agreeing)
    table = annotate.uncertainty(load_results(root))
    assert (table["disagreement"] == 0).all()
    planted = {f"{i} | {c} | originality" for i, c in PLANTED}
    assert set(table.loc[table["flip"] >= 2, "task"]) == planted


LS_TASK = '{"data": {"item": "item-001"}, "annotations": [{"completed_by": 1, "result": RESULT}]}'
LS_SCORED = (
    '{"data": {"item": "item-001"}, "annotations": [{"completed_by": USER, '
    '"result": [{"from_name": "score", "value": {"choices": ["1"]}}]}]}'
)
BAD_FILES = {  # (file it goes in, content) -> the start of the one-line error after the file name
    ("ls.json", "[1, 2]"): "task 1: not a task object",
    ("ls.json", '[{"data": "x"}]'): "task 1: data: not an object",
    ("ls.json", '[{"data": {"item": "item-001"}, "annotations": "x"}]'): "task 1: annotations: not a list",
    ("ls.json", "[" + LS_TASK.replace("RESULT", '"bad"') + "]"): "task 1: result: not a list",
    (
        "ls.json",
        "[" + LS_TASK.replace("RESULT", '[{"from_name": "score", "value": [1]}]') + "]",
    ): "task 1: value: not an object",
    (
        "ls.json",
        "[" + LS_TASK.replace("RESULT", '[{"from_name": "score", "value": {"choices": "12"}}]') + "]",
    ): "task 1: choices: not a list",
    ("ls.json", b'[{"data": "\xff"}]'): "not UTF-8",
    ("sheet.csv", ""): "not a readable CSV",
    ("sheet.csv", b"item,score\n\xff,1\n"): "not a readable CSV",
    ("key.csv", ""): "not a readable CSV",
    ("key.csv", "x,y\n1,2\n"): "no 'item' column",
    ("key.csv", "item,instance_id,candidate_id,source,dimension\nitem-001,i,c,s,d\n"): "no 'low' column",
    (
        "key.csv",
        "item,instance_id,candidate_id,source,dimension,low,high\n" + "item-001,i,c,s,d,0,3\n" * 2,
    ): "row 2: item: 'item-001' repeats row 1",
    # issue 25 #16: a TypeError, a RecursionError, and users merged into one annotator `None`
    (
        "ls.json",
        "[" + LS_TASK.replace('"item-001"', '["item-001"]').replace("RESULT", "[]") + "]",
    ): "task 1: data.item: not an item name (list)",
    ("ls.json", "[" * 100_000 + "]" * 100_000): "JSON nested too deeply",
    (
        "ls.json",
        "[" + LS_SCORED.replace("USER", '{"first_name": "A"}') + "]",
    ): "task 1, annotation 1: completed_by: no user email or id",
    ("ls.json", "[" + LS_SCORED.replace("USER", "null") + "]"): "task 1, annotation 1: completed_by: no user",
}


@pytest.mark.parametrize(
    ("where", "content"), list(BAD_FILES), ids=[f"{w}-{i}" for i, (w, _) in enumerate(BAD_FILES)]
)
def test_ingest_errors_are_one_line_naming_the_file(study, tmp_path, capsys, where, content) -> None:
    """A malformed Label Studio export, sheet or key: exit 2 and one `error:` line naming that file (a
    malformed export was an AttributeError traceback; the others named no file, e.g. `error: 'item'`)."""
    out = tmp_path / "set"
    annotate.export(study, out, n=4, by="disagreement")
    files = {
        "ls.json": tmp_path / "ls.json",
        "sheet.csv": tmp_path / "sheet.csv",
        "key.csv": tmp_path / "key.csv",
    }
    (out / "sheet.csv").replace(files["sheet.csv"])
    (out / "key.csv").replace(files["key.csv"])
    (files["ls.json"]).write_text("[" + LS_TASK.replace("RESULT", "[]") + "]")
    bad = files[where]
    bad.write_bytes(content if isinstance(content, bytes) else content.encode())
    given = files["ls.json"] if where == "ls.json" else files["sheet.csv"]
    args = ["ingest", str(given), "--key", str(files["key.csv"]), "--out", str(tmp_path / "h.csv")]
    assert annotate.main([*args, "--annotator", "a"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {bad}: "), err
    assert BAD_FILES[(where, content)] in err, err


@pytest.mark.parametrize("n", ["0", "-2", "x"])
def test_export_refuses_n_below_one(study, tmp_path, capsys, n) -> None:
    """--n 0 wrote an empty set behind a pandas error and --n -2 all items but two; argparse refuses both."""
    with pytest.raises(SystemExit) as exc:
        annotate.main(["export", str(study), "--out", str(tmp_path / "set"), "--n", n])
    assert exc.value.code == 2
    assert "argument --n: must be a positive integer" in capsys.readouterr().err
    assert not (tmp_path / "set").exists()
    with pytest.raises(ValueError, match="n must be at least 1"):
        annotate.select(pd.DataFrame({"entropy": [1.0], "disagreement": [1.0], "flip": [1.0]}), 0, "entropy")


@pytest.mark.parametrize(
    ("name", "content"), [("config.json", "{"), ("manifest.json", '{"judge": "judge-a"}')]
)
def test_export_names_a_damaged_run_file(study, tmp_path, capsys, name, content) -> None:
    """A damaged config.json / manifest.json was `error: Expecting value ...` / `error: 'dataset_path'`."""
    bad = study / "0_judge-a_independent_novelty" / name
    bad.write_text(content)
    assert annotate.main(["export", str(study), "--out", str(tmp_path / "set")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {bad}: "), err


FORMULAS = ('=HYPERLINK("http://x","y")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\tTAB", "\rCR")


def test_sheet_cells_never_run_as_formulas_and_come_back_as_written(study, tmp_path) -> None:
    """Review F10: texts starting with = + - @ tab or CR are written with a leading quote (OWASP), so a
    spreadsheet shows them as text; ingest reads the sheet back with the quote removed."""
    lines = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    texts = {}
    for n, inst in enumerate(lines):
        for cand in [inst["reference"], *inst["candidates"]]:
            cand["text"] = texts[cand["candidate_id"]] = FORMULAS[n % len(FORMULAS)] + " " + cand["text"]
    dataset = tmp_path / "formulas.jsonl"
    dataset.write_text("\n".join(json.dumps(inst) for inst in lines) + "\n")
    out = tmp_path / "set"
    key = annotate.export(study, out, n=12, by="disagreement", seed=3, dataset=dataset)
    raw = pd.read_csv(out / "sheet.csv", dtype=str, keep_default_na=False)
    assert raw["text"].str.startswith("'").all() and (raw["position"] == key["position"].astype(str)).all()
    assert raw["text"].str[1:].tolist() == [texts[c] for c in key["candidate_id"]]
    back = load_sheet(out / "sheet.csv")
    assert back["text"].tolist() == [texts[c] for c in key["candidate_id"]]
    assert back["item"].tolist() == key["item"].tolist() and (back["score"] == "").all()


def test_csv_safe_quotes_formula_text_only() -> None:
    frame = pd.DataFrame(
        {
            "name": [*FORMULAS, "-3", "'=q", "plain", None],
            "x": [-1.5] * 10,
            "mixed": [-2.0, "unknown", "-x", 1, 2, 3, 4, 5, 6, 7],
        }
    )
    safe = csv_safe(frame)
    assert safe["name"].tolist()[:9] == ["'" + f for f in FORMULAS] + ["-3", "''=q", "plain"]
    assert pd.isna(safe["name"].iloc[9]) and safe["x"].tolist() == [-1.5] * 10
    assert safe["mixed"].tolist()[:3] == [-2.0, "unknown", "'-x"]
    assert csv_unescape(safe["name"].fillna("")).tolist() == [*FORMULAS, "-3", "'=q", "plain", ""]


def test_ingest_refuses_labels_already_given(study, tmp_path, capsys) -> None:
    # the same sheet ingested twice onto one labels file: every label would be a duplicate, which the
    # report and the viewer refuse; ingest refuses it first, in one line, and writes nothing
    out = tmp_path / "set"
    annotate.export(study, out, n=4, by="disagreement")
    sheet = pd.read_csv(out / "sheet.csv", dtype=str, keep_default_na=False)
    sheet["annotator"], sheet["score"] = "x", "1"
    sheet.to_csv(tmp_path / "done.csv", index=False)
    first = [
        "ingest",
        str(tmp_path / "done.csv"),
        "--key",
        str(out / "key.csv"),
        "--out",
        str(tmp_path / "h.csv"),
    ]
    assert annotate.main(first) == 0
    again = [*first[:-1], str(tmp_path / "h2.csv"), "--humans", str(tmp_path / "h.csv")]
    capsys.readouterr()
    assert annotate.main(again) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {tmp_path / 'done.csv'}: row 1: "), err
    assert f"{tmp_path / 'h.csv'}:2" in err and "annotator=x" in err and not (tmp_path / "h2.csv").exists()


KEY = "item,instance_id,candidate_id,source,dimension,low,high\nA,i1,c1,gen,clarity,1,5\nB,i1,c2,gen,clarity,1,5\n"


def _ingest_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    capsys.readouterr()
    assert annotate.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_a_repeated_label_names_its_sheet_rows_and_tasks(tmp_path, capsys) -> None:
    """Review 8 F4: row 1 is not scored yet (skipped), B is labelled on rows 2 and 3; Label Studio's task 3
    holds both labels. The error counted kept labels ("row 2 ... row 1") and said "row" for a task."""
    (tmp_path / "key.csv").write_text(KEY)
    (tmp_path / "sheet.csv").write_text("item,annotator,score\nA,x,\nB,x,3\nB,x,4\n")
    argv = [
        "ingest",
        str(tmp_path / "sheet.csv"),
        "--key",
        str(tmp_path / "key.csv"),
        "--out",
        str(tmp_path / "h.csv"),
    ]
    err = _ingest_error(capsys, argv)
    assert err.startswith(f"error: {tmp_path / 'sheet.csv'}: row 3: label (") and err.endswith(
        "already given in row 2"
    )
    ann = [
        {"completed_by": {"email": "x@y"}, "result": [{"from_name": "score", "value": {"choices": [s]}}]}
        for s in ("3", "4")
    ]
    tasks = [{"data": {"item": "A"}, "annotations": []}] * 2 + [{"data": {"item": "B"}, "annotations": ann}]
    (tmp_path / "ls.json").write_text(json.dumps(tasks))
    err = _ingest_error(capsys, [*argv[:1], str(tmp_path / "ls.json"), *argv[2:]])
    assert err.startswith(f"error: {tmp_path / 'ls.json'}: task 3: label (annotator=x@y, ") and err.endswith(
        "already given in task 3"
    )


def test_a_label_already_in_the_humans_file_names_its_file_line(tmp_path, capsys) -> None:
    """The kept file's label for B starts on line 5 (a quoted newline in a comment and a blank line above);
    the sheet repeats it on row 2 (row 1 not scored)."""
    (tmp_path / "key.csv").write_text(KEY)
    kept = tmp_path / "kept.csv"
    kept.write_text(
        "annotator,instance_id,candidate_id,source,dimension,score,comment\n"
        'x,i1,c1,gen,clarity,2,"one\ntwo"\n\nx,i1,c2,gen,clarity,2,\n'
    )
    (tmp_path / "sheet.csv").write_text("item,annotator,score\nA,x,\nB,x,3\n")
    err = _ingest_error(
        capsys,
        [
            "ingest",
            str(tmp_path / "sheet.csv"),
            "--key",
            str(tmp_path / "key.csv"),
            "--out",
            str(tmp_path / "h.csv"),
            "--humans",
            str(kept),
        ],
    )
    assert err.startswith(f"error: {tmp_path / 'sheet.csv'}: row 2: label (") and err.endswith(
        f"given in {kept}:5"
    )


def test_ingested_zero_padded_ids_come_back_as_written(tmp_path) -> None:
    """The key says 007 / 01 / 1: the labels file keeps them, and reading it back (report, card, viewer,
    --humans) gives 007 / 01 / 1, not 7 / 1 / 1 (which refused 01 and 1 as one item labelled twice)."""
    from analysis.load.collect import load_humans

    (tmp_path / "key.csv").write_text(
        "item,instance_id,candidate_id,source,dimension,low,high\n"
        "A,007,01,gen,clarity,1,5\nB,007,1,gen,clarity,1,5\n"
    )
    (tmp_path / "sheet.csv").write_text("item,annotator,score\nA,x,3\nB,x,4\n")
    out = tmp_path / "h.csv"
    assert (
        annotate.main(
            ["ingest", str(tmp_path / "sheet.csv"), "--key", str(tmp_path / "key.csv"), "--out", str(out)]
        )
        == 0
    )
    back = load_humans(out)
    assert back["instance_id"].tolist() == ["007", "007"] and back["candidate_id"].tolist() == ["01", "1"]
    assert back["score"].tolist() == [3.0, 4.0]


def test_key_csv_runs_no_formula_and_reads_back_as_written(tmp_path: Path) -> None:
    """key.csv is opened by the study lead too: a generator named like a formula gets a leading quote on disk,
    and `read_key` gives every cell back as export wrote it (an id `NA` stays `NA`)."""
    from analysis.annotate.files import read_key, write_key

    key = pd.DataFrame(
        {
            "item": ["item-001", "item-002"],
            "instance_id": ["NA", "007"],
            "candidate_id": ["c", "-c"],
            "source": ['=HYPERLINK("x")', "gen"],
            "dimension": "originality",
            "low": [0, 0],
            "high": [3, 3],
        }
    )
    write_key(key, tmp_path / "key.csv")
    on_disk = (tmp_path / "key.csv").read_text()
    assert "'=HYPERLINK" in on_disk and "'-c" in on_disk
    back = read_key(tmp_path / "key.csv")
    assert back.astype(str).to_dict("list") == key.astype(str).to_dict("list")


def _drop_instances(folder: Path, instances: set[str]) -> None:
    """A run whose judge never saw `instances` (their rows are not in its results)."""
    frame = pd.read_csv(folder / "results.csv", dtype={"instance_id": str})
    frame.loc[~frame["instance_id"].isin(instances)].to_csv(folder / "results.csv", index=False)


def test_export_with_humans_sends_only_items_judged_and_not_yet_labelled(tmp_path, capsys) -> None:
    """Issue 24, item 8 (planted): the judges never saw the last two instances, and two experts already
    labelled every item there (0 against 3: the most uncertain items there are) and the 4 disputed
    originality items the judges scored. `--by entropy` chose the unjudged items, ranked by the experts'
    own disagreement; now only items a judge scored and no expert labelled are sent, the rest counted."""
    from analysis.load.collect import load_humans

    instances = list(dict.fromkeys(i for i, _, _, _ in sample_candidates()))
    unjudged = set(instances[-2:])
    root = tmp_path / "study"
    for name, judge, scorer in (("0", "judge-a", _agreeing), ("1", "judge-b", _disputing)):
        _drop_instances(write_fake_run(root / name, judge, "independent", scorer), unjudged)
    rows = []
    for inst, cand, source, _ in sample_candidates():
        for dim in DIMENSIONS:
            if inst in unjudged or ((inst, cand) in PLANTED and dim == "originality"):
                rows += [(who, inst, cand, source, dim, score) for who, score in (("ann1", 0), ("ann2", 3))]
    columns = ["annotator", "instance_id", "candidate_id", "source", "dimension", "score"]
    labelled = pd.DataFrame(rows, columns=columns)
    labelled.to_csv(tmp_path / "humans.csv", index=False)
    n_unjudged = len(labelled.loc[labelled["instance_id"].isin(unjudged)]) // 2
    assert n_unjudged == 66 and len(labelled) // 2 - n_unjudged == 4

    humans = load_humans(tmp_path / "humans.csv")
    key = annotate.export(root, tmp_path / "set", n=12, by="entropy", humans=humans)
    assert len(key) == 12
    assert not set(key["instance_id"]) & unjudged  # every item has a judge's score to check
    done = set(zip(labelled["instance_id"], labelled["candidate_id"], labelled["dimension"], strict=True))
    assert not done & set(zip(key["instance_id"], key["candidate_id"], key["dimension"], strict=True))
    err = capsys.readouterr().err
    assert "left out 66 item(s) no judge scored (labelled in --humans only) and 4 item(s) already" in err


RENAMED = {"originality": "source_boundedness", "gap_addressing": "diagnostic_framing"}


def _two_rubric_study(tmp_path: Path) -> Path:
    """Two judges' novelty runs and their narrowness runs (that rubric's own two dimensions) in one folder."""
    from omegaconf import OmegaConf

    from tests.support.study_folders import ROOT

    root = tmp_path / "two"
    narrowness = OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / "rubric" / "narrowness.yaml"))
    for n, (judge, scorer) in enumerate((("judge-a", _agreeing), ("judge-b", _disputing))):
        write_fake_run(root / f"novelty{n}", judge, "independent", scorer)
        folder = write_fake_run(root / f"narrowness{n}", judge, "independent", scorer)
        frame = pd.read_csv(folder / "results.csv")
        frame = frame.loc[frame["dimension"] != "non_obviousness"]
        renamed = frame["dimension"].map(RENAMED)
        frame = frame.assign(rubric="narrowness", higher_is_better=False, dimension=renamed)
        frame.to_csv(folder / "results.csv", index=False)
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(config | {"rubric": narrowness}))
    return root


def test_export_rubric_picks_one_rubric_of_a_two_rubric_study(tmp_path, capsys) -> None:
    """Issue 24, item 8: a study run with two rubrics was refused with no way to pick one; `--rubric` picks it,
    and the items, the wording and the scale are that rubric's alone."""
    root = _two_rubric_study(tmp_path)
    assert annotate.main(["export", str(root), "--out", str(tmp_path / "x"), "--n", "4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "several rubrics (narrowness, novelty); pick one with --rubric" in err
    for rubric, dims in (("novelty", set(DIMENSIONS)), ("narrowness", set(RENAMED.values()))):
        out = tmp_path / rubric
        argv = ["export", str(root), "--out", str(out), "--n", "500", "--by", "entropy", "--rubric", rubric]
        code, err = annotate.main(argv), capsys.readouterr().err
        assert code == 0, err
        key = pd.read_csv(out / "key.csv")
        assert set(key["dimension"]) == dims and set(key["rubric"]) == {rubric}
        assert len(key) == 66 * len(dims)  # every item of that rubric, none of the other's
        assert f"<!-- rubric: {rubric} -->" in (out / "labelstudio_config.xml").read_text()
    assert annotate.main(["export", str(root), "--out", str(tmp_path / "y"), "--rubric", "pairwise"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--rubric pairwise: no run of" in err and "narrowness, novelty" in err


def test_label_studio_users_are_told_apart_by_email_or_id(tmp_path) -> None:
    """Issue 25 #16: users without email were `str(None)`, one rater; a user given as {"id": 7} was "7" but as
    7 "labelstudio:7", two raters. Email first, else `labelstudio:<id>` in both shapes."""
    from analysis.annotate.files import read_labelstudio

    users = ['{"id": 7}', "7", '{"id": 8, "email": "p@lab.org"}', '{"id": 9, "email": ""}']
    (tmp_path / "ls.json").write_text("[" + ", ".join(LS_SCORED.replace("USER", u) for u in users) + "]")
    who = read_labelstudio(tmp_path / "ls.json")["annotator"].tolist()
    assert who == ["labelstudio:7", "labelstudio:7", "p@lab.org", "labelstudio:9"]


def test_a_judge_run_in_two_modes_is_one_rater_in_the_entropy(tmp_path: Path, monkeypatch) -> None:
    """Issue 23, item 3: judge-a agrees with the truth in both modes, judge-b disputes the planted items.
    Counted as two raters, judge-a's two runs outvote judge-b (its own agreement makes its label look
    certain); one rater per judge and mode fit, the second mode adds no vote: the one-mode study's entropy."""
    from analysis.load.collect import load_results
    from analysis.stats import latent_models

    one = tmp_path / "one"
    write_fake_run(one / "0_judge-a_independent_novelty", "judge-a", "independent", _agreeing)
    write_fake_run(one / "1_judge-b_independent_novelty", "judge-b", "independent", _disputing)
    two = tmp_path / "two"
    write_fake_run(two / "0_judge-a_independent_novelty", "judge-a", "independent", _agreeing)
    write_fake_run(two / "1_judge-a_comparative_novelty", "judge-a", "comparative", _agreeing)
    write_fake_run(two / "2_judge-b_independent_novelty", "judge-b", "independent", _disputing)
    fits: list[list[str]] = []
    real = latent_models.dawid_skene

    def recording(labels: pd.DataFrame, n_iter: int = 100) -> latent_models.LatentFit:  # a spy, not a fake
        fits.append(sorted(str(w).rsplit(" [", 1)[0] for w in labels["worker"].unique()))
        return real(labels, n_iter)

    monkeypatch.setattr(latent_models, "dawid_skene", recording)
    single = annotate.uncertainty(load_results(one)).set_index("task")["entropy"]
    both = annotate.uncertainty(load_results(two)).set_index("task")["entropy"]
    assert fits and all(len(judges) == len(set(judges)) for judges in fits), fits  # each judge once per fit
    pd.testing.assert_series_equal(both.sort_index(), single.sort_index())
    planted = [f"{i} | {c} | originality" for i, c in PLANTED]
    assert both.loc[planted].min() > 0.5 > both.drop(planted).max()  # a 1-vs-1 dispute is uncertain


# --- a hostile Label Studio export (issue 25): any JSON in its place ---

USERS = st.one_of(JSON, st.fixed_dictionaries({}, optional={"email": JSON, "id": JSON}))
RESULTS = st.lists(
    st.one_of(
        JSON,
        st.fixed_dictionaries(
            {
                "from_name": st.just("score"),
                "value": st.one_of(
                    JSON, st.fixed_dictionaries({"choices": st.one_of(JSON, st.lists(JSON, max_size=2))})
                ),
            }
        ),
    ),
    max_size=2,
)
TASKS = st.lists(
    st.one_of(
        JSON,
        st.fixed_dictionaries(
            {
                "data": st.one_of(JSON, st.fixed_dictionaries({"item": JSON})),
                "annotations": st.one_of(
                    JSON,
                    st.lists(
                        st.fixed_dictionaries(
                            {"completed_by": USERS, "result": st.one_of(JSON, RESULTS)},
                            optional={"was_cancelled": JSON},
                        ),
                        max_size=3,
                    ),
                ),
            }
        ),
    ),
    max_size=4,
)


@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(tasks=st.one_of(TASKS, JSON), nested=st.sampled_from([0, 0, 0, 5_000, 200_000]))
def test_a_hostile_label_studio_export_is_read_or_one_line(
    tasks: object, nested: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Any JSON in place of a Label Studio export (wrong types anywhere, nesting past the parser, users with
    no email or id): labels with a text item and a distinct annotator each, or one line naming the file."""
    from analysis.annotate.files import AnnotationError, read_labelstudio

    path = tmp_path_factory.mktemp("ls") / "export.json"
    text = json.dumps(tasks)
    path.write_text("[" * nested + text + "]" * nested)
    try:
        labels = read_labelstudio(path)
    except AnnotationError as exc:
        assert one_line(str(exc)) and str(exc).startswith(str(path)), exc
        return
    assert labels["item"].map(lambda v: v is None or isinstance(v, str)).all()
    assert (
        labels["annotator"].map(lambda v: isinstance(v, str) and v not in ("None", "labelstudio:None")).all()
    )
