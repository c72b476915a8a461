"""The application layer's fast parts: capturing @proc objects, argument checks, spelling,
progress rendering. Searches with a real compiler are in tests/integration/test_api.py."""

from __future__ import annotations

import io
import linecache
import re

import pytest
from exo import DRAM, proc
from exo.stdlib.scheduling import divide_loop

from schedsearch import api
from schedsearch.app import CLI, PYTHON
from schedsearch.app.compose import refuse_transient_db
from schedsearch.core import Counters, EventKind, SearchEvent, TimeSpent
from schedsearch.errors import StoreError, WorkloadError
from schedsearch.progress import NotebookProgress, TextProgress, progress_renderer
from schedsearch.transforms import build_proc
from schedsearch.transforms.capture import capture_proc, workload_from_proc

SCALE = 3.0


@proc
def triple(N: size, x: f32[N] @ DRAM):
    for i in seq(0, N):
        x[i] = SCALE * x[i]


@proc
def axpy(N: size, x: f32[N] @ DRAM, y: f32[N] @ DRAM):
    assert N >= 1
    triple(N, x)
    for i in seq(0, N):
        y[i] += x[i]


class StackMemory(DRAM):
    """A memory defined outside any installed library: it cannot be written down."""


# ------------------------------------------------------------------ capture


def test_a_module_level_proc_is_captured_with_the_names_it_uses() -> None:
    captured = capture_proc(axpy, [globals()])
    assert captured.proc == "axpy" and captured.origin.endswith(f"test_app.py:{axpy._loopir_proc.srcinfo.lineno}")
    text = captured.source
    assert text.startswith("from __future__ import annotations\n")
    assert "from exo.API import proc" in text and "from exo.core.memory import DRAM" in text
    assert "SCALE = 3.0" in text
    # the proc it calls is captured before it, and nothing else of this file is
    assert text.index("def triple(") < text.index("def axpy(")
    assert "import pytest" not in text and "StackMemory" not in text


def test_a_captured_workload_rebuilds_the_same_proc_with_sizes_bound() -> None:
    workload = workload_from_proc(axpy, {"N": 64}, [globals()])
    assert workload.proc == "axpy" and workload.sizes == (("N", 64),)
    assert workload.path.startswith("<axpy from ") and workload.path.endswith(">")
    assert str(build_proc(workload)) == str(axpy.partial_eval(N=64))
    # the identity in the store is stable: capturing again gives the same key
    assert workload_from_proc(axpy, {"N": 64}, [globals()]).key == workload.key
    assert workload_from_proc(axpy, {"N": 32}, [globals()]).key != workload.key


def test_a_proc_defined_in_a_function_uses_its_local_values() -> None:
    def make(width: int):
        @proc
        def fill(x: f32[width] @ DRAM):
            for i in seq(0, width):
                x[i] = 0.0
        return fill, dict(locals())

    four, scope4 = make(4)
    eight, scope8 = make(8)
    a = workload_from_proc(four, None, [scope4, globals()])
    b = workload_from_proc(eight, None, [scope8, globals()])
    assert "width = 4" in a.source and "width = 8" in b.source
    assert a.source_sha256 != b.source_sha256
    assert a.args[0].shape == (4,) and b.args[0].shape == (8,)
    with pytest.raises(WorkloadError, match="uses width, which cannot be found"):
        capture_proc(four, [globals()])


def test_a_notebook_cell_is_captured_from_linecache() -> None:
    """IPython keeps each cell's text in linecache under a made-up file name; the imports
    may live in another cell: the names come from the shared namespace."""
    namespace: dict[str, object] = {}
    imports = "from exo import DRAM, proc\n"
    cell = ("from __future__ import annotations\n\n"
            "@proc\ndef double(N: size, x: f32[N] @ DRAM):\n    for i in seq(0, N):\n        x[i] = 2.0 * x[i]\n")
    for number, text in enumerate((imports, cell)):
        filename = f"/tmp/ipykernel_0/cell{number}-{id(namespace)}.py"
        linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
        exec(compile(text, filename, "exec"), namespace)
    workload = workload_from_proc(namespace["double"], {"N": 8}, [namespace])
    assert "def double(" in workload.source and "from exo.API import proc" in workload.source
    assert workload.sizes == (("N", 8),)


