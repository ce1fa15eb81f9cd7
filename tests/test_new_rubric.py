"""A new rubric is two files - its YAML and its template - and its direction reaches the analysis untold.

The test writes both into a temporary config folder (added with Hydra's `hydra.searchpath`), runs the real
command against a local server, and reads the table with the analysis: a lower-is-better dimension the
analysis has never heard of gets its wins and losses the right way round.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.load.collect import load_results
from analysis.stats.winrate import win_tie_loss
from experiments.datasets.loader import load_dataset
from tests.support.cli import run as run_cli
from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.rubrics import CONF, check_golden, discover, golden_cases, render_text
from tests.support.runners import run_env
from tests.support.studies import cli_env

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = """{% import "_common.jinja" as c %}
Rate the research question shown at the end: verbosity (0-3, LOWER is better: fewer needless words) and
clarity (0-3, higher is better).

{{ c.background_block(background) }}
Research question to rate:
{{ c.items_block(items, "QUESTION") }}
{{ c.answer_format(rubric, items, comparative) }}
"""


def write_rubric(conf: Path) -> None:
    (conf / "rubric").mkdir(parents=True)
    (conf / "rubric" / "terse.jinja").write_text(TEMPLATE)
    (conf / "rubric" / "terse.yaml").write_text(f"""name: terse
template: {conf / "rubric" / "terse.jinja"}
kind: scores
system: "You answer with a single JSON object and nothing else."
dimensions:
  - {{name: verbosity, low: 0, high: 3, higher_is_better: false}}
  - {{name: clarity, low: 0, high: 3, higher_is_better: true}}
""")


def test_a_lower_is_better_rubric_in_two_files(tmp_path: Path) -> None:
    references = {i.reference.text for i in load_dataset(ROOT / "data/sample/instances.jsonl") if i.reference}

    def answer(body: dict[str, Any]) -> Step:
        """The reference is the most verbose (3); every generated question is terse (0); clarity ties."""
        text = re.search(r"<<<QUESTION>>>\n(.*?)\n<<<END QUESTION>>>", body["messages"][-1]["content"], re.S)
        assert text is not None
        return Step(200, json.dumps({"verbosity": 3 if text.group(1) in references else 0, "clarity": 2}))

    write_rubric(tmp_path / "conf")
    with ScriptedServer(answer).running() as server:
        args = [
            f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
            "rubric=terse",
            "judge=qwen",
            f"judge.api_base={server.api_base}",
            "limit=3",
            "n_samples=1",
            "workers=1",
            "progress=false",
            f"hydra.run.dir={tmp_path / 'run'}",
        ]
        done = run_cli(
            [sys.executable, "-m", "experiments.run", *args],
            cwd=tmp_path,
            env={**run_env(tmp_path), "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    results = load_results(tmp_path / "run")
    directions = results.groupby("dimension", observed=True)["higher_is_better"].unique()
    assert [bool(v) for v in directions["verbosity"]] == [False] and [
        bool(v) for v in directions["clarity"]
    ] == [True]
    rates = win_tie_loss(results, n_boot=50).set_index("dimension")
    # lower verbosity than the reference is a win for every generator; equal clarity is a tie
    assert (rates.loc["verbosity", "win"] == 1.0).all() and (rates.loc["clarity", "tie"] == 1.0).all()


CLARITY = """name: clarity
template: novelty.jinja
kind: scores
system: "You answer with a single JSON object and nothing else."
dimensions:
  - name: clarity
    low: 0
    high: 3
    description: can a reader state what answering the question would show?
    anchors: {0: unclear what is asked, 1: mostly clear, 2: clear, 3: clear and testable as stated}
  - name: wordiness
    low: 0
    high: 3
    higher_is_better: false
    description: how many words could go without losing anything?
    anchors: {0: none, 1: a few, 2: many, 3: most of them}
"""


def test_a_rubric_in_one_yaml_is_golden_rendered_scored_and_reported(tmp_path: Path) -> None:
    """A rubric that is one YAML in a user's config folder (its prose there; a shipped template writes it in):
    the golden renders find it, a study through the command line scores it on the sample, and the report's
    tables carry both its dimensions, the lower-is-better one the right way round."""
    (tmp_path / "conf" / "rubric").mkdir(parents=True)
    (tmp_path / "conf" / "rubric" / "clarity.yaml").write_text(CLARITY)
    rubrics = discover(CONF, tmp_path / "conf" / "rubric")
    assert ("clarity", False) in golden_cases(rubrics) and ("clarity", True) in golden_cases(rubrics)
    golden = tmp_path / "golden"
    golden.mkdir()
    for comparative in (False, True):
        (golden / f"clarity{'_comparative' if comparative else ''}.txt").write_text(
            render_text(rubrics["clarity"], comparative)
        )
        check_golden(rubrics["clarity"], comparative, golden)
    prose = (
        "on two criteria, each an integer from 0 to 3.\n\n"
        "clarity - can a reader state what answering the question would show?\n  0: unclear what is asked\n"
        "  1: mostly clear\n  2: clear\n  3: clear and testable as stated\n"
        "wordiness - how many words could go without losing anything?\n  0: none\n"
    )
    assert prose in (golden / "clarity.txt").read_text()

    with ScriptedServer(lambda body: Step(200, rubric_answer(body))).running() as server:
        args = [
            f"hydra.searchpath=[file://{tmp_path / 'conf'}]",
            "rubric=clarity",
            "judge=qwen",
            f"judge.api_base={server.api_base}",
            "limit=3",
            "n_samples=1",
            "workers=1",
            "progress=false",
            f"hydra.run.dir={tmp_path / 'run'}",
        ]
        done = run_cli(
            [sys.executable, "-m", "experiments.run", *args],
            cwd=tmp_path,
            env=cli_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=300,
        )
        sent = [body["messages"][-1]["content"] for body in server.requests]
    assert done.returncode == 0, done.stderr[-2000:]
    assert sent and all(prose in text for text in sent)
    results = load_results(tmp_path / "run")
    assert (
        set(results["dimension"].astype(str)) == {"clarity", "wordiness"} and results["score"].notna().all()
    )
    report = run_cli(
        [sys.executable, "-m", "analysis.report", str(tmp_path / "run"), "--n-boot", "20"],
        cwd=tmp_path,
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.returncode == 0 and "Traceback" not in report.stderr, report.stderr[-2000:]
    tables = {p.stem: pd.read_csv(p) for p in (tmp_path / "run" / "report" / "tables").glob("*.csv")}
    shown = {
        key: set(frame["dimension"].astype(str)) for key, frame in tables.items() if "dimension" in frame
    }
    assert shown and all(dims <= {"clarity", "wordiness", "overall"} for dims in shown.values())
    assert any({"clarity", "wordiness"} <= dims for dims in shown.values()), shown
    directions = dict(zip(results["dimension"].astype(str), results["higher_is_better"], strict=False))
    assert directions == {"clarity": True, "wordiness": False}
