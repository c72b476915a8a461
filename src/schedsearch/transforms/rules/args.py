"""Typed step arguments: one frozen record per rule, checked when it is built or decoded.

A ``core.Rewrite`` is the wire form of a step (kind, target, sorted name/value pairs), as
stored in databases and schedule files. Each rule declares a frozen dataclass of its
arguments; ``encode`` turns a record into the pairs and ``decode`` turns the pairs back,
refusing unknown and missing arguments and values of the wrong type with one sentence. A
record checks its own fields when it is built, so a proposer cannot emit a malformed step.

What an argument is, the record says in its field metadata (``naming``, ``loop``,
``count``):

- ``naming``: it only names a loop or buffer the step creates. ``describe`` leaves it
  out, and two proposals that differ only in names are the same proposal.
- ``loop``: the pattern of a loop the step works on (``"j #0"``); shown, but not part of a
  proposal's shape (copies of a loop get one set of proposals).
- ``count``: an integer with a least value (factors, rows: at least 1).

A field typed ``X | None`` with default None is optional: left out of the step when None.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from schedsearch.core import ArgValue


class ArgError(ValueError):
    """Arguments that do not make a valid record: unknown, missing, or of the wrong type."""


#: A loop pattern as the rules write them: loop names, each maybe with its occurrence
#: (``"j #0"``, ``"i j"``, ``"c #0 r #0"``), or ``proc``. Anything else read from a file or
#: a database is malformed: it would reach the lowering's own parsing and Exo's.
LOOP_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*( #[0-9]+)?( [A-Za-z_][A-Za-z0-9_]*( #[0-9]+)?)*")
#: The names a step gives new loops and buffers: names, separated by single spaces.
NAMES = re.compile(r"[A-Za-z_][A-Za-z0-9_]*( [A-Za-z_][A-Za-z0-9_]*)*")


def check_pattern(value: object, what: str) -> None:
    """Raise ``ArgError`` unless ``value`` is a loop pattern (``LOOP_PATTERN``)."""
    if not isinstance(value, str) or LOOP_PATTERN.fullmatch(value) is None:
        raise ArgError(f"{what} must be a loop pattern such as 'j #0', not {_short(value)}")


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def naming(**kwargs: Any) -> Any:
    """A field that only names a loop or buffer the step creates."""
    return dataclasses.field(metadata={"naming": True}, **kwargs)


def loop(**kwargs: Any) -> Any:
    """A field holding the pattern of a loop the step works on."""
    return dataclasses.field(metadata={"loop": True}, **kwargs)


def count(minimum: int = 1, sized: bool = False, **kwargs: Any) -> Any:
    """An integer field whose value is at least ``minimum``; ``sized`` when it follows from
    the problem's sizes (a loop's trip count), not from a choice of the schedule."""
    return dataclasses.field(metadata={"minimum": minimum, "sized": sized}, **kwargs)


def sized(**kwargs: Any) -> Any:
    """A field that follows from the problem's sizes (how a split handles its remainder):
    the same step at other sizes may need another value."""
    return dataclasses.field(metadata={"sized": True}, **kwargs)


@dataclasses.dataclass(frozen=True, slots=True)
class StepArgs:
    """Base of every rule's argument record: its fields are checked when it is built."""

    def __post_init__(self) -> None:
        hints = _hints(type(self))  # type: ignore[arg-type]  # a class is hashable; mypy checks its instances' __hash__
        for f in dataclasses.fields(self):
            value = _checked(f, hints[f.name], getattr(self, f.name))
            object.__setattr__(self, f.name, value)  # a valid enum spelling becomes the enum
        self.check()

    def check(self) -> None:
        """Rules between fields (a mode's required arguments); raise ``ArgError``."""


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _options(hint: Any) -> tuple[Any, bool]:
    """(the type, whether None is allowed) of a field's annotation."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0], len(args) < len(typing.get_args(hint))
    return hint, False


def _checked(f: dataclasses.Field, hint: Any, value: Any) -> Any:
    kind, optional = _options(hint)
    if value is None and optional:
        return None
    if isinstance(kind, type) and issubclass(kind, StrEnum):
        try:
            return kind(value)
        except ValueError:
            choices = ", ".join(m.value for m in kind)
            raise ArgError(f"{f.name} must be one of {choices}, not {value!r}") from None
    if kind is bool:
        if not isinstance(value, bool):
            raise ArgError(f"{f.name} must be true or false, not {value!r}")
    elif kind is int:
        least = f.metadata.get("minimum")
        if not isinstance(value, int) or isinstance(value, bool) or (least is not None and value < least):
            what = {None: "an integer", 0: "an integer >= 0", 1: "a positive integer"}.get(
                least, f"an integer >= {least}"
            )
            raise ArgError(f"{f.name} must be {what}, not {value!r}")
    elif kind is str:
        if not isinstance(value, str):
            raise ArgError(f"{f.name} must be a string, not {value!r}")
        if f.metadata.get("loop"):
            check_pattern(value, f.name)
        if f.metadata.get("naming") and NAMES.fullmatch(value) is None:
            raise ArgError(f"{f.name} must be names separated by spaces, not {_short(value)}")
    return value


def field_names(cls: type[StepArgs], key: str) -> frozenset[str]:
    """Names of the fields of ``cls`` whose metadata sets ``key`` (``naming``, ``loop``)."""
    return frozenset(f.name for f in dataclasses.fields(cls) if f.metadata.get(key))


def encode(args: StepArgs) -> tuple[tuple[str, ArgValue], ...]:
    """The record as a Rewrite's sorted (name, value) pairs; None fields are left out."""
    pairs = []
    for f in dataclasses.fields(args):
        value = getattr(args, f.name)
        if value is None:
            continue
        pairs.append((f.name, value.value if isinstance(value, StrEnum) else value))
    return tuple(sorted(pairs))


def decode(cls: type[StepArgs], raw: Mapping[str, ArgValue]) -> StepArgs:
    """The record of ``cls`` from a step's arguments; ``ArgError`` says what is wrong."""
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(raw) - set(known))
    if unknown:
        takes = ", ".join(sorted(known)) or "no arguments"
        raise ArgError(f"unknown argument {unknown[0]!r} (it takes {takes})")
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and f.name not in raw:
            raise ArgError(f"missing argument {f.name!r}")
    return cls(**raw)
