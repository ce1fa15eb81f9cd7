"""Credentials on the command line, learnt and moved out of Hydra's sight before Hydra reads it.

Hydra prints the overrides it is given (the `#0 : ...` job lines, its error lines) and writes them
(multirun.yaml). So each credential an override holds - a string under a secret-looking name at any depth
(`+judge.extra.api_key=KEY`, `+judge.extra.headers={X-Api-Key:KEY}`), a number typed there, the password or
`?key=` of a URL (`judge.api_base=https://u:KEY@host`), each choice of a sweep - is learnt first (so every
printed line is scrubbed, judge.secrets.redact) and then replaced, where it is written, by
`${oc.env:JUDGESCOPE_SECRET_<i>_<j>}`, the credential going into that environment variable. Only the
credential's own characters are replaced: the override keeps its prefix (`+`, `++`), its shape (a map
merges as before) and its sweep. The rewritten override must read back to exactly the original value;
where it would not (a credential typed with escapes), a plain override's whole value is moved instead, and
each string choice of a sweep. An override Hydra cannot read is refused by Hydra (and named, valueless, by
experiments.config): what looks like a credential in it is learnt.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

from hydra.core.override_parser.types import ChoiceSweep, QuotedString

from judge.secrets import MIN_SECRET_LEN, is_secret_name, learn, url_secrets

_LOOSE = re.compile(
    r"(?:KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|BEARER|COOKIE)[\w-]*['\"]?\s*[:=]\s*['\"]?([^,'\"}\]]+)",
    re.IGNORECASE,
)
_INTERPOLATION = re.compile(r"\$\{oc\.env:(JUDGESCOPE_SECRET_\d+_\d+)\}")


def _parsed(arg: str) -> tuple[Any, bool, bool]:
    """(value, is a sweep, readable): a sweep's value is the list of its choices, unescaped."""
    from hydra.core.override_parser.overrides_parser import OverridesParser  # noqa: PLC0415

    try:
        override = OverridesParser.create().parse_overrides([arg])[0]
    except Exception:  # noqa: BLE001  (the grammar's error, whatever its class)
        return None, False, False
    value = override.value()
    if override.is_sweep_override():
        return ([_text(v) for v in value.list] if isinstance(value, ChoiceSweep) else None), True, True
    return _text(value), False, True


def _text(value: Any) -> Any:
    """A sweep's quoted choice (Hydra's `QuotedString`) as its text; anything else as it is."""
    return value.text if isinstance(value, QuotedString) else value


def _credentials(name: str, value: Any) -> Iterator[str]:
    """The credentials inside one parsed value (see the module doc)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _credentials(str(key), item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _credentials(name, item)
    elif isinstance(value, str):
        if "${" in value:  # resolved when the config is composed, and its resolved credential learnt then
            return
        if value and is_secret_name(name):
            yield value
        yield from url_secrets(value)
    elif isinstance(value, int | float) and not isinstance(value, bool) and is_secret_name(name):
        yield str(value)  # a key of digits, read by Hydra as a number


def _unresolved(value: Any, environ: Mapping[str, str]) -> Any:
    """`value` with our `${oc.env:JUDGESCOPE_SECRET_...}` put back (what OmegaConf will resolve)."""
    if isinstance(value, Mapping):
        return {k: _unresolved(v, environ) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_unresolved(v, environ) for v in value]
    if isinstance(value, str):
        return _INTERPOLATION.sub(lambda m: environ[m.group(1)], value)
    return value


def _as_typed(value: Any, name: str) -> Any:
    """`value` as it reads back once hidden: a number under a secret-looking name becomes its text."""
    if isinstance(value, Mapping):
        return {k: _as_typed(v, str(k)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_as_typed(v, name) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool) and is_secret_name(name):
        return str(value)
    return value


def _substituted(arg: str, secrets: list[str], tag: int, environ: MutableMapping[str, str]) -> str | None:
    """`arg` with each credential's characters replaced by an `oc.env` interpolation, or None when the
    result would not read back to the original value."""
    key, _, text = arg.partition("=")
    mine: dict[str, str] = {}
    for j, secret in enumerate(sorted(set(secrets), key=len, reverse=True)):
        if secret not in text:
            return None
        var = f"JUDGESCOPE_SECRET_{tag}_{j}"
        mine[var] = secret
        text = text.replace(secret, f"${{oc.env:{var}}}")
    hidden = f"{key}={text}"
    before, after = _parsed(arg), _parsed(hidden)
    name = key.lstrip("+~").rsplit(".", 1)[-1]
    if after[1:] != before[1:] or _unresolved(after[0], mine) != _as_typed(before[0], name):
        return None
    environ.update(mine)
    return hidden


def _whole(arg: str, value: Any, tag: int, environ: MutableMapping[str, str]) -> str:
    """The fallback for a plain override: its whole value in one variable (a credential is text). A map or list cannot be
    moved whole without changing how Hydra applies it (a `+` map would be assigned, not merged): refused."""
    key, _, text = arg.partition("=")
    if isinstance(value, Mapping | list | tuple):
        raise ValueError(
            f"{key}=...: holds a credential that cannot be hidden from Hydra in place (value not "
            f"shown); put it in an environment variable and write {key}.<entry>=${{oc.env:NAME}}"
        )
    var = f"JUDGESCOPE_SECRET_{tag}_0"
    environ[var] = value if isinstance(value, str) else text  # a number: the credential as typed
    return f"{key}=${{oc.env:{var}}}"


def _each_choice(arg: str, choices: list[Any], tag: int, environ: MutableMapping[str, str]) -> str | None:
    """The fallback for a sweep: every string choice in its own variable (`key=${oc.env:A},${oc.env:B}`),
    other choices as literals; None when that would not read back to the same choices."""
    key = arg.partition("=")[0]
    mine, parts = {}, []
    for j, choice in enumerate(choices):
        if isinstance(choice, str):
            mine[f"JUDGESCOPE_SECRET_{tag}_{j}"] = choice
            parts.append(f"${{oc.env:JUDGESCOPE_SECRET_{tag}_{j}}}")
        else:
            parts.append(grammar(choice))
    hidden = f"{key}={','.join(parts)}"
    after = _parsed(hidden)
    if after[1:] != (True, True) or _unresolved(after[0], mine) != _as_typed(choices, key.rsplit(".", 1)[-1]):
        return None
    environ.update(mine)
    return hidden


def _loose(text: str) -> list[str]:
    """What looks like a credential in an override Hydra cannot read: the value after a secret-looking
    name (up to `,`, `}` or `]`, spaces included) and each of its words, and a URL's credentials."""
    found = [m.strip() for m in _LOOSE.findall(text)]
    return [text, *url_secrets(text), *found, *(w for m in found for w in re.split(r"[\s=;]+", m))]


