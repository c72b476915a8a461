"""The CLI's own plumbing: option parsing, error handling, where output goes.

The composition (executors, stores, compiler settings, the cost model) lives in
``schedsearch.app``; its helpers are re-exported here for the commands that use them.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import click
import psutil
from rich.console import Console

from schedsearch.app.compose import (  # re-exported: the commands (and benchmarks) use them
    bench_config,
    db_label,
    expand_options,
    make_cost_model,
    make_executor,
    open_db,
    refuse_transient_db,
)
from schedsearch.errors import (
    ClusterError,
    InfrastructureError,
    NoScheduleError,
    ReplayError,
    SchedsearchError,
    ScheduleFileError,
    SearchCompletedError,
    SearchError,
    SettingError,
    StoreError,
    UntrustedSourceError,
    WorkloadError,
)

__all__ = [
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_USAGE",
    "INPUT_ERRORS",
    "bench_config",
    "command_start",
    "command_started",
    "db_label",
    "expand_options",
    "fail",
    "handle_errors",
    "json_stdout",
    "make_cost_model",
    "make_executor",
    "open_db",
    "parse_sizes",
    "print_json",
    "refuse_transient_db",
    "stderr_console",
    "stdout_console",
]

F = TypeVar("F", bound=Callable[..., Any])

#: Errors caused by what the user typed or pointed at, or by the machine it runs on (a
#: compiler, disk, cache or database the user must fix): exit code 2.
INPUT_ERRORS = (
    SettingError,
    WorkloadError,
    ScheduleFileError,
    StoreError,
    InfrastructureError,
    ClusterError,
    ReplayError,
    UntrustedSourceError,
    SearchCompletedError,
    NoScheduleError,
)

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


#: A process that began longer ago than this did not begin as this command (a program that
#: calls ``main`` itself): the command's time is counted from the call instead.
COMMAND_START_WINDOW = 60.0


def command_start(from_process: bool) -> float:
    """When this command began, on ``time.monotonic``'s scale: with ``from_process`` (the
    console script, ``python -m schedsearch``) when this process did - the interpreter's
    start and imports are the user's wait too - else now."""
    now = time.monotonic()
    before = process_age() if from_process else 0.0
    return now - before if 0.0 <= before <= COMMAND_START_WINDOW else now


def process_age() -> float:
    """Seconds since this process began, to about 10 ms (-1.0 when unknown).

    Read on Linux from the kernel's own boot-time clock: the process's start tick and the
    uptime. ``psutil``'s create_time adds that tick to the boot time in whole seconds (the
    kernel's ``btime``) and compares it with the wall clock, which made a process that had
    just begun up to a second old; it is the fallback elsewhere."""
    with contextlib.suppress(OSError, ValueError, IndexError):
        with open("/proc/self/stat", "rb") as f:
            # the fields after the command name, which may hold spaces and parentheses
            fields = f.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
        return uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22 of stat(5): starttime
    with contextlib.suppress(psutil.Error, OSError):
        return time.time() - psutil.Process().create_time()
    return -1.0


def command_started() -> float:
    """When the command being run began: what ``main`` found (``command_start``), passed to
    the command as its click context's object; now for a command invoked otherwise (a
    test's runner). A search's ``starting`` seconds count from then."""
    ctx = click.get_current_context(silent=True)
    started = ctx.find_root().obj if ctx is not None else None
    return started if isinstance(started, float) else time.monotonic()


#: What a command says the moment a Ctrl-C or SIGTERM reaches it, before the search runs.
STOPPING = "schedsearch: stopping..."


def fail(message: str, code: int = EXIT_USAGE) -> None:
    """Print one line on stderr and exit."""
    click.echo(f"schedsearch: error: {message}", err=True)
    sys.exit(code)


