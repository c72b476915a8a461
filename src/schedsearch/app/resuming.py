"""Resume a search without trusting what its database says.

A database is data: a copy from a colleague, a CI artifact, a file on a shared disk. So a
resumed search takes from it only what cannot run:

- **the toolchain comes from the caller.** The compiler and flags are the command line's
  (``--cc``, ``--cflags``; the defaults ``run`` has), never the ones stored with the search.
  When the two differ, the resume is refused with one sentence (``UntrustedConfigError``)
  unless the caller says ``--trust-db-config``: then the search goes on, built with the
  caller's toolchain, and is recorded with it. The stored compiler is never run, not even as
  ``cc --version``.
- **nothing a row holds is compiled.** The rows the run will build are rebuilt by replaying
  their stored schedules on the workload, whose source is checked as before
  (``schedsearch.trust``); a row whose replay gives other C than its fingerprint names is
  marked tampered (``search.inherited``).
- the workload source runs only under ``check_stored_source``.
"""

from __future__ import annotations

import dataclasses
import shlex

from schedsearch.app.compose import CLI, Spelling, bench_config, open_db
from schedsearch.app.searching import Say, SearchSession, silent
from schedsearch.app.settings import checked
from schedsearch.core import BenchConfig, Candidate, SearchConfig, SearchRecord, SearchStatus, Store
from schedsearch.errors import SchedsearchError, SearchCompletedError, UntrustedConfigError
from schedsearch.search.inherited import Inherited, rebuild_inherited

#: Longest stored value a message quotes (the rest is cut): a message is one line.
SHOWN_CHARS = 80


def resume_search(
    search_id: int,
    *,
    budget: float | None = None,
    max_candidates: int | None = None,
    workers: int | None = None,
    db: str | None = None,
    trust_db_source: bool = False,
    remeasure: bool | None = False,
    early_stop: int | bool | None = None,
    cc: str | None = None,
    cflags: str | None = None,
    trust_db_config: bool = False,
    spelling: Spelling = CLI,
    say: Say = silent,
) -> SearchSession:
    """Continue a search from the store: same workload (stored source), same settings
    but those given (each checked as ``SearchSettings`` checks it; None: as stored): budgets
    are added to the search's, ``remeasure`` turns measurement reuse off for this run,
    ``early_stop`` replaces the stored rule), built with ``cc`` and ``cflags`` (None: ``run``'s defaults).

    The stored source runs only when it matches its recorded sha256 and the file it came
    from is still here with the same content, or with ``trust_db_source``. A search stored
    with another compiler or flags is refused (UntrustedConfigError) unless
    ``trust_db_config``; the stored ones are never run. The rows the run will build are
    rebuilt from their schedules here, before anything else runs (``session.inherited``). A
    completed search needs more budget (SearchCompletedError otherwise). A search another
    live driver runs is refused (SearchBusyError), untouched; one whose driver stopped is
    taken over (the session's ``notes`` say so). ``say`` is told each step as it begins.
    """
    from schedsearch.evaluate import check_toolchain, default_cache_dir, private_cache_dir
    from schedsearch.search.lease import LeaseKeeper
    from schedsearch.transforms import root_candidate
    from schedsearch.trust import check_stored_source

    changed = {"budget": budget, "max_candidates": max_candidates, "workers": workers, "early_stop": early_stop}
    for name, value in changed.items():  # before anything is opened
        if value is not None:
            checked(name, value)
    say("opening the database")
    store = open_db(db, create=False)
    lease = LeaseKeeper(store)
    try:
        search = store.get_search(search_id)
        # First of all: a search another live driver runs is refused (SearchBusyError), untouched.
        lease.hold(search_id)
        config = resumed_config(search, budget, max_candidates, workers, early_stop)
        if remeasure:
            config = dataclasses.replace(config, remeasure=True)
        if search.status is SearchStatus.COMPLETED and budget is None and max_candidates is None:
            raise SearchCompletedError(
                f"search {search_id} already completed; add {spelling.budget} (or "
                f"{spelling.max_candidates}) to search further"
            )
        check_stored_source(search.workload, trust_db_source=trust_db_source, what=f"search {search_id}")
        config = dataclasses.replace(config, bench=resumed_bench(search, cc, cflags, trust_db_config, spelling))
        say(f"checking the C compiler ({config.bench.cc})")
        check_toolchain(config.bench)
        private_cache_dir(default_cache_dir())
        say("loading the workload with Exo")
        root = root_candidate(search.workload)
        say("rebuilding the stored candidates from their schedules")
        inherited = rebuild_rows(store, search, root, config)
    except BaseException:
        lease.release()
        store.close()
        raise
    return SearchSession(search.workload, root, config, store, search_id=search_id, lease=lease, inherited=inherited)


