"""``schedsearch run`` around the search: it reports before it releases the workers (shutting
a private Ray cluster down takes seconds), and a signal while they start is said at once and
ends the run before a search is recorded."""

from __future__ import annotations

import pytest

from schedsearch.app import SearchRunner, SearchSession
from schedsearch.cli import commands_run
from schedsearch.core import SearchConfig, SearchStatus
from schedsearch.store import InMemoryStore
from schedsearch.testing.fake_executor import FakeExecutor
from schedsearch.testing.fake_tree import FakeTree, fake_root, fake_workload


class _Released(FakeExecutor):
    """A fake executor that notes when it is released."""

    def __init__(self, tree: FakeTree, order: list[str]) -> None:
        super().__init__(tree)
        self._order = order

    def close(self) -> None:
        self._order.append("workers released")


def _session(order: list[str], monkeypatch: pytest.MonkeyPatch) -> SearchSession:
    tree = FakeTree(moves=6, branching=4, seed=3)
    config = SearchConfig(max_seconds=None, max_candidates=12, seed=0, warm_start=False)
    session = SearchSession(fake_workload(), fake_root(tree.moves), config, InMemoryStore())
    monkeypatch.setattr(session, "runner",
                        lambda address=None, stop=None, say=None: SearchRunner(session, _Released(tree, order), None))
    return session


def test_the_summary_and_the_json_come_before_the_workers_are_released(monkeypatch, capsys) -> None:
    order: list[str] = []
    session = _session(order, monkeypatch)
    report = commands_run._report

    def noted(*args, **kwargs) -> None:
        report(*args, **kwargs)
        order.append("reported")

    monkeypatch.setattr(commands_run, "_report", noted)
    commands_run._drive(session, None, None, as_json=True)
    assert order == ["reported", "workers released"]
    out, err = capsys.readouterr()
    assert '"search_id"' in out and "completed" in err
    assert session.store.get_search(session.search_id).status is SearchStatus.COMPLETED


def test_the_first_signal_asks_for_a_stop_and_is_announced_the_second_aborts() -> None:
    import signal
    import threading

    from schedsearch.app import stop_on_signals

    stop, said = threading.Event(), []
    before = signal.getsignal(signal.SIGUSR1)
    announced = threading.Event()

    def announce() -> None:
        said.append(threading.current_thread().name)
        announced.set()

    with stop_on_signals(stop, (signal.SIGUSR1,), announce=announce):
        signal.raise_signal(signal.SIGUSR1)
        assert stop.is_set() and announced.wait(2.0)
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGUSR1)
    # Announced once, and not by the main thread: it may be held up in native code.
    assert len(said) == 1 and said[0] != threading.main_thread().name
    assert signal.getsignal(signal.SIGUSR1) == before  # the caller's handler is back
    assert signal.set_wakeup_fd(-1) == -1  # and no wakeup fd is left behind


def test_a_signal_announces_at_once_while_the_main_thread_waits_in_native_code() -> None:
    import signal
    import subprocess
    import sys
    import threading
    import time

    from schedsearch.app import stop_on_signals

    stop, announced_at = threading.Event(), []
    with stop_on_signals(stop, (signal.SIGUSR1,), announce=lambda: announced_at.append(time.monotonic())):
        sent = time.monotonic()
        threading.Timer(0.2, signal.raise_signal, (signal.SIGUSR1,)).start()
        # The main thread waits 1.5 s in native code: Python's handler runs only after it.
        subprocess.run([sys.executable, "-c", "import time; time.sleep(1.5)"], check=True)
        assert stop.is_set()
    assert announced_at and announced_at[0] - sent < 1.0


def test_a_stop_while_the_workers_start_ends_the_run_before_a_search_is_recorded(monkeypatch) -> None:
    order: list[str] = []
    session = _session(order, monkeypatch)

    def runner(address=None, stop=None, say=None):
        stop.set()  # as a Ctrl-C while the cluster started would
        return SearchRunner(session, _Released(FakeTree(moves=6, branching=4, seed=3), order), None)

    monkeypatch.setattr(session, "runner", runner)
    with pytest.raises(KeyboardInterrupt):
        commands_run._drive(session, None, None, as_json=False)
    assert order == ["workers released"]
    assert session.search_id is None and session.store.list_searches() == []


def test_the_start_says_where_its_seconds_went_once_ready_and_nothing_when_it_fails() -> None:
    import io
    import time

    from rich.console import Console

    from schedsearch.cli.render import StartingView

    log = io.StringIO()
    now = time.monotonic()
    with StartingView(Console(file=log, force_terminal=False, color_system=None), now - 2.0) as view:
        view("checking the C compiler (gcc)")
        view("a private Ray cluster for 2 workers")
        view._steps = [("checking the C compiler (gcc)", now - 1.5), ("a private Ray cluster", now - 1.0)]
        assert view.breakdown(now) == ("[start   2.0s] ready: Python and imports 0.5 s; checking the C compiler "
                                       "(gcc) 0.5 s; a private Ray cluster 1.0 s")
        assert log.getvalue() == ""  # nothing while it starts, in a log
        view.ready()
    assert log.getvalue().startswith("[start   2.") and log.getvalue().count("\n") == 1

    failed = io.StringIO()
    with pytest.raises(RuntimeError), StartingView(Console(file=failed, force_terminal=False), now) as view:
        view("checking the C compiler (gcc)")
        raise RuntimeError("no compiler")  # the command's error line is all stderr will hold
    assert failed.getvalue() == ""

    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=200)
    with StartingView(terminal, time.monotonic()) as view:
        view("loading the workload with Exo")
        view.ready()
        from rich.live import Live

        with Live(console=terminal):  # the search's view: rich allows one live display at a time
            pass
    assert "ready: Python and imports" in screen.getvalue() and "loading the workload with Exo" in screen.getvalue()


def test_a_process_age_is_never_more_than_the_process_has_lived() -> None:
    """The command's start is the process's (``command_start``): an age read a second
    too old - psutil's, on a boot time in whole seconds - was reported as "starting"."""
    import subprocess
    import sys
    import time

    before = time.monotonic()
    out = subprocess.run([sys.executable, "-c", "from schedsearch.cli.wiring import process_age; print(process_age())"],
                         capture_output=True, text=True, check=True).stdout
    lived = time.monotonic() - before
    age = float(out)
    assert 0.0 <= age <= lived + 0.03, (age, lived)  # one clock tick of slack
