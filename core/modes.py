"""What a study mode shows the judge, declared by each mode and carried by every results row (`mode_kind`).

The analysis chooses its tables by kind, never by a mode's name: a new mode (a module under
experiments/modes/ and its YAML) gets the mode-shift, position-bias and flag tables of its kind.

- `single`: one candidate per prompt (independent).
- `multi`: several candidates in one prompt at recorded positions (comparative, comparative_all): a
  position-bias table, and a mode shift against each `single` mode of the same judge.
- `pair`: two texts and a preference, in both orders (pairwise): the order-bias table.
"""

from __future__ import annotations

from enum import StrEnum


class ModeKind(StrEnum):
    single = "single"
    multi = "multi"
    pair = "pair"
