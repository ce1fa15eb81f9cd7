"""Imports go at module level (issue 23, item 4): a function-level import of a project module hides a cycle or
an upward import from readers and tools. The only ones left keep a heavy library (litellm, pandas,
matplotlib, diskcache) off a path that must stay fast; each is listed below with its reason, so a new one is
a decision, not a habit."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "judge", "experiments", "analysis", "conf", "rubrics")

_LITELLM_AFTER_CHECKS = "litellm: imported after the inputs are checked and the price map chosen"
_PANDAS_BEFORE_HYDRA = "pandas: not imported for the one-line answers given before Hydra starts"

# (file, imported project module) -> why it is imported inside a function
LAZY: dict[tuple[str, str], str] = {
    ("experiments/cli/entry.py", "experiments.cli.secrets"): "hydra's override parser: only `start` needs it",
    ("experiments/cli/entry.py", "judge.speedups"): "litellm: after `choose` sets the price map",
    ("experiments/cli/entry.py", "experiments.inputs"): _PANDAS_BEFORE_HYDRA,
    ("experiments/cli/entry.py", "judge.cache.store"): _LITELLM_AFTER_CHECKS,
    ("experiments/cli/entry.py", "judge.retry"): _LITELLM_AFTER_CHECKS,
    ("experiments/run.py", "experiments.inputs"): _PANDAS_BEFORE_HYDRA,
    ("experiments/run.py", "experiments.outputs"): _PANDAS_BEFORE_HYDRA,
    ("experiments/run.py", "experiments.plan"): _LITELLM_AFTER_CHECKS,
    ("experiments/run.py", "experiments.study"): _LITELLM_AFTER_CHECKS,
    ("experiments/stages/extract.py", "experiments.stages.candidates"): _LITELLM_AFTER_CHECKS,
    ("experiments/stages/extract.py", "experiments.judges"): _LITELLM_AFTER_CHECKS,
    ("experiments/stages/extract.py", "experiments.manifest"): _LITELLM_AFTER_CHECKS,
    ("experiments/stages/generate.py", "experiments.judges"): _LITELLM_AFTER_CHECKS,
    ("experiments/stages/generate.py", "experiments.manifest"): _LITELLM_AFTER_CHECKS,
    ("experiments/stages/generate.py", "experiments.stages.candidates"): _LITELLM_AFTER_CHECKS,
    ("experiments/stages/issues.py", "experiments.stages.candidates"): _LITELLM_AFTER_CHECKS,
    ("experiments/stages/issues.py", "experiments.judges"): _LITELLM_AFTER_CHECKS,
    ("experiments/sweep_budget.py", "experiments.outputs"): "pandas: every run imports this callback early",
    (
        "experiments/sweep_budget.py",
        "experiments.duplicates",
    ): "pyarrow: every run imports this callback early",
    (
        "analysis/novbench/metrics.py",
        "analysis.novbench.ppl_cache",
    ): "diskcache: only when perplexity is computed",
    ("analysis/report/build.py", "analysis.report.render"): "matplotlib: only when the report is written",
    ("analysis/report/__main__.py", "analysis.report.build"): "after the arguments parse (--help)",
    ("analysis/card/__main__.py", "analysis.card.build"): "after the arguments parse (--help)",
    # the viewer's start (issue 35): scipy and statsmodels only when a page or a --humans file needs them
    ("analysis/view/data.py", "analysis.stats.humans"): "scipy, statsmodels: only for --humans",
    ("analysis/view/server.py", "analysis.load.collect"): "scipy, statsmodels: only for --humans",
    (
        "analysis/view/server.py",
        "analysis.view.item",
    ): "pandas, numpy, scipy: only once an item page is drawn",
    ("analysis/report/build.py", "analysis.report.plots"): "matplotlib: only when a figure is drawn",
    # no heavy library: left while a concurrent change to the card is merged; move to module level after
}


def _module_of(path: Path, root: Path) -> list[str]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imported(node: ast.Import | ast.ImportFrom, path: Path, root: Path) -> list[str]:
    """The absolute module names an import statement names (a relative one resolved against its package)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = _module_of(path, root) if path.name == "__init__.py" else _module_of(path, root)[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, *([base] if base else [])])
    # `from judge import speedups` names the module judge.speedups when there is one
    return [f"{base}.{a.name}" if _is_module(root, f"{base}.{a.name}") else base for a in node.names]


