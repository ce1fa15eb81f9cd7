"""`python -m experiments.extract` keeps working: the code lives in `experiments.stages.extract`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("experiments.stages.extract", run_name="__main__", alter_sys=True)
