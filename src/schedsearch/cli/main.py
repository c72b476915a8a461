"""The ``schedsearch`` command line: click commands that parse options, call the use cases in
``schedsearch.app`` and render what comes back."""

from __future__ import annotations

import contextlib
import faulthandler
import math
import signal
import sys
import threading
from typing import Any

import click

from schedsearch.app.compose import MAX_BUDGET
from schedsearch.cli import commands_dashboard, commands_read, commands_run
from schedsearch.cli.wiring import STOPPING, handle_errors, json_stdout, mark_command_start, parse_sizes
from schedsearch.targets import TARGETS

TARGET_CHOICES = ["auto", *(t.name.value for t in TARGETS)]
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def _a_number(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    # click's FloatRange lets "nan" through: every comparison with it is false.
    if value is not None and math.isnan(value):
        raise click.BadParameter("must be a number of seconds, not nan")
    return value


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
    cc_since = " The compiler stored with the search is never run" + refused if resume else ""
    flags_since = " The flags stored with the search are never used" + refused if resume else ""

    def add(fn: Any) -> Any:
        fn = click.option(
            "--cflags",
            default=None,
            metavar="STR",
            help='Compiler flags [default: "-O3 -march=native"]; the target\'s own flags (e.g. '
            "-mprefer-vector-width=512 for avx512) are added after them." + flags_since,
        )(fn)
        fn = click.option(
            "--cc",
            default=None,
            metavar="PATH",
            help="C compiler command taking gcc's arguments [default: gcc]." + cc_since,
        )(fn)
        return fn

    return add


def search_options(fn: Any) -> Any:
    """Options shared by run and resume: budgets, workers, compiler."""
    opts = [
        # Bounded above: an infinite budget would not survive JSON storage (and a month is plenty).
        click.option(
            "--budget",
            type=click.FloatRange(min=0, min_open=True, max=MAX_BUDGET),
            default=None,
            metavar="SECONDS",
            callback=_a_number,
            help="Wall-time budget of the search in seconds, counted once the workers are ready (the "
            "seconds before - loading the workload, checking the compiler, starting Ray - are shown "
            "as 'starting' and reported apart), at most 30 days [run default: 120; resume: as many "
            "more seconds].",
        ),
        click.option(
            "--max-candidates",
            type=click.IntRange(min=1),
            default=None,
            metavar="N",
            help="Stop after measuring N candidates (measurements reused from earlier searches do not count).",
        ),
        click.option(
            "--early-stop",
            type=click.IntRange(min=1),
            default=None,
            metavar="N",
            help="End the search (finalists re-measured as usual) once N candidates in a row brought no "
            "new best beyond the timing noise: a near-tie that takes the lead by less than the "
            "spread of the two times does not count [run default: the stretch without such a "
            "gain must be twice the search before it (and at least 100 candidates and 60 s); "
            "resume: as the search was started].",
        ),
        click.option(
            "--no-early-stop",
            is_flag=True,
            help="Search until the budget is spent, however long ago the last gain came.",
        ),
        click.option(
            "--workers",
            type=click.IntRange(min=0),
            default=None,
            metavar="N",
            help="Ray workers (0: no Ray, everything in this process) [default: 2].",
        ),
        click.option(
            "--address",
            default=None,
            metavar="ADDR",
            help="Use an existing Ray cluster (host:port) instead of starting a local one.",
        ),
        click.option(
            "--remeasure",
            is_flag=True,
            help="Measure every candidate, even C an earlier search measured on this machine with the "
            "same compiler, flags and target (by default that measurement is reused).",
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
@search_options
@click.option("--max-depth", type=click.IntRange(min=1), default=12, show_default=True, help="Longest schedule.")
@click.option(
    "--strategy", type=click.Choice(["best-first", "beam", "random"]), default="best-first", show_default=True
)
@click.option(
    "--seed",
    type=click.IntRange(min=0, max=2**63 - 1),
    default=0,
    show_default=True,
    help="Makes the search reproducible.",
)
@toolchain_options()
@click.option("--parallel", is_flag=True, help="Also try OpenMP parallel loops (benchmarks then use every core).")
@click.option(
    "--target",
    type=click.Choice(TARGET_CHOICES),
    default="auto",
    show_default=True,
    help="Instruction set rewrites may emit: auto = the widest this CPU has.",
)
@click.option(
    "--cost-model",
    type=click.Choice(["off", "rank", "prune"]),
    default="rank",
    show_default=True,
    help="Learned cost model (trained on this machine's earlier measurements and this search's): "
    "off = measure children in proposal order; rank = measure the predicted-fastest children "
    "first (10% picked at random, seeded) and let predictions weigh in when choosing nodes to "
    "expand; prune = rank, and when the budget is short - a round's new children would take "
    "more than the seconds left at this search's pace so far (elapsed / evaluated), or "
    "outnumber the --max-candidates left - skip the predicted-slower half of them.",
)
@click.option(
    "--float",
    "float_mode",
    type=click.Choice(["strict", "relaxed"]),
    default="strict",
    show_default=True,
    help="Float arithmetic candidates may use: strict = as written (IEEE); relaxed = the compiler may "
    "divide by a constant as a multiplication by its reciprocal (gcc -freciprocal-math, what "
    "Halide does unless told StrictFloat). Either way every candidate is checked against the "
    "unscheduled proc built strictly, within the float tolerance.",
)
@click.option(
    "--timing",
    type=click.Choice(["auto", "quiet", "shared"]),
    default="auto",
    show_default=True,
    help="quiet = a node's builds and expansions pause while one of its kernels is timed (where "
    "cores share execution units, as SMT siblings and many cloud vCPUs do, they make a kernel "
    "1.5x slower and its times noisy); shared = they run on beside it: more candidates a "
    "second, noisier times; auto = quiet while the node's own timings show that the work "
    "beside them makes them noisier or slower, shared while it does not (a new best's second "
    "measurement and the finalists are always quiet).",
)
@click.option(
    "--warm-start/--no-warm-start",
    default=True,
    show_default=True,
    help="First evaluate the best schedules earlier searches found for this proc (any sizes, same "
    "target), replayed on these sizes; those that no longer apply are skipped.",
)
@click.option(
    "--defer-costly/--no-defer-costly",
    default=True,
    show_default=True,
    help="Expand a large node (a register tile, an unrolled nest) in two parts: its cheap rewrites "
    "first, and its reorders, hoists, sinks and packs - seconds of Exo each there - only when "
    "the search picks the node again. --no-defer-costly tries every rewrite at once.",
)
@click.option(
    "--yardstick/--no-yardstick",
    default=True,
    show_default=True,
    help="Time each candidate beside the fastest kernel so far (the yardstick), in one process with "
    "interleaved rounds, and put its time on one scale by its ratio to the yardstick's: on a host "
    "whose speed drifts (a shared cloud machine), candidates then compare by what they are, not "
    "by when each was measured. --no-yardstick times each candidate alone.",
)
@click.option(
    "--confirm-best/--no-confirm-best",
    default=True,
    show_default=True,
    help="Measure a candidate twice, in two processes, when it would be the new best, and count "
    "the slower time: the fastest of hundreds of near-equal kernels is mostly the luckiest "
    "measurement. --no-confirm-best takes every first measurement as it is.",
)
@click.option(
    "--compiler-notes/--no-compiler-notes",
    default=True,
    show_default=True,
    help="Have the cost model read what gcc made of each candidate - which statements it "
    "vectorized, with what vectors, read from the machine code - to predict its time: every "
    "child is built as it is made, before any is measured, and the model leads: one parent a "
    "round, and the next round sooner. Read only with gcc, an objdump and the model on. "
    "--no-compiler-notes measures more candidates a second with worse first predictions.",
)
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
@search_options
@toolchain_options(resume=True)
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
@click.option("--parallel", is_flag=True, help="Include OpenMP parallel loops.")
@click.option(
    "--target",
    type=click.Choice(TARGET_CHOICES),
    default="auto",
    show_default=True,
    help="Instruction set rewrites may emit: auto = the widest this CPU has.",
)
@json_option
def explain(file: str, proc: str | None, sizes: tuple[str, ...], parallel: bool, target: str, as_json: bool) -> None:
    """Show the loop nest and every legal rewrite at the root."""
    handle_errors(commands_read.explain_command)(file, proc, parse_sizes(sizes), parallel, target, as_json)


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
@click.option("--cc", default=None, metavar="PATH", help="C compiler command [default: gcc].")
@click.option(
    "--cflags",
    default=None,
    metavar="STR",
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
    mark_command_start(from_process=argv is None)  # a search's "starting" seconds count from here
    try:
        # The console script's process ends with the command: what it writes while it exits
        # (Ray's threads) must not follow the JSON document on stdout.
        with json_stdout(restore=argv is not None) if "--json" in args else contextlib.nullcontext():
            cli.main(args=args, prog_name="schedsearch", standalone_mode=False)
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
