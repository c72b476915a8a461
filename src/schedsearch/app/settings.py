"""Every setting a user chooses for a search, defined once.

``SearchSettings`` is the one typed record of a new search's settings. Each field carries a
``Knob`` — its help, its command-line spelling, its bounds — and its default is the
setting's default. From it are derived the options of ``schedsearch run`` and ``resume``
(``cli.options``), the keyword arguments of ``schedsearch.tune()`` (``SearchSettings.of``)
and the stored ``SearchConfig`` (``app.compose.search_config``). A ``SearchSettings`` that
exists is valid: its constructor coerces choice names to their enums and raises
``SettingError``, one sentence naming the setting, for anything else.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from typing import Any

from schedsearch.core import CostModelMode, FloatMode, SearchConfig, StrategyKind, TimingMode
from schedsearch.errors import SettingError
from schedsearch.targets import TargetName

#: The longest budget accepted, in seconds: an infinite one would not survive JSON storage
#: (and a month is plenty).
MAX_BUDGET = 30 * 86400.0
#: The target that means "the widest instruction set this CPU has".
AUTO = "auto"
TARGET_CHOICES = (AUTO, *(t.value for t in TargetName))


@dataclass(frozen=True, slots=True)
class Knob:
    """How a user meets one setting: its help, and its command-line option.

    The option is ``--<name with dashes>`` unless ``flag`` says otherwise. A boolean is a
    flag that turns it on, or with ``negatable`` a ``--x/--no-x`` pair. ``off_flag`` adds a
    flag that sets the setting to False (a setting that is a number, on by default, or off).
    ``resumable`` settings are also options of ``resume``, where leaving one out keeps the
    value the search was started with.
    """

    help: str
    flag: str | None = None
    metavar: str | None = None
    low: float | None = None  # bounds of a number (inclusive unless ``low_open``)
    high: float | None = None
    low_open: bool = False
    choices: tuple[str, ...] = ()  # a string's allowed values (an enum's come from its type)
    negatable: bool = False
    off_flag: str | None = None
    off_help: str = ""
    resumable: bool = False


def knob(default: Any, help: str, **how: Any) -> Any:
    """A dataclass field with ``default`` and its ``Knob``."""
    return field(default=default, metadata={"knob": Knob(help, **how)})


@dataclass(frozen=True, slots=True)
class SearchSettings:
    """What a user chooses for a new search: the options of ``schedsearch run``, the keyword
    arguments of ``tune()`` (underscores for dashes). Every field has its default here."""

    budget: float = knob(
        120.0,
        "Wall-time budget of the search in seconds, counted once the workers are ready (the seconds "
        "before - loading the workload, checking the compiler, starting Ray - are shown as 'starting' "
        "and reported apart), at most 30 days [resume: as many more seconds].",
        metavar="SECONDS",
        low=0,
        low_open=True,
        high=MAX_BUDGET,
        resumable=True,
    )
    max_candidates: int | None = knob(
        None,
        "Stop after measuring N candidates (measurements reused from earlier searches do not count).",
        metavar="N",
        low=1,
        resumable=True,
    )
    early_stop: int | bool = knob(
        True,
        "End the search (finalists re-measured as usual) once N candidates in a row brought no new best "
        "beyond the timing noise: a near-tie that takes the lead by less than the spread of the two "
        "times does not count [default: the stretch without such a gain must be twice the search "
        "before it (and at least 100 candidates and 60 s); resume: as the search was started].",
        metavar="N",
        low=1,
        off_flag="--no-early-stop",
        off_help="Search until the budget is spent, however long ago the last gain came.",
        resumable=True,
    )
    workers: int = knob(
        2,
        "Ray workers (0: no Ray, everything in this process) [tune(): 0].",
        metavar="N",
        low=0,
        resumable=True,
    )
    max_depth: int = knob(12, "Longest schedule.", metavar="N", low=1)
    strategy: StrategyKind = knob(StrategyKind.BEST_FIRST, "How the search picks the nodes it expands.")
    seed: int = knob(0, "Makes the search reproducible.", metavar="N", low=0, high=2**63 - 1)
    cc: str | None = knob(None, "C compiler command taking gcc's arguments [default: gcc].", metavar="PATH")
    cflags: str | None = knob(
        None,
        'Compiler flags [default: "-O3 -march=native"]; the target\'s own flags (e.g. '
        "-mprefer-vector-width=512 for avx512) are added after them.",
        metavar="STR",
    )
    threads: int = knob(
        1,
        "Threads a kernel may run on. N > 1 adds OpenMP parallel loops (an outermost loop: the "
        "rows of output tiles) to the rewrites, and times each candidate that has one on N threads "
        "pinned to N cores, with the node's builds and expansions paused meanwhile; speedups stay "
        "against the unscheduled proc on one thread.",
        metavar="N",
        low=1,
    )
    target: str = knob(
        AUTO, "Instruction set rewrites may emit: auto = the widest this CPU has.", choices=TARGET_CHOICES
    )
    cost_model: CostModelMode = knob(
        CostModelMode.RANK,
        "Learned cost model (trained on this machine's earlier measurements and this search's): "
        "off = measure children in proposal order; rank = measure the predicted-fastest children "
        "first (10% picked at random, seeded) and let predictions weigh in when choosing nodes to "
        "expand; prune = rank, and when the budget is short - a round's new children would take "
        "more than the seconds left at this search's pace so far (elapsed / evaluated), or "
        "outnumber the --max-candidates left - skip the predicted-slower half of them.",
    )
    float_mode: FloatMode = knob(
        FloatMode.STRICT,
        "Float arithmetic candidates may use: strict = as written (IEEE); relaxed = the compiler may "
        "divide by a constant as a multiplication by its reciprocal (gcc -freciprocal-math, what "
        "Halide does unless told StrictFloat). Either way every candidate is checked against the "
        "unscheduled proc built strictly, within the float tolerance.",
        flag="--float",
    )
    timing: TimingMode = knob(
        TimingMode.AUTO,
        "quiet = a node's builds and expansions pause while one of its kernels is timed (where "
        "cores share execution units, as SMT siblings and many cloud vCPUs do, they make a kernel "
        "1.5x slower and its times noisy); shared = they run on beside it: more candidates a "
        "second, noisier times; auto = quiet while the node's own timings show that the work "
        "beside them makes them noisier or slower, shared while it does not (a new best's second "
        "measurement and the finalists are always quiet).",
    )
    remeasure: bool = knob(
        False,
        "Measure every candidate, even C an earlier search measured on this machine with the "
        "same compiler, flags and target (by default that measurement is reused).",
        resumable=True,
    )
    warm_start: bool = knob(
        True,
        "First evaluate the best schedules earlier searches found for this proc (any sizes, same "
        "target), replayed on these sizes; those that no longer apply are skipped.",
        negatable=True,
    )
    defer_costly: bool = knob(
        True,
        "Expand a large node (a register tile, an unrolled nest) in two parts: its cheap rewrites "
        "first, and its reorders, hoists, sinks and packs - seconds of Exo each there - only when "
        "the search picks the node again. --no-defer-costly tries every rewrite at once.",
        negatable=True,
    )
    compiler_notes: bool = knob(
        True,
        "Have the cost model read what gcc made of each candidate - which statements it "
        "vectorized, with what vectors, read from the machine code - to predict its time: every "
        "child is built as it is made, before any is measured, and the model leads: one parent a "
        "round, and the next round sooner. Read only with gcc, an objdump and the model on. "
        "--no-compiler-notes measures more candidates a second with worse first predictions.",
        negatable=True,
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, checked(f.name, getattr(self, f.name)))

    def config(self) -> SearchConfig:
        """The SearchConfig these settings give on this machine: the target resolved once
        (``auto``: the widest this CPU has), the compiler's flags made for it."""
        from schedsearch.app.compose import bench_config, expand_options, reads_notes
        from schedsearch.evaluate import cpu_flags
        from schedsearch.targets import resolve

        target = resolve(self.target, cpu_flags()).name.value
        bench = dataclasses.replace(
            bench_config(self.cc, self.cflags, self.seed, target, self.float_mode, self.timing), threads=self.threads
        )
        # The notes feed the model alone: with it off they would only build each child early.
        notes = reads_notes(self.compiler_notes and self.cost_model is not CostModelMode.OFF, bench)
        return SearchConfig(
            strategy=self.strategy,
            seed=self.seed,
            max_seconds=self.budget,
            max_candidates=self.max_candidates,
            early_stop=self.early_stop if not isinstance(self.early_stop, bool) else None,
            auto_stop=self.early_stop is not False,
            max_depth=self.max_depth,
            workers=self.workers,
            cost_model=self.cost_model,
            bench=bench,
            expand=expand_options(self.threads > 1, target, notes),
            remeasure=self.remeasure,
            warm_start=self.warm_start,
            defer_costly=self.defer_costly,
            # gcc's notes make the model rank a node's children right from the first round.
            model_leads=notes,
        )

    @staticmethod
    def of(**values: Any) -> SearchSettings:
        """Settings from keyword arguments named as the fields; SettingError for a name that
        is not a setting (saying which are) or a value it cannot take. None means the default."""
        unknown = sorted(set(values) - set(knobs()))
        if unknown:
            raise SettingError(f"{unknown[0]!r} is not a setting; the settings are {', '.join(knobs())}")
        return SearchSettings(**{k: v for k, v in values.items() if v is not None})


