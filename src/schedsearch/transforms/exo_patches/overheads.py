"""Stand-ins for the parts of Exo 1.0.0 whose cost has nothing to do with scheduling.

What each patch of ``registry`` removes, and why its answer is Exo's own (what each one
saved is measured in benchmarks/RESULTS.md, "The search's own machinery"):

- **cheap_inspect.** ``proc.find`` and ``find_loop`` parse their pattern in the caller's
  scope, which Exo gets from ``inspect.stack()``: that reads the source line of every frame
  on the stack. Only the caller's frame and its file and line are used; ``CheapInspect``
  builds the stack only as far as it is read.
- **solvers.** Each analysis builds a new ``pysmt`` ``Factory``, which tries to import every
  solver pysmt knows, again each time; ``solver_lookup`` uses the environment's factory,
  probed once. ``SMTSolver`` in z3 mode only pushes and pops its pysmt solver
  (``UnusedSolver`` counts the levels), and its z3 solvers come from a pool of used ones
  (``z3_pool``).
- **scoped_values.** The constant propagation keeps the values in scope in a ``ChainMap``
  with one map per ``let``: a lookup walks every map. ``ScopedValues`` answers in one
  dictionary lookup and puts back what a scope replaced when it is left.
- **lift_to_cir.** The C backend marks each index node that is never negative by asking the
  range analysis about each node anew, each answer walking its subtree;
  ``lifting_to_cir`` finds each node's range once, from its children's, with the
  operations Exo's ``index_range_analysis`` applies.
- **windows_compiled_once.** The C backend compiles each window operand of a vector
  instruction twice (``codegen``).
- **unchanged_when_equal.** ``simplify``'s index normalization and constant folding
  rebuild expressions that come back equal, and each rebuilt one is an edit that later
  cursor forwarding walks through; an equal one now counts as unchanged.
- **contexts_once** and **windows_once.** The effect analysis works out a statement's
  context again for each check (``contexts``) and composes the windows of each ``let``
  again for each buffer (``windows``); each is now worked out once.
- **ir_checks.** The IR classes are abstract base classes with no virtual subclass, and
  every node is made with each field checked; ``ir_checks`` gives them ordinary
  ``isinstance`` and checks that remember the types they accepted, and drops the checks of
  the formulas the analysis builds from nodes already checked (only a formula Exo itself
  built wrong would now reach the solver unchecked).
"""

from __future__ import annotations

import inspect
import operator
import sys
from dataclasses import dataclass
from types import FrameType


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


class CheapInspect:
    """The two ``inspect`` functions Exo's pattern and fragment parsers call."""

    @staticmethod
    def stack() -> _LazyStack:
        # sys._getframe(1): the caller of stack(), as inspect.stack()'s first entry is
        return _LazyStack(sys._getframe(1))

    @staticmethod
    def getframeinfo(frame: FrameType) -> inspect.Traceback:
        # file and line only: the parsers quote them in error messages, never the source
        return inspect.Traceback(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name, None, None)


def solver_lookup(logic):
    """Exo's ``_get_smt_solver`` over the environment's own factory (probed once)."""
    import pysmt.shortcuts

    def get_smt_solver():
        factory = pysmt.shortcuts.get_env().factory
        solvers = factory.all_solvers(logic=logic) if logic is not None else factory.all_solvers()
        if len(solvers) == 0:
            raise OSError("Could not find any SMT solvers")
        return pysmt.shortcuts.Solver(name=next(iter(solvers)))

    return get_smt_solver


class UnusedSolver:
    """The pysmt solver of an ``SMTSolver`` in z3 mode, which only pushes and pops it."""

    __slots__ = ("levels",)

    def __init__(self) -> None:
        self.levels = 0

    def push(self) -> None:
        self.levels += 1

    def pop(self) -> None:
        if self.levels == 0:
            raise IndexError("pop with no pushed level")
        self.levels -= 1


def z3_mode_only(smt_solver: type | None) -> bool:
    """Whether ``SMTSolver`` is the one this stand-in was written against: always in z3
    mode, using its pysmt solver for push and pop only (and a model that raises first)."""
    if smt_solver is None:
        return False
    try:
        source = inspect.getsource(smt_solver)
    except (OSError, TypeError):
        return False
    uses = {
        line.split("self.solver.")[1].split("(")[0]
        for line in source.splitlines()
        if "self.solver." in line and not line.strip().startswith("#")
    }
    return (
        "self.Z3_MODE = True" in source
        and "self.Z3_MODE = False" not in source
        and uses <= {"push", "pop", "get_py_values"}
        and 'raise NotImplementedError("Out of Date")' in source
    )


class ScopedValues:
    """What Exo's constant propagation does with its ``ChainMap`` (``new_child`` to enter a
    scope, ``parents`` to leave it, ``[name] = value`` to bind in the innermost, ``get``),
    with every lookup one dictionary access: the values in scope live in one dictionary,
    and each scope keeps what its bindings replaced, to put back when it is left."""

    __slots__ = ("_undo", "_values")

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


def lifting_to_cir(loopir, cir, range_analysis):
    """Exo's ``lift_to_cir(e, range_env)`` (an index expression as the C backend's CIR,
    each node marked when it is never negative) finding each node's range once: from its
    children's, with the operations Exo's ``index_range_analysis`` applies to them."""
    read, const, binop, usub = loopir.Read, loopir.Const, loopir.BinOp, loopir.USub
    index_range, is_zero = range_analysis.IndexRange, range_analysis.is_zero
    combine = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.floordiv, "%": operator.mod}

    def non_negative(rng) -> bool:
        # check_expr_bound(0, leq, e): a constant, or a range of no free variable, from 0 up
        if isinstance(rng, int):
            return 0 <= rng
        return is_zero(rng.base) and rng.lo is not None and 0 <= rng.lo

    def lift(e, env):
        """(CIR of e, e's range as index_range_analysis gives it)."""
        assert e.type.is_indexable(), "why are you here?"
        if isinstance(e, read):
            rng = index_range(e, 0, 0) if e.name not in env else index_range.create_constant_range(*env[e.name])
            return cir.Read(e.name, non_negative(rng)), rng
        if isinstance(e, const):
            return cir.Const(e.val), e.val
        if isinstance(e, binop):
            lhs, lhs_range = lift(e.lhs, env)
            rhs, rhs_range = lift(e.rhs, env)
            assert e.op in combine, "invalid binop in index expression"
            rng = combine[e.op](lhs_range, rhs_range)
            return cir.BinOp(e.op, lhs, rhs, non_negative(rng)), rng
        if isinstance(e, usub):
            arg, arg_range = lift(e.arg, env)
            rng = -arg_range
            return cir.USub(arg, non_negative(rng)), rng
        raise AssertionError("bad case!")

    def lift_to_cir(e, range_env):
        return lift(e, range_env.env)[0]

    return lift_to_cir


def unchanged_when_equal(map_e, kept: type | tuple[type, ...] = ()):
    """A rewrite pass's ``map_e`` that answers None (unchanged) where ``map_e`` rebuilt an
    expression equal to the one it was given: the proc is the same, with no edit made.
    An equal answer of a ``kept`` type is still given, for a pass that reads it (constant
    folding reads both bounds of a loop as constants to delete a loop that never runs)."""

    def map_e_or_none(self, e):
        new = map_e(self, e)
        return None if new is not None and new == e and not isinstance(new, kept) else new

    return map_e_or_none