def _is_module(root: Path, name: str) -> bool:
    target = root.joinpath(*name.split("."))
    return target.with_suffix(".py").is_file() or (target / "__init__.py").is_file()


def function_level_project_imports(root: Path = ROOT) -> set[tuple[str, str]]:
    """(file, module) for every import of a project module inside a function (TYPE_CHECKING blocks aside)."""
    found: set[tuple[str, str]] = set()
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()

            def visit(node: ast.AST, in_function: bool, path: Path = path, rel: str = rel) -> None:
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                        continue
                    inside = in_function or isinstance(
                        child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
                    )
                    if inside and isinstance(child, (ast.Import, ast.ImportFrom)):
                        for name in _imported(child, path, root):
                            if name.split(".")[0] in PACKAGES:
                                found.add((rel, name))
                    visit(child, inside)

            visit(ast.parse(path.read_text(encoding="utf-8")), False)
    return found


def test_function_level_project_imports_are_the_listed_lazy_ones() -> None:
    found = function_level_project_imports()
    unlisted = sorted(found - LAZY.keys())
    assert not unlisted, f"import these at module level, or add them to LAZY with the reason: {unlisted}"
    stale = sorted(LAZY.keys() - found)
    assert not stale, f"no longer imported inside a function; remove from LAZY: {stale}"


def test_the_scan_sees_a_function_level_import(tmp_path: Path) -> None:
    """The scan itself: an import inside a function (relative or absolute) is found, one at module level and
    one under TYPE_CHECKING are not."""
    (tmp_path / "judge").mkdir()
    (tmp_path / "judge" / "d.py").write_text("")
    (tmp_path / "judge" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nimport judge.b\nif TYPE_CHECKING:\n    from judge import c\n"
        "def f() -> None:\n    from . import d\n    import experiments.e\n"
    )
    assert function_level_project_imports(tmp_path) == {
        ("judge/a.py", "judge.d"),
        ("judge/a.py", "experiments.e"),
    }


def test_entry_points_import_no_heavy_library() -> None:
    """`python -m experiments.run` answers a bad setting before Hydra without litellm, torch or pandas; the
    inputs check (experiments.inputs) without litellm or torch; the cache command (`python -m judge.cache`,
    judge.cache.bundle: export, import, stats) without litellm or torch (a provider's answer, `Completion`,
    lives in judge.types)."""
    code = (
        "import sys, experiments.run, experiments.cli.entry; a = sorted(m for m in ('litellm', 'torch', 'pandas') "
        "if m in sys.modules); import experiments.inputs, experiments.config; "
        "b = sorted(m for m in ('litellm', 'torch') if m in sys.modules); import judge.cache.bundle; "
        "c = sorted(m for m in ('litellm', 'torch') if m in sys.modules); print(a, b, c)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True, cwd=ROOT
    )
    assert out.stdout.strip().splitlines()[-1] == "[] [] []"


def test_the_library_path_loads_the_bundled_price_map_like_the_commands() -> None:
    """`from experiments.study import run_study` (a library caller, a benchmark) imports litellm with the
    bundled price map chosen, as `python -m experiments.run` does: no connection is attempted at import (issue
    36, item 5). A shell's own LITELLM_LOCAL_MODEL_COST_MAP=False still stands (the download is attempted)."""
    code = (
        "import sys; tried = []; "
        "sys.addaudithook(lambda event, args: tried.append(args) if event == 'socket.connect' else None); "
        "from experiments.study import run_study; print('litellm' in sys.modules, len(tried) > 0)"
    )
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    env["LITELLM_MODEL_COST_MAP_URL"] = "http://127.0.0.1:9/model_prices.json"  # refused at once, never slow
    for shell_setting, expected in ((None, "True False"), ("False", "True True")):
        if shell_setting is not None:
            env["LITELLM_LOCAL_MODEL_COST_MAP"] = shell_setting
        ran = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            cwd=ROOT,
            env=env,
        )
        assert ran.stdout.strip().splitlines()[-1] == expected, ran.stdout + ran.stderr


