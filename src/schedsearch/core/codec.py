"""The JSON codec: ``encode`` turns records into plain JSON data, ``decode`` rebuilds them
from their class's type hints, and ``JsonRecord`` gives every record ``to_json`` / ``from_json``.

A record's annotations are resolved in the module that defines it, so each record module
imports the classes its fields name at run time. Standard library only."""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, TypeVar

T = TypeVar("T")


def encode(value: Any) -> Any:
    """Turn a record (or nested records, tuples, enums) into plain JSON data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [encode(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    return value


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    # Resolving string annotations dominates decoding cost; record classes never change.
    return typing.get_type_hints(cls)


def decode(cls: Any, data: Any) -> Any:
    """Rebuild a value of type ``cls`` (a record class or a type hint) from JSON data."""
    origin = typing.get_origin(cls)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(cls) if a is not type(None)]
        if data is None:
            return None
        return decode(options[0], data)
    if origin is tuple:
        args = typing.get_args(cls)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(decode(args[0], v) for v in data)
        return tuple(decode(a, v) for a, v in zip(args, data, strict=True))
    if origin in (dict, Mapping):
        _, vt = typing.get_args(cls)
        return {k: decode(vt, v) for k, v in data.items()}
    if isinstance(cls, type) and dataclasses.is_dataclass(cls):
        hints = _type_hints(cls)
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name in data:
                kwargs[f.name] = decode(hints[f.name], data[f.name])
        return cls(**kwargs)
    if isinstance(cls, type) and issubclass(cls, StrEnum):
        return cls(data)
    if cls is float and isinstance(data, int):
        return float(data)
    return data


class JsonRecord:
    """Mixin: ``to_json()`` gives plain data, ``from_json(data)`` rebuilds the record."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        """Plain JSON-able dict of this record."""
        return encode(self)

    @classmethod
    def from_json(cls: type[T], data: Mapping[str, Any]) -> T:
        """Rebuild the record from ``to_json`` output."""
        return decode(cls, data)
