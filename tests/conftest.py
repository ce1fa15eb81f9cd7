"""Test-wide settings: litellm never touches the network; caches live in a temporary folder."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("JUDGESCOPE_CACHE_DIR", tempfile.mkdtemp(prefix="judgescope-test-cache-"))
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
