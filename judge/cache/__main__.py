"""`python -m judge.cache` keeps working: the code lives in `judge.cache.bundle`."""

from judge.spend import price_map

price_map.choose("bundled")  # before litellm's import (judge.cache.bundle): no price-map download

from judge.cache.bundle import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
