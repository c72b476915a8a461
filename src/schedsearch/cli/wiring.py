"""Composition helpers for the CLI: option parsing, executors, stores, error handling.

This is the composition root: the only place that knows every package.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shlex
import sys
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console

from schedsearch.core import BenchConfig, CostModel, CostModelMode, Executor, ExpandOptions, SearchConfig, Store
from schedsearch.errors import (
    ClusterError,
    InfrastructureError,
    ReplayError,
    ScheduleFileError,
    SchedsearchError,
    SearchError,
    StoreError,
    UntrustedSourceError,
    WorkloadError,
)

F = TypeVar("F", bound=Callable[..., Any])

#: Errors caused by what the user typed or pointed at, or by the machine it runs on (a
#: compiler, disk, cache or database the user must fix): exit code 2.
INPUT_ERRORS = (WorkloadError, ScheduleFileError, StoreError, InfrastructureError, ClusterError, ReplayError,
                UntrustedSourceError)

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


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
            fail(f"internal error: {type(e).__name__}: {_one_line(str(e))} (set SCHEDSEARCH_DEBUG=1 for details)", EXIT_FAILURE)

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


def bench_config(cc: str | None, cflags: str | None, seed: int, target: str = "auto") -> BenchConfig:
    """BenchConfig from the --cc / --cflags / --seed / --target options (defaults for the
    rest). The target's own compiler flags follow the user's (``targets.build_flags``)."""
    from schedsearch.evaluate import cpu_flags
    from schedsearch.targets import build_flags, resolve

    base = BenchConfig(seed=seed)
    flags = tuple(shlex.split(cflags)) if cflags is not None else base.cflags
    return dataclasses.replace(base, cc=cc or base.cc, cflags=build_flags(flags, resolve(target, cpu_flags())))


def expand_options(parallel: bool, target: str) -> ExpandOptions:
    """ExpandOptions from --parallel and --target (``auto``: the widest instruction set this
    CPU has; a kernel for instructions the benchmarking nodes lack fails and is recorded)."""
    from schedsearch.evaluate import cpu_flags
    from schedsearch.targets import resolve

    return ExpandOptions(allow_parallel=parallel, target=resolve(target, cpu_flags()).name.value)


def open_db(url: str | None, *, create: bool, read_only: bool = False) -> Store:
    """Open the results store named by --db (default ./schedsearch.db); ``read_only`` for
    the commands that only read (nothing is written, read-only media work)."""
    from schedsearch.store import open_store

    return open_store(url, create=create, read_only=read_only)


def refuse_transient_db(url: str | None) -> None:
    """A search's results must outlive it: refuse in-memory databases for ``run``."""
    from schedsearch.store import is_transient

    if is_transient(url):
        raise StoreError(
            f"--db {url} is an in-memory database: the results would vanish when the search ends and "
            "`schedsearch show` could not read them; pass a file path such as --db results.db"
        )


def db_label(url: str | None) -> str:
    """How to name the database back to the user (for --db in printed commands)."""
    from schedsearch.store import DEFAULT_DB

    return url or DEFAULT_DB


def make_executor(
    workers: int, address: str | None, bench: BenchConfig, expand: ExpandOptions, cache_dir: Path | None = None
) -> Executor:
    """LocalExecutor for ``--workers 0``, otherwise a RayExecutor (local cluster or --address)."""
    from schedsearch.transforms import Expander

    if workers == 0 and address is None:
        from schedsearch.evaluate import LocalExecutor

        return LocalExecutor(Expander, expand, bench, cache_dir)
    from schedsearch.evaluate.ray_backend import RayExecutor

    return RayExecutor(Expander, expand, bench, workers=max(workers, 1), address=address, cache_dir=cache_dir)


def make_cost_model(config: SearchConfig, store: Store, executor: Executor) -> CostModel | None:
    """The learned cost model for ``config.cost_model`` (None when off), first trained on
    every earlier measurement in ``store`` made on this machine fingerprint."""
    if config.cost_model is CostModelMode.OFF:
        return None
    from schedsearch.model import LearnedCostModel
    from schedsearch.transforms.features import FEATURE_VERSION

    history = store.training_samples(executor.machine().fingerprint, FEATURE_VERSION)
    # Exo (and z3, which is not safe beside a second Python thread) runs in the executor's
    # worker processes, never in this one, so the model can always train in the background.
    return LearnedCostModel(history, seed=config.seed, background=True)


def print_json(data: Any) -> None:
    """Exactly one JSON document on stdout."""
    click.echo(json.dumps(data, indent=2, default=str))


def stderr_console() -> Console:
    """Where progress, tables and messages go (stdout stays for --json and exports)."""
    # soft_wrap: log lines stay whole when stderr is a file or a CI log, not cut at 80 columns.
    return Console(stderr=True, highlight=False, soft_wrap=True)
