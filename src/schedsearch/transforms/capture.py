"""Capture an Exo ``@proc`` object as source text any process can rebuild it from.

Procedures do not pickle, and a worker rebuilds a proc from source text (see ``source``).
A proc object handed to ``schedsearch.tune()`` — defined in a notebook cell, a test or a
script — is turned into a small, self-contained module::

    from __future__ import annotations
    from exo.API import proc
    from exo.core.memory import DRAM
    TILE = 8

    @proc
    def sgemm(M: size, ...):
        ...

Only the proc's own definition (read through ``linecache``, where Exo itself found it and
where IPython keeps notebook cells) and the names it uses are kept: each name is bound to
the value it has in the caller's scope, as an import from an installed library, a literal
constant, or the captured definition of another proc it calls. Nothing else of the file
or cell runs again, and the text (hence its sha256, the workload's identity in the store)
changes only when the proc or a value it uses changes.

The captured text is checked by rebuilding the proc from it and comparing Exo's printout
with the object's: a proc that was scheduled after ``@proc``, or that uses a value that
cannot be written down, is refused with one sentence.
"""

from __future__ import annotations

import ast
import functools
import inspect
import linecache
import os
import sys
import sysconfig
import textwrap
import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from exo import Procedure
from exo.frontend.pyparser import _prim_types

from schedsearch.core import Workload
from schedsearch.errors import WorkloadError
from schedsearch.transforms.source import execute_source, procs_in
from schedsearch.transforms.workload import workload_from_module

#: Words of Exo's language: types, loop kinds and size/index/stride, never looked up.
DSL_WORDS = frozenset({"size", "index", "stride", "bool", "seq", "par", *_prim_types})

_CONSTANTS = (bool, int, float, complex, str, bytes, type(None))


@dataclass(frozen=True, slots=True)
class CapturedProc:
    """A proc's captured module text, the proc's name, and where it was defined."""

    source: str
    proc: str
    origin: str  # "file.py:12": for messages and as the workload's path label


def capture_proc(obj: object, scopes: Sequence[Mapping[str, Any]] = ()) -> CapturedProc:
    """Capture ``obj`` (an Exo ``@proc``) as a small module that defines it.

    ``scopes`` are the namespaces the proc's names are looked up in, innermost first (the
    caller's locals and globals); the globals of the module that defines the proc, when it
    is imported, come first. Raises WorkloadError when ``obj`` is no proc, its source cannot
    be found, or a name it uses cannot be written down.
    """
    if not isinstance(obj, Procedure):
        raise WorkloadError(f"expected an Exo @proc or the path of a workload file, not {type(obj).__name__}.")
    capture = _Capture(scopes)
    name = capture.add_proc(obj)
    info = obj._loopir_proc.srcinfo
    return CapturedProc(capture.text(), name, f"{info.filename}:{info.lineno}")


def workload_from_proc(
    obj: object,
    sizes: Mapping[str, int] | None = None,
    scopes: Sequence[Mapping[str, Any]] = (),
    *,
    proc_option: str = "proc=",
) -> Workload:
    """The Workload of a proc object with concrete sizes (see ``capture_proc``).

    The captured text is executed once here, the rebuilt proc compared with ``obj``, and
    the sizes bound and checked as ``load_workload`` does. The workload's ``path`` is a
    label, ``<name from file:line>``, not a file.
    """
    captured = capture_proc(obj, scopes)
    label = f"<{captured.proc} from {captured.origin}>"
    try:
        module = execute_source(captured.source, label)
    except WorkloadError as exc:
        raise WorkloadError(f"proc {captured.proc} cannot be rebuilt from its captured source: {exc}") from None
    rebuilt = procs_in(module).get(captured.proc)
    if rebuilt is None or str(rebuilt) != str(obj):
        raise WorkloadError(
            f"proc {captured.proc} is not the proc its source at {captured.origin} defines (it was scheduled, "
            "renamed or edited after @proc); pass the proc as written, or the path of its file."
        )
    return workload_from_module(module, captured.source, label, captured.proc, sizes, proc_option=proc_option)