def handle_errors(fn: F) -> F:
    """Turn user-facing errors into one line and an exit code; never a traceback.

    Set SCHEDSEARCH_DEBUG=1 to see the traceback of an internal failure.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except INPUT_ERRORS as e:
            fail(_one_line(str(e)), EXIT_USAGE)
        except (SearchError, SchedsearchError) as e:
            fail(_one_line(str(e)), EXIT_FAILURE)
        except (click.exceptions.Exit, click.ClickException, click.Abort, SystemExit):
            raise
        except KeyboardInterrupt:
            fail("interrupted", 130)
        except BrokenPipeError:
            # stdout was closed early (e.g. piped into `head`): stop quietly, like other tools.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            sys.exit(EXIT_FAILURE)
        except Exception as e:  # noqa: BLE001 - the last line of defence before a traceback
            if os.environ.get("SCHEDSEARCH_DEBUG"):
                traceback.print_exc()
            fail(
                f"internal error: {type(e).__name__}: {_one_line(str(e))} (set SCHEDSEARCH_DEBUG=1 for details)",
                EXIT_FAILURE,
            )

    return wrapper  # type: ignore[return-value]


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " ".join(lines)[:500] if lines else "(no message)"


def parse_sizes(values: Iterable[str]) -> dict[str, int]:
    """``("M=64", "N=64,K=32")`` -> ``{"M": 64, "N": 64, "K": 32}``; BadParameter otherwise."""
    sizes: dict[str, int] = {}
    for value in values:
        for part in value.split(","):
            part = part.strip()
            if not part:
                continue
            name, eq, num = part.partition("=")
            name, num = name.strip(), num.strip()
            if not eq or not name or not num:
                raise click.BadParameter(f"{part!r} is not NAME=INT (e.g. --size M=64,N=64)", param_hint="--size")
            try:
                sizes[name] = int(num)
            except ValueError:
                raise click.BadParameter(f"size {name} must be an integer, got {num!r}", param_hint="--size") from None
    return sizes


#: The file descriptor ``json_stdout`` kept for the JSON document (None: plain stdout).
_json_fd: int | None = None


@contextlib.contextmanager
def json_stdout(restore: bool = True) -> Iterator[None]:
    """Keep stdout for the one JSON document of a ``--json`` command: meanwhile anything
    else written to file descriptor 1 - by native code in this process (Ray's core, a
    compiler's diagnostics) or by a child process that inherits it - goes to stderr, so a
    reader of stdout always gets one document and nothing after it.

    Without ``restore`` (a process that ends with the command) stdout stays with stderr
    afterwards too: what is written while the process exits - a Ray cluster's last error
    message (a worker its memory monitor killed), printed by its driver's threads - goes to
    stderr as well, and the real stdout is closed once the document is out."""
    global _json_fd
    sys.stdout.flush()
    kept = os.dup(1)
    os.dup2(2, 1)
    _json_fd = kept
    try:
        yield
    finally:
        sys.stdout.flush()
        _json_fd = None
        if restore:
            os.dup2(kept, 1)
        os.close(kept)


def print_json(data: Any) -> None:
    """Exactly one JSON document on stdout, flushed at once: a pipe buffers it, and a
    process that ends without Python's own exit (a library's quick exit in a shutdown
    thread) would lose it."""
    text = json.dumps(data, indent=2, default=str) + "\n"
    if _json_fd is None:
        click.echo(text, nl=False)
        sys.stdout.flush()
        return
    view = memoryview(text.encode())
    while view:  # os.write may write less than asked (a pipe's buffer)
        view = view[os.write(_json_fd, view) :]


def stdout_console() -> Console:
    """Where a command's result goes: tables, reports, trees, a search's summary.

    Bound to ``sys.stdout`` as it is when printing (a test's capture included). On a pipe or
    a file rich writes no colour or style codes (unless FORCE_COLOR asks for them) and
    ``numbers_view.print_whole`` renders tables and trees at their full width."""
    # soft_wrap: a long line stays one line in a pipe, for grep and the like.
    return Console(highlight=False, soft_wrap=True)


def stderr_console() -> Console:
    """Where progress, the live view, warnings and notes go: never the result a user may
    pipe (``stdout_console``), nor a ``--json`` document."""
    # soft_wrap: log lines stay whole when stderr is a file or a CI log, not cut at 80 columns.
    return Console(stderr=True, highlight=False, soft_wrap=True)
