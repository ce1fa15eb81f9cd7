"""A rubric and judges of the user's own config folder (`hydra.searchpath`) work end to end (issue 23, item 4).

The folder holds a rubric the shipped conf/ has never heard of (a 1-7 dimension where lower is better) and
two judges. A study runs against a local scripted server, then the analysis (report, validation, card) reads
that rubric's direction and range from the results and the run's config.json; a robustness run writes its
paraphrases with the folder's second judge (`robustness.generator`). An audit hook fails the test if anything
the analysis does opens a file under conf/.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import conf
from analysis.card import build as card
from analysis.load.checks import ResultsError
from analysis.load.collect import load_results
from analysis.report import build as report
from experiments.datasets.loader import load_dataset
from tests.support.cli import run as run_cli
from tests.support.openai_server import ScriptedServer, Step
from tests.support.studies import cli_env

ROOT = Path(__file__).resolve().parent.parent
CONF = Path(conf.__file__).resolve().parent
TEMPLATE = """{% import "_common.jinja" as c %}
Rate the research question shown at the end for rigour_gap (1-7, LOWER is better: how much rigour is missing).

{{ c.background_block(background) }}
Research question to rate:
{{ c.items_block(items, "QUESTION") }}
{{ c.answer_format(rubric, items, comparative) }}
"""
WRITER = "writer-model"  # the model of the folder's paraphrase generator judge


def write_folder(folder: Path, api_base: str) -> None:
    """The user's config folder: rubric `strict` (its own template) and judges `mine` and `writer`."""
    (folder / "rubric").mkdir(parents=True)
    (folder / "judge").mkdir()
    (folder / "rubric" / "strict.jinja").write_text(TEMPLATE)
    (folder / "rubric" / "strict.yaml").write_text(f"""name: strict
template: {folder / "rubric" / "strict.jinja"}
kind: scores
system: "You answer with a single JSON object and nothing else."
dimensions:
  - {{name: rigour_gap, low: 1, high: 7, higher_is_better: false}}
""")
    for name, model in (("mine", "mine-model"), ("writer", WRITER)):
        (folder / "judge" / f"{name}.yaml").write_text(
            f"name: {name}\nmodel: openai/{model}\napi_base: {api_base}\napi_key_env: null\nconcurrency: 2\n"
        )


@contextmanager
def no_conf_reads() -> Iterator[list[str]]:
    """Every file or folder under conf/ that is opened or listed while inside (Python's audit events, so a
    yaml.safe_load, OmegaConf.load or Path.read_text alike); the hook stays installed, inactive outside."""
    seen: list[str] = []
    _WATCHERS.append(seen)
    try:
        yield seen
    finally:
        _WATCHERS.remove(seen)


_WATCHERS: list[list[str]] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if not _WATCHERS or event not in ("open", "os.listdir", "os.scandir") or not args:
        return
    path = args[0]
    if isinstance(path, (str, bytes, Path)):
        text = path.decode(errors="replace") if isinstance(path, bytes) else str(path)
        if text.startswith(str(CONF)) or Path(text).resolve().is_relative_to(CONF):
            _WATCHERS[-1].append(text)


sys.addaudithook(_audit)


def _answer(references: set[str]) -> Any:
    def answer(body: dict[str, Any]) -> Step:
        """Paraphrases (by whichever judge is asked); rigour_gap 7 for a reference, 2 for a generated text."""
        prompt = body["messages"][-1]["content"]
        if prompt.startswith("Rewrite the text"):
            text = prompt.split("<<<TEXT>>>", 1)[1].split("<<<END TEXT>>>", 1)[0].strip()
            return Step(200, "In other words: " + text)
        shown = re.search(r"<<<QUESTION>>>\n(.*?)\n<<<END QUESTION>>>", prompt, re.S)
        assert shown is not None
        return Step(200, json.dumps({"rigour_gap": 7 if shown.group(1) in references else 2}))

    return answer


