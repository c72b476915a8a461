"""Remembered Exo calls: one expansion applies many rewrites to the same parent, and
composite rewrites often begin with the same call.

A pack with ``interchange`` first swaps the two loops around it, exactly as the plain
``reorder`` of those loops does; on a register-tiled SGEMM that one ``reorder_loops``
takes Exo about a second (its commutativity check walks every unrolled statement). Exo's
procs are immutable values, so a call on the same proc with the same resolved arguments
always gives the same proc (or the same error): the second time it is looked up instead.

Arguments are compared after they are resolved on the proc, so ``p.find("io jo")`` and
``p.find_loop("io #0")`` naming the same loop are the same argument.
"""

from __future__ import annotations

import dataclasses
from typing import Any

#: Most calls one memo keeps: far above one expansion's (a register-tile root: about 300).
MEMO_LIMIT = 4096


class _Unkeyable(Exception):
    """An argument with no stable key: that call is simply not remembered."""


def _key(value: Any) -> Any:
    """A hashable stand-in for a resolved argument: a cursor by its kind and its path in the
    proc, plain data as it is, Exo's memories and instructions by identity."""
    impl = getattr(value, "_impl", None)
    if impl is not None and dataclasses.is_dataclass(impl):
        return (type(value).__name__, _internal(impl))
    if isinstance(value, (list, tuple)):
        return tuple(_key(v) for v in value)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, type):
        return ("class", id(value))
    try:
        hash(value)
    except TypeError:
        raise _Unkeyable from None
    return ("object", id(value))


def _internal(cursor: Any) -> Any:
    """An internal cursor's fields, all but the proc it belongs to (the memo's key has it)."""
    out = []
    for field in dataclasses.fields(cursor):
        if field.name == "_root":
            continue
        v = getattr(cursor, field.name)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            out.append(_internal(v))
        elif isinstance(v, range):
            out.append(("range", v.start, v.stop, v.step))
        elif isinstance(v, (list, tuple)):
            out.append(tuple(tuple(x) if isinstance(x, list) else x for x in v))
        elif v is None or isinstance(v, (str, int, bool)):
            out.append(v)
        else:
            raise _Unkeyable
    return (type(cursor).__name__, tuple(out))


class CallMemo:
    """Results of Exo calls made on procs this memo has seen, for the span of one expansion.

    The procs are kept alive here, so a proc's ``id`` names it for as long as the memo lives.
    """

    def __init__(self, limit: int = MEMO_LIMIT) -> None:
        self.limit = limit
        self.hits = 0
        self._done: dict[tuple, tuple[Any, Any, BaseException | None]] = {}

    def key(self, proc: Any, op: str, args: list, kwargs: dict) -> tuple | None:
        """The key of ``op(proc, *args, **kwargs)``, or None when it has none."""
        try:
            return (id(proc), op, _key(args), tuple(sorted((k, _key(v)) for k, v in kwargs.items())))
        except _Unkeyable:
            return None

    def get(self, key: tuple) -> tuple[bool, Any]:
        """(True, result) for a remembered call (its error re-raised), else (False, None)."""
        found = self._done.get(key)
        if found is None:
            return False, None
        self.hits += 1
        _, result, error = found
        if error is not None:
            raise error
        return True, result

    def put(self, key: tuple, proc: Any, result: Any = None, error: BaseException | None = None) -> None:
        if len(self._done) < self.limit:
            self._done[key] = (proc, result, error)
