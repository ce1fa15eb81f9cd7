"""`python -m experiments.generate` keeps working: the code lives in `experiments.stages.generate`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("experiments.stages.generate", run_name="__main__", alter_sys=True)
