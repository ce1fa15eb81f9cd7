"""Issue 23, item 6: test modules take shared helpers from tests/support/ only, never from one another, so a
helper has one home and a test file can be renamed or split without breaking another."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported_modules(path: Path, root: Path) -> list[tuple[int, str]]:
    """Every module `path` imports (at any depth; a relative import resolved from `root`, the folder holding
    the `tests` package), with its line, in line order."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            package = list(path.relative_to(root).parent.parts)
            base = package[: len(package) - node.level + 1] if node.level else []
            found.append((node.lineno, ".".join([*base, node.module or ""]).strip(".")))
    return sorted(found)


def misplaced_imports(folder: Path) -> list[str]:
    """`file:line: module` for each import of a test module, or of a tests module outside tests.support."""
    bad = []
    for path in sorted(folder.rglob("*.py")):
        for line, module in imported_modules(path, folder.parent):
            parts = module.split(".")
            if parts[0] != "tests" or len(parts) == 1:
                continue
            if parts[1] != "support" or any(part.startswith("test_") for part in parts):
                bad.append(f"{path.relative_to(folder.parent)}:{line}: {module}")
    return bad


def test_tests_import_helpers_only_from_tests_support() -> None:
    bad = misplaced_imports(TESTS)
    assert not bad, "move shared helpers to tests/support/ and import them from there:\n" + "\n".join(bad)


def test_helpers_live_in_tests_support() -> None:
    """A module directly in tests/ is a test module (collected by pytest) or conftest.py; helpers go to
    tests/support/."""
    stray = [p.name for p in sorted(TESTS.glob("*.py")) if not p.name.startswith("test_")]
    assert set(stray) <= {"__init__.py", "conftest.py"}, f"move these helpers to tests/support/: {stray}"


def test_the_check_finds_an_import_from_another_test_module(tmp_path: Path) -> None:
    """The check itself can fail: planted imports of a test module and of a stray helper are both found."""
    folder = tmp_path / "tests"
    folder.mkdir()
    (folder / "test_a.py").write_text(
        "from tests.support.openai_server import Step\n"
        "def test_x():\n"
        "    from tests.test_plan import compose\n"
        "import tests.studies\n"
        "from . import fakes\n"
    )
    assert misplaced_imports(folder) == [
        "tests/test_a.py:3: tests.test_plan",
        "tests/test_a.py:4: tests.studies",
    ]