def test_a_scheduled_proc_is_refused() -> None:
    split = divide_loop(axpy, "i #0", 4, ["io", "ii"], tail="cut")
    with pytest.raises(WorkloadError, match="is not the proc its source at .* defines"):
        workload_from_proc(split, {"N": 64}, [globals()])


def test_values_that_cannot_be_written_down_are_refused() -> None:
    @proc
    def on_stack(x: f32[4] @ StackMemory):
        for i in seq(0, 4):
            x[i] = 1.0

    with pytest.raises(WorkloadError, match="uses StackMemory .* outside an installed library"):
        capture_proc(on_stack, [globals()])
    with pytest.raises(WorkloadError, match="expected an Exo @proc or the path of a workload file, not int"):
        capture_proc(3)


def test_sizes_are_checked_as_for_files() -> None:
    with pytest.raises(WorkloadError, match="needs values for its size arguments: N"):
        workload_from_proc(axpy, None, [globals()])
    with pytest.raises(WorkloadError, match="axpy has no size argument M"):
        workload_from_proc(axpy, {"N": 8, "M": 2}, [globals()])


# ------------------------------------------------------------------ the Python front's checks


def test_the_api_finds_names_in_the_callers_scope() -> None:
    local_scale = 5.0

    @proc
    def quintuple(N: size, x: f32[N] @ DRAM):
        for i in seq(0, N):
            x[i] = local_scale * x[i]

    workload = api._workload(quintuple, {"N": 16}, None)
    assert "local_scale = 5.0" in workload.source


@pytest.mark.parametrize("kwargs, message", [
    ({"budget": 0}, r"^budget must be a number of seconds > 0 and <= 2592000, not 0$"),
    ({"budget": float("nan")}, "budget must be a number of seconds"),
    ({"budget": "60"}, "budget must be a number of seconds"),
    ({"max_candidates": 0}, r"max_candidates must be a whole number >= 1, or None, not 0"),
    ({"max_candidates": 2.5}, r"max_candidates must be a whole number"),
    ({"workers": -1}, "workers must be a whole number >= 0"),
    ({"workers": True}, "workers must be a whole number"),
    ({"strategy": "greedy"}, "strategy must be one of best-first, beam, random"),
    ({"cost_model": "on"}, "cost_model must be one of off, rank, prune"),
    ({"target": "sse"}, "target must be one of auto"),
    ({"max_depth": 0}, "max_depth must be a whole number >= 1"),
    ({"early_stop": 0}, r"early_stop must be a whole number >= 1, True \(the default\) or False, not 0"),
    ({"early_stop": "never"}, "early_stop must be a whole number"),
    ({"defer_costly": "no"}, "defer_costly must be True or False, not 'no'"),
    ({"budgte": 60}, "'budgte' is not a setting; the settings are budget, max_candidates"),
])
def test_bad_arguments_are_refused_before_anything_runs(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        api.tune(axpy, {"N": 8}, db="never-created.db", **kwargs)


def test_a_resume_with_a_bad_early_stop_is_refused_before_anything_runs() -> None:
    with pytest.raises(ValueError, match="early_stop must be a whole number >= 1"):
        api.resume(1, early_stop=0, db="never-created.db")
    with pytest.raises(ValueError, match="'target' is not a setting resume\\(\\) takes; it takes budget"):
        api.resume(1, target="avx2", db="never-created.db")


def test_bad_workload_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match="sizes must be a mapping"):
        api.apply(axpy, [("N", 8)])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="proc= names a proc in a workload file"):
        api.apply(axpy, {"N": 8}, proc="axpy")


