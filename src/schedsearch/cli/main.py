"""The ``schedsearch`` command line: click commands that parse options, call the use cases in
``schedsearch.app`` and render what comes back."""

from __future__ import annotations

import contextlib
import faulthandler
import signal
import sys
import threading
from typing import Any

import click

from schedsearch.cli import commands_dashboard, commands_read, commands_run
from schedsearch.cli.options import setting_option, settings_options
from schedsearch.cli.wiring import STOPPING, command_start, handle_errors, json_stdout, parse_sizes

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def workload_options(fn: Any) -> Any:
    """--proc and --size, shared by the commands that load a workload file."""
    fn = click.option(
        "--size",
        "sizes",
        multiple=True,
        metavar="NAME=INT[,NAME=INT]",
        help="Bind a size argument; repeat or comma-separate (--size M=64,N=64,K=64). "
        "Sizes not given come from the file's SCHEDSEARCH_SIZES defaults.",
    )(fn)
    fn = click.option(
        "--proc", default=None, metavar="NAME", help="The @proc to tune (needed when the file defines several)."
    )(fn)
    return fn


def db_option(fn: Any) -> Any:
    return click.option(
        "--db",
        default=None,
        metavar="URL",
        help="Results database: a SQLite path or any SQLAlchemy URL [default: ./schedsearch.db].",
    )(fn)


def json_option(fn: Any) -> Any:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document on stdout.")(fn)


def toolchain_options(resume: bool = False) -> Any:
    """--cc and --cflags: ``run``'s, and ``resume``'s (the same defaults, and what a resume
    does with the compiler and flags stored with the search)."""
    refused = " (a search stored with others is refused, unless --trust-db-config)."
    cc = setting_option("cc", help_more=" The compiler stored with the search is never run" + refused if resume else "")
    flags = setting_option(
        "cflags", help_more=" The flags stored with the search are never used" + refused if resume else ""
    )
    return lambda fn: cc(flags(fn))


def run_options(fn: Any) -> Any:
    """The options of run and resume that are not settings of the search: where it runs,
    where its results and events go."""
    opts = [
        click.option(
            "--address",
            default=None,
            metavar="ADDR",
            help="Use an existing Ray cluster (host:port) instead of starting a local one.",
        ),
        click.option(
            "--events",
            type=click.File("a", encoding="utf-8", lazy=False),
            default=None,
            metavar="FILE",
            help="Also append every event of the search (rounds asked, expansions, measurements, new "
            "bests) to FILE as JSON lines.",
        ),
        db_option,
        json_option,
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


@click.group(context_settings=CONTEXT)
@click.version_option(package_name="schedsearch")
def cli() -> None:
    """Find fast schedules for Exo procedures automatically.

    \b
    Quick start:
      schedsearch run examples/matmul.py            # search, show progress, keep results
      schedsearch show 1                            # the search's summary and top candidates
      schedsearch export 1 --format py -o best.py   # the best schedule as readable Exo code
    """


@cli.command(context_settings=CONTEXT)
@click.argument("file", type=click.Path(dir_okay=False))
@workload_options
@settings_options(exclude=("cc", "cflags"))
@toolchain_options()
@run_options
def run(file: str, proc: str | None, sizes: tuple[str, ...], **opts: Any) -> None:
    """Search for a fast schedule of the @proc in FILE."""
    handle_errors(commands_run.run_command)(file, proc, parse_sizes(sizes), **opts)


def trust_option(fn: Any) -> Any:
    return click.option(
        "--trust-db-source",
        is_flag=True,
        help="Run the workload source stored in the database even when its file is not here "
        "with the same content (its recorded sha256 must still match).",
    )(fn)


@cli.command(context_settings=CONTEXT)
@click.argument("search_id", type=int)
@settings_options(resume=True, exclude=("cc", "cflags"))
@toolchain_options(resume=True)
@run_options
@trust_option
@click.option(
    "--trust-db-config",
    is_flag=True,
    help="Go on even when the search was built with another compiler or flags than --cc and --cflags "
    "give (their defaults included): the rest of the search is built with this command's "
    "compiler and flags, and recorded with them. Those stored in the database are never run, "
    "with or without this flag.",
)
def resume(search_id: int, **opts: Any) -> None:
    """Continue an interrupted search; nothing measured is measured again.

    Nothing the database holds runs: the compiler and flags are this command's, and
    candidates are rebuilt by replaying their stored schedules (one whose schedule does not
    give the C recorded for it is marked tampered and never used)."""
    handle_errors(commands_run.resume_command)(search_id, **opts)


@cli.command(name="list", context_settings=CONTEXT)
@db_option
@json_option
def list_(db: str | None, as_json: bool) -> None:
    """List the searches in a database."""
    handle_errors(commands_read.list_command)(db, as_json)


@cli.command(context_settings=CONTEXT)
@click.argument("search_id", type=int)
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="How many candidates to show.")
@db_option
@json_option
def show(search_id: int, top: int, db: str | None, as_json: bool) -> None:
    """Summary and top candidates of a search; * marks its best (re-measured side by side
    when the finalists were)."""
    handle_errors(commands_read.show_command)(search_id, top, db, as_json)


