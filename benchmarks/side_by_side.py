"""The near-best kernels of several searches, re-measured side by side: their speeds with the
machine's drift taken out.

Why: each search measures a kernel once, at one moment, and on a shared machine the same C
can measure very differently from one moment to the next. On a 2-vCPU KVM guest (AMD EPYC,
Zen 3) the same 6x16 register tile of SGEMM 512 measured 3.9-8.5 ms in 18 searches of one
afternoon, while the samples of each single measurement lay within a few percent of each
other; separate driver processes timing that C on the idle machine measured 4.1-5.9 ms in
clusters lasting seconds. A benchmark that judges "found a kernel within 95% of the best" by
such numbers is judging the moment more than the search. In one driver process with
interleaved rounds (``schedsearch.evaluate.remeasure``) every kernel sees the same moments,
so their ratios are what the searches' own numbers cannot give.

``side_by_side`` takes the kept databases of a benchmark's runs of one kernel and the pooled
search-time speeds (fingerprint -> seconds), re-measures the fastest ``most`` kernels within
``within`` of the fastest, and any others within it that it is given (``also``: the kernels
each run held as its best on the way), ``rounds`` times, each time in a fresh driver process, and gives
each of them the median of its ratios to the pooled fastest one (the anchor), times the
anchor's pooled time: the same scale as the pooled speeds, with the ratios measured side by
side.

Why ``also``: where hundreds of kernels lie within the noise of one another (SGEMM 512 and
the multi-channel conv1d on Zen 4: over a thousand distinct kernels within 1.2x and 1.1x
of the fastest pooled time), the fastest ``most`` by pooled time are the luckiest
measurements of a crowd of equals. Judged alone, they decide which run "reached" the best:
a run that measured its register tile unluckily never got there, though side by side that
tile ran as fast as the kernels that did. ``search_efficiency.py`` reports with these speeds; to report again on the databases of
an earlier run, give it that run's ``--keep DIR --resume``.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from schedsearch.core import BenchConfig, Candidate, CandidateRecord, Status, Workload
from schedsearch.evaluate import remeasure
from schedsearch.store import open_store

#: Kernels this many times the fastest pooled time or faster are re-measured ...
WITHIN = 1.5
#: ... at most this many of them, the fastest first ...
MOST = 24
#: ... this many times, each in its own driver process.
ROUNDS = 5


@dataclass(frozen=True)
class SideBySide:
    """What ``side_by_side`` measured."""

    seconds: dict[str, float]  # fingerprint -> seconds on the anchor's pooled scale
    anchor: str  # the pooled fastest kernel's fingerprint
    kernels: int  # re-measured
    rounds: int  # driver processes that timed them all
    ratio_spread: float | None  # median over kernels of (max - min) / median of its ratios to the anchor
    measured: dict[str, float]  # fingerprint -> the median over rounds of its own seconds (this machine, now)


@dataclass(frozen=True)
class _Kept:
    workload: Workload
    bench: BenchConfig
    root: Candidate
    found: dict[str, Candidate]


def _candidate(record: CandidateRecord) -> Candidate:
    return Candidate(schedule=record.schedule, c_source=record.c_source, fingerprint=record.fingerprint,
                     proc_text=record.proc_text, depth=record.depth)


def _kept(dbs: Sequence[Path], wanted: Sequence[str]) -> _Kept | None:
    """The workload, bench settings, root and wanted candidates the databases hold (the first
    search's workload and settings; every search of one benchmark kernel has the same)."""
    found: dict[str, Candidate] = {}
    first: tuple[Workload, BenchConfig, Candidate] | None = None
    want = set(wanted)
    for db in dbs:
        store = open_store(str(db), create=False, read_only=True)
        try:
            for search in store.list_searches():
                records = store.candidates(search.id)
                root = next((r for r in records if r.parent_id is None), None)
                if first is None and root is not None:
                    first = (search.workload, search.config.bench, _candidate(root))
                for r in records:
                    if r.fingerprint in want and r.fingerprint not in found and r.c_source:
                        found[r.fingerprint] = _candidate(r)
        finally:
            store.close()
    if first is None:
        return None
    return _Kept(first[0], first[1], first[2], found)


def side_by_side(dbs: Sequence[Path], speeds: Mapping[str, float], cache_dir: Path, *, within: float = WITHIN,
                 most: int = MOST, rounds: int = ROUNDS, also: Iterable[str] = ()) -> SideBySide | None:
    """The near-best kernels of ``speeds`` (pooled search-time seconds by fingerprint), and
    those of ``also`` within ``within`` of the fastest, re-measured side by side (see the module's
    docstring); None when none could be."""
    if not speeds:
        return None
    best = min(speeds.values())
    wanted = sorted((fp for fp, t in speeds.items() if t <= within * best), key=lambda fp: speeds[fp])[:most]
    extra = {fp for fp in also if fp in speeds and speeds[fp] <= within * best} - set(wanted)
    wanted += sorted(extra, key=lambda fp: (speeds[fp], fp))
    kept = _kept(dbs, wanted)
    if kept is None or wanted[0] not in kept.found:
        return None
    anchor = wanted[0]
    candidates = [kept.found[fp] for fp in wanted if fp in kept.found]
    ratios: dict[str, list[float]] = {c.fingerprint: [] for c in candidates}
    own: dict[str, list[float]] = {c.fingerprint: [] for c in candidates}
    done = 0
    for _ in range(rounds):
        measured = remeasure(kept.workload, kept.root, candidates, kept.bench, cache_dir)
        times = {m.fingerprint: m.timing.median for m in measured
                 if m.status is Status.OK and m.timing is not None and m.timing.median > 0}
        if anchor not in times:
            continue
        done += 1
        for fp, seconds in times.items():
            ratios[fp].append(seconds / times[anchor])
            own[fp].append(seconds)
    if not done:
        return None
    spreads = [(max(r) - min(r)) / statistics.median(r) for fp, r in ratios.items() if len(r) > 1 and fp != anchor]
    return SideBySide({fp: statistics.median(r) * speeds[anchor] for fp, r in ratios.items() if r}, anchor,
                      len(candidates), done, statistics.median(spreads) if spreads else None,
                      {fp: statistics.median(t) for fp, t in own.items() if t})
