"""Every search setting is defined once (``app.settings``): the CLI's options, tune()'s
keywords and the stored config are derived from that one definition."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from click.testing import CliRunner

from schedsearch import api
from schedsearch.app.settings import SearchSettings, checked, default, knobs
from schedsearch.cli import commands_run
from schedsearch.cli.main import cli
from schedsearch.core import CostModelMode, FloatMode, StrategyKind, TimingMode
from schedsearch.errors import SettingError

#: A value other than the default for every setting, as tune() takes it, and as `run` is
#: told it. A new setting must be added here (``test_every_setting_is_exercised``).
OTHER: dict[str, tuple[Any, list[str]]] = {
    "budget": (30.0, ["--budget", "30"]),
    "max_candidates": (7, ["--max-candidates", "7"]),
    "early_stop": (False, ["--no-early-stop"]),
    "workers": (1, ["--workers", "1"]),
    "max_depth": (5, ["--max-depth", "5"]),
    "strategy": (StrategyKind.BEAM, ["--strategy", "beam"]),
    "seed": (9, ["--seed", "9"]),
    "cc": ("cc", ["--cc", "cc"]),
    "cflags": ("-O2", ["--cflags", "-O2"]),
    "threads": (2, ["--threads", "2"]),
    "target": ("scalar", ["--target", "scalar"]),
    "cost_model": (CostModelMode.OFF, ["--cost-model", "off"]),
    "float_mode": (FloatMode.RELAXED, ["--float", "relaxed"]),
    "timing": (TimingMode.QUIET, ["--timing", "quiet"]),
    "remeasure": (True, ["--remeasure"]),
    "warm_start": (False, ["--no-warm-start"]),
    "defer_costly": (False, ["--no-defer-costly"]),
    "compiler_notes": (False, ["--no-compiler-notes"]),
}


def test_every_setting_is_exercised() -> None:
    assert list(OTHER) == list(knobs())
    for name, (value, _) in OTHER.items():
        assert value != default(name), name


def _run_settings(monkeypatch, tmp_path, args: list[str]) -> SearchSettings:
    seen: dict[str, SearchSettings] = {}

    def start(spec, settings, **kw):
        seen["settings"] = settings
        raise SettingError("stop here")

    monkeypatch.setattr(commands_run, "start_search", start)
    workload = tmp_path / "k.py"
    workload.write_text("")
    result = CliRunner().invoke(cli, ["run", str(workload), *args])
    assert "stop here" in result.output, result.output
    return seen["settings"]


def _tune_settings(monkeypatch, **kwargs: Any) -> SearchSettings:
    seen: dict[str, SearchSettings] = {}

    def start(spec, settings, **kw):
        seen["settings"] = settings
        raise SettingError("stop here")

    monkeypatch.setattr(api, "start_search", start)
    with pytest.raises(SettingError, match="stop here"):
        api.tune("k.py", **kwargs)
    return seen["settings"]


def test_run_and_tune_give_the_same_settings_for_every_option(monkeypatch, tmp_path) -> None:
    values = {name: value for name, (value, _) in OTHER.items()}
    args = [a for _, flags in OTHER.values() for a in flags]
    from_cli = _run_settings(monkeypatch, tmp_path, args)
    from_python = _tune_settings(monkeypatch, **values)
    assert from_cli == from_python == SearchSettings(**values)


@pytest.mark.parametrize("name", list(OTHER))
def test_each_option_alone_changes_its_setting_and_nothing_else(monkeypatch, tmp_path, name) -> None:
    value, args = OTHER[name]
    got = _run_settings(monkeypatch, tmp_path, args)
    assert got == dataclasses.replace(SearchSettings(), **{name: value})


def test_the_defaults_are_the_records_on_both_fronts(monkeypatch, tmp_path) -> None:
    assert _run_settings(monkeypatch, tmp_path, []) == SearchSettings()
    # tune() runs in the caller's process unless told otherwise: its one default of its own
    assert _tune_settings(monkeypatch) == SearchSettings(workers=0)
    chosen = SearchSettings(budget=5, seed=3)
    assert _tune_settings(monkeypatch, settings=chosen, seed=4) == SearchSettings(budget=5, seed=4)


def test_choice_names_become_enums_and_the_config_carries_every_setting() -> None:
    s = SearchSettings(strategy="beam", cost_model="off", float_mode="relaxed", timing="quiet", target="scalar")
    assert s.strategy is StrategyKind.BEAM and s.float_mode is FloatMode.RELAXED
    c = dataclasses.replace(s, budget=30, max_candidates=7, early_stop=50, workers=1, seed=9, cflags="-O2").config()
    assert (c.max_seconds, c.max_candidates, c.early_stop, c.auto_stop, c.workers) == (30.0, 7, 50, True, 1)
    assert (c.strategy, c.cost_model, c.seed, c.expand.target) == (StrategyKind.BEAM, CostModelMode.OFF, 9, "scalar")
    assert c.bench.cflags[:1] == ("-O2",) and c.bench.float_mode is FloatMode.RELAXED
    assert c.bench.timing is TimingMode.QUIET
    assert not SearchSettings(early_stop=False, target="scalar").config().auto_stop


def test_resume_offers_exactly_the_resumable_settings() -> None:
    resumable = [n for n, (k, _) in knobs().items() if k.resumable]
    assert resumable == ["budget", "max_candidates", "early_stop", "workers", "remeasure"]
    result = CliRunner().invoke(cli, ["resume", "--help"])
    for name in knobs():
        flag = "--" + name.replace("_", "-")
        assert (flag in result.output) == (name in resumable or name in ("cc", "cflags")), name


def test_a_resume_option_left_out_is_none(monkeypatch) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(commands_run, "resume_search", lambda *a, **kw: seen.update(kw) or 1 / 0)
    CliRunner().invoke(cli, ["resume", "3", "--budget", "10"])
    assert seen["budget"] == 10.0 and seen.get("max_candidates") is None
    assert all(seen.get(n) in (None, False) for n in ("workers", "early_stop", "remeasure"))
    seen.clear()
    CliRunner().invoke(cli, ["resume", "3", "--no-early-stop"])
    assert seen["early_stop"] is False


@pytest.mark.parametrize("args, message", [
    (["--budget", "0"], "Invalid value for '--budget'"),
    (["--budget", "nan"], "must be a number, not nan"),
    (["--strategy", "greedy"], "Invalid value for '--strategy'"),
    (["--early-stop", "0"], "Invalid value for '--early-stop'"),
])
def test_the_cli_refuses_what_the_record_refuses(tmp_path, args, message) -> None:
    workload = tmp_path / "k.py"
    workload.write_text("")
    result = CliRunner().invoke(cli, ["run", str(workload), *args])
    assert result.exit_code == 2 and message in result.output
    name = args[0][2:].replace("-", "_")
    with pytest.raises(SettingError, match=f"^{name} must be"):
        checked(name, float(args[1]) if name == "budget" else int(args[1]) if name == "early_stop" else args[1])


def test_the_command_start_reaches_the_command_as_a_value(monkeypatch, tmp_path) -> None:
    """``main`` hands the command its start (the click context's object); no module keeps it."""
    from schedsearch.cli import main as main_mod
    from schedsearch.cli.wiring import command_started

    seen: list[float] = []
    monkeypatch.setattr(main_mod, "command_start", lambda from_process: 1234.5)
    monkeypatch.setattr(commands_run, "run_command", lambda *a, **kw: seen.append(command_started()))
    workload = tmp_path / "k.py"
    workload.write_text("")
    with pytest.raises(SystemExit) as stop:
        main_mod.main(["run", str(workload)])
    assert stop.value.code == 0 and seen == [1234.5]
    assert command_started() != 1234.5  # outside a command: now