def test_messages_name_what_each_front_can_type() -> None:
    with pytest.raises(StoreError, match=r"^--db memory is an in-memory database.*such as --db results.db$"):
        refuse_transient_db("memory", CLI)
    with pytest.raises(StoreError, match=r"^db=memory is an in-memory database.*such as db=results.db$"):
        refuse_transient_db("memory", PYTHON)
    workload = workload_from_proc(axpy, {"N": 64}, [globals()])
    assert PYTHON.tune_command(workload, "t.db") == "schedsearch.tune(axpy, {'N': 64}, db='t.db')"
    assert CLI.tune_command(workload, None).startswith("schedsearch run '<axpy from ")
    assert CLI.tune_command(workload, None).endswith("--proc axpy --size N=64")


# ------------------------------------------------------------------ progress


def event(kind: EventKind, elapsed: float, evaluated: int = 0) -> SearchEvent:
    return SearchEvent(kind, 1, elapsed, Counters(evaluated=evaluated, ok=evaluated))


def test_text_progress_prints_key_events_and_a_heartbeat() -> None:
    now = [0.0]
    out = io.StringIO()
    view = TextProgress("axpy[N=8]", out, heartbeat=10.0, clock=lambda: now[0])
    view(event(EventKind.STARTED, 0.0))
    for t in (1.0, 2.0, 11.5, 12.0):
        now[0] = t
        view(event(EventKind.EVALUATED, t, evaluated=int(t)))
    now[0] = 13.0
    view(event(EventKind.FINISHED, 13.0, evaluated=12))
    lines = out.getvalue().splitlines()
    assert [re.search(r"\] axpy\[N=8\] (\w+):", line).group(1) for line in lines] == ["started", "evaluated", "finished"]
    assert "evaluated 11" in lines[1] and "axpy[N=8]" in lines[0]


class FakeHandle:
    def __init__(self) -> None:
        self.shown: list[str] = []

    def update(self, obj: object) -> None:
        self.shown.append(obj.data)  # type: ignore[attr-defined]


def test_the_notebook_bar_measures_the_tighter_limit_and_ends_full() -> None:
    now = [0.0]
    handle = FakeHandle()
    bar = NotebookProgress("axpy[N=8]", budget=100.0, max_candidates=10, interval=1.0, clock=lambda: now[0],
                           handle=handle)
    assert bar.fraction(event(EventKind.EVALUATED, 10.0, evaluated=5)) == 0.5  # candidates are the tighter
    assert bar.fraction(event(EventKind.EVALUATED, 80.0, evaluated=1)) == 0.8
    bar(event(EventKind.EVALUATED, 1.0, evaluated=1))
    now[0] = 0.5
    bar(event(EventKind.EVALUATED, 2.0, evaluated=2))  # within the interval: not drawn
    now[0] = 0.6
    bar(event(EventKind.FINISHED, 3.0, evaluated=3))
    assert len(handle.shown) == 2
    assert '<progress value="1.000" max="1"' in handle.shown[-1] and "axpy[N=8]" in handle.shown[-1]
    bar.close()
    assert len(handle.shown) == 3


def test_no_progress_outside_a_notebook_unless_asked() -> None:
    assert progress_renderer(None, 10.0, None, "x") is None
    assert progress_renderer(False, 10.0, None, "x") is None
    assert isinstance(progress_renderer(True, 10.0, None, "x"), TextProgress)


def test_the_notebook_bar_says_where_the_time_went_once_any_was_counted() -> None:
    bar = NotebookProgress("axpy[N=8]", budget=100.0, max_candidates=None, handle=FakeHandle())
    counted = SearchEvent(EventKind.EVALUATED, 1, 9.0, Counters(evaluated=4, spent=TimeSpent(expanding=7.5, idle=6.0)))
    assert "workers expanding 7.5 s" in bar.html(counted) and "nothing being measured for 6.0 s" in bar.html(counted)
    assert "workers expanding" not in bar.html(event(EventKind.EVALUATED, 9.0, evaluated=4))
