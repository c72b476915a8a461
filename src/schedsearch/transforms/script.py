"""Export a schedule as a standalone Python script that uses Exo directly.

The script embeds the workload's source text and checks it against its recorded sha256
before running it, so it runs from any directory, with or without the workload file, and
needs nothing of schedsearch: only Exo. Every other string it holds came from a database
or a schedule file and is data: Python literals are ``repr``'d, and text in its docstring
and comments is quoted so that it cannot end them (``quoting``).
"""

from __future__ import annotations

import ast
import os

from schedsearch.core import Schedule, Workload
from schedsearch.targets import schedule_target
from schedsearch.transforms.calls import OPS, helpers_source, imports_needed, render
from schedsearch.transforms.quoting import in_comment, in_docstring
from schedsearch.transforms.rules import describe, lower

_TEMPLATE = '''\
"""Schedule for {label}, {count} step(s), for the {target_doc} target.

Re-applies the schedule with Exo's own scheduling operations and prints the C code.
Self-contained: the workload source ({origin}) is embedded below and checked against
its sha256, so this script runs from any directory.

Build the C the way the search built and measured it:
    {build}{run}
Import this file to get the scheduled proc as ``p``.
"""

import hashlib
import linecache
import sys
import types

{imports}from exo.stdlib.scheduling import {ops}

TARGET = {target!r}  # the instruction set the steps use: a CPU must have it
CC = {cc!r}
CFLAGS = {cflags!r}  # the flags the search built and measured it with
THREADS = {threads!r}  # the OpenMP threads its parallel loops were measured with
WORKLOAD_SHA256 = {sha!r}
WORKLOAD_SOURCE = {source}


def load_workload():
    """Run the embedded workload source as a module (Exo reads each proc's source back
    through linecache, so the text is registered there under its own name)."""
    if hashlib.sha256(WORKLOAD_SOURCE.encode("utf-8")).hexdigest() != WORKLOAD_SHA256:
        sys.exit("the embedded workload source does not match its sha256: this script was edited; export it again")
    filename = "<workload {name} " + WORKLOAD_SHA256[:12] + ">"
    linecache.cache[filename] = (len(WORKLOAD_SOURCE), None, WORKLOAD_SOURCE.splitlines(True), filename)
    module = types.ModuleType("exported_workload_" + WORKLOAD_SHA256[:12])
    module.__file__ = filename
    sys.modules[module.__name__] = module
    exec(compile(WORKLOAD_SOURCE, filename, "exec"), module.__dict__)
    return module

{helpers}
workload = load_workload()
p = workload.{proc}{bind}
{steps}

if __name__ == "__main__":
    print(p.c_code_str())
'''


def schedule_script(
    workload: Workload, schedule: Schedule, *, cc: str = "", cflags: tuple[str, ...] = (), threads: int = 1
) -> str:
    """A readable script that embeds the workload's source, binds the sizes with
    ``partial_eval``, applies each step with Exo's scheduling calls and prints the C.

    ``cc`` and ``cflags`` are the compiler and flags the candidate was built and measured
    with, ``threads`` the OpenMP threads its parallel loops were measured with; the script
    names them (and its target) so that its C is built and run the same way.
    Its C equals ``user_c(workload, schedule)``.
    """
    lines: list[str] = []
    all_calls = []
    for index, step in enumerate(schedule.steps):
        calls = lower(step)
        all_calls.extend(calls)
        lines.append(f"# step {index}: {in_comment(describe(step))}")
        lines.extend(render(call) for call in calls)
    used_ops = sorted({call.op for call in all_calls} & OPS) or ["simplify"]
    imports = "".join(
        f"from {module} import {', '.join(names)}\n" for module, names in imports_needed(all_calls).items()
    )
    helpers = helpers_source(all_calls)
    bind = ""
    if workload.sizes:
        bind = ".partial_eval(" + ", ".join(f"{k}={v}" for k, v in workload.sizes) + ")"
    flags = " ".join(cflags)
    # Text in the docstring, each piece quoted (``quoting``): the compiler, flags and file
    # name come from a database.
    shown_flags = " ".join(in_docstring(f) for f in cflags) if flags else "-O3 -march=native"
    if schedule.uses_openmp and "-fopenmp" not in cflags:
        shown_flags += " -fopenmp"
    run = f"\nand run it with OMP_NUM_THREADS={threads} OMP_PROC_BIND=close." if schedule.uses_openmp else ""
    return _TEMPLATE.format(
        label=in_docstring(workload.label),
        count=len(schedule),
        target_doc=in_docstring(schedule_target(schedule)),
        target=schedule_target(schedule),
        origin=in_docstring(workload.path if workload.path.startswith("<") else os.path.basename(workload.path)),
        build=f"{in_docstring(cc or 'cc')} {shown_flags} -c {workload.proc}.c",
        ops=", ".join(used_ops),
        imports=imports,
        cc=cc,
        cflags=flags,
        threads=threads if schedule.uses_openmp else 1,
        run=run,
        sha=workload.source_sha256,
        source=source_literal(workload.source),
        name=workload.proc,
        helpers=helpers,
        proc=workload.proc,
        bind=bind,
        steps="\n".join(lines),
    )


def source_literal(text: str) -> str:
    """A Python literal of ``text``: a readable raw triple-quoted string when that reads
    back exactly, otherwise ``repr``."""
    for quotes in ("'''", '"""'):
        readable = f"r{quotes}{text}{quotes}"
        if quotes not in text and _reads_back(readable, text):
            return readable
    return repr(text)


def _reads_back(literal: str, text: str) -> bool:
    try:
        return ast.literal_eval(literal) == text
    except (SyntaxError, ValueError):
        return False
