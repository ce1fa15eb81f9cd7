"""The call path to a judge: completer, cache, retries, parsing, prices.

Importing any judge module first makes litellm's bundled price map the default (issue 36, item 5): litellm
reads LITELLM_LOCAL_MODEL_COST_MAP once, at its own import, and several judge modules import litellm, so a
library caller (`from experiments.study import run_study`, a benchmark) would otherwise start by trying to
download the map. `setdefault`: a shell's own setting still stands; the entry points then set the study's
`prices` explicitly (judge.spend.price_map.choose) before anything imports litellm, and `run_study` does the
same for a library caller whose litellm is not loaded yet.
"""

import os as _os

_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
