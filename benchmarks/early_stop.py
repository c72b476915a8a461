"""Replay recorded searches through the stopping rule: where would each have stopped, what
would it have saved, and how far short of its full-budget best would it have ended?

Reads the event logs that ``schedsearch run --events FILE`` writes (``kernel_classes.py
--keep DIR --run-args=--no-early-stop`` keeps one per case) and applies
``schedsearch.stopping.StoppingRule`` - the function the search itself calls - after every
event, for the default constants and a grid around them.

    python benchmarks/early_stop.py DIR/*.events [--grid]

A search's seconds are its own (the wait for the baseline left out, as the search counts
them); "saved" is the share of the search's seconds after the stop; "short" is how much
slower the best found by the stop is than the best of the whole run (search-time medians).
"""

from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

from schedsearch.stopping import DEFAULT_RULE, StoppingRule


@dataclass(frozen=True)
class Point:
    """One event of a recorded search: its seconds of search, measured candidates, candidates
    since the last real gain, and the best time so far."""

    seconds: float
    measured: int
    since_best: int
    best: float | None


def trace(path: Path) -> list[Point]:
    """The points of one event log (seconds counted from the baseline's arrival)."""
    points: list[Point] = []
    baseline_at = 0.0
    best = None
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == "baseline":
            baseline_at = event["elapsed"]
        if event["kind"] in ("finalists", "finished", "stopping"):
            break
        c = event["counters"]
        record = event.get("record") or {}
        if event["kind"] == "new_best" and record.get("seconds"):
            best = record["seconds"] if best is None else min(best, record["seconds"])
        points.append(Point(max(0.0, event["elapsed"] - baseline_at), c["evaluated"] - c.get("reused", 0),
                            c["since_best"], best))
    return points


@dataclass(frozen=True)
class Outcome:
    stopped_at: float | None  # seconds of search, None: the rule never held
    saved: float  # share of the run's seconds after the stop
    short: float  # best at the stop / best of the run - 1


def replay(points: list[Point], rule: StoppingRule) -> Outcome:
    """Where ``rule`` stops the recorded search ``points``."""
    gain = (0.0, 0)
    since_before = 0
    final = next((p.best for p in reversed(points) if p.best is not None), None)
    end = points[-1].seconds if points else 0.0
    for p in points:
        if p.since_best < since_before or p.since_best == 0:
            gain = (p.seconds, p.measured)
        since_before = p.since_best
        if p.best is not None and rule.should_stop(gain[0], gain[1], p.seconds, p.since_best):
            short = p.best / final - 1 if final else 0.0
            return Outcome(p.seconds, 1 - p.seconds / end if end else 0.0, short)
    return Outcome(None, 0.0, 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("events", nargs="+", type=Path)
    parser.add_argument("--grid", action="store_true", help="also try constants around the default")
    opts = parser.parse_args()
    traces = {p.stem: trace(p) for p in opts.events}
    rules = [DEFAULT_RULE]
    if opts.grid:
        rules += [StoppingRule(pa, mc, ms) for pa, mc, ms in itertools.product((1.0, 1.5, 2.0, 3.0), (50, 100, 200),
                                                                               (30.0, 60.0, 120.0))]
    print("| rule (patience, min candidates, min s) | " + " | ".join(traces) + " | worst short | mean saved |")
    print("|---|" + "---|" * (len(traces) + 2))
    for rule in dict.fromkeys(rules):
        outs = [replay(t, rule) for t in traces.values()]
        cells = [f"{o.saved:.0%} saved, {o.short:+.1%}" if o.stopped_at is not None else "runs on" for o in outs]
        worst = max(o.short for o in outs)
        mean = sum(o.saved for o in outs) / len(outs)
        mark = " (default)" if rule == DEFAULT_RULE else ""
        print(f"| {rule.patience:g}, {rule.min_candidates}, {rule.min_seconds:g}{mark} | " + " | ".join(cells)
              + f" | {worst:+.1%} | {mean:.0%} |")


if __name__ == "__main__":
    main()
