"""`python -m experiments.issues` keeps working: the code lives in `experiments.stages.issues`."""

import runpy

if __name__ == "__main__":
    runpy.run_module("experiments.stages.issues", run_name="__main__", alter_sys=True)
