"""Issue 11 (hardening), the analysis side: every hand-edited, damaged or wrong file answers one line naming
it, and nothing out of its rubric's range or counted twice reaches a table. Includes the hostile-results
property (hypothesis): whatever is done to a results file, the loader either refuses it with one line or
loads only valid values."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis.load.checks import ResultsError
from analysis.load.collect import load_results
from analysis.load.synthetic import synthetic_humans, synthetic_results
from analysis.report.build import main, overview


def novelty_run(n_instances: int = 3) -> pd.DataFrame:
    """A small results table of the shipped novelty rubric (scores 0-3)."""
    frame = synthetic_results(
        n_instances=n_instances,
        n_samples=2,
        judges=("j",),
        modes=("independent",),
        dimensions=("originality", "gap_addressing"),
        seed=3,
    )
    frame = frame.astype({c: str for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)})
    frame["rubric"] = "novelty"
    frame["score"] = frame["score"].clip(0, 3).round()
    return frame.assign(score_min=0.0, score_max=3.0)  # the range, as a run writes it beside each score


# the rubric as a run's config.json records it (the analysis never reads conf/rubric/novelty.yaml)
NOVELTY = {
    "name": "novelty",
    "dimensions": [
        {"name": d, "low": 0, "high": 3, "higher_is_better": True}
        for d in ("originality", "gap_addressing", "non_obviousness")
    ],
}


def write(folder: Path, frame: pd.DataFrame, kind: str = "csv") -> Path:
    """The results file and the run's config.json, as experiments.run leaves them."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"rubric": NOVELTY}))
    path = folder / f"results.{kind}"
    frame.to_csv(path, index=False) if kind == "csv" else frame.to_parquet(path, index=False)
    return path


def one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """`python -m analysis.report argv` must answer one line and exit 2; that line."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err


def test_a_valid_run_loads(tmp_path: Path) -> None:
    frame = novelty_run()
    write(tmp_path / "run", frame)
    assert len(load_results(tmp_path)) == len(frame)


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_a_score_outside_the_rubric_range_is_refused(
    tmp_path: Path, kind: str, capsys: pytest.CaptureFixture[str]
) -> None:
    frame = novelty_run()
    frame.loc[5, "score"] = 99
    path = write(tmp_path / "run", frame, kind)
    where = f"{path}:7" if kind == "csv" else f"{path}: row 6"
    message = f"{where}: score 99 for {frame.loc[5, 'dimension']} is outside the novelty rubric's range 0-3"
    with pytest.raises(ResultsError, match="^" + message.replace("(", r"\(")):
        load_results(tmp_path)
    assert one_line(capsys, [str(tmp_path)]) == f"error: {message}"


def test_an_older_table_takes_its_range_from_the_run_config_never_from_conf(tmp_path: Path) -> None:
    """Issue 23, item 4: a table written before `score_min` / `score_max` is checked against the rubric in its
    run's config.json; that rubric, not the shipped conf/rubric/novelty.yaml, is the one the run used."""
    frame = novelty_run().drop(columns=["score_min", "score_max"])
    frame.loc[5, "score"] = 99
    path = write(tmp_path / "run", frame)
    outside = r"results.csv:7: score 99 for .* outside the novelty rubric's range 0-3"
    with pytest.raises(ResultsError, match=outside):
        load_results(tmp_path / "run")
    wide = {**NOVELTY, "dimensions": [{**d, "high": 100} for d in NOVELTY["dimensions"]]}
    (path.parent / "config.json").write_text(json.dumps({"rubric": wide}))  # the run's own novelty: 0-100
    assert load_results(tmp_path / "run")["score"].max() == 99
    # the row's own range and the run's: the narrower holds (a hand-edited bound widens nothing)
    write(tmp_path / "cols", frame.assign(score_min=0.0, score_max=100.0))
    (tmp_path / "cols" / "config.json").write_text(json.dumps({"rubric": wide}))
    assert load_results(tmp_path / "cols")["score"].max() == 99
    (tmp_path / "cols" / "config.json").write_text(json.dumps({"rubric": NOVELTY}))
    with pytest.raises(ResultsError, match=outside):
        load_results(tmp_path / "cols")
    # a dimension the run's rubric lacks is refused
    frame.loc[5, "score"] = 1
    write(tmp_path / "dim", frame.assign(dimension="clarity"))
    not_a_dimension = r"'clarity' is not a dimension of the novelty rubric \(originality, "
    with pytest.raises(ResultsError, match=not_a_dimension):
        load_results(tmp_path / "dim")
    (tmp_path / "damaged").mkdir()
    (tmp_path / "damaged" / "config.json").write_text("{not json")
    frame.to_csv(tmp_path / "damaged" / "results.csv", index=False)
    with pytest.raises(ResultsError, match=r"damaged/config.json: not readable JSON"):
        load_results(tmp_path / "damaged")


