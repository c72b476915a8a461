"""Load a workload: pick the proc in a file, bind its sizes, describe its C arguments."""

from __future__ import annotations

import operator
import os
import types
from collections.abc import Mapping
from typing import cast

from exo import Procedure

from schedsearch.core import INT64_MAX, ArgRole, ArgSpec, DType, Workload, sha256_text
from schedsearch.errors import LimitError, UntrustedSourceError, WorkloadError
from schedsearch.transforms.codegen import count_flops
from schedsearch.transforms.source import execute_source, procs_in, read_source
from schedsearch.transforms.walk import literal, written_buffers

#: Name of the optional module-level dict giving default sizes per proc.
SIZES_ATTRIBUTE = "SCHEDSEARCH_SIZES"
#: Name of the optional module-level string naming the proc to use when none is given.
PROC_ATTRIBUTE = "SCHEDSEARCH_PROC"

_OPS = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.floordiv,
    "%": operator.mod,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "and": lambda a, b: bool(a) and bool(b),
    "or": lambda a, b: bool(a) or bool(b),
}


def list_procs(path: str | os.PathLike) -> list[str]:
    """Names of the ``@proc`` procedures defined in the file, in definition order."""
    abspath, source = read_source(path)
    module = execute_source(source, os.fspath(path), os.path.dirname(abspath))
    return list(procs_in(module))


def load_workload(
    path: str | os.PathLike,
    proc: str | None = None,
    sizes: Mapping[str, int] | None = None,
    *,
    expected_sha256: str | None = None,
    proc_option: str = "--proc",
) -> Workload:
    """Load the proc ``proc`` (or the file's only proc) from ``path`` with concrete sizes.

    Size arguments (``N: size``) are bound to integers with ``partial_eval``. Sizes the
    caller does not give are taken from a module-level dict in the workload file,
    ``SCHEDSEARCH_SIZES = {"proc_name": {"N": 256, ...}}``; a size is missing only when
    neither gives it. A file with several procs may name the default one in a module-level
    ``SCHEDSEARCH_PROC = "proc_name"``. The proc's ``assert`` statements are checked with the bound values
    (Exo does not check them itself).

    With ``expected_sha256`` (a schedule file's record of the file) the text read is checked
    against it before it is executed: UntrustedSourceError when it differs.
    ``proc_option`` is how messages name the way to choose a proc (``--proc`` on the
    command line, ``proc=`` in Python).

    Raises WorkloadError, with one sentence naming the problem, for: a missing file, a
    syntax error, an import failure, no procs, several procs and no name, an unknown proc
    name, missing/unknown/non-positive sizes, a violated assertion, and arguments the
    harness cannot handle (windows, index/stride/bool arguments, non-DRAM memories, ...);
    LimitError (a WorkloadError) for sizes or shapes that do not fit in 64 bits (whether
    the buffers fit in memory is ``evaluate.check_memory``'s to say).
    """
    abspath, source = read_source(path)
    if expected_sha256 is not None and sha256_text(source) != expected_sha256:
        raise UntrustedSourceError(
            f"{os.fspath(path)} is not the file that was recorded (sha256 {sha256_text(source)[:12]}, recorded "
            f"{expected_sha256[:12] or 'nothing'}), so it is not run; re-export the schedule, or record the new "
            "sha256 if the change is intended"
        )
    module = execute_source(source, os.fspath(path), os.path.dirname(abspath))
    return workload_from_module(module, source, abspath, proc, sizes, shown=os.fspath(path), proc_option=proc_option)


def workload_from_module(
    module: types.ModuleType,
    source: str,
    path: str,
    proc: str | None = None,
    sizes: Mapping[str, int] | None = None,
    *,
    shown: str | None = None,
    proc_option: str = "--proc",
) -> Workload:
    """The Workload of ``proc`` in ``module``, already executed from ``source`` (see
    ``load_workload``, which reads and runs a file first; ``path`` is recorded, ``shown``
    names it in messages)."""
    procs = procs_in(module)
    default = getattr(module, PROC_ATTRIBUTE, None)
    name = _pick_proc(shown or path, procs, proc, default if isinstance(default, str) else None, proc_option)
    defaults = getattr(module, SIZES_ATTRIBUTE, None)
    given = dict(defaults.get(name, {})) if isinstance(defaults, Mapping) else {}
    given.update(sizes or {})
    unbound = procs[name]
    bound_sizes = _check_sizes(name, unbound, given, explicit=dict(sizes or {}))
    _check_assertions(name, unbound, dict(bound_sizes))
    bound = unbound.partial_eval(**dict(bound_sizes)) if bound_sizes else unbound
    args = arg_specs(name, bound)
    flops = count_flops(bound)
    return Workload(
        path=path,
        source=source,
        source_sha256=sha256_text(source),
        proc=name,
        sizes=bound_sizes,
        args=args,
        # A count beyond 64 bits cannot be stored; it is then simply unknown.
        flops=flops if flops is None or flops <= INT64_MAX else None,
    )


def bound_proc_from_source(workload: Workload) -> Procedure:
    """Rebuild the size-bound proc from the workload's source text (no file needed)."""
    module = execute_source(workload.source, workload.path)
    procs = procs_in(module)
    if workload.proc not in procs:
        raise WorkloadError(f"proc {workload.proc} is no longer defined in {workload.path}.")
    proc = procs[workload.proc]
    return proc.partial_eval(**workload.sizes_dict) if workload.sizes else proc


