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
  ones fail again each time, compiling their modules anew: about 6 ms a query. And each
  ``SMTSolver`` of Exo's effect analysis makes a pysmt solver (a z3 solver within) that it
  only pushes and pops: in its z3 mode, the only one it has, every assertion and query
  goes to a z3 solver of its own. That one gets a stand-in that counts the levels, and the
  z3 solver, new for each check, comes from a pool of used ones (``z3_pool``): a new z3
  solver's first push and check cost a millisecond more, and the 49 rewrites of a 256-cubed
  SGEMM's root other than its register tiles took 8.0 s of CPU instead of 10.3 s.

A third cost grows with the proc. Exo simplifies every effect formula it checks with a
constant propagation that keeps the values in scope in a ``collections.ChainMap``, one map
per ``let`` it enters. A lookup walks every map up to the one that binds the name, and a
miss walks them all, twice (``get`` asks ``in`` first): on a register-tiled node, whose
formulas nest a ``let`` per unrolled statement, the lookups were three quarters of a loop
reorder's 3 s.

A fourth is spread thin over everything. Exo's IR classes are made by ``asdl_adt`` as
abstract base classes, so every ``isinstance`` against one that is not the exact class
(``isinstance(s, LoopIR.stmt)``, and each field check of each node Exo builds) goes through
``ABCMeta``'s virtual-subclass lookup, though no IR class has a virtual subclass. On a
256-cubed SGEMM's expansions that lookup and the field checks were about a tenth of the time.

A fifth is in the C backend. ``lift_to_cir`` turns each index expression of a window
(every operand of every vector instruction) into C, marking each node that is never
negative; to know that, it asks the range analysis about each node anew, and each answer
walks the node's whole subtree. Finding each range once from the children's made C
generation of a register-tiled SGEMM node's children a tenth faster (1.12 s to 0.99 s for
59 children on a Zen 4 core).

