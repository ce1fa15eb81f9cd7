"""The viewer's numbers on planted rows (no browser): nothing to compare is unknown, not 0; a pairwise item's
list cell counts its verdicts; a study closes its DuckDB thread, so a process that used one exits cleanly."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from starlette.testclient import TestClient

from analysis.load.collect import load_results
from analysis.view.data import Study
from analysis.view.server import create_app

BASE = {"run_id": "r", "rubric": "r", "source": "gen", "dimension": "d", "sample_idx": 0, "prompt_id": "p"}


def write_rows(root: Path, rows: list[dict[str, Any]]) -> Path:
    """One results.parquet per mode (a run holds one mode)."""
    frame = pd.DataFrame([{**BASE, **r} for r in rows])
    for mode, part in frame.groupby("mode"):
        (root / str(mode)).mkdir(parents=True)
        part.to_parquet(root / str(mode) / "results.parquet", index=False)
    return root


def test_nothing_to_compare_is_unknown_not_zero_and_sorts_last(tmp_path: Path) -> None:
    # i0/c: one judge in one mode → no other judge, no other mode: judge–judge and indep. vs comp. unknown.
    # i1/c: judges j and k agree (3, 3) in both modes (3, 3): a real 0. i2/c: j scores 2, k's answer did not
    # parse (score NaN), so only one judge has a score: unknown. Sorted by either, i1 (0.0) precedes the
    # unknown items; a 0 for i0 sorted it first (same value, smaller key).
    rows = [
        {"instance_id": "i0", "candidate_id": "c", "judge": "j", "mode": "independent", "score": 1.0},
        {
            "instance_id": "i0",
            "candidate_id": "c",
            "judge": "j",
            "mode": "independent",
            "score": 5.0,
            "sample_idx": 1,
        },
        *(
            {"instance_id": "i1", "candidate_id": "c", "judge": j, "mode": m, "score": 3.0}
            for j in ("j", "k")
            for m in ("independent", "comparative")
        ),
        {"instance_id": "i2", "candidate_id": "c", "judge": "j", "mode": "comparative", "score": 2.0},
        {
            "instance_id": "i2",
            "candidate_id": "c",
            "judge": "k",
            "mode": "comparative",
            "score": float("nan"),
            "parse_ok": False,
        },
    ]
    with Study(write_rows(tmp_path, rows)) as study:
        for sort in ("judge_judge", "mode_shift"):
            page = study.page({}, sort).rows
            got = {(r["instance_id"], r["judge"], r["mode"]): r[sort] for r in page}
            assert got[("i0", "j", "independent")] is None, sort
            assert got[("i1", "j", "independent")] == 0.0 and got[("i1", "k", "comparative")] == 0.0, sort
            assert got[("i2", "j", "comparative")] is None and got[("i2", "k", "comparative")] is None, sort
            known = [r["instance_id"] for r in page if r[sort] is not None]
            assert known == ["i1"] * 4 and page[0]["instance_id"] == "i1", sort
        listed = TestClient(create_app(study), base_url="http://127.0.0.1").get("/?instance_id=i0").text
        unknown = '<td class="num"><span class="fig">–</span></td>'
        assert listed.count(unknown) == 3  # judge–judge, judge–human, indep. vs comp.
        assert '<td class="num"><span class="fig">4.00</span>' in listed  # the spread across i0's two samples


def test_pairwise_list_cell_counts_the_verdicts_as_the_item_page_lists_them(tmp_path: Path) -> None:
    # c1 against c2 in both orders, 2 samples each: verdicts a, b (a flip), a, a → a 3 / b 1 (was one of them)
    pair = {
        "instance_id": "i",
        "candidate_id": "c1",
        "other_id": "c2",
        "judge": "j",
        "mode": "pairwise",
        "score": float("nan"),
    }
    rows = [
        {**pair, "prompt_id": f"p_{o}", "order": o, "sample_idx": s, "preference": p}
        for o, s, p in (("ab", 0, "a"), ("ba", 0, "b"), ("ab", 1, "a"), ("ba", 1, "a"))
    ]
    rows.append({**pair, "candidate_id": "c3", "preference": "tie"})
    with Study(write_rows(tmp_path, rows)) as study:
        cells = {r["candidate_id"]: r["scores"] for r in study.page({}).rows}
        assert cells == {"c1": "d a 3 / b 1", "c3": "d tie 1"}
        assert {
            r["candidate_id"]: r["scores"] for r in study.page({"dimension": "d"}, "spread").rows
        } == cells


EXIT = """
import sys, pathlib
import pandas as pd
from analysis.view.data import Study
root = pathlib.Path(sys.argv[1])
study = Study(root)
print(study.page({}).total)
"""


def test_a_process_that_opened_a_study_exits_cleanly(tmp_path: Path) -> None:
    # page() starts building the disagreement tables on a daemon thread; exiting while DuckDB ran there
    # aborted the interpreter (SIGABRT, 5 of 8 runs). Without close(), the study is closed at exit.
    frame = pd.DataFrame(
        [
            {
                **BASE,
                "instance_id": f"i{k}",
                "candidate_id": f"c{j}",
                "judge": "j",
                "mode": "independent",
                "score": float(j),
                "sample_idx": s,
            }
            for k in range(300)
            for j in range(5)
            for s in range(3)
        ]
    )
    (tmp_path / "run").mkdir()
    frame.to_parquet(tmp_path / "run" / "results.parquet", index=False)
    code = textwrap.dedent(EXIT)
    for _ in range(6):
        done = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=Path(__file__).resolve().parent.parent,
        )
        assert (done.returncode, done.stdout.strip()) == (0, "1500"), done.stderr[-500:]
    with Study(tmp_path) as study:
        study.page({})
    study.close()  # a second close does nothing


# review 9, F4: a missing number spelled as the analysis accepts it (validate.MISSING_TEXT, any case, spaces
# around) is empty in the viewer too, and a NaN is empty: NaN was counted (j's list cell "d nan", judge–judge
# unknown) and NA / None refused the whole study. j scores 2 and (missing), k scores 4: j's mean 2, spread 0,
# judge–judge |4 - 2| = 2 for both.
HEADER = "run_id,judge,mode,rubric,prompt_id,instance_id,candidate_id,source,dimension,higher_is_better,sample_idx,"


@pytest.mark.parametrize(
    "spelled", ["", "nan", "NA", "None", " null ", "N/A", "-NaN", "#N/A", "<NA>", "NULL"]
)
def test_missing_numbers_spelled_as_the_analysis_accepts_are_empty(tmp_path: Path, spelled: str) -> None:
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "results.csv").write_text(
        HEADER + "score,parse_ok,cost_usd,latency_s,position\n"
        "r,j,independent,x,p,i,c,g,d,true,0,2,true,0.5,1.0,1\n"
        f"r,j,independent,x,p,i,c,g,d,true,1,{spelled},{spelled},{spelled},{spelled},{spelled}\n"
        "r,k,independent,x,p2,i,c,g,d,true,0,4,true,0.5,1.0,1\n"
    )
    check_the_missing_score(tmp_path)


def test_a_nan_in_a_parquet_is_empty(tmp_path: Path) -> None:
    nan = float("nan")
    table = pa.table(
        {
            "run_id": ["r"] * 3,
            "judge": ["j", "j", "k"],
            "mode": ["independent"] * 3,
            "rubric": ["x"] * 3,
            "prompt_id": ["p", "p", "p2"],
            "instance_id": ["i"] * 3,
            "candidate_id": ["c"] * 3,
            "source": ["g"] * 3,
            "dimension": ["d"] * 3,
            "higher_is_better": [True] * 3,
            "sample_idx": [0, 1, 0],
            "score": pa.array([2.0, nan, 4.0]),
            "parse_ok": [True, False, True],
            "cost_usd": pa.array([0.5, nan, 0.5]),
            "latency_s": pa.array([1.0, nan, 1.0]),
        }
    )
    (tmp_path / "r").mkdir()
    pq.write_table(table, tmp_path / "r" / "results.parquet")
    check_the_missing_score(tmp_path)


def check_the_missing_score(root: Path) -> None:
    assert load_results(root)["score"].isna().tolist() == [False, True, False]  # the analysis reads it so
    with Study(root) as study:
        rows = study.page({}, "judge_judge").rows
        got = {r["judge"]: (r["judge_judge"], r["spread"], r["scores"]) for r in rows}
        assert got == {"j": (2.0, 0.0, "d 2.0"), "k": (2.0, 0.0, "d 4.0")}
        counts = study.con.execute(
            "SELECT count(score), count(cost_usd), count(latency_s) FROM results"
        ).fetchone()
        assert counts == (2, 2, 2)


def test_item_mean_and_list_row_are_the_unperturbed_rows_perturbed_ones_shown_apart(tmp_path: Path) -> None:
    # c judged by j unperturbed (run r0, perturbation none: 3, 3) and padded (run r1: 1, 2), by k unperturbed
    # only (4); c2 by j in a run without the column (an older run: unperturbed, 2); c3 by j padded only (5).
    # As analysis.robustness reads it, the baseline is `none` (empty: none): j's mean of c is 3 (pooled: 2.25),
    # its spread 0 (pooled: the padded samples' 1), judge–judge |4 − 3| = 1 (pooled: 1.75); the two padded
    # rows are counted apart. c3 has no unperturbed score (–), not its padded 5.
    key = {"rubric": "r", "source": "gen", "dimension": "d", "instance_id": "i", "mode": "independent"}
    runs = {
        "r0": [("j", "c", "none", 0, 3.0), ("j", "c", "none", 1, 3.0), ("k", "c", "none", 0, 4.0)],
        "r1": [
            ("j", "c", "padding", 0, 1.0),
            ("j", "c", "padding", 1, 2.0),
            ("j", "c3", "padding", 0, 5.0),
            ("j", "c3", "padding", 1, 5.0),
        ],
        "r2": [("j", "c2", None, 0, 2.0)],
    }
    for run, rows in runs.items():
        frame = pd.DataFrame(
            [
                {
                    **key,
                    "run_id": run,
                    "prompt_id": f"p_{run}",
                    "judge": j,
                    "candidate_id": c,
                    "perturbation": p,
                    "sample_idx": s,
                    "score": v,
                }
                for j, c, p, s, v in rows
            ]
        )
        (tmp_path / run).mkdir()
        frame.drop(columns="perturbation" if run == "r2" else []).to_parquet(
            tmp_path / run / "results.parquet"
        )
    want = {
        ("c", "j"): ("d 3.0", 0.0, 1.0, 2),
        ("c", "k"): ("d 4.0", 0.0, 1.0, 0),
        ("c2", "j"): ("d 2.0", 0.0, None, 0),
        ("c3", "j"): ("d –", None, None, 2),
    }
    with Study(tmp_path) as study:
        for filters, sort in (
            ({}, "item"),
            ({}, "judge_judge"),
            ({"dimension": "d"}, "spread"),
            ({"dimension": "d"}, "judge_judge"),
        ):
            got = {
                (r["candidate_id"], r["judge"]): (r["scores"], r["spread"], r["judge_judge"], r["perturbed"])
                for r in study.page(filters, sort).rows
            }
            assert got == want, (filters, sort)
        client = TestClient(create_app(study), base_url="http://127.0.0.1")
        listed = client.get("/?judge=j&instance_id=i").text
        assert listed.count("2 perturbed rows") == 2  # c and c3, noted as not in the mean
        page = client.get("/item?instance_id=i&candidate_id=c").text
    assert "3.00 (3, 3)" in page and "1.50 (1, 2)" in page  # unperturbed and padded in columns of their own
    assert "j · r · independent · perturbed: padding" in page


def test_an_unparsed_answer_is_no_score_and_csv_flags_open_as_the_analysis_reads_them(tmp_path: Path) -> None:
    """Review 11, F1/F3: an unparsed answer's score entered the viewer's mean (2 parsed, 4 unparsed: 3.0 where
    the analysis has 2.0); a CSV spelling its flags 1.0/0.0 or " true " (which the analysis accepts) would not
    open ("Could not convert string '1.0' to BOOL")."""
    rows = pd.DataFrame(
        [
            {
                **BASE,
                "instance_id": "i",
                "candidate_id": "c",
                "judge": "j",
                "mode": "independent",
                "score": s,
                "sample_idx": k,
                "parse_ok": ok,
                "cached": cached,
                "higher_is_better": "True",
            }
            for k, (s, ok, cached) in enumerate([(2.0, "1.0", " true "), (4.0, "0.0", "FALSE")])
        ]
    )
    (tmp_path / "run").mkdir()
    rows.to_csv(tmp_path / "run" / "results.csv", index=False)
    analysis = load_results(tmp_path)
    from analysis.stats.scores import candidate_scores

    assert candidate_scores(analysis)["score"].tolist() == [2.0]
    with Study(tmp_path) as study:
        page = study.page({}).rows
        assert [(r["candidate_id"], r["scores"], r["spread"]) for r in page] == [("c", "d 2.0", 0.0)]
        client = TestClient(create_app(study), base_url="http://127.0.0.1")
        item = client.get("/item?instance_id=i&candidate_id=c").text
        assert "2 [unparsed: 4]" in item and "3.00" not in item  # review 12, F1: the item page agrees