def _pick_proc(
    path: str, procs: dict[str, Procedure], name: str | None, default: str | None, proc_option: str = "--proc"
) -> str:
    if not procs:
        raise WorkloadError(f"{path} defines no @proc procedures.")
    if name is None and default is not None:
        if default not in procs:
            raise WorkloadError(
                f"{path} sets {PROC_ATTRIBUTE} = {default!r} but defines no such proc; available: {', '.join(procs)}."
            )
        return default
    if name is None:
        if len(procs) > 1:
            raise WorkloadError(f"{path} defines several procs ({', '.join(procs)}); choose one with {proc_option}.")
        return next(iter(procs))
    if name not in procs:
        raise WorkloadError(f"{path} has no proc named {name}; available: {', '.join(procs)}.")
    return name


def _arg_nodes(proc: Procedure) -> list:
    # ArgCursor does not expose windows or control types; the IR node does.
    return list(proc.INTERNAL_proc().args)


def _check_sizes(
    name: str, proc: Procedure, given: dict[str, object], explicit: dict[str, object]
) -> tuple[tuple[str, int], ...]:
    size_args = [a.name.name() for a in _arg_nodes(proc) if type(a.type).__name__ == "Size"]
    unknown = [k for k in explicit if k not in size_args]
    if unknown:
        known = ", ".join(size_args) if size_args else "none"
        raise WorkloadError(f"{name} has no size argument {', '.join(unknown)} (its sizes: {known}).")
    for key in size_args:
        if key not in given:
            continue
        value = given[key]
        if not isinstance(value, int) or isinstance(value, bool):
            raise WorkloadError(f"size {key} of {name} must be an integer, not {value!r}.")
        if value <= 0:
            raise WorkloadError(f"size {key} of {name} must be positive, not {value}.")
        if value > INT64_MAX:
            raise LimitError(f"size {key} of {name} is {value}, which does not fit in a 64-bit integer.")
    missing = [k for k in size_args if k not in given]
    if missing:
        raise WorkloadError(f"{name} needs values for its size arguments: {', '.join(missing)}.")
    return tuple((k, int(cast(int, given[k]))) for k in size_args)  # checked above


def _evaluate(expr, env: dict[str, int]):
    """Value of a size predicate over literal sizes; None when it uses anything else."""
    kind = type(expr).__name__
    if kind == "Const":
        return expr.val
    if kind == "Read":
        return env.get(expr.name.name()) if not expr.idx else None
    if kind == "USub":
        value = _evaluate(expr.arg, env)
        return None if value is None else -value
    if kind == "BinOp" and expr.op in _OPS:
        lhs, rhs = _evaluate(expr.lhs, env), _evaluate(expr.rhs, env)
        if lhs is None or rhs is None or (expr.op in ("/", "%") and rhs == 0):
            return None
        return _OPS[expr.op](lhs, rhs)
    return None


def _check_assertions(name: str, proc: Procedure, sizes: dict[str, int]) -> None:
    for pred in proc.INTERNAL_proc().preds:
        if _evaluate(pred, sizes) is False:
            shown = ", ".join(f"{k}={v}" for k, v in sizes.items())
            raise WorkloadError(f"sizes {shown} violate the assertion `{pred}` of {name}.")


def arg_specs(name: str, proc: Procedure) -> tuple[ArgSpec, ...]:
    """ArgSpecs of the size-bound proc's C arguments, in C order."""
    outputs = written_buffers(proc)
    shapes = {a.name(): a for a in proc.args()}
    specs = []
    for node in _arg_nodes(proc):
        arg = node.name.name()
        typ = node.type
        kind = type(typ).__name__
        where = f"argument {arg} of {name}"
        if kind in ("Size", "Index", "Stride", "Bool", "Int"):
            raise WorkloadError(f"{where} has type `{typ}`, which schedsearch cannot pass to the kernel.")
        if kind == "WindowType" or getattr(typ, "is_window", False):
            raise WorkloadError(f"{where} is a window ({typ}); use a plain tensor argument.")
        mem = getattr(node.mem, "name", lambda: "DRAM")()
        if mem != "DRAM":
            raise WorkloadError(f"{where} lives in memory {mem}; only DRAM arguments can be allocated.")
        try:
            dtype = DType(str(typ.basetype()))
        except ValueError:
            raise WorkloadError(f"{where} has type {typ}, which schedsearch does not support.") from None
        shape: tuple[int, ...] = ()
        role = ArgRole.SCALAR
        if kind == "Tensor":
            role = ArgRole.TENSOR
            dims = [literal(d) for d in shapes[arg].shape()]
            known = [d for d in dims if d is not None]
            if len(known) != len(dims):
                raise WorkloadError(f"{where} has a shape that is not constant after binding sizes ({typ}).")
            shape = tuple(int(d) for d in known)
        try:
            specs.append(ArgSpec(arg, role, dtype, shape, output=arg in outputs))
        except ValueError as exc:
            raise LimitError(f"{where} cannot be used: {exc}.") from None
    return tuple(specs)
