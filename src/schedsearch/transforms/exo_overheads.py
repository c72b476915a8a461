"""Costs Exo 1.0.0 pays on scheduling calls that have nothing to do with scheduling.

Profiling the root expansion of a 256-cubed SGEMM in the AVX-512 space (52 rewrites, about
22 s on a Zen 4 core) showed half the time outside Exo's rewriting:

- **Finding a cursor reads source files.** ``proc.find`` and ``find_loop`` parse their
  pattern in the caller's scope, and to get that scope Exo calls ``inspect.stack()``, which
  reads the source line of every frame on the stack (a Ray worker's stack is deep): about
  3 ms a call, and an expansion makes thousands. Only the caller's frame and its file name
  and line (for error messages) are used.
- **Every SMT query probes for solvers.** Each analysis builds a new ``pysmt`` ``Factory``,
  which tries to import every solver pysmt knows (MathSAT, CVC, Yices, ...). The missing
  ones fail again each time, compiling their modules anew: about 6 ms a query.

A third cost grows with the proc. Exo simplifies every effect formula it checks with a
constant propagation that keeps the values in scope in a ``collections.ChainMap``, one map
per ``let`` it enters. A lookup walks every map up to the one that binds the name, and a
miss walks them all, twice (``get`` asks ``in`` first): on a register-tiled node, whose
formulas nest a ``let`` per unrolled statement, the lookups were three quarters of a loop
reorder's 3 s.

``install`` gives Exo's pattern parser a stack that is built only as far as it is read, its
solver lookups the environment's one factory, and its constant propagation a scope that
finds a name in one dictionary lookup (``ScopedValues``). All three return what Exo would have got, so
every rewrite, every proc and all generated C stay the same (the rewrite tests check C
byte for byte). If Exo's internals are not the ones these were written against, nothing is
changed and Exo is only slower.
"""

from __future__ import annotations

import collections
import inspect
import sys
from dataclasses import dataclass
from types import FrameType

_installed = False


@dataclass(frozen=True, slots=True)
class _FrameInfo:
    """What Exo reads of an ``inspect.FrameInfo``: ``[0]`` and ``.frame``."""

    frame: FrameType

    def __getitem__(self, index: int) -> FrameType:
        return (self.frame,)[index]


class _LazyStack:
    """``inspect.stack()`` as a sequence whose entries are made only when indexed."""

    def __init__(self, frame: FrameType) -> None:
        self._frame = frame

    def __getitem__(self, index: int) -> _FrameInfo:
        frame = self._frame
        for _ in range(index):
            if frame.f_back is None:
                raise IndexError(index)
            frame = frame.f_back
        return _FrameInfo(frame)


class _CheapInspect:
    """The two ``inspect`` functions Exo's pattern and fragment parsers call."""

    @staticmethod
    def stack() -> _LazyStack:
        # sys._getframe(1): the caller of stack(), as inspect.stack()'s first entry is
        return _LazyStack(sys._getframe(1))

    @staticmethod
    def getframeinfo(frame: FrameType) -> inspect.Traceback:
        # file and line only: the parsers quote them in error messages, never the source
        return inspect.Traceback(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name, None, None)


def _solver_lookup(logic):
    """Exo's ``_get_smt_solver`` over the environment's own factory (probed once)."""
    import pysmt.shortcuts

    def get_smt_solver():
        factory = pysmt.shortcuts.get_env().factory
        solvers = factory.all_solvers(logic=logic) if logic is not None else factory.all_solvers()
        if len(solvers) == 0:
            raise OSError("Could not find any SMT solvers")
        return pysmt.shortcuts.Solver(name=next(iter(solvers)))

    return get_smt_solver


class ScopedValues:
    """What Exo's constant propagation does with its ``ChainMap`` (``new_child`` to enter a
    scope, ``parents`` to leave it, ``[name] = value`` to bind in the innermost, ``get``),
    with every lookup one dictionary access: the values in scope live in one dictionary,
    and each scope keeps what its bindings replaced, to put back when it is left."""

    __slots__ = ("_values", "_undo")

    _ABSENT = object()

    def __init__(self) -> None:
        self._values: dict = {}
        self._undo: list[list[tuple]] = [[]]

    def new_child(self) -> ScopedValues:
        self._undo.append([])
        return self

    @property
    def parents(self) -> ScopedValues:
        frame = self._undo.pop() if self._undo else []
        for key, old in reversed(frame):
            if old is self._ABSENT:
                del self._values[key]
            else:
                self._values[key] = old
        if not self._undo:
            self._undo.append([])  # ChainMap's parents of the last map is an empty chain
        return self

    def __setitem__(self, key, value) -> None:
        self._undo[-1].append((key, self._values.get(key, self._ABSENT)))
        self._values[key] = value

    def __getitem__(self, key):
        return self._values[key]

    def __contains__(self, key) -> bool:
        return key in self._values

    def get(self, key, default=None):
        return self._values.get(key, default)


def install() -> bool:
    """Remove both overheads from this process (once); False when Exo's internals differ
    from the ones expected, in which case nothing was changed."""
    global _installed
    if _installed:
        return True
    try:
        from exo.frontend import boundscheck, parse_fragment, pattern_match
        from exo.rewrite import LoopIR_unification, analysis_simplify, new_analysis_core
        from pysmt import logics
    except ImportError:
        return False
    parsers = (pattern_match, parse_fragment)
    analyses = ((boundscheck, None), (LoopIR_unification, None), (new_analysis_core, logics.LIA))
    if not all(getattr(m, "inspect", None) is inspect for m in parsers) or \
            not all(callable(getattr(m, "_get_smt_solver", None)) for m, _ in analyses) or \
            getattr(analysis_simplify, "ChainMap", None) is not collections.ChainMap:
        return False
    for module in parsers:
        module.inspect = _CheapInspect
    for module, logic in analyses:
        module._get_smt_solver = _solver_lookup(logic)
    # the module uses ChainMap only for the constant propagation's scopes (ASimplify)
    analysis_simplify.ChainMap = ScopedValues
    _installed = True
    return True