def resumed_config(
    search: SearchRecord,
    budget: float | None,
    max_candidates: int | None,
    workers: int | None,
    early_stop: int | bool | None = None,
) -> SearchConfig:
    """The stored config with budgets extended (budgets count the search's total), and
    ``workers`` and ``early_stop`` replaced when given (True: the default stopping rule,
    False: run to the budget, N: N candidates in a row without a gain)."""
    old = search.config
    max_seconds = old.max_seconds
    if budget is not None:
        max_seconds = search.elapsed_seconds + budget
    limit = old.max_candidates
    if max_candidates is not None:
        limit = search.counters.measured + max_candidates
    return dataclasses.replace(
        old,
        max_seconds=max_seconds,
        max_candidates=limit,
        workers=old.workers if workers is None else workers,
        early_stop=old.early_stop if early_stop is None else (None if isinstance(early_stop, bool) else early_stop),
        auto_stop=old.auto_stop if early_stop is None else early_stop is not False,
    )


def resumed_bench(
    search: SearchRecord, cc: str | None, cflags: str | None, trust_db_config: bool = False, spelling: Spelling = CLI
) -> BenchConfig:
    """The stored BenchConfig with the caller's compiler and flags, made as ``run`` makes
    them (``bench_config``: the search's own target and float mode add their flags).

    Raises UntrustedConfigError (one sentence: what differs, what to pass) when the search
    was stored with another compiler or flags, unless ``trust_db_config``. Runs nothing.
    """
    old = search.config.bench
    mine = bench_config(cc, cflags, old.seed, search.config.expand.target, old.float_mode.value, old.timing.value)
    differs = []
    if mine.cc != old.cc:
        differs.append((spelling.cc, f"the compiler {shown(old.cc)} (this resume: {shown(mine.cc)})"))
    if tuple(mine.cflags) != tuple(old.cflags):
        differs.append((spelling.cflags, _flags_difference(tuple(old.cflags), tuple(mine.cflags))))
    if differs and not trust_db_config:
        raise UntrustedConfigError(
            f"search {search.id} was built with {' and '.join(text for _, text in differs)}; the compiler and "
            f"flags in a database are never run: pass the same {' and '.join(name for name, _ in differs)} if "
            f"you mean them, or add {spelling.trust_db_config} to build the rest of the search with this resume's"
        )
    return dataclasses.replace(old, cc=mine.cc, cflags=mine.cflags)


def _flags_difference(old: tuple[str, ...], mine: tuple[str, ...]) -> str:
    """How the stored flags differ from this resume's, in a few words."""
    extra = [f for f in old if f not in mine]
    missing = [f for f in mine if f not in old]
    if not extra and not missing:
        return f"the flags {shown(' '.join(old))} (this resume's, in another order)"
    parts = [f"the flags {shown(shlex.join(extra))} that this resume does not give"] if extra else []
    if missing:
        parts.append(f"{'' if extra else 'flags '}without this resume's {shown(shlex.join(missing))}")
    return ", ".join(parts)


def shown(value: str) -> str:
    """A stored value as a message may quote it: shell-quoted, on one line, at most
    ``SHOWN_CHARS`` characters (``repr`` when it holds a character a terminal would act on)."""
    cut = value[:SHOWN_CHARS]
    text = shlex.quote(cut) if cut.isprintable() else repr(cut)
    return text + ("..." if len(value) > SHOWN_CHARS else "")


def toolchain_args(config: SearchConfig) -> str:
    """The command-line options (`` --cc X --cflags Y``) that give a resume of a search with
    ``config`` its compiler and flags; "" when they are ``run``'s defaults (or cannot be
    worked out)."""
    bench = config.bench
    try:
        default = bench_config(None, None, bench.seed, config.expand.target, bench.float_mode.value, bench.timing.value)
    except SchedsearchError:
        return ""
    args = ""
    if bench.cc != default.cc:
        args += f" --cc {_quoted(bench.cc)}"
    if tuple(bench.cflags) != tuple(default.cflags):
        args += f" --cflags {_quoted(shlex.join(bench.cflags))}"
    return args


def _quoted(value: str) -> str:
    return shlex.quote(value) if value.isprintable() else repr(value)


def rebuild_rows(store: Store, search: SearchRecord, root: Candidate, config: SearchConfig) -> Inherited:
    """The rows of ``search`` the resumed run will build, rebuilt from their schedules by Exo in
    this process (``search.inherited``): before the cost model trains beside it."""
    from schedsearch.transforms import Expander

    expander = Expander(search.workload, config.expand)
    return rebuild_inherited(store, search.id, root, config, expander.candidate)
