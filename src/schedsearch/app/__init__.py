"""The use cases both fronts call: the CLI (which only parses and renders) and the Python
API (``schedsearch.tune()``, ``apply()``, ``load_schedule()``).

This is the composition root: the only package that knows every other one (``cli`` and
the Python front door call it; nothing else imports it). Heavy packages (Exo, Ray,
SQLAlchemy, the cost model) are imported inside the functions that need them.

- start a search, drive it: ``searching``; resume one, trusting nothing its database says: ``resuming``
- the best known schedule, apply it, explain a workload, export a schedule: ``reading``
- regress one schedule file: ``regress``
- every setting of a search, defined once: ``settings``
- compiler settings, executors, stores, the cost model: ``compose``
"""

from schedsearch.app.compose import CLI, PYTHON, Spelling, db_label
from schedsearch.app.compose import gflops as gflops_of
from schedsearch.app.reading import (
    Applied,
    BestKnown,
    Explanation,
    ExportSource,
    KnownBest,
    apply_best,
    best_known,
    best_on_this_machine,
    best_record,
    driver_gone,
    explain,
    export_c,
    export_py,
    export_source,
    replay,
    schedule_file_of,
    search_tree,
    step_lines,
)
from schedsearch.app.regress import CaseResult, RegressSetup, check_one, regress_setup
from schedsearch.app.resuming import resume_search, toolchain_args
from schedsearch.app.searching import (
    SearchRun,
    SearchRunner,
    SearchSession,
    WorkloadFile,
    capture,
    finished,
    load,
    start_search,
    stop_on_signals,
)
from schedsearch.app.settings import MAX_BUDGET, SearchSettings, SettingError

__all__ = [
    "CLI",
    "MAX_BUDGET",
    "PYTHON",
    "Applied",
    "BestKnown",
    "CaseResult",
    "Explanation",
    "ExportSource",
    "KnownBest",
    "RegressSetup",
    "SearchRun",
    "SearchRunner",
    "SearchSession",
    "SearchSettings",
    "SettingError",
    "Spelling",
    "WorkloadFile",
    "apply_best",
    "best_known",
    "best_on_this_machine",
    "best_record",
    "capture",
    "check_one",
    "db_label",
    "driver_gone",
    "explain",
    "export_c",
    "export_py",
    "export_source",
    "finished",
    "gflops_of",
    "load",
    "regress_setup",
    "replay",
    "resume_search",
    "schedule_file_of",
    "search_tree",
    "start_search",
    "step_lines",
    "stop_on_signals",
    "toolchain_args",
]