def test_duplicated_rows_and_copied_runs_are_refused(tmp_path: Path) -> None:
    frame = novelty_run()
    write(tmp_path / "dup", pd.concat([frame, frame.iloc[[4]]], ignore_index=True))
    with pytest.raises(ResultsError, match=r"results.csv:\d+: a duplicated row \(1 in all\)"):
        load_results(tmp_path / "dup")
    write(tmp_path / "copies" / "a", frame)
    write(tmp_path / "copies" / "b", frame)
    copy = r"b/results.csv: holds run '.*' with the same rows as .*a/results.csv: a copy; remove one, or add --latest"
    with pytest.raises(ResultsError, match=copy):
        load_results(tmp_path / "copies")


def test_a_sweep_and_its_continuation_name_the_overlap_and_latest_keeps_the_newer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sweep stopped on its budget and its continuation, side by side in one folder: the same job name (run
    id), the stopped one holding part of the rows. Neither is a copy ("remove the copy" was wrong): the line
    names both files and offers --latest, which keeps the continuation's rows only."""
    import os

    full = novelty_run().assign(run_id="0_j_independent_novelty")
    stopped = write(tmp_path / "day" / "10-00-00" / "0_j_independent_novelty", full.iloc[: len(full) // 2])
    later = write(tmp_path / "day" / "10-30-00" / "0_j_independent_novelty", full)
    os.utime(stopped, (1_000_000, 1_000_000))
    expected = (
        f"error: {stopped} and {later} both hold run '0_j_independent_novelty' with different rows (two "
        "sweeps of the same jobs, e.g. one stopped on its budget and its continuation); analyse one sweep "
        f"folder, or add --latest to keep the newer ({later.parent})"
    )
    assert one_line(capsys, [str(tmp_path / "day")]) == expected
    kept = load_results(tmp_path / "day", latest=True)
    assert len(kept) == len(full)
    note = f"note: --latest: left out {stopped} (a newer file holds the same run)\n"
    assert capsys.readouterr().err == note


def test_symlinked_run_folders_are_not_followed_and_said_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A `latest` link to a sweep next to it (or a linked results file) is not read a second time; one note
    line names each link."""
    frame = novelty_run().assign(run_id="run")
    write(tmp_path / "sweep" / "run", frame)
    (tmp_path / "sweep" / "latest").symlink_to(tmp_path / "sweep" / "run", target_is_directory=True)
    (tmp_path / "sweep" / "other").mkdir()
    (tmp_path / "sweep" / "other" / "results.csv").symlink_to(tmp_path / "sweep" / "run" / "results.csv")
    loaded = load_results(tmp_path / "sweep")
    assert len(loaded) == len(frame)
    assert capsys.readouterr().err.splitlines() == [
        f"note: {tmp_path / 'sweep' / 'latest'} is a symbolic link: not followed (analyse the folder it points to "
        "on its own)",
        f"note: {tmp_path / 'sweep' / 'other' / 'results.csv'} is a symbolic link: not followed (analyse the folder "
        "it points to on its own)",
    ]


def test_runs_of_one_judge_over_the_same_items_are_separate_raters(tmp_path: Path) -> None:
    """Two runs of one judge, mode and rubric that judged the same items (a `-m temperature=0.1,1.0` sweep)
    are two raters, ``judge@run``: pooled, every candidate score would mix the settings' samples and
    self-consistency would measure the gap between the runs. Runs over other instances stay one rater."""
    from analysis.stats.consistency import self_consistency
    from analysis.stats.scores import candidate_scores

    cool = novelty_run().assign(run_id="cool")
    hot = cool.assign(run_id="hot", score=3 - cool["score"])  # the same items, answered otherwise
    write(tmp_path / "sweep" / "0", cool)
    write(tmp_path / "sweep" / "1", hot)
    swept = load_results(tmp_path / "sweep")
    assert sorted(swept["judge"].unique()) == ["j@cool", "j@hot"]
    assert (candidate_scores(swept)["n_scored"] == 2).all()  # each run's 2 samples, never 4
    alone = self_consistency(load_results(tmp_path / "sweep" / "0"), n_boot=20).set_index("dimension")
    split = self_consistency(swept, n_boot=20)
    pd.testing.assert_series_equal(
        split[split["judge"] == "j@cool"].set_index("dimension")["mean_sd"], alone["mean_sd"]
    )

    for folder, frame in (("0", cool), ("1", cool.assign(run_id="again"))):  # one study run twice
        write(tmp_path / "rerun" / folder, frame)
        (tmp_path / "rerun" / folder / "manifest.json").write_text(json.dumps({"study_id": "s1"}))
    rerun = load_results(tmp_path / "rerun")
    assert list(rerun["judge"].unique()) == ["j"] and len(rerun) == len(cool)  # one rater, each judgment once
    assert rerun.attrs["duplicate_judgments"] == len(cool)
    assert (candidate_scores(rerun)["n_scored"] == 2).all()
    edited = cool.assign(run_id="edited", rubric_version="v2")  # the same settings, another template
    write(tmp_path / "rerun" / "2", edited)
    (tmp_path / "rerun" / "2" / "manifest.json").write_text(json.dumps({"study_id": "s1"}))
    assert len(load_results(tmp_path / "rerun")) == 2 * len(cool)  # not a repeat: its rows are kept

    other = novelty_run().assign(run_id="more")
    other["instance_id"] = "x-" + other["instance_id"].astype(str)  # the same study over other instances
    write(tmp_path / "split" / "0", cool)
    write(tmp_path / "split" / "1", other)
    assert list(load_results(tmp_path / "split")["judge"].unique()) == ["j"]


def test_every_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert one_line(capsys, [str(tmp_path / "missing")]) == f"error: {tmp_path / 'missing'}: no such folder"
    (tmp_path / "empty").mkdir()
    assert "no results.parquet or results.csv below this folder" in one_line(
        capsys, [str(tmp_path / "empty")]
    )
    frame = novelty_run()
    text = frame.assign(score=frame["score"].astype(object))
    text.loc[2, "score"] = "abc"
    path = write(tmp_path / "abc", text)
    assert one_line(capsys, [str(tmp_path / "abc")]) == f"error: {path}:4: score 'abc' is not a number"
    binary = tmp_path / "binary" / "results.csv"
    binary.parent.mkdir()
    binary.write_bytes(bytes(range(256)) * 40)
    assert one_line(capsys, [str(binary.parent)]).startswith(f"error: {binary}: ")
    path = write(tmp_path / "nocol", frame.drop(columns=["dimension"]))
    assert one_line(capsys, [str(tmp_path / "nocol")]).startswith(
        f"error: {path}: missing column(s) dimension"
    )
    write(tmp_path / "ok", frame)
    humans = tmp_path / "humans.jsonl"
    humans.write_text("\n".join(json.dumps(r) for r in synthetic_humans(frame).head(5).to_dict("records")))
    assert one_line(capsys, [str(tmp_path / "ok"), "--humans", str(humans)]).startswith(f"error: {humans}: ")


def test_an_unknown_cost_is_shown_as_unknown() -> None:
    frame = novelty_run()
    known = overview(load_ready(frame))
    assert known["cost_usd"].iloc[0] == pytest.approx(
        0.042
    )  # 3 instances × 7 candidates × 2 samples = 42 calls of $0.001
    frame.loc[3, "cost_usd"] = np.nan
    assert overview(load_ready(frame))["cost_usd"].tolist() == ["unknown"]


def load_ready(frame: pd.DataFrame) -> pd.DataFrame:
    from analysis.load.collect import prepare

    return prepare(frame)


# --- the hostile-results property --------------------------------------------------------------------------

EDITS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "score",
                "dimension",
                "run_id",
                "sample_idx",
                "cost_usd",
                "drop",
                "duplicate",
                "truncate",
                "bytes",
            ]
        ),
        st.integers(0, 10_000),
        st.one_of(st.integers(-(10**6), 10**6), st.floats(), st.text(max_size=8)),
    ),
    min_size=1,
    max_size=4,
)


def hostile_edit(path: Path, frame: pd.DataFrame, edits: list[tuple[str, int, object]]) -> None:
    """Hand-edit a results CSV as a careless (or malicious) user would."""
    out = frame.copy().astype(object)
    for what, at, value in edits:
        row = at % len(out)
        if what == "drop":
            out = out.drop(columns=[out.columns[at % len(out.columns)]])
        elif what == "duplicate":
            out = pd.concat([out, out.iloc[[row]]], ignore_index=True)
        elif what in out.columns:
            out.iloc[row, out.columns.get_loc(what)] = value
    out.to_csv(path, index=False)
    data = path.read_bytes()
    for what, at, _ in edits:
        if what == "truncate":
            data = data[: at % max(1, len(data))]
        elif what == "bytes":
            data = data[: at % max(1, len(data))] + bytes(range(256)) + data[at % max(1, len(data)) :]
    path.write_bytes(data)


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(EDITS)
def test_hostile_results_files_load_valid_or_answer_one_line(
    tmp_path_factory: pytest.TempPathFactory, edits: list[tuple[str, int, object]]
) -> None:
    frame = novelty_run(2)
    folder = tmp_path_factory.mktemp("hostile") / "run"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"rubric": NOVELTY}))
    hostile_edit(folder / "results.csv", frame, edits)
    try:
        loaded = load_results(folder)
    except (ResultsError, OSError) as exc:
        assert "\n" not in str(exc) and str(folder) in str(exc)
        return
    assert set(loaded["dimension"].astype(str)) <= {"originality", "gap_addressing"}
    assert loaded["score"].dropna().between(0, 3).all()
    keys = ["run_id", "prompt_id", "instance_id", "candidate_id", "dimension", "sample_idx"]
    assert not loaded[[k for k in keys if k in loaded]].astype(str).duplicated().any()


@pytest.mark.parametrize(
    "module", ["report.build", "novbench_report", "echoreview_report", "robustness", "card.build", "latent"]
)
@pytest.mark.parametrize("value", ["0", "-5"])
def test_n_boot_must_be_positive_in_every_analysis_cli(
    module: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """0 left every CI empty with exit 0; -5 said numpy's "negative dimensions" without naming the option."""
    import importlib

    cli = importlib.import_module(f"analysis.{module}")
    with pytest.raises(SystemExit) as stop:
        cli.main([str(tmp_path), "--n-boot", value])
    assert stop.value.code == 2
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith(f"error: argument --n-boot: must be a positive integer, not '{value}'")
    )


# review 8, F2/F3: ids are text (``007`` is not ``7``; ``01`` and ``1`` are two items) and an error names the
# file line a record starts on (a quoted newline or a blank line moves the later records down)
LABELS = "annotator,instance_id,candidate_id,source,dimension,score,comment\n"


def test_human_label_ids_are_read_as_text(tmp_path: Path) -> None:
    from analysis.load.collect import load_humans

    path = tmp_path / "h.csv"
    path.write_text(LABELS + "NA,007,1.50,gen,1e3,3,\nNA,01,c1,gen,1e3,4,\nNA,1,c1,gen,1e3,,\n")
    humans = load_humans(path)  # 01 and 1 were one id (1), so the third label was refused as a duplicate
    assert humans["instance_id"].tolist() == ["007", "01", "1"]
    assert humans["candidate_id"].tolist() == ["1.50", "c1", "c1"]
    assert humans["annotator"].tolist() == ["NA"] * 3 and humans["dimension"].tolist() == ["1e3"] * 3
    assert humans["score"].tolist()[:2] == [3.0, 4.0] and np.isnan(humans["score"].iloc[2])


def test_results_csv_ids_are_read_as_text(tmp_path: Path) -> None:
    frame = novelty_run(n_instances=1).drop(columns=["prompt_id"], errors="ignore")
    frame = frame.loc[frame["dimension"] == "originality"].drop_duplicates(["candidate_id"]).head(3).copy()
    frame["instance_id"], frame["candidate_id"] = "007", ["01", "1", "1.50"]
    frame["prompt_id"] = ["08", "8", "1e3"]
    write(tmp_path / "run", frame)
    loaded = load_results(tmp_path / "run")
    assert loaded["instance_id"].astype(str).tolist() == ["007"] * 3
    assert loaded["candidate_id"].astype(str).tolist() == ["01", "1", "1.50"]
    assert loaded["prompt_id"].astype(str).tolist() == ["08", "8", "1e3"]


@pytest.mark.parametrize(
    ("text", "line", "first"),
    [
        (
            LABELS
            + 'a,i1,c1,gen,clarity,3,"line one\nline two"\na,i1,c2,gen,clarity,4,ok\na,i1,c1,gen,clarity,5,x\n',
            5,
            2,
        ),
        (LABELS + "a,i1,c1,gen,clarity,3,\n\na,i1,c1,gen,clarity,5,\n", 4, 2),
        (LABELS + '\na,i1,c0,gen,clarity,3,"x\n\ny"\na,i1,c1,gen,clarity,3,\na,i1,c1,gen,clarity,5,\n', 7, 6),
    ],
)
def test_duplicate_label_names_the_file_lines(tmp_path: Path, text: str, line: int, first: int) -> None:
    from analysis.load.collect import load_humans

    path = tmp_path / "h.csv"
    path.write_text(text)
    assert text.splitlines()[line - 1].startswith("a,i1,c1,") and text.splitlines()[first - 1].startswith(
        "a,i1,c1,"
    )
    with pytest.raises(
        ResultsError, match=rf"h.csv:{line}: duplicate human label .* first given on line {first};"
    ):
        load_humans(path)


def test_a_bad_number_names_its_file_line(tmp_path: Path) -> None:
    from analysis.load.collect import load_humans

    path = tmp_path / "h.csv"
    path.write_text(LABELS + 'a,i1,c1,gen,clarity,3,"one\ntwo"\n\na,i1,c2,gen,clarity,abc,\n')
    with pytest.raises(ResultsError, match=r"h.csv:5: score 'abc' is not a number"):
        load_humans(path)
    frame = novelty_run(n_instances=1).head(3).copy()
    frame["raw"] = ["a\nb", "c", "d"]
    frame["score"] = frame["score"].astype(object)
    frame.iloc[2, frame.columns.get_loc("score")] = "abc"
    write(tmp_path / "run", frame)
    with pytest.raises(ResultsError, match=r"results.csv:5: score 'abc' is not a number"):
        load_results(tmp_path / "run")


# review 9, F3: an id spelled like a missing value (NA, null, None, N/A, nan) is an id in a results.csv too, as
# it is in the parquet copy and in the human labels; only the number and flag columns know missing spellings
def test_a_csv_and_a_parquet_copy_of_one_study_load_alike(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    from analysis.load.collect import load_humans
    from analysis.stats.humans import human_agreement
    from experiments.rows import to_frame

    ids = ["NA", "null", "None", "N/A", "nan", "FR"]
    rows = [
        {
            "run_id": "r",
            "judge": "j",
            "model": "NA",
            "mode": "independent",
            "rubric": "x",
            "rubric_version": "v",
            "prompt_id": f"p{i}",
            "instance_id": inst,
            "candidate_id": "c",
            "source": "NA",
            "dimension": "d",
            "higher_is_better": True,
            "sample_idx": 0,
            "score": float(i % 3 + 1),
            "parse_ok": True,
            "cost_usd": None if i == 1 else 0.5,
            "latency_s": 1.0,
            "cached": False,
            "raw": "x",
        }
        for i, inst in enumerate(ids)
    ]
    rows.append(
        {**rows[-1], "prompt_id": "p9", "instance_id": "US", "score": None, "parse_ok": False, "raw": None}
    )
    table = pa.Table.from_pandas(to_frame(rows), preserve_index=False)
    (tmp_path / "pq" / "r").mkdir(parents=True)
    (tmp_path / "csv" / "r").mkdir(parents=True)
    table.to_pandas().to_parquet(tmp_path / "pq" / "r" / "results.parquet", index=False)
    pa_csv.write_csv(table, tmp_path / "csv" / "r" / "results.csv")
    parquet, text = load_results(tmp_path / "pq"), load_results(tmp_path / "csv")
    assert text["instance_id"].astype(object).tolist() == [*ids, "US"]
    assert text["source"].astype(object).tolist() == ["NA"] * 7
    same = [c for c in text.columns if c != "position"]  # an all-empty Int64 column is float NaN in a CSV

    def cells(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[same].astype(object).where(frame[same].notna(), None)

    pd.testing.assert_frame_equal(cells(text), cells(parquet))
    assert (
        np.isnan(text["cost_usd"].iloc[1])
        and np.isnan(text["score"].iloc[6])
        and pd.isna(text["raw"].iloc[6])
    )
    humans = tmp_path / "h.csv"
    pd.DataFrame(
        {
            "annotator": "a",
            "instance_id": ids,
            "candidate_id": "c",
            "source": "NA",
            "dimension": "d",
            "score": [i % 3 + 1 for i in range(6)],
        }
    ).to_csv(humans, index=False)
    labels = load_humans(humans)
    assert human_agreement(text, labels, n_boot=20)["n"].tolist() == [6]
    assert human_agreement(parquet, labels, n_boot=20)["n"].tolist() == [6]


# review 9, F6: pandas skips a line only when it is empty or holds only spaces and tabs; a line `""` (or `" "`,
# `,`, a form feed) is a record, so csv_line must count it: after a quoted newline it named line 4, not 5
@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('a,b\n1,"x\ny"\n""\n2,BAD\n', 5),
        ('a,b\n1,x\n""\n2,BAD\n', 4),
        ('a,b\n1,"x\ny"\n" "\n \t \n\n2,BAD\n', 7),
        ('a,b\r\n1,"x\r\ny"\r\n\f\r\n\t\r\n2,BAD\r\n', 6),
        ('a,b\r1,"x\ry"\r""\r  \r2,BAD\r', 6),
    ],
)
def test_csv_line_skips_the_lines_pandas_skips(tmp_path: Path, text: str, line: int) -> None:
    from analysis.load.checks import csv_line

    path = tmp_path / "f.csv"
    path.write_bytes(text.encode())
    frame = pd.read_csv(path, dtype=str)
    record = int(np.flatnonzero(frame["b"] == "BAD")[0])  # pandas' record number of the bad row
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    assert [n for n, t in enumerate(lines, 1) if "BAD" in t] == [line]
    assert csv_line(path, record) == line


def test_csv_flags_are_parsed_and_token_counts_checked(tmp_path: Path) -> None:
    """Review 10, F2/F3: a CSV parse_ok column that also holds " NA " stayed text, and "False" read as true by
    truthiness (a failed parse's score entered the means); a token count "n.a." stopped the report with a bare
    float error. Flags are parsed (any case, spaces, missing spellings) and a bad count is one line naming the
    file and line."""
    from analysis.stats.scores import usable_mask
    from experiments.rows import to_frame

    rows = [
        {
            "run_id": "r",
            "judge": "j",
            "model": "m",
            "mode": "independent",
            "rubric": "x",
            "rubric_version": "v",
            "prompt_id": f"p{i}",
            "instance_id": "i",
            "candidate_id": f"c{i}",
            "source": "s",
            "dimension": "d",
            "higher_is_better": True,
            "sample_idx": 0,
            "score": 1.0,
            "parse_ok": True,
            "cost_usd": 0.5,
            "latency_s": 1.0,
            "cached": False,
            "raw": "x",
            "prompt_tokens": 3,
            "completion_tokens": 2,
        }
        for i in range(4)
    ]
    frame = to_frame(rows).astype({"parse_ok": object, "cached": object})
    frame["parse_ok"] = ["True", "False", " NA ", "false"]
    frame["cached"] = ["FALSE", "true", "", "0"]
    (tmp_path / "r").mkdir()
    frame.to_csv(tmp_path / "r" / "results.csv", index=False)
    loaded = load_results(tmp_path)
    assert usable_mask(loaded).tolist() == [True, False, True, False]  # unknown counts as parsed
    assert loaded["cached"].astype(object).tolist() == [False, True, pd.NA, False]
    frame["prompt_tokens"] = frame["prompt_tokens"].astype(object)
    frame.loc[2, "prompt_tokens"] = "n.a."
    frame.to_csv(tmp_path / "r" / "results.csv", index=False)
    with pytest.raises(ResultsError, match=r"results\.csv:4: prompt_tokens 'n\.a\.' is not a number"):
        load_results(tmp_path)


def test_a_preference_outside_the_run_rubric_choices_is_refused(tmp_path: Path) -> None:
    """A preference's choices come from the run's config.json rubric (issue 23, item 4), as the ranges."""
    same = {"run_id": "r", "judge": "j", "mode": "pairwise", "rubric": "duel", "instance_id": "i"}
    same |= {"order": "ab", "source": "g", "dimension": "better", "higher_is_better": True, "sample_idx": 0}
    rows = [
        {**same, "candidate_id": c, "other_id": o, "score": None, "preference": p, "parse_ok": True}
        for c, o, p in (("c1", "c2", "left"), ("c2", "c1", "right"), ("c1", "c3", "maybe"))
    ]
    folder = tmp_path / "run"
    folder.mkdir()
    rubric = {"name": "duel", "dimensions": [{"name": "better", "choices": ["left", "right", "tie"]}]}
    (folder / "config.json").write_text(json.dumps({"rubric": rubric}))
    pd.DataFrame(rows).to_csv(folder / "results.csv", index=False)
    wrong = r"results.csv:4: preference 'maybe' for better is not one of left, right"
    with pytest.raises(ResultsError, match=wrong):
        load_results(folder)
    pd.DataFrame(rows[:2]).to_csv(folder / "results.csv", index=False)
    assert list(load_results(folder)["preference"].astype(str)) == ["left", "right"]


def test_overlapping_runs_look_up_each_run_once_not_each_row() -> None:
    """`label_overlapping_runs` asked for every row's study (999,900 calls, 2.2 s of a 1M-row load's profile);
    it now asks once per run, with the same labels."""
    from analysis.load.collect import label_overlapping_runs  # noqa: PLC0415

    class CountingStudies(dict[str, str]):
        asked = 0

        def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
            CountingStudies.asked += 1
            return super().get(key, default)

    rows = pd.DataFrame(
        {
            "run_id": ["r1"] * 300 + ["r2"] * 300,
            "judge": "j",
            "mode": "independent",
            "rubric": "novelty",
            "instance_id": [f"i{k % 300}" for k in range(600)],
            "candidate_id": "c",
            "dimension": "d",
            "score": 1.0,
            "parse_ok": True,
        }
    )
    out = label_overlapping_runs(rows, CountingStudies(r1="s1"))
    assert CountingStudies.asked == 2
    assert sorted(out["judge"].unique()) == ["j@r1", "j@r2"]


def test_a_results_file_cut_mid_row_is_one_line_naming_the_row(tmp_path: Path) -> None:
    """A file truncated just after a line break left a row of only a run id ('r'), which loaded as a judgment
    with no judge, candidate or dimension; it is refused with its line."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"rubric": NOVELTY}))
    novelty_run(1).to_csv(folder / "results.csv", index=False)
    text = (folder / "results.csv").read_text()
    (folder / "results.csv").write_text(text + "r\n")
    last = len(text.splitlines()) + 1
    with pytest.raises(ResultsError, match=rf"results\.csv:{last}: no judge \(is the line cut short\?\)$"):
        load_results(folder)
