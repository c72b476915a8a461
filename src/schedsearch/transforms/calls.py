"""Exo scheduling calls as data: run them on a proc, or print them as Python.

Every rewrite kind lowers to a short list of ``ExoCall``s. ``run`` executes them and
``render`` prints the very same calls as a line of a standalone script, so the exported
script and the search apply identical operations by construction.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass

from exo import SchedulingError
from exo.rewrite.LoopIR_unification import UnificationError
from exo.stdlib import scheduling
from exo.stdlib.scheduling import MemoryError as MemoryMismatch
from exo.stdlib.scheduling import call_site_mem_aware_replace

from schedsearch.transforms.call_memo import CallMemo
from schedsearch.transforms.walk import count_statements, literal

ArgData = int | str | bool | tuple[str, ...]

#: Scheduling operations a call may name (all from ``exo.stdlib.scheduling``).
OPS = frozenset(
    {
        "divide_loop",
        "reorder_loops",
        "unroll_loop",
        "fuse",
        "simplify",
        "stage_mem",
        "set_memory",
        "parallelize_loop",
        "divide_dim",
        "bind_expr",
        "expand_dim",
        "lift_alloc",
        "fission",
        "remove_loop",
        "divide_with_recompute",
        "cut_loop",
        "shift_loop",
        "sink_alloc",
        "resize_dim",
        "set_precision",
        "lift_scope",
        "commute_expr",
        "fold_into_reduce",
    }
)


@dataclass(frozen=True, slots=True)
class Loop:
    """A loop found by pattern, optionally lifted ``up`` levels to an enclosing statement."""

    pattern: str
    up: int = 0
    next: bool = False  # the statement right after the loop instead of the loop itself


@dataclass(frozen=True, slots=True)
class Nest:
    """The outer loop of a perfectly nested pair, ``"a b"`` or ``"a b #n"`` (n-th such pair).

    Resolved with ``proc.find``: Exo 1.0.0's own ``reorder_loops(p, "a b #n")`` shorthand
    ignores the ``#n`` and always takes the first pair.
    """

    pair: str

    def exo_pattern(self) -> str:
        names, _, count = self.pair.partition("#")
        outer, inner = names.split()
        suffix = f" #{count.strip()}" if count.strip() else ""
        return f"for {outer} in _:\n  for {inner} in _: _{suffix}"


@dataclass(frozen=True, slots=True)
class Stmt:
    """A statement reached from a loop by ``steps``: ``"prev"``/``"next"`` step to a
    sibling, ``"up"`` to the enclosing statement, an integer ``i`` into ``body()[i]``.

    Three more steps reach what is not a statement: ``"body"`` the loop's whole body (a
    block, e.g. to stage around), ``"after"`` the gap after a statement (for ``fission``),
    and ``"rhs"``/``"lhs"`` into an assignment's right-hand side and a binary operation's
    operands (an expression, e.g. to ``bind_expr``).
    """

    loop: str
    steps: tuple[str | int, ...] = ()


@dataclass(frozen=True, slots=True)
class Within:
    """The first match of an Exo pattern (expression or statement) inside a loop."""

    loop: str
    pattern: str


@dataclass(frozen=True, slots=True)
class After:
    """The gap right after the first statement matching a pattern (for ``fission``)."""

    pattern: str


@dataclass(frozen=True, slots=True)
class Instr:
    """An Exo instruction proc by module and name (e.g. ``mm256_fmadd_ps`` of ``exo.platforms.x86``)."""

    name: str
    module: str = "exo.platforms.x86"


@dataclass(frozen=True, slots=True)
class Memory:
    """An Exo memory class by module and name (e.g. ``DRAM_STACK`` of ``exo.libs.memories``)."""

    name: str
    module: str = "exo.libs.memories"


#: Only Exo's own modules may be named: a schedule step is data and must not import code.
EXO_MODULES = frozenset({"exo.libs.memories", "exo.platforms.x86", "exo.platforms.neon"})


def _exo_object(module: str, name: str):
    if module not in EXO_MODULES:
        raise ValueError(f"{module!r} is not an Exo module that instructions or memories may come from")
    value = getattr(importlib.import_module(module), name, None)
    if value is None:
        raise ValueError(f"{module} has no {name!r}")
    return value


@dataclass(frozen=True, slots=True)
class ExoCall:
    """``p = op(p, *args, **kwargs)`` where Loop and Memory args are resolved on ``p``."""

    op: str
    args: tuple[
        Loop | Nest | Stmt | Within | After | Instr | Memory | ArgData | tuple[Instr, ...] | tuple[Stmt, ...], ...
    ] = ()
    kwargs: tuple[tuple[str, ArgData], ...] = ()


def find_in(p, loop, pattern):
    """The first match of pattern inside the loop found by the loop pattern."""
    scope = p.find_loop(loop)
    for match in p.find(pattern, many=True):
        cursor = match
        while cursor:  # an InvalidCursor (falsy) above the top-level statements
            if cursor == scope:
                return match
            cursor = cursor.parent()
    raise ValueError(f"no {pattern} inside loop {loop}")


#: The exported script defines the same helper (Exo has no "find inside this loop").
FIND_IN_SOURCE = inspect.getsource(find_in)


def _same_shape(loop, pattern) -> bool:
    """Whether ``loop`` and an instruction's loop have the same statement kinds in their
    bodies (an assignment is never a reduction): needed for the two to unify."""
    body, other = loop.body(), pattern.body()
    return len(body) == len(other) and all(type(a) is type(b) for a, b in zip(body, other, strict=True))


def replace_in(p, loops, instrs):
    """Replace every loop named in ``loops`` by the first instruction that matches it.

    Exo's ``replace_all`` restricted to the loops a step made: it tries each instruction
    on every loop of the proc, and a failed unification is costly (a register tile's four
    instructions on a 256-cubed SGEMM: 0.8 s over every loop, 0.15 s over its own). The
    result is the same: a loop gets the first instruction it unifies with, memories checked.
    """
    for name in loops:
        n = 0
        while True:
            try:
                loop = p.find_loop(f"{name} #{n}")
            except SchedulingError:  # no loop of that name left
                break
            for instr in instrs:
                if not _same_shape(loop, instr.body()[0]):
                    continue  # a cheap refusal: unification would fail, slowly
                try:
                    p = call_site_mem_aware_replace(p, loop, instr, quiet=True)
                    break
                except (UnificationError, SchedulingError, MemoryMismatch, NotImplementedError, TypeError):
                    continue
            else:  # no instruction fits this loop: leave it, as replace_all would
                n += 1
    return p


#: Calls that run a helper of this module rather than an Exo operation. The exported script
#: defines the same helpers, with the imports they need.
HELPERS = {"replace_in": replace_in}
#: The functions each helper's exported definition needs, in order.
HELPER_CODE = {"replace_in": (_same_shape, replace_in)}
HELPER_IMPORTS = {
    "replace_in": "from exo import SchedulingError\n"
    "from exo.rewrite.LoopIR_unification import UnificationError\n"
    "from exo.stdlib.scheduling import MemoryError as MemoryMismatch\n"
    "from exo.stdlib.scheduling import call_site_mem_aware_replace\n",
}


#: Named steps of a ``Stmt`` path: the cursor method each one calls.
STEPS = {"up": "parent", "prev": "prev", "next": "next", "body": "body", "after": "after", "rhs": "rhs", "lhs": "lhs"}


def _step(cursor, step: str | int):
    if isinstance(step, int):
        return cursor.body()[step]
    if step not in STEPS:
        raise ValueError(f"unknown step {step!r}")
    return getattr(cursor, STEPS[step])()


def _resolve(proc, value):
    if isinstance(value, Loop):
        cursor = proc.find_loop(value.pattern)
        for _ in range(value.up):
            cursor = cursor.parent()
        if value.next:
            cursor = cursor.next()
        return cursor
    if isinstance(value, Nest):
        return proc.find(value.exo_pattern())
    if isinstance(value, Stmt):
        cursor = proc.find_loop(value.loop)
        for step in value.steps:
            cursor = _step(cursor, step)
        return cursor
    if isinstance(value, Within):
        return find_in(proc, value.loop, value.pattern)
    if isinstance(value, After):
        return proc.find(value.pattern).after()
    if isinstance(value, (Instr, Memory)):
        return _exo_object(value.module, value.name)
    if isinstance(value, tuple):
        return [_resolve(proc, v) for v in value]
    return value


#: Most statements one ``unroll_loop`` may produce. Far above anything the search proposes
#: (see ``rewrites.MAX_UNROLLED_STATEMENTS``) or a composite step emits; it stops a schedule
#: file or database row from asking Exo for billions of statements (and all the memory).
MAX_UNROLL_STATEMENTS = 4096


def _check_unroll(proc, target) -> None:
    """ValueError (a rejected rewrite) when unrolling ``target`` would exceed the limit."""
    try:
        loop = proc.find_loop(target) if isinstance(target, str) else target
        lo, hi = literal(loop.lo()), literal(loop.hi())
        body = count_statements(loop.body())
    except Exception:  # noqa: BLE001 - not a loop Exo can find: Exo itself says why below
        return
    if lo is None or hi is None:
        return
    produced = max(0, hi - lo) * max(1, body)
    if produced > MAX_UNROLL_STATEMENTS:
        raise ValueError(
            f"unrolling {target if isinstance(target, str) else 'the loop'} would produce {produced} statements, "
            f"over the limit of {MAX_UNROLL_STATEMENTS}"
        )


def run(proc, call: ExoCall, memo: CallMemo | None = None):
    """Apply one call to ``proc`` and return the new proc (Exo raises when illegal). With a
    ``memo``, a call already made on this proc with the same resolved arguments is looked up."""
    if call.op in HELPERS:
        fn = HELPERS[call.op]
    elif call.op in OPS:
        fn = getattr(scheduling, call.op)
    else:
        raise ValueError(f"unknown scheduling operation {call.op!r}")
    args = [_resolve(proc, a) for a in call.args]
    kwargs = {k: _resolve(proc, v) for k, v in call.kwargs}
    key = memo.key(proc, call.op, args, kwargs) if memo is not None else None
    if key is not None:
        assert memo is not None
        found, result = memo.get(key)
        if found:
            return result
    try:
        if call.op == "unroll_loop" and args:
            _check_unroll(proc, args[0])
        result = fn(proc, *args, **kwargs)
    except Exception as exc:
        if memo is not None and key is not None:
            memo.put(key, proc, error=exc)
        raise
    if memo is not None and key is not None:
        memo.put(key, proc, result)
    return result


def run_all(proc, calls: list[ExoCall], memo: CallMemo | None = None):
    """Apply the calls in order (``memo``: see ``run``)."""
    for call in calls:
        proc = run(proc, call, memo)
    return proc


def _render_value(value) -> str:
    if isinstance(value, Loop):
        text = f"p.find_loop({value.pattern!r})"
        text += ".parent()" * value.up
        if value.next:
            text += ".next()"
        return text
    if isinstance(value, Nest):
        return f"p.find({value.exo_pattern()!r})"
    if isinstance(value, Stmt):
        text = f"p.find_loop({value.loop!r})"
        for step in value.steps:
            text += f".body()[{step}]" if isinstance(step, int) else f".{STEPS[step]}()"
        return text
    if isinstance(value, Within):
        return f"find_in(p, {value.loop!r}, {value.pattern!r})"
    if isinstance(value, After):
        return f"p.find({value.pattern!r}).after()"
    if isinstance(value, (Instr, Memory)):
        return value.name
    if isinstance(value, tuple):
        return "[" + ", ".join(_render_value(v) for v in value) + "]"
    return repr(value)


def render(call: ExoCall) -> str:
    """The call as one line of Python operating on a variable ``p``."""
    parts = ["p"] + [_render_value(a) for a in call.args]
    parts += [f"{k}={_render_value(v)}" for k, v in call.kwargs]
    return f"p = {call.op}({', '.join(parts)})"


def _values(calls: list[ExoCall]):
    for call in calls:
        for value in list(call.args) + [v for _, v in call.kwargs]:
            yield from value if isinstance(value, tuple) else (value,)


def imports_needed(calls: list[ExoCall]) -> dict[str, list[str]]:
    """Module -> sorted names of the memories and instructions the rendered calls use."""
    out: dict[str, set[str]] = {}
    for v in _values(calls):
        if isinstance(v, (Instr, Memory)):
            out.setdefault(v.module, set()).add(v.name)
    return {module: sorted(names) for module, names in sorted(out.items())}


def needs_find_in(calls: list[ExoCall]) -> bool:
    """Whether the rendered calls use the ``find_in`` helper."""
    return any(isinstance(v, Within) for v in _values(calls))


def helpers_source(calls: list[ExoCall]) -> str:
    """The definitions (with their imports) of the helpers the rendered calls use."""
    parts = [FIND_IN_SOURCE] if needs_find_in(calls) else []
    for name in sorted({call.op for call in calls} & HELPERS.keys()):
        parts.append(HELPER_IMPORTS[name] + "\n\n" + "\n\n".join(inspect.getsource(f) for f in HELPER_CODE[name]))
    return "".join(f"\n{part}\n" for part in parts)
