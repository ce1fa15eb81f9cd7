"""Test-wide settings: litellm never touches the network; caches live in a temporary folder."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import tempfile
import time

# a suite started in the background by a non-interactive shell (`bash -c '... &'`) inherits SIGINT ignored, and
# so would every command it starts: the Ctrl-C tests' commands would never see their Ctrl-C. A terminal's default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# made by the process that starts the suite, which removes it at exit (xdist workers inherit it)
if "JUDGESCOPE_CACHE_DIR" not in os.environ:
    os.environ["JUDGESCOPE_CACHE_DIR"] = tempfile.mkdtemp(prefix="judgescope-test-cache-")
    atexit.register(shutil.rmtree, os.environ["JUDGESCOPE_CACHE_DIR"], ignore_errors=True)
# what judge.local loading the embedded model sets in-process: set from the start, so that a test's later CLI
# commands see the environment tests.support.forkserver imported under (one that differs runs fresh)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# parallel workers (pytest-xdist) share the cores: each gets its share of torch/OpenMP threads (itself and the
# CLI processes it starts), instead of every worker spinning one thread per core
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    _THREADS = str(max(1, (os.cpu_count() or 1) // _WORKERS))
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "JUDGESCOPE_TORCH_THREADS"):
        os.environ.setdefault(_var, _THREADS)
# the public data (experiments.datasets.fetch): this workspace's read-only copy when there is one, else the fetched folder
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SHARED_DATA = os.path.join(_REPO, "..", "shared", "data")
if os.path.isdir(_SHARED_DATA):
    os.environ.setdefault("JUDGESCOPE_DATA_DIR", os.path.normpath(_SHARED_DATA))


import litellm  # noqa: E402
import pytest  # noqa: E402

_LITELLM_CALLBACK_LISTS = (
    "callbacks",
    "success_callback",
    "failure_callback",
    "_async_success_callback",
    "_async_failure_callback",
    "input_callback",
    "service_callback",
)


@pytest.fixture(autouse=True)
def _restore_litellm_callbacks():  # type: ignore[no-untyped-def]
    """litellm keeps callbacks in module globals, and a Router registers its own there: restore them after each
    test, so that one test's Router does not change how the next test's calls are logged (or timed)."""
    saved = {name: list(getattr(litellm, name, []) or []) for name in _LITELLM_CALLBACK_LISTS}
    yield
    for name, value in saved.items():
        if hasattr(litellm, name):
            setattr(litellm, name, value)


#: The test files that take longest (a whole-suite run with JUDGESCOPE_TEST_CPU_LOG, issue 36 item 6), longest
#: first, but the one that builds the session's shared sample study and report (tests.support.studies,
#: tests.support.sample_report) before the others that read them, so that no worker waits on its lock. Under
#: `--dist loadfile` a worker takes a whole file; these go out first, so that the last files handed out are
#: short ones and no worker idles while the other finishes a long file at the end (xdist's own order, by number
#: of tests, sent test_benchmarks_smoke.py's 2 tests last). A stale entry only changes the order.
SLOWEST_FILES = (
    "test_analysis_report.py",  # first: it builds the shared sample study and report the later files copy
    "test_reliability.py",
    "test_benchmarks_smoke.py",
    "test_plan.py",
    "test_completeness_banner.py",
    "test_scaling.py",
    "test_analysis_paper_tables.py",
    "test_cli.py",
    "test_analysis_views_agree.py",
    "test_imports.py",
    "test_view.py",
    "test_config.py",
    "test_cache_backends.py",
    "test_batch_outputs.py",
    "test_annotate.py",
    "test_record.py",
    "test_robustness.py",
    "test_sweep_budget.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Files in SLOWEST_FILES order, then the others by number of tests (most first, as xdist orders them);
    tests keep their order within a file. pyproject's `--no-loadscope-reorder` makes xdist keep this order."""
    sizes: dict[str, int] = {}
    for item in items:
        sizes[item.path.name] = sizes.get(item.path.name, 0) + 1
    rank = {name: k for k, name in enumerate(SLOWEST_FILES)}
    items.sort(key=lambda item: (rank.get(item.path.name, len(rank)), -sizes[item.path.name]))


def _cpu_seconds() -> float:
    """This process's CPU, the children it has reaped, and the commands forked for it (tests.support.cli)."""
    import resource

    from tests.support import cli

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + cli.FORKED_CPU[0]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):  # type: ignore[no-untyped-def]
    """With JUDGESCOPE_TEST_CPU_LOG=FILE, one line per test: its CPU seconds (set-up, call and tear-down, with
    the commands it ran), its xdist worker and its start and end time, to see where the suite's time goes and
    whether a worker idles (issue 36, item 6)."""
    path = os.environ.get("JUDGESCOPE_TEST_CPU_LOG")
    before, start = (_cpu_seconds(), time.time()) if path else (0.0, 0.0)
    yield
    if path:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(path, "a", encoding="utf-8") as log:
            log.write(
                f"{_cpu_seconds() - before:.2f}\t{item.nodeid}\t{worker}\t{start:.2f}\t{time.time():.2f}\n"
            )