A sixth is in ``simplify``. Its index normalization rebuilds every index expression of the
proc, and each rebuilt expression is an edit whose cursor forwarding every later visit walks
through: quadratic in the proc's index expressions, though nearly all come back equal (1562
of 1682 on a register-tiled SGEMM node). Counting an equal one as unchanged made the 213
``simplify`` calls of expanding SGEMM 256's root, four children and eight grandchildren
2.1 times faster (24.1 s to 11.3 s on a Zen 4 core, each call timed both ways in turn),
about a quarter of those expansions' time. The constant folding after it does the same:
counting an equal expression it rebuilt as unchanged (constants still answered, since it
reads a loop's bounds to delete a loop that never runs) took the same 213 calls from 9.8 s
to 7.9 s, and those expansions from 48.0 s to 44.8 s.

A seventh is in the effect analysis itself. Checking a reorder, a sink or a pack builds its
safety condition as formulas (``new_analysis_core.A``) over location sets and effects
(``new_eff.LS``, ``new_eff.E``; the bounds checks' ``boundscheck.E``): millions of nodes for
a register-tiled node, each with every field checked against its declared type as it is
made, and each operator given as text made into Exo's operator class anew. Those nodes are
made by Exo's analysis alone, from program nodes already checked, and never leave it: they
become SMT queries, not procs or C. Their fields go unchecked (``trusting_formulas``); a
list field still gets its own copy, and an operator is still converted, once per text. Ten
expansions of an SGEMM 256 search (280 children, a Zen 4 core, each way in turn) took 36.9
and 39.8 s against 42.1 and 48.2 s with the checks, their children the same byte for byte.
Only a formula Exo built wrong - its own internal error, which the check would have raised -
would now go on to the solver. A formula's type, checked by a function of Exo's own
(``is_type_bound``) rather than by a declared class, goes unchecked the same way.

An eighth and a ninth are work done twice: the effect analysis composes the windows bound by
each ``let`` of a statement's context again for each buffer it asks about (``exo_windows``),
and the C backend compiles each window operand of a vector instruction twice
(``exo_codegen``). With those two and the types unchecked, the same ten expansions took 44.0
and 42.4 s against 47.7 and 48.6 s (a Zen 4 core, each way in turn), their children's C the
same byte for byte.

``install`` gives Exo's pattern parser a stack that is built only as far as it is read, its
solver lookups the environment's one factory, its constant propagation a scope that
finds a name in one dictionary lookup (``ScopedValues``), its IR classes the plain
``isinstance`` of ordinary classes, with field checks that remember the exact types they
have accepted, its C backend a ``lift_to_cir`` that finds each node's range once, from
its children's (``lifting_to_cir``), and its index normalization and constant folding no
edit where nothing changed (``unchanged_when_equal``), and its effect checks a context extraction
that works out each statement's context once (``exo_contexts``) and composes each ``let``'s
windows once (``exo_windows``), its analysis formulas no field checks (``trusting_formulas``),
and its C backend each instruction operand's window compiled once (``exo_codegen``). All
of them return what Exo would have got, so every rewrite, every proc and all generated C
stay the same (the rewrite tests check C byte for byte). If Exo's internals are not the
ones these were written against, nothing is changed and Exo is only slower.
"""

from __future__ import annotations

import abc
import collections
import inspect
import operator
import sys
import typing
from dataclasses import dataclass
from types import FrameType

from schedsearch.transforms import exo_codegen, exo_contexts, exo_windows, z3_pool

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


def _z3_mode_only(smt_solver: type) -> bool:
    """Whether ``SMTSolver`` is the one this stand-in was written against: always in z3
    mode, using its pysmt solver for push and pop only (and a model that raises first)."""
    try:
        source = inspect.getsource(smt_solver)
    except (OSError, TypeError):
        return False
    uses = {line.split("self.solver.")[1].split("(")[0] for line in source.splitlines()
            if "self.solver." in line and not line.strip().startswith("#")}
    return "self.Z3_MODE = True" in source and "self.Z3_MODE = False" not in source and \
        uses <= {"push", "pop", "get_py_values"} and 'raise NotImplementedError("Out of Date")' in source


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


class _PlainChecks(abc.ABCMeta):
    """``ABCMeta`` with the ``isinstance`` and ``issubclass`` of ordinary classes: the
    answer from the class's bases alone. Given only to classes with no virtual subclass,
    for which it is the answer ``ABCMeta`` gives, found without its registry and caches."""

    __instancecheck__ = type.__instancecheck__
    __subclasscheck__ = type.__subclasscheck__


def _ir_classes(base: type) -> list[type]:
    """``base``, first, and every class derived from it."""
    found, todo = [], [base]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def _unregistered(classes: list[type]) -> bool:
    """True when none of ``classes`` has a virtual subclass registered with it."""
    return all(isinstance(cls, abc.ABCMeta) and not abc._get_dump(cls)[0] for cls in classes)


def _remembering(typ: type, convert: bool, seq: bool, opt: bool, error: type):
    """The field check ``asdl_adt`` makes for a field of type ``typ`` (optional when
    ``opt``, a list when ``seq``), remembering the exact types it has accepted: whether an
    object is an instance of an ordinary class depends on its type alone."""
    accepted: set[type] = set()

    def point(obj):
        kind = type(obj)
        if kind in accepted:
            return obj
        if obj is not None:
            if isinstance(obj, typ):
                accepted.add(kind)
                return obj
            if convert:
                return typ(obj)
        raise error(typ, kind)

    def validate(value):
        if value is None and opt:
            return value
        if seq:
            if not isinstance(value, list):
                raise error(list, type(value))
            # a block of statements is checked each time a node holding it is rebuilt:
            # when every item's type was accepted before, the copy is made in C
            if accepted.issuperset(map(type, value)):
                return list(value)
            try:
                return [point(item) for item in value]
            except error as err:
                raise error(typing.List[err.expected], typing.List[err.actual]) from err
        return point(value)

    validate.seq, validate.convert = seq, convert  # type: ignore[attr-defined]  # read by ``trusting_formulas``
    return validate


def _trusting(seq: bool):
    """A field check that checks nothing (``trusting_formulas``): a list field still gets a
    list of its own, as ``asdl_adt`` gives it."""
    if seq:
        return lambda value: value if value is None else list(value)
    return lambda value: value


def _converting_once(check):
    """``check`` (a converting field check: an operator given as text becomes Exo's
    operator, a ``str`` subclass) asked once per value: the answer for a text seen before
    is the equal operator made then."""
    made: dict = {}

    def convert(value):
        if type(value) is not str:
            return check(value)
        found = made.get(value)
        if found is None:
            found = made[value] = check(value)
        return found

    return convert


#: The field checks ``trusting_formulas`` replaced: (namespace, name, the check it replaced).
TRUSTED: list[tuple[dict, str, typing.Callable]] = []


def _checked_only_by(check, functions: tuple[typing.Callable, ...]) -> bool:
    """Whether ``check`` is ``asdl_adt``'s check of a single (not list) field by one of
    ``functions``: functions of Exo's own that return the value they are given, or raise."""
    outer = _closure(check)
    return not outer.get("seq", True) and any(outer.get("point_valid") is f for f in functions)


def trusting_formulas(modules: typing.Iterable[object], checks_only: tuple[typing.Callable, ...] = ()) -> int:
    """Drop the field checks of the classes of Exo's analysis formula ``modules`` (``asdl_adt``
    modules: ``new_analysis_core.A``, ``new_eff.LS``, ``new_eff.E``, ``boundscheck.E``) that
    ``_plain_ir_checks`` made remembering (see the module text), and those made with one of
    Exo's own ``checks_only`` (``is_type_bound`` of ``new_analysis_core`` and of ``new_eff``:
    a formula's type is a tuple or an IR type); those that convert (an operator's text)
    convert each text once. Returns how many were replaced."""
    from asdl_adt import adt

    count = 0
    for module in modules:
        for cls in vars(module).values():
            if not (isinstance(cls, type) and issubclass(cls, adt._AsdlAdtBase)):
                continue
            namespace = getattr(cls.__dict__.get("__init__"), "__globals__", None)
            if namespace is None or namespace.get("__name__") is not None:
                continue
            for name, check in list(namespace.items()):
                if not name.startswith("_validate_"):
                    continue
                convert = getattr(check, "convert", None)
                if convert is None and _checked_only_by(check, checks_only):
                    replacement = _trusting(False)
                elif convert is None or (convert and check.seq):
                    continue  # Exo's other checks, and lists to convert, stay as they are
                else:
                    replacement = _converting_once(check) if convert else _trusting(check.seq)
                TRUSTED.append((namespace, name, check))
                namespace[name] = replacement
                count += 1
    return count


def _closure(func) -> dict:
    """A function's free variables by name."""
    cells = func.__closure__ or ()
    return {name: cell.cell_contents for name, cell in zip(func.__code__.co_freevars, cells)}


def _plain_ir_checks() -> bool:
    """Give every ``asdl_adt`` class of this process plain ``isinstance`` checks and
    remembering field checks; False, changing nothing, when a class has a virtual subclass
    or the checks are not shaped as expected."""
    try:
        from asdl_adt import adt, validators
    except ImportError:
        return False
    classes = _ir_classes(adt._AsdlAdtBase)
    if not _unregistered(classes):
        return False
    replacements = []  # (namespace, name, check): all found before any is changed
    for cls in classes:
        init = cls.__dict__.get("__init__")
        namespace = getattr(init, "__globals__", None)
        if namespace is None or namespace.get("__name__") is not None:
            continue  # not an __init__ made by asdl_adt (those run in a namespace of their own)
        for name, check in namespace.items():
            if not name.startswith("_validate_") or check.__qualname__.startswith(_remembering.__name__):
                continue
            outer = _closure(check)
            if set(outer) != {"opt", "point_valid", "seq"}:
                return False
            inner = _closure(outer["point_valid"])
            if set(inner) != {"convert", "typ"} or not isinstance(inner["typ"], type):
                continue  # a field checked by a function of Exo's own: left as it is
            replacements.append((namespace, name, _remembering(
                inner["typ"], inner["convert"], outer["seq"], outer["opt"], validators.ValidationError)))
    for cls in classes[1:]:
        # not asdl_adt's own base: classes made later inherit its metaclass, and they may
        # yet have virtual subclasses
        cls.__class__ = _PlainChecks
    for namespace, name, check in replacements:
        namespace[name] = check
    return True


def lifting_to_cir(loopir, cir, range_analysis):
    """Exo's ``lift_to_cir(e, range_env)`` (an index expression as the C backend's CIR,
    each node marked when it is never negative) finding each node's range once: from its
    children's, with the operations Exo's ``index_range_analysis`` applies to them."""
    read, const, binop, usub = loopir.Read, loopir.Const, loopir.BinOp, loopir.USub
    index_range, is_zero = range_analysis.IndexRange, range_analysis.is_zero
    combine = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.floordiv,
               "%": operator.mod}

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


def install() -> bool:
    """Remove these overheads from this process (once); False when Exo's internals differ
    from the ones expected, in which case nothing was changed."""
    global _installed
    if _installed:
        return True
    try:
        from exo.backend import LoopIR_compiler
        from exo.core.LoopIR import CIR, LoopIR
        from exo.frontend import boundscheck, parse_fragment, pattern_match
        from exo.rewrite import (LoopIR_scheduling, LoopIR_unification, analysis_simplify, new_analysis_core,
                                 new_eff, range_analysis)
        from pysmt import logics
    except ImportError:
        return False
    parsers = (pattern_match, parse_fragment)
    analyses = ((boundscheck, None), (LoopIR_unification, None), (new_analysis_core, logics.LIA))
    if not all(getattr(m, "inspect", None) is inspect for m in parsers) or \
            not all(callable(getattr(m, "_get_smt_solver", None)) for m, _ in analyses) or \
            getattr(analysis_simplify, "ChainMap", None) is not collections.ChainMap or \
            getattr(LoopIR_compiler.lift_to_cir, "__module__", None) != LoopIR_compiler.__name__ or \
            not all(hasattr(range_analysis, name) for name in ("IndexRange", "is_zero")) or \
            not all(callable(getattr(getattr(LoopIR_scheduling, name, None), "map_e", None))
                    for name in ("_DoNormalize", "DoSimplify")) or \
            not exo_contexts.expected(new_eff) or not exo_windows.expected(new_eff) or \
            not exo_codegen.expected(LoopIR_compiler) or \
            not all(callable(getattr(m, "is_type_bound", None)) for m in (new_analysis_core, new_eff)):
        return False
    for module in parsers:
        module.inspect = _CheapInspect
    for module, logic in analyses:
        module._get_smt_solver = _solver_lookup(logic)
    if _z3_mode_only(getattr(new_analysis_core, "SMTSolver", None)):
        new_analysis_core._get_smt_solver = UnusedSolver
    z3_pool.install(new_analysis_core)
    # the module uses ChainMap only for the constant propagation's scopes (ASimplify)
    analysis_simplify.ChainMap = ScopedValues
    LoopIR_compiler.lift_to_cir = lifting_to_cir(LoopIR, CIR, range_analysis)
    exo_codegen.fields_once(LoopIR_compiler.Compiler, LoopIR.Call)
    LoopIR_scheduling._DoNormalize.map_e = unchanged_when_equal(LoopIR_scheduling._DoNormalize.map_e)
    LoopIR_scheduling.DoSimplify.map_e = unchanged_when_equal(LoopIR_scheduling.DoSimplify.map_e, LoopIR.Const)
    new_eff.ContextExtraction = exo_contexts.remembering_contexts(new_eff.ContextExtraction)
    new_eff.AEnv.translate_win = exo_windows.translating_once(new_eff.AEnv.translate_win)
    if _plain_ir_checks():
        trusting_formulas((new_analysis_core.A, new_eff.LS, new_eff.E, boundscheck.E),
                          checks_only=(new_analysis_core.is_type_bound, new_eff.is_type_bound))
    _installed = True
    return True
