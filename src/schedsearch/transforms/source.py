"""Execute a workload file's text as a module and find the Exo procedures in it.

Exo's ``@proc`` reads the decorated function's source with ``inspect``, so the text must be
reachable through ``linecache`` under the code's file name. Every execution uses a file name
and module name derived from the text's sha256: two different files with the same base name
never clash, a file edited and reloaded in the same process is read afresh, and a worker on
another node rebuilds the procs from the text alone (the file need not exist there).
"""

from __future__ import annotations

import linecache
import os
import sys
import types
from collections.abc import Iterator
from contextlib import contextmanager

from exo import Procedure

from schedsearch.core import sha256_text
from schedsearch.errors import WorkloadError

#: Longest exception message quoted in a WorkloadError (Exo's can run to many lines).
MAX_MESSAGE = 400


def code_filename(source: str, path: str) -> str:
    """The (virtual) file name the text is compiled under: unique per content."""
    return f"/schedsearch-workloads/{sha256_text(source)[:16]}/{os.path.basename(path) or 'workload.py'}"


@contextmanager
def _import_context(module: types.ModuleType, search_dir: str | None) -> Iterator[None]:
    """Register the module (some libraries look themselves up in sys.modules while their
    module body runs) and let the file import its neighbours; undo both afterwards."""
    name = module.__name__
    previous = sys.modules.get(name)
    sys.modules[name] = module
    added_path = bool(search_dir) and search_dir not in sys.path
    if added_path:
        assert search_dir is not None  # added_path says so
        sys.path.insert(0, search_dir)
    try:
        yield
    finally:
        if added_path and search_dir in sys.path:
            sys.path.remove(search_dir)
        if previous is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = previous


def execute_source(source: str, path: str, search_dir: str | None = None) -> types.ModuleType:
    """Run ``source`` (the text of the file at ``path``) as a fresh module and return it.

    ``path`` is only used in messages and for the module's base name; ``search_dir`` (the
    file's directory, when it exists locally) is put on ``sys.path`` during the import.
    Raises WorkloadError for a syntax error (with file:line) or any failure while importing.
    """
    filename = code_filename(source, path)
    try:
        code = compile(source, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise WorkloadError(f"{path}:{exc.lineno}: syntax error: {exc.msg}.") from None
    # An entry with mtime None is never invalidated by linecache.checkcache, which inspect
    # calls before reading; the content hash in the name keeps it correct.
    lines = source.splitlines(keepends=True)
    linecache.cache[filename] = (len(source), None, lines, filename)
    module = types.ModuleType(f"schedsearch_workload_{sha256_text(source)[:16]}")
    module.__file__ = filename
    with _import_context(module, search_dir):
        try:
            exec(code, module.__dict__)  # noqa: S102 - running the workload file is the point
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's module may raise anything
            message = " ".join(str(exc).replace(filename, path).split())
            if len(message) > MAX_MESSAGE:
                message = message[: MAX_MESSAGE - 3] + "..."
            detail = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
            raise WorkloadError(f"cannot import {path}: {detail}") from None
    return module


def read_source(path: str | os.PathLike) -> tuple[str, str]:
    """Absolute path and text of a workload file; WorkloadError when it cannot be read."""
    abspath = os.path.abspath(os.fspath(path))
    if not os.path.isfile(abspath):
        raise WorkloadError(f"workload file {os.fspath(path)} does not exist.")
    try:
        with open(abspath, encoding="utf-8") as fh:
            return abspath, fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"cannot read workload file {os.fspath(path)}: {exc}.") from None


def procs_in(module: types.ModuleType) -> dict[str, Procedure]:
    """The module's Exo procedures (not instructions) by variable name, in definition order."""
    found: dict[str, Procedure] = {}
    for name, value in vars(module).items():
        if isinstance(value, Procedure) and not value.is_instr() and not name.startswith("_"):
            found[name] = value
    return found