def run(args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    env = cli_env(tmp, {"OPENAI_API_KEY": "sk-local-test-server"})
    return run_cli(
        [sys.executable, "-m", "experiments.run", *args],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """Two runs of judge `mine` on rubric `strict` (the original and a paraphrase run whose generator is
    `writer`), and the requests the server got; a third run names a generator that does not exist."""
    tmp = tmp_path_factory.mktemp("user_conf")
    references = {i.reference.text for i in load_dataset(ROOT / "data/sample/instances.jsonl") if i.reference}
    server = ScriptedServer(_answer(references))
    with server.running():
        write_folder(tmp / "myconf", server.api_base)
        common = [
            f"hydra.searchpath=[file://{tmp / 'myconf'}]",
            "judge=mine",
            "rubric=strict",
            "limit=2",
            "n_samples=1",
            "workers=1",
            "progress=false",
        ]
        done = run([*common, f"hydra.run.dir={tmp / 'study' / 'none'}"], tmp)
        assert done.returncode == 0, done.stderr[-3000:]
        done = run(
            [
                *common,
                "robustness.perturbation=paraphrase",
                "robustness.generator=writer",
                f"hydra.run.dir={tmp / 'study' / 'paraphrase'}",
            ],
            tmp,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        unknown = run(
            [
                *common,
                "robustness.perturbation=paraphrase",
                "robustness.generator=nosuch",
                f"hydra.run.dir={tmp / 'unknown'}",
            ],
            tmp,
        )
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr, unknown.stderr[-3000:]
    last = unknown.stderr.strip().splitlines()[-1]
    assert last.startswith("error: robustness.generator=nosuch: no judge config 'nosuch'"), last
    assert "mine" in last and "writer" in last  # the folder's judges are among those it names
    return tmp / "study", list(server.requests)


def test_the_folder_judge_writes_the_paraphrases(study: tuple[Path, list[dict[str, Any]]]) -> None:
    root, requests = study
    asked = {str(r["model"]) for r in requests if r["messages"][-1]["content"].startswith("Rewrite the text")}
    assert asked == {WRITER}
    audit = [
        json.loads(line) for line in (root / "paraphrase" / "perturbations.jsonl").read_text().splitlines()
    ]
    assert audit and all(a["perturbed"].startswith("In other words: ") for a in audit if a.get("perturbed"))


def test_the_analysis_reads_the_folder_rubric_never_conf(
    study: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    root, _ = study
    with no_conf_reads() as opened:
        results = load_results(root)
        assert report.main([str(root), "--n-boot", "20", "--out", str(tmp_path / "report")]) == 0
        assert card.main([str(root), "--n-boot", "20", "--out", str(tmp_path / "cards")]) == 0
    assert opened == []
    assert set(results["dimension"].astype(str)) == {"rigour_gap"}
    assert not results["higher_is_better"].any()
    assert (results["score_min"] == 1).all() and (results["score_max"] == 7).all()
    # lower is better: every generated text (2) beats the reference (7)
    wins = pd.read_csv(tmp_path / "report" / "tables" / "winrate.csv")
    assert set(wins["dimension"]) == {"rigour_gap"} and len(wins) == 2 and (wins["win"] == 1.0).all()
    text = (tmp_path / "cards" / "mine.md").read_text()
    assert "rubric version: strict " in text and "| independent | paraphrase | rigour_gap |" in text


def test_validation_uses_the_folder_rubric_range(
    study: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """A score of 5 is valid on the folder's 1-7 scale (the shipped rubrics stop at 3) and 9 is refused, from
    the row's range and, for a table written before the range columns, from the run's config.json."""
    root, _ = study
    frame = pd.read_parquet(root / "none" / "results.parquet")
    config = json.loads((root / "none" / "config.json").read_text())
    old = frame.drop(columns=["score_min", "score_max"])
    # "novelty": the folder's own rubric under a shipped rubric's name (conf/rubric/novelty.yaml is 0-3 and
    # has no rigour_gap): the run's rubric is the one it used
    shadow = {**config, "rubric": {**config["rubric"], "name": "novelty"}}
    cases = (("new", frame, config), ("old", old, config), ("shadow", old.assign(rubric="novelty"), shadow))
    for name, table, run_config in cases:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(run_config))
        table.assign(score=5.0).to_parquet(folder / "results.parquet")
        rubric = run_config["rubric"]["name"]
        with no_conf_reads() as opened:
            assert (load_results(folder)["score"] == 5).all()
            table.assign(score=9.0).to_parquet(folder / "results.parquet")
            with pytest.raises(
                ResultsError, match=f"score 9 for rigour_gap is outside the {rubric} rubric's range 1-7"
            ):
                load_results(folder)
        assert opened == [], name


def test_no_analysis_module_imports_conf() -> None:
    """The analysis knows a rubric only from the results and the run's config.json: none of its modules
    imports the `conf` package or names a path under it."""
    for path in sorted((ROOT / "analysis").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert all(a.name.split(".")[0] != "conf" for a in node.names), path
            elif isinstance(node, ast.ImportFrom):
                assert (node.module or "").split(".")[0] != "conf", path
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not re.search(r"(^|/)conf/(rubric|judge)", node.value), path