class _Capture:
    """Collects the bindings and definitions of one captured module."""

    def __init__(self, scopes: Sequence[Mapping[str, Any]]) -> None:
        self.scopes = tuple(scopes)
        self.lines: dict[str, str] = {}  # name -> the line that binds it (imports, constants)
        self.values: dict[str, Any] = {}  # name -> the value it is bound to
        self.defs: list[str] = []  # captured definitions, dependencies first
        self.captured: dict[int, str] = {}  # id of a proc's IR -> its def name

    def text(self) -> str:
        """The module: imports, then constants, then the definitions."""
        lines = list(self.lines.values())
        imports = [ln for ln in lines if ln.startswith(("import ", "from "))]
        head = ["from __future__ import annotations", *imports, *(ln for ln in lines if ln not in imports)]
        return "\n".join(head) + "\n\n\n" + "\n\n\n".join(d.strip() for d in self.defs) + "\n"

    # -------------------------------------------------------------- definitions

    def add_proc(self, obj: Procedure) -> str:
        """Capture ``obj``'s definition and the names it uses; its def name."""
        ir = obj._loopir_proc
        if id(ir) in self.captured:
            return self.captured[id(ir)]
        name = obj.name()
        self.captured[id(ir)] = name
        info = ir.srcinfo
        fdef, text = _definition(info.filename, info.lineno, name)
        scopes = self.scopes
        module = _module_of(info.filename)
        if module is not None:
            scopes = (vars(module), *scopes)
        missing = []
        for used, chains in _free_names(fdef).items():
            found, value = _lookup(used, scopes)
            if not found:
                if used not in DSL_WORDS:
                    missing.append(used)
                continue
            self._bind(name, used, value, chains)
        if missing:
            raise WorkloadError(
                f"proc {name} uses {', '.join(missing)}, which cannot be found in the caller's scope "
                f"(a local variable of a function that has returned?); define them at the top of its module or cell."
            )
        self.defs.append(text)
        return name

    # -------------------------------------------------------------- bindings

    def _bind(self, proc: str, name: str, value: Any, chains: list[list[str]]) -> None:
        if name in self.values:
            if self.values[name] is value or (isinstance(value, _CONSTANTS) and self.values[name] == value):
                return
            raise WorkloadError(
                f"proc {proc} uses {name}, which means different things in the procs it is "
                "captured with; give them different names."
            )
        if isinstance(value, Procedure) and not _library_home(value, name):
            defined = self.add_proc(value)
            self.values[name] = value
            if defined != name:
                self.defs.append(f"{name} = {defined}")
            return
        self.values[name] = value
        self.lines[name] = _binding_line(proc, name, value, chains)


def _binding_line(proc: str, name: str, value: Any, chains: list[list[str]]) -> str:
    """One line of Python binding ``name`` to ``value`` (WorkloadError when none can)."""
    if isinstance(value, types.ModuleType):
        return _module_imports(name, value, chains)
    if isinstance(value, _CONSTANTS):
        return f"{name} = {value!r}"
    home = _library_home(value, name)
    if home is not None:
        module, attr = home
        return f"from {module} import {attr}" + (f" as {name}" if attr != name else "")
    raise WorkloadError(
        f"proc {proc} uses {name} ({type(value).__name__}), which is defined outside an installed library "
        "and is not a proc or a constant; move it to a module, or pass the path of the proc's file."
    )


def _module_imports(name: str, module: types.ModuleType, chains: list[list[str]]) -> str:
    """``import a.b.c`` lines for a module used as ``name.x.y``: the deepest submodules the
    proc reaches through it are imported too (a fresh process may not have loaded them)."""
    if not _is_library(module):
        raise WorkloadError(
            f"the module {module.__name__} is not an installed library, so a worker may not have it; "
            "import what the proc needs from installed libraries only."
        )
    first = f"import {module.__name__}" if module.__name__ == name else f"import {module.__name__} as {name}"
    deeper: list[str] = []
    for chain in chains:
        value: Any = module
        reached = None
        for attr in chain[1:]:
            value = getattr(value, attr, None)
            if not isinstance(value, types.ModuleType):
                break
            reached = value
        if reached is not None and f"import {reached.__name__}" not in deeper:
            deeper.append(f"import {reached.__name__}")
    return "; ".join([first, *deeper])


# ------------------------------------------------------------------ source and names


