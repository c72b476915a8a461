"""What code may run: a workload named by data runs only from where it should be, as recorded.

Loading a workload file runs it, as importing any Python file does. A file the user names
on the command line (``run FILE``, ``explain FILE``, ``best FILE``), or a file or ``@proc``
object passed to ``schedsearch.tune()`` / ``apply()``, is the user's choice.
Schedule files and database rows are data, and data never chooses code on its own:

- a schedule file's workload must lie inside the schedule file's own folder tree, or in a
  file or folder the user named with ``regress --workloads PATH``; and its text must match
  the ``source_sha256`` the schedule file records (checked by ``load_workload`` on the very
  text it then imports);
- a workload source stored in a database runs (``resume``, ``export --format c``) or is
  embedded in an exported script (``export --format py``) only when it matches its
  recorded sha256 *and* the file it came from is still on this machine with that same
  content, so the database adds no code the user does not already have; or when the user
  says ``--trust-db-source`` for that command. A proc captured from an object has no file:
  its stored source needs ``--trust-db-source``.

Standard library and schedsearch's own records only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from schedsearch.core import Workload, sha256_text
from schedsearch.errors import UntrustedSourceError


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def schedule_workload_path(
    schedule_path: str | os.PathLike, workload_file: str, allowed: Iterable[str | os.PathLike] = ()
) -> Path:
    """The workload file a schedule file names, resolved (symbolic links followed).

    Raises UntrustedSourceError unless it lies inside the schedule file's folder tree, is one
    of the ``allowed`` files, or lies inside one of the ``allowed`` folders.
    """
    base = Path(schedule_path).resolve().parent
    target = (base / workload_file).resolve()
    if _inside(target, base):
        return target
    for raw in allowed:
        root = Path(raw).resolve()
        if target == root or (root.is_dir() and _inside(target, root)):
            return target
    raise UntrustedSourceError(
        f"its workload {workload_file} lies outside the schedule file's folder {base}, so it is not run; "
        f"if you trust it, name it (or its folder) with --workloads {os.path.relpath(target.parent)}"
    )


def check_stored_source(workload: Workload, *, trust_db_source: bool, what: str) -> None:
    """Raise UntrustedSourceError unless ``workload.source`` (read from a database) may run.

    ``what`` names the thing that would run it in messages (e.g. ``search 3``).
    """
    actual = sha256_text(workload.source)
    if actual != workload.source_sha256:
        raise UntrustedSourceError(
            f"the workload source stored for {what} does not match its recorded sha256 "
            f"(stored text {actual[:12]}, recorded {workload.source_sha256[:12]}): the database was edited "
            "or damaged, so that code is not run"
        )
    if trust_db_source:
        return
    path = Path(workload.path)
    try:
        on_disk = sha256_text(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, UnicodeDecodeError):
        on_disk = None
    if on_disk is None and workload.path.startswith("<"):
        # A proc object's captured source (schedsearch.tune(proc)): there is no file to match.
        raise UntrustedSourceError(
            f"the workload of {what} was captured from a proc object ({workload.path}), so no file on this "
            "machine vouches for the source stored in the database: pass --trust-db-source (trust_db_source=True "
            f"in Python) to use it (sha256 {workload.source_sha256[:12]})"
        )
    if on_disk is None:
        raise UntrustedSourceError(
            f"{workload.path}, the workload file of {what}, is not on this machine, and code that exists only "
            "in a database is not run unless you say so: pass --trust-db-source to run the stored source "
            f"(sha256 {workload.source_sha256[:12]})"
        )
    if on_disk != workload.source_sha256:
        raise UntrustedSourceError(
            f"{workload.path} changed since {what} recorded it (sha256 {on_disk[:12]}, recorded "
            f"{workload.source_sha256[:12]}), so the stored source is not run: restore the file, or pass "
            "--trust-db-source to run the stored source anyway"
        )
