"""The search settings' command-line options, derived from their one definition
(``app.settings``): each setting's option, help, type, bounds and default come from its
field and its ``Knob``; nothing here names a setting except to pick some."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any

import click

from schedsearch.app.settings import SearchSettings, default, kind, knobs

Decorator = Callable[[Any], Any]


def _a_number(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    # click's FloatRange lets "nan" through: every comparison with it is false.
    if value is not None and math.isnan(value):
        raise click.BadParameter("must be a number, not nan")
    return value


def setting_option(name: str, *, resume: bool = False, help: str | None = None, help_more: str = "") -> Decorator:
    """The option (or options) of the setting ``name``: ``run``'s, or with ``resume``
    ``resume``'s, where an option left out is None (the value the search was started with).
    ``help`` replaces the setting's help, ``help_more`` is added to it."""
    knob_, tp = knobs()[name]
    base, _ = kind(tp)
    # Left out, a resumed search keeps its value, and a setting with an off flag its default
    # (which no value of the option spells).
    value = None if resume or knob_.off_flag else default(name)
    flag = knob_.flag or "--" + name.replace("_", "-")
    common: dict[str, Any] = {"help": (help if help is not None else knob_.help) + help_more}
    if base is bool:
        if knob_.negatable:
            decl = f"{flag}/--no-{flag[2:]}"
            opts = [click.option(decl, name, default=value, show_default=not resume, **common)]
        else:
            opts = [click.option(flag, name, is_flag=True, default=False, **common)]
    else:
        typ: Any
        if isinstance(base, type) and issubclass(base, StrEnum):
            typ, value = click.Choice([m.value for m in base]), None if value is None else str(value)
        elif base is str and knob_.choices:
            typ = click.Choice(list(knob_.choices))
        elif base is int:
            low, high = (None if b is None else int(b) for b in (knob_.low, knob_.high))
            typ = click.IntRange(min=low, max=high)
        elif base is float:
            typ = click.FloatRange(min=knob_.low, max=knob_.high, min_open=knob_.low_open)
            common["callback"] = _a_number
        else:
            typ = str
        opts = [
            click.option(
                flag,
                name,
                type=typ,
                default=value,
                show_default=value is not None,
                metavar=knob_.metavar,
                **common,
            )
        ]
        if knob_.off_flag:
            opts.append(click.option(knob_.off_flag, _off(name), is_flag=True, help=knob_.off_help))

    def add(fn: Any) -> Any:
        for opt in reversed(opts):
            fn = opt(fn)
        return fn

    return add


def _off(name: str) -> str:
    """The parameter name of the setting ``name``'s off flag."""
    return f"{name}__off"


def settings_options(*, resume: bool = False, exclude: Iterable[str] = ()) -> Decorator:
    """The options of every setting but ``exclude`` (with ``resume``: every resumable
    one), in the order the settings are defined."""
    chosen = [n for n, (k, _) in knobs().items() if (k.resumable or not resume) and n not in exclude]

    def add(fn: Any) -> Any:
        for name in reversed(chosen):
            fn = setting_option(name, resume=resume)(fn)
        return fn

    return add


def given(opts: dict[str, Any]) -> dict[str, Any]:
    """Take the settings out of a command's parsed options (``opts`` keeps the rest): each
    setting's value, None when the option was left out, False when its off flag was given."""
    values = {}
    for name, (knob_, _) in knobs().items():
        if name in opts:
            values[name] = opts.pop(name)
        if knob_.off_flag and opts.pop(_off(name), False):
            values[name] = False
    return values


def settings_from(opts: dict[str, Any]) -> SearchSettings:
    """The SearchSettings of ``run``'s parsed options (taken out of ``opts``)."""
    return SearchSettings.of(**given(opts))