def _definition(filename: str, lineno: int, name: str) -> tuple[ast.FunctionDef, str]:
    """The def at ``lineno`` of ``filename`` (as linecache has it) and its dedented text,
    decorators included."""
    lines = linecache.getlines(filename)
    if not lines:
        raise WorkloadError(
            f"the source of proc {name} ({filename}) cannot be found; define the proc in a file or a notebook "
            "cell, or pass the path of its file."
        )
    text = "".join(lines)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        raise WorkloadError(
            f"the source of proc {name} ({filename}) no longer parses; pass the path of its file."
        ) from None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.lineno == lineno and node.name == name:
            first = min([d.lineno for d in node.decorator_list] + [node.lineno])
            body = textwrap.dedent("".join(lines[first - 1 : node.end_lineno]))
            return node, body.rstrip() + "\n"
    raise WorkloadError(
        f"proc {name} is no longer defined at {filename}:{lineno} (the file or cell changed since); run its "
        "definition again, or pass the path of its file."
    )


def _free_names(fdef: ast.FunctionDef) -> dict[str, list[list[str]]]:
    """Names the definition reads from outside itself, in order of first use, each with the
    attribute chains it is used in (``exo.platforms.x86.mm256_loadu_ps`` -> one chain)."""
    bound = {a.arg for a in fdef.args.args}
    nodes = [*fdef.decorator_list, *fdef.args.args, *fdef.body]
    if fdef.returns is not None:
        nodes.append(fdef.returns)
    for node in _walk(nodes):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
    free: dict[str, list[list[str]]] = {}
    for node in _walk(nodes):
        if isinstance(node, ast.Attribute):
            chain = _chain(node)
            if chain and chain[0] not in bound:
                free.setdefault(chain[0], []).append(chain)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in bound:
            free.setdefault(node.id, [])
    return dict(sorted(free.items(), key=lambda kv: _first_use(nodes, kv[0])))


def _walk(nodes: Sequence[ast.AST]) -> Iterator[ast.AST]:
    for node in nodes:
        yield from ast.walk(node)


def _chain(node: ast.Attribute) -> list[str]:
    parts: list[str] = []
    current: ast.AST = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    return [current.id, *reversed(parts)] if isinstance(current, ast.Name) else []


def _first_use(nodes: Sequence[ast.AST], name: str) -> tuple[int, int]:
    positions = [(n.lineno, n.col_offset) for n in _walk(nodes) if isinstance(n, ast.Name) and n.id == name]
    return min(positions, default=(0, 0))


def _lookup(name: str, scopes: Sequence[Mapping[str, Any]]) -> tuple[bool, Any]:
    for scope in scopes:
        if name in scope:
            return True, scope[name]
    return False, None


# ------------------------------------------------------------------ where values live


@functools.cache
def _library_roots() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    roots = {os.path.realpath(paths[k]) for k in ("purelib", "platlib", "stdlib", "platstdlib") if k in paths}
    return tuple(sorted(roots))


def _is_library(module: types.ModuleType) -> bool:
    """Whether a module is installed (site-packages or the standard library): a worker with
    the same environment has it, unlike the user's own files."""
    filename = getattr(module, "__file__", None)
    if filename is None:
        return module.__name__ in sys.builtin_module_names
    real = os.path.realpath(filename)
    return any(real.startswith(root + os.sep) for root in _library_roots())


def _module_of(filename: str) -> types.ModuleType | None:
    """The imported module whose file is ``filename`` (None for a notebook cell or script)."""
    real = os.path.realpath(filename)
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and os.path.realpath(path) == real:
            return module
    return None


def _library_home(value: Any, prefer: str) -> tuple[str, str] | None:
    """(module, attribute) of an installed library that holds ``value``, preferring the
    value's own module and the attribute named ``prefer``; None when no library holds it."""
    own = getattr(value, "__module__", None) if (inspect.isclass(value) or inspect.isroutine(value)) else None
    qual = getattr(value, "__qualname__", "")
    if isinstance(own, str) and own in sys.modules and "." not in qual and "<" not in qual:
        module = sys.modules[own]
        if _is_library(module) and getattr(module, qual, None) is value:
            return own, qual
    found: list[tuple[int, str, str]] = []
    for modname, module in sorted(sys.modules.items()):
        if not isinstance(module, types.ModuleType) or not _is_library(module):
            continue
        try:
            items = list(vars(module).items())
        except TypeError:
            continue
        for attr, held in items:
            if held is value and not attr.startswith("_"):
                found.append((0 if attr == prefer else 1, modname, attr))
    if not found:
        return None
    found.sort(key=lambda f: (f[0], f[1].count("."), len(f[1]), f[1]))
    return found[0][1], found[0][2]
