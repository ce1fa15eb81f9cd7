"""A rubric's prompts rendered once per shape: the template runs once with stand-ins for the untrusted texts,
and every prompt of that shape is the result with each stand-in replaced by its text, neutralised.

A study renders tens of thousands of prompts that differ only in the texts shown (the papers, the judged
questions); Jinja's own work per prompt (~0.1 ms) was a quarter of a cached replay. The shortcut is taken only
where it is exact: the stand-ins (`Probe`) record any use a template makes of them other than passing them
through the `neutral` filter and writing the result out (a length, a comparison, a slice, a string method,
writing one out raw ...), the filter's result is such a stand-in too, and a skeleton whose output holds a
stand-in in any other form (escaped, cut, transformed) or at either end of a message (where `strip` could
reach into the text) is not used. The filter's result is written out by the environment's `finalize`
(`written`), the one use not logged: a filter that turns it into text to change it (`| neutral | replace(...)`)
is logged, and so is any use of a captured text holding one (`captured`, the environment's `concat`: a
`{% filter %}` or `{% set %}` block, a macro's output). The first prompt of every shape, and every
`CHECK_EVERY`-th after it, is also rendered in full and compared; a difference marks the renderer `broken` and
the caller renders every prompt in full (experiments.modes.build_prompts).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

CHECK_EVERY = 32  # every prompt of a shape at this stride (and its first) is also rendered in full
_OWN = frozenset({"_log", "_index", "_nonce", "neutral_marker", "__class__", "__dict__"})


class Probe(str):
    """A stand-in for one untrusted text while a skeleton renders: its content is an opaque marker, and any
    use of it (attribute, operator, conversion) is written to its log; `neutral_marker` is what the
    `neutral` filter gives for it (judge.rubric.neutralise)."""

    _log: list[str]
    _index: int
    _nonce: str

    def __new__(cls, index: int, nonce: str, log: list[str]) -> Probe:
        self = super().__new__(cls, f"\x02{nonce}:{index}\x02")
        self.__dict__.update(_log=log, _index=index, _nonce=nonce)
        return self

    def __getattribute__(self, name: str) -> Any:
        if name not in _OWN:
            object.__getattribute__(self, "_log").append(name)
        return object.__getattribute__(self, name)

    def neutral_marker(self) -> str:
        """What `neutral` writes for this text: a marker the skeleton replaces by the neutralised text."""
        return Marker(self._index, self._nonce, self._log)


class Marker(Probe):
    """The `neutral` filter's result for a Probe: it may be written out (`written`), nothing else. `str()` of it
    is logged: the `replace` filter turns its value into text that way before changing it, and a skeleton
    that wrote the marker out unchanged sent the text unreplaced (a prompt other than the template's)."""

    def __new__(cls, index: int, nonce: str, log: list[str]) -> Marker:
        self = str.__new__(cls, f"\x01{nonce}:{index}\x01")
        self.__dict__.update(_log=log, _index=index, _nonce=nonce)
        return self


class Captured(Probe):
    """Text a template captured (a block's or a macro's output) holding a marker: written out it stays exact,
    any other use (a `{% filter %}` block's replace, a slice, a comparison) is logged."""

    def __new__(cls, text: str, nonce: str, log: list[str]) -> Captured:
        self = str.__new__(cls, text)
        self.__dict__.update(_log=log, _index=-1, _nonce=nonce)
        return self


# the skeleton renders under way: nonce -> their log (`captured` finds a captured text's render by its marker)
_ACTIVE: dict[str, list[str]] = {}


def written(value: Any) -> Any:
    """The environment's `finalize` (judge.rubric): a marker or captured text written out, as plain text and not
    logged; any other value as it is."""
    return str.__str__(value) if isinstance(value, (Marker, Captured)) else value


def captured(parts: Iterable[str]) -> str:
    """The environment's `concat` (judge.rubric): the joined text, a `Captured` where it holds a marker of a
    skeleton render under way (plain text otherwise, and always outside one)."""
    text = "".join(parts)
    if _ACTIVE and "\x01" in text:
        for nonce, log in list(_ACTIVE.items()):
            if f"\x01{nonce}:" in text:
                return Captured(text, nonce, log)
    return text


def _logged(name: str) -> Callable[..., Any]:
    method = getattr(str, name)

    def use(self: Probe, *args: Any) -> Any:
        object.__getattribute__(self, "_log").append(name)
        return method(self, *args)

    use.__name__ = name
    return use


for _name in (
    "__len__",
    "__iter__",
    "__getitem__",
    "__contains__",
    "__eq__",
    "__ne__",
    "__lt__",
    "__le__",
    "__gt__",
    "__ge__",
    "__hash__",
    "__add__",
    "__mul__",
    "__rmul__",
    "__mod__",
    "__rmod__",
    "__format__",
    "__str__",
    "__repr__",
):
    setattr(Probe, _name, _logged(_name))


def _flag(name: str) -> Callable[..., Any]:
    def use(self: Probe, *args: Any) -> Any:
        object.__getattribute__(self, "_log").append(name)
        return str.__str__(self) if name == "__radd__" else float(0) if name == "__float__" else 0

    return use


Probe.__radd__ = _flag("__radd__")  # type: ignore[attr-defined]  # "x" + probe
Probe.__int__ = _flag("__int__")  # type: ignore[attr-defined]  # int(probe) would read the marker text
Probe.__float__ = _flag("__float__")  # type: ignore[attr-defined]
Probe.__bool__ = _flag("__bool__")  # type: ignore[attr-defined]


class Renders(Protocol):
    """What is rendered: judge.rubric.Rubric.render."""

    def __call__(self, **variables: Any) -> list[dict[str, str]]: ...


@dataclass(frozen=True)
class Skeleton:
    """One shape's messages as (literal, text index) runs: content = literal + text, ..., + the last literal."""

    messages: tuple[tuple[str, tuple[tuple[str, int], ...], str], ...]  # (role, runs, tail)


class PromptShapes:
    """The skeletons of one rubric's prompt shapes (`render` with variables built from texts by `build`)."""

    def __init__(self, render: Renders, neutral: Callable[[str], str]) -> None:
        self._render = render
        self._neutral = neutral
        self._skeletons: dict[Hashable, Skeleton | None] = {}
        self._seen: dict[Hashable, int] = {}
        self._neutralised: dict[str, str] = {}
        self.broken = False  # a skeleton's prompt differed from the full render: render everything in full

    def render(
        self, shape: Hashable, texts: Sequence[str], build: Callable[[Sequence[str]], dict[str, Any]]
    ) -> list[dict[str, str]]:
        """`render(**build(texts))`, from the shape's skeleton where it has a usable one. `shape` must hold
        everything besides `texts` that `build`'s variables carry (checked on a stride, see the module doc)."""
        if shape not in self._skeletons:
            self._skeletons[shape] = self._skeleton(len(texts), build)
        skeleton = self._skeletons[shape]
        if skeleton is None or self.broken:
            return self._render(**build(texts))
        seen = self._seen[shape] = self._seen.get(shape, -1) + 1
        memo = self._neutralised  # the papers of an instance recur in each of its prompts
        neutral = [memo[t] if t in memo else memo.setdefault(t, self._neutral(t)) for t in texts]
        out = [
            {"role": role, "content": "".join([part for lit, i in runs for part in (lit, neutral[i])]) + tail}
            for role, runs, tail in skeleton.messages
        ]
        if seen % CHECK_EVERY == 0 and out != self._render(**build(texts)):
            self.broken = True
        return out

    def _skeleton(self, n_texts: int, build: Callable[[Sequence[str]], dict[str, Any]]) -> Skeleton | None:
        """The shape's skeleton, or None where the template uses a text other than through `neutral`."""
        nonce, log = secrets.token_hex(8), list[str]()
        probes = [Probe(i, nonce, log) for i in range(n_texts)]
        _ACTIVE[nonce] = log
        try:
            rendered = self._render(**build(probes))
        except Exception:  # noqa: BLE001  (a template that trips over a stand-in: render in full)
            return None
        finally:
            del _ACTIVE[nonce]
        if log:
            return None
        marker = re.compile(f"\x01{nonce}:(\\d+)\x01")
        messages = []
        for message in rendered:
            if set(message) != {"role", "content"}:
                return None
            content = str.__str__(message["content"])
            pieces = marker.split(content)
            literals, indices = pieces[0::2], [int(i) for i in pieces[1::2]]
            if any("\x01" in lit or "\x02" in lit or nonce in lit for lit in literals):
                return None  # a stand-in written out in another form
            if indices and (not literals[0].strip() or not literals[-1].strip()):
                return None  # a text at either end: the render's `strip` could reach into it
            runs = tuple(zip(literals[:-1], indices, strict=True))
            messages.append((str.__str__(message["role"]), runs, literals[-1]))
        return Skeleton(tuple(messages))