def project_import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the project modules it imports anywhere: module level, inside functions and in
    TYPE_CHECKING blocks alike (a type-only import is still a dependency a reader must follow)."""
    graph: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            name = ".".join(_module_of(path, root))
            edges = graph.setdefault(name, set())
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    edges |= {
                        m for m in _imported(node, path, root) if m.split(".")[0] in PACKAGES and m != name
                    }
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return cycles


def test_no_import_cycle_between_files_counting_type_only_imports() -> None:
    """No two modules import each other, even for type checking (issue 36, item 3): shared types live in one
    low module (judge.types)."""
    assert import_cycles(project_import_graph()) == []


def test_the_cycle_finder_sees_a_type_only_cycle() -> None:
    assert import_cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def analysis_folder(module: str, root: Path = ROOT) -> str | None:
    """The folder of an analysis/ module (``analysis.stats`` for analysis.stats.scores), or the module itself
    for a top-level command module (``analysis.robustness``); None outside analysis/."""
    parts = module.split(".")
    if parts[0] != "analysis":
        return None
    if len(parts) >= 2 and (root / parts[0] / parts[1]).is_dir():
        return ".".join(parts[:2])
    return module


def analysis_folder_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """folder -> the analysis/ folders its modules import (every import, type-only and function-level ones
    too), from `project_import_graph`."""
    folders: dict[str, set[str]] = {}
    for module, imported in project_import_graph(root).items():
        here = analysis_folder(module, root)
        if here is None:
            continue
        edges = folders.setdefault(here, set())
        edges |= {f for f in (analysis_folder(m, root) for m in imported) if f is not None and f != here}
    return folders


def test_no_import_cycle_between_analysis_folders() -> None:
    """Imports inside analysis/ run one way (issue 36, item 1): stats (with the declaration types,
    analysis.stats.spec) <- tables (which collects) <- report, card and view (which render)."""
    graph = analysis_folder_graph()
    assert import_cycles(graph) == []
    assert (
        "analysis.tables" not in graph["analysis.stats"] and "analysis.report" not in graph["analysis.tables"]
    )
    assert {"analysis.card", "analysis.view"}.isdisjoint(graph["analysis.tables"] | graph["analysis.stats"])


def test_the_folder_graph_sees_a_cycle_between_folders(tmp_path: Path) -> None:
    """The folder check can fail: two folders whose modules import each other (one only for type checking)."""
    for folder in ("stats", "tables"):
        (tmp_path / "analysis" / folder).mkdir(parents=True)
        (tmp_path / "analysis" / folder / "__init__.py").write_text("")
    (tmp_path / "analysis" / "__init__.py").write_text("")
    (tmp_path / "analysis" / "stats" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from analysis.tables import b\n"
    )
    (tmp_path / "analysis" / "tables" / "b.py").write_text("from analysis.stats import a\n")
    graph = analysis_folder_graph(tmp_path)
    assert import_cycles(graph) == [["analysis.stats", "analysis.tables"]]


def test_a_modules_main_guard_is_its_last_statement() -> None:
    """`python -m module` runs the `if __name__ == "__main__":` block where it stands: a declaration after it
    (a table spec appended at a statistic module's bottom) is not yet defined when the command runs
    (analysis.latent's NameError)."""
    late = []
    for path in sorted(ROOT.glob("*/**/*.py")):
        if any(part in {"tests", ".git", "outputs", "multirun"} for part in path.parts):
            continue
        body = ast.parse(path.read_text(encoding="utf-8")).body
        for i, node in enumerate(body):
            test = node.test if isinstance(node, ast.If) else None
            if (
                isinstance(test, ast.Compare)
                and ast.unparse(test) == "__name__ == '__main__'"
                and i < len(body) - 1
            ):
                late.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not late, late
