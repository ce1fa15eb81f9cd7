"""Test-wide settings: litellm never touches the network; caches live in a temporary folder."""

from __future__ import annotations

import os
import tempfile

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("JUDGESCOPE_CACHE_DIR", tempfile.mkdtemp(prefix="judgescope-test-cache-"))
