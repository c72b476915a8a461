"""The composition root's parts: compiler settings, executors, stores, the cost model.

The only place (with the rest of ``app``) that knows every package. Imports of the heavy
packages happen inside the functions, so that ``schedsearch --help`` and ``import
schedsearch`` stay quick.
"""

from __future__ import annotations

import dataclasses
import shlex
import threading
from dataclasses import dataclass
from pathlib import Path

from schedsearch.core import (
    BenchConfig,
    CostModel,
    CostModelMode,
    Executor,
    ExpandOptions,
    FloatMode,
    SearchConfig,
    Store,
    TimingMode,
    Workload,
)
from schedsearch.errors import SchedsearchError, StoreError


@dataclass(frozen=True, slots=True)
class Spelling:
    """How messages name the knobs a user turns: command-line options or Python arguments.

    The use cases are shared by the CLI and the Python API; a hint such as "pass a file
    path such as --db results.db" must name what *this* user can type.
    """

    db: str = "--db"
    proc: str = "--proc"
    budget: str = "--budget SECONDS"
    max_candidates: str = "--max-candidates N"
    cc: str = "--cc"
    cflags: str = "--cflags"
    trust_db_config: str = "--trust-db-config"
    python: bool = False

    def tune_command(self, workload: Workload, db: str | None) -> str:
        """How to start a search of ``workload`` (a file's, or a captured proc's)."""
        if self.python:
            where = f", db={db!r}" if db else ""
            return f"schedsearch.tune({workload.proc}, {workload.sizes_dict!r}{where})"
        sizes = ",".join(f"{k}={v}" for k, v in workload.sizes)
        return (
            f"schedsearch run {shlex.quote(workload.path)} --proc {workload.proc}"
            + (f" --size {sizes}" if sizes else "")
            + (f" --db {shlex.quote(db)}" if db else "")
        )


CLI = Spelling()
PYTHON = Spelling(
    db="db=",
    proc="proc=",
    budget="budget=SECONDS",
    max_candidates="max_candidates=N",
    cc="cc=",
    cflags="cflags=",
    trust_db_config="trust_db_config=True",
    python=True,
)


def bench_config(
    cc: str | None,
    cflags: str | None,
    seed: int,
    target: str = "auto",
    float_mode: FloatMode | str = FloatMode.STRICT,
    timing: TimingMode | str = TimingMode.AUTO,
) -> BenchConfig:
    """BenchConfig from the --cc / --cflags / --seed / --target / --float / --timing options
    (defaults for the rest). The target's and the float mode's own compiler flags follow the user's
    (``targets.build_flags``)."""
    from schedsearch.evaluate import cpu_flags
    from schedsearch.targets import build_flags, resolve

    base = BenchConfig(seed=seed)
    mode = FloatMode(float_mode)
    flags = tuple(shlex.split(cflags)) if cflags is not None else base.cflags
    return dataclasses.replace(
        base,
        cc=cc or base.cc,
        float_mode=mode,
        timing=TimingMode(timing),
        cflags=build_flags(flags, resolve(target, cpu_flags()), mode),
    )


def expand_options(parallel: bool, target: str, compiler_notes: bool = False) -> ExpandOptions:
    """ExpandOptions from --threads (``parallel``: more than one), --target (``auto``: the widest instruction set this
    CPU has; a kernel for instructions the benchmarking nodes lack fails and is recorded)
    and --compiler-notes."""
    from schedsearch.evaluate import cpu_flags
    from schedsearch.targets import resolve

    return ExpandOptions(
        allow_parallel=parallel, target=resolve(target, cpu_flags()).name.value, compiler_notes=compiler_notes
    )


def reads_notes(requested: bool, bench: BenchConfig) -> bool:
    """Whether a search asking for the compiler's notes (``--compiler-notes``, the default)
    gets them: its compiler is gcc and an objdump reads its machine code. Without them the
    model must not lead (it ranks some kernels' children backwards from the statement count
    alone), so a search with clang, or no binutils, runs as with --no-compiler-notes."""
    from schedsearch.evaluate.build import writes_notes

    if not requested:
        return False
    try:
        return writes_notes(bench)
    except SchedsearchError:
        return False  # the builds say what is wrong with the compiler


def open_db(url: str | None, *, create: bool, read_only: bool = False) -> Store:
    """Open the results store named by --db (default ./schedsearch.db); ``read_only`` for
    the commands that only read (nothing is written, read-only media work)."""
    from schedsearch.store import open_store

    return open_store(url, create=create, read_only=read_only)


def refuse_transient_db(url: str | None, spelling: Spelling = CLI) -> None:
    """A search's results must outlive it: refuse in-memory databases for a search."""
    from schedsearch.store import is_transient

    if is_transient(url):
        raise StoreError(
            f"{spelling.db}{'' if spelling.db.endswith('=') else ' '}{url} is an in-memory database: the results "
            "would vanish when the search ends and `schedsearch show` could not read them; pass a file path such as "
            f"{spelling.db}{'' if spelling.db.endswith('=') else ' '}results.db"
        )


def db_label(url: str | None) -> str:
    """How to name the database back to the user (for --db in printed commands)."""
    from schedsearch.store import DEFAULT_DB

    return url or DEFAULT_DB


def make_executor(
    workers: int,
    address: str | None,
    bench: BenchConfig,
    expand: ExpandOptions,
    cache_dir: Path | None = None,
    stop: threading.Event | None = None,
) -> Executor:
    """LocalExecutor for ``--workers 0``, otherwise a RayExecutor (local cluster or --address);
    ``stop``, set while a private cluster starts, makes it shut the cluster down as soon as it
    is up and raise ``KeyboardInterrupt``."""
    from schedsearch.transforms import Expander

    if workers == 0 and address is None:
        from schedsearch.evaluate import LocalExecutor

        return LocalExecutor(Expander, expand, bench, cache_dir)
    from schedsearch.evaluate.ray_backend import RayExecutor

    return RayExecutor(
        Expander, expand, bench, workers=max(workers, 1), address=address, cache_dir=cache_dir, stop=stop
    )


def make_cost_model(config: SearchConfig, store: Store, executor: Executor) -> CostModel | None:
    """The learned cost model for ``config.cost_model`` (None when off), first trained on
    every earlier measurement in ``store`` made on this machine fingerprint."""
    if config.cost_model is CostModelMode.OFF:
        return None
    from schedsearch.model import LearnedCostModel
    from schedsearch.model.features import FEATURE_VERSION, work_estimate

    history = store.training_samples(executor.machine().fingerprint, FEATURE_VERSION)
    # Exo (and z3, which is not safe beside a second Python thread) runs in the executor's
    # worker processes, never in this one, so the model can always train in the background.
    return LearnedCostModel(history, seed=config.seed, background=True, estimate=work_estimate)


def gflops(flops: int | None, seconds: float | None) -> float | None:
    """GFLOP/s of one call of ``flops`` operations taking ``seconds``, when both are known."""
    if not flops or not seconds:
        return None
    return flops / seconds / 1e9