def _found(arg: str) -> tuple[Any, bool, bool, list[str]]:
    """(value, sweep, readable, the credentials it holds), learning them."""
    key, _, text = arg.partition("=")
    name = key.lstrip("+~").rsplit(".", 1)[-1]
    value, sweep, readable = _parsed(arg)
    if not readable:  # Hydra will refuse it and may print it whole: what looks like a credential is learnt
        learn(_loose(text))
        return value, sweep, readable, []
    if sweep and value is None:  # a range() or glob(): no literal values to hide
        if is_secret_name(name):
            learn([text, *re.findall(r"[\w.-]+", text)])
            raise ValueError(
                f"{key}=...: a range or glob sweep of credentials cannot be hidden from Hydra "
                "(value not shown); list the values, or read them with ${oc.env:NAME}"
            )
        return value, sweep, readable, []
    if not sweep and isinstance(value, int | float) and not isinstance(value, bool) and is_secret_name(name):
        found = [text]  # a key of digits, as typed (Hydra reads `1e100000` as inf)
    else:
        found = [c for c in _credentials(name, value) if len(c) >= MIN_SECRET_LEN]
    learn(found)
    return value, sweep, readable, found


def hide_secret_overrides(argv: list[str], environ: MutableMapping[str, str]) -> list[str]:
    """`argv` with every credential learnt and, wherever Hydra would write it (in any override, under any
    name), moved into `environ`. A ValueError names an override that holds one and cannot be rewritten."""
    parsed = [
        _found(arg) if "=" in arg and not arg.startswith("-") else (None, False, False, []) for arg in argv
    ]
    every = sorted({c for *_, found in parsed for c in found}, key=len, reverse=True)
    out = []
    for tag, (arg, (value, sweep, readable, own)) in enumerate(zip(argv, parsed, strict=True)):
        text = arg.partition("=")[2]
        here = [c for c in every if c in text]
        if readable and (here or own) and value is not None:
            # one of its own credentials typed otherwise (escaped) than it reads: no substitution can hide it
            hidden = _substituted(arg, here, tag, environ) if all(c in text for c in own) else None
            if hidden is None:
                hidden = _each_choice(arg, value, tag, environ) if sweep else _whole(arg, value, tag, environ)
            arg = hidden or arg  # a sweep neither way can be hidden stays as typed: its values are learnt
        out.append(arg)
    return out


_BEFORE_QUOTE, _AT_END = re.compile(r"(\\*)'"), re.compile(r"\\+$")
_KEY_SPECIAL = re.compile(r"[\\()\[\]{}:=, \t]")  # escaped with a backslash in an unquoted dict key


def grammar(value: Any) -> str:
    """`value` in OmegaConf's grammar, every string quoted, so `oc.decode` gives back exactly `value`."""
    if isinstance(value, Mapping):
        keys = (_KEY_SPECIAL.sub(lambda m: "\\" + m.group(0), str(k)) for k in value)
        return "{" + ", ".join(f"{k}: {grammar(v)}" for k, v in zip(keys, value.values(), strict=True)) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(grammar(v) for v in value) + "]"
    if isinstance(value, str):  # a backslash escapes only before a quote or at the end
        quoted = _BEFORE_QUOTE.sub(lambda m: m.group(1) * 2 + "\\'", value)
        return "'" + _AT_END.sub(lambda m: m.group(0) * 2, quoted) + "'"
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