@cache
def knobs() -> dict[str, tuple[Knob, Any]]:
    """Each setting's name -> its Knob and its type, in the order of the fields."""
    hints = typing.get_type_hints(SearchSettings)
    return {f.name: (f.metadata["knob"], hints[f.name]) for f in dataclasses.fields(SearchSettings)}


def default(name: str) -> Any:
    """The default of the setting ``name``."""
    return next(f.default for f in dataclasses.fields(SearchSettings) if f.name == name)


def kind(tp: Any) -> tuple[type, bool]:
    """The setting's value type (bool, int, float, str, or a StrEnum) and whether None is
    allowed; ``int | bool`` is an int that may also be False (or True: its default)."""
    args = [a for a in typing.get_args(tp) if a is not type(None)] or [tp]
    optional = type(None) in typing.get_args(tp)
    return (int if int in args else args[0]), optional


def checked(name: str, value: Any) -> Any:
    """``value`` as the setting ``name`` holds it (a choice's name as its enum), or
    SettingError saying what the setting takes."""
    knob_, tp = knobs()[name]
    base, optional = kind(tp)
    if value is None and optional:
        return None
    may_be_off = bool in typing.get_args(tp) and base is int
    if isinstance(value, bool):
        if base is bool or (may_be_off and (value is False or value == default(name))):
            return value
    elif isinstance(base, type) and issubclass(base, StrEnum):
        allowed = [m.value for m in base]
        if isinstance(value, str) and value in allowed:
            return base(value)
        raise SettingError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    elif base is str and isinstance(value, str):
        if knob_.choices and value not in knob_.choices:
            raise SettingError(f"{name} must be one of {', '.join(knob_.choices)}, not {value!r}")
        return value
    elif base in (int, float) and isinstance(value, (int, float)):
        if (base is int and not isinstance(value, int)) or math.isnan(value):
            raise SettingError(f"{name} must be {_takes(name)}, not {value!r}")
        if _in_bounds(knob_, value):
            return float(value) if base is float else value
    raise SettingError(f"{name} must be {_takes(name)}, not {value!r}")


def _in_bounds(k: Knob, value: float) -> bool:
    above = k.low is None or (value > k.low if k.low_open else value >= k.low)
    return above and (k.high is None or value <= k.high)


def _takes(name: str) -> str:
    """What the setting ``name`` takes, in a few words ("a number of seconds > 0 and <= 2592000")."""
    knob_, tp = knobs()[name]
    base, optional = kind(tp)
    if base is bool:
        what = "True or False"
    elif base is str:
        what = "a string"
    else:
        what = "a number of seconds" if knob_.metavar == "SECONDS" else "a whole number" if base is int else "a number"
        low = "" if knob_.low is None else f"{'>' if knob_.low_open else '>='} {_number(knob_.low)}"
        high = "" if knob_.high is None else f"<= {_number(knob_.high)}"
        what += (" " + " and ".join(b for b in (low, high) if b)) if low or high else ""
        if bool in typing.get_args(tp):
            what += f", {default(name)} (the default) or {not default(name)}"
    return what + (", or None" if optional else "")


def _number(x: float) -> str:
    return str(int(x)) if x == int(x) else str(x)
