"""Tables are chosen by what a mode shows (its declared kind), not by its name (issue 33, item 8).

A user adds two modes the way the README says (a module on the path + a YAML in their own config folder):
`alone` (one candidate per prompt, kind single) and `pair_up` (the reference and one candidate in one prompt
at a seeded position, kind multi). Neither name is known to the analysis, yet the report gets the mode-shift
and position-bias tables of their kinds, the card gets the mode-shift field, and the shipped
`comparative_all` (kind multi) gets a position-bias table. Everything runs through the command line against
a local scripted server.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.support.cli import run as run_cli
from tests.support.openai_server import ScriptedServer, Step, rubric_answer
from tests.support.report_run import report_without_figures
from tests.support.studies import cli_env

MODES_MODULE = '''
from dataclasses import dataclass
from typing import ClassVar

from core.modes import ModeKind
from experiments.datasets.instances import Instance
from experiments.modes import RENDERS, Labels, select_candidates
from experiments.modes.independent import Independent
from experiments.prompt import Judged, Prompt, Shown, items
from judge.rubric import Rubric, RubricKind
import random


class Alone(Independent):
    """The independent mode under another name."""


@dataclass(frozen=True)
class PairUp:
    """The reference and one generated candidate in one prompt, in a seeded order under Q1/Q2."""

    name: str = "pair_up"
    k_per_source: int | None = None
    kind: ClassVar[ModeKind] = ModeKind.multi
    asks: ClassVar[RubricKind] = RubricKind.scores
    renders: ClassVar[frozenset[str]] = RENDERS

    def prompts(self, instance: Instance, rubric: Rubric, seed: int, labels: Labels | None = None) -> list[Prompt]:
        chosen = select_candidates(instance, self.k_per_source)
        ref = [c for c in chosen if c.source == "reference"]
        out = []
        for cand in [c for c in chosen if c.source != "reference"]:
            texts = [*ref, cand]
            random.Random(f"{seed}|{instance.instance_id}|{cand.candidate_id}").shuffle(texts)
            shown = tuple(Shown(c, i, f"Q{i + 1}") for i, c in enumerate(texts))
            messages = rubric.render(background=instance.background, items=items(shown), comparative=True)
            out.append(
                Prompt(
                    f"{instance.instance_id}|pair|{cand.candidate_id}",
                    instance.instance_id,
                    messages,
                    shown,
                    self.name,
                    self.asks,
                    tuple(Judged(s) for s in shown),
                    labelled=True,
                    answer_tokens=rubric.answer_tokens(tuple(s.label or "" for s in shown)),
                )
            )
        return out
'''


def _run(args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    env = cli_env(tmp, {"OPENAI_API_KEY": "sk-local-test-server"})
    env["PYTHONPATH"] = f"{env['PYTHONPATH']}:{tmp / 'code'}"
    return run_cli([sys.executable, *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("mode_kinds")
    (tmp / "code").mkdir()
    (tmp / "code" / "mymodes.py").write_text(MODES_MODULE)
    (tmp / "myconf" / "mode").mkdir(parents=True)
    (tmp / "myconf" / "judge").mkdir()
    (tmp / "myconf" / "mode" / "alone.yaml").write_text(
        "_target_: mymodes.Alone\nname: alone\nk_per_source: 2\n"
    )
    (tmp / "myconf" / "mode" / "pair_up.yaml").write_text(
        "_target_: mymodes.PairUp\nname: pair_up\nk_per_source: 2\n"
    )
    server = ScriptedServer(lambda body: Step(200, rubric_answer(body)))
    with server.running():
        (tmp / "myconf" / "judge" / "mine.yaml").write_text(
            f"name: mine\nmodel: openai/mine\napi_base: {server.api_base}\napi_key_env: null\nconcurrency: 4\n"
        )
        done = _run(
            [
                "-m",
                "experiments.run",
                "-m",
                f"hydra.searchpath=[file://{tmp / 'myconf'}]",
                "judge=mine",
                "mode=alone,pair_up,comparative_all",
                "limit=3",
                "n_samples=2",
                "workers=1",
                "progress=false",
                f"hydra.sweep.dir={tmp / 'study'}",
            ],
            tmp,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    # the report in process with its figures undrawn (the tests read its tables); the cards as a command
    assert report_without_figures([str(tmp / "study"), "--n-boot", "20", "--out", str(tmp / "report")]) == 0
    done = _run(
        ["-m", "analysis.card", str(tmp / "study"), "--n-boot", "20", "--out", str(tmp / "card")], tmp
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp


def test_rows_carry_the_kind_their_mode_declares(analysed: Path) -> None:
    kinds = {}
    for path in (analysed / "study").rglob("results.parquet"):
        frame = pd.read_parquet(path, columns=["mode", "mode_kind"])
        kinds.update(dict(zip(frame["mode"], frame["mode_kind"], strict=True)))
    assert kinds == {"alone": "single", "pair_up": "multi", "comparative_all": "multi"}


def test_a_new_mode_gets_the_mode_shift_and_position_tables_of_its_kind(analysed: Path) -> None:
    tables = analysed / "report" / "tables"
    shift = pd.read_csv(tables / "mode_shift.csv")
    assert set(shift["mode"]) == {"pair_up", "comparative_all"}  # each multi mode against `alone`
    position = pd.read_csv(tables / "position_bias.csv")
    assert set(position["mode"]) == {"pair_up", "comparative_all"}  # comparative_all gets one too
    assert set(position.loc[position["mode"] == "pair_up", "position"]) == {0, 1}


def test_the_card_reads_the_new_modes_by_kind(analysed: Path) -> None:
    card = (analysed / "card" / "mine.md").read_text()
    assert "Mode shift" in card and "pair_up" in card
    assert "needs the judge in a one-candidate mode" not in card  # the field is filled, not explained away