@cli.command(context_settings=CONTEXT)
@click.argument("search_id", type=int)
@click.option(
    "--depth",
    type=click.IntRange(min=0),
    default=None,
    help="Show nodes down to this depth; a collapsed node says +N for its hidden descendants.",
)
@click.option(
    "--sort",
    type=click.Choice(["order", "speed"]),
    default="order",
    show_default=True,
    help="Siblings in the order the search produced them, or fastest first.",
)
@db_option
@json_option
def tree(search_id: int, depth: int | None, sort: str, db: str | None, as_json: bool) -> None:
    """The search tree: each node's id, status, time ± spread and speedup, then its step;
    ~ marks a step within noise, * the path to the best."""
    handle_errors(commands_read.tree_command)(search_id, depth, db, as_json, sort)


@cli.command(context_settings=CONTEXT)
@click.argument("file", type=click.Path(dir_okay=False))
@workload_options
@click.option(
    "--top", type=click.IntRange(min=1), default=5, show_default=True, help="How many searches' bests to show."
)
@db_option
@json_option
def best(file: str, proc: str | None, sizes: tuple[str, ...], top: int, db: str | None, as_json: bool) -> None:
    """The best known schedule for a workload: each search's best (as `show` reports it),
    fastest first."""
    handle_errors(commands_read.best_command)(file, proc, parse_sizes(sizes), top, db, as_json)


@cli.command(context_settings=CONTEXT)
@click.argument("search_id", type=int, required=False)
@click.option(
    "--candidate", "candidate_id", type=int, default=None, help="Export this candidate instead of a search's best."
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["py", "c", "json"]),
    required=True,
    help="py: a readable Exo script; c: the generated C; json: a schedule file for `regress`.",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="Write here instead of stdout.")
@db_option
@trust_option
def export(
    search_id: int | None, candidate_id: int | None, fmt: str, output: str | None, db: str | None, trust_db_source: bool
) -> None:
    """Export a search's best schedule (or --candidate ID) as Python, C or a schedule file."""
    handle_errors(commands_read.export_command)(search_id, candidate_id, fmt, output, db, trust_db_source)


@cli.command(context_settings=CONTEXT)
@db_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (another than loopback lets others on the network read the results).",
)
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    default=8080,
    show_default=True,
    help="Port to listen on (0: any free one, printed at start).",
)
def dashboard(db: str | None, host: str, port: int) -> None:
    """Serve a read-only web dashboard of the database's searches (Ctrl-C stops it)."""
    handle_errors(commands_dashboard.dashboard_command)(db, host, port)


@cli.command(context_settings=CONTEXT)
@click.argument("file", type=click.Path(dir_okay=False))
@workload_options
@setting_option("threads", help="Threads a kernel may run on: more than 1 includes OpenMP parallel loops.")
@setting_option("target")
@json_option
def explain(file: str, proc: str | None, sizes: tuple[str, ...], threads: int, target: str, as_json: bool) -> None:
    """Show the loop nest and every legal rewrite at the root."""
    handle_errors(commands_read.explain_command)(file, proc, parse_sizes(sizes), threads > 1, target, as_json)


