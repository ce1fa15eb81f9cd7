"""`python -m experiments.data` keeps working: the code lives in `experiments.datasets.fetch`."""

from experiments.datasets.fetch import main

if __name__ == "__main__":
    raise SystemExit(main())