@cli.command(context_settings=CONTEXT)
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option(
    "--tolerance",
    type=click.FloatRange(min=0, max=1),
    default=0.2,
    show_default=True,
    help="Fail when the speedup falls below recorded x (1 - tolerance).",
)
@click.option("--junit", type=click.Path(dir_okay=False), default=None, help="Write a JUnit XML report here.")
@setting_option("cc")
@setting_option(
    "cflags",
    help='Compiler flags [default: "-O3 -march=native"]; the flags of the widest instruction '
    "set this CPU has are added after them, as `run --target auto` does.",
)
@click.option(
    "--strict-machine",
    is_flag=True,
    help="Also fail on a slowdown against a timing recorded on another machine (default: a warning).",
)
@click.option(
    "--update",
    is_flag=True,
    help="Re-record each schedule's speedup, time and machine from this run (rewrites the files); "
    "a schedule that fails to replay or verify, or is slower than the unscheduled proc, is not "
    "re-recorded and still fails.",
)
@click.option(
    "--workloads",
    multiple=True,
    metavar="PATH",
    type=click.Path(exists=True),
    help="A workload file, or a folder of them, that schedule files may name from outside their own "
    "folder (repeatable). Otherwise a workload must lie in the schedule file's folder tree.",
)
@json_option
def regress(
    paths: tuple[str, ...],
    tolerance: float,
    junit: str | None,
    cc: str | None,
    cflags: str | None,
    as_json: bool,
    strict_machine: bool,
    update: bool,
    workloads: tuple[str, ...],
) -> None:
    """Replay schedule files; fail when one no longer applies, is wrong, got slower than
    recorded, or is slower than the unscheduled proc."""
    from schedsearch.cli import regress as regress_mod

    code = handle_errors(regress_mod.regress_command)(
        paths, tolerance, junit, cc, cflags, as_json, strict_machine, update, workloads
    )
    sys.exit(code)


def _interrupt(signum: int, frame: Any) -> None:
    """Say that the command stops, then stop it as Ctrl-C does."""
    with contextlib.suppress(OSError):
        sys.stderr.write(STOPPING + "\n")
        sys.stderr.flush()
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: usage errors become one line on stderr and exit code 2."""
    # Exo's checks run native code (z3) in this process: if that ever crashes, say where.
    faulthandler.enable()
    # Ctrl-C and SIGTERM end a command alike (exit 130, workers released), said at once:
    # what follows them (releasing workers, closing a store) can take seconds. A search, from
    # the start of its workers on, replaces this with a clean stop (``stop_on_signals``).
    previous = (
        {signum: signal.signal(signum, _interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}
        if threading.current_thread() is threading.main_thread()
        else {}
    )
    args = sys.argv[1:] if argv is None else list(argv)
    started = command_start(from_process=argv is None)  # a search's "starting" seconds count from here
    try:
        # The console script's process ends with the command: what it writes while it exits
        # (Ray's threads) must not follow the JSON document on stdout.
        with json_stdout(restore=argv is not None) if "--json" in args else contextlib.nullcontext():
            cli.main(args=args, prog_name="schedsearch", standalone_mode=False, obj=started)
    except click.UsageError as e:
        where = e.ctx.command_path if e.ctx is not None else "schedsearch"
        click.echo(f"schedsearch: error: {e.format_message()} (see `{where} --help`)", err=True)
        sys.exit(2)
    except click.ClickException as e:
        click.echo(f"schedsearch: error: {e.format_message()}", err=True)
        sys.exit(e.exit_code)
    except click.Abort:
        click.echo("schedsearch: interrupted", err=True)
        sys.exit(130)
    finally:
        for signum, handler in previous.items():  # a caller's own (main called in a process of its own)
            signal.signal(signum, handler)
    sys.exit(0)
