"""Whether a node's other work disturbs the kernels it times: the evidence behind ``auto`` timing.

Quiet timing (``evaluate.quiet``) pauses a node's builds and expansions for every timing. On
a 2-vCPU guest that leaves one vCPU idle for about a third of a search, and whether the pause
buys anything depends on the host: on one AMD EPYC Zen 4 guest a Python loop on the other
vCPU made a kernel 1.47x slower; on a later guest of the same type 1.03-1.09x. Nothing in
the guest's topology tells the two apart, so ``TimingMode.AUTO`` asks the node's own
timings.

The evidence of one timing (``Evidence``) is its *noise*: the interquartile range of its
samples over their median. Work beside the kernels comes and goes within a timing, hits
some rounds and not others, and widens that spread; a kind's typical noise is the
geometric mean of its timings'. Each node keeps the latest ``WINDOW`` timings of each kind,
quiet and shared. It starts quiet and alternates until it holds ``MIN_EVIDENCE`` of each;
from then on its timings are shared while the shared ones are at most ``NOISE_FACTOR``
times as noisy as the quiet ones, and quiet otherwise. Every ``PROBE_EVERY``-th timing is of
the other kind, so that the verdict follows the host when its neighbours change.

Under auto timing the finalists, whose side-by-side timing decides what a search reports,
are timed quietly whatever the evidence says; so is a kernel with parallel loops.
"""

from __future__ import annotations

import math
import statistics
import threading
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Timings of each kind (quiet, shared) a node judges by: the latest ones, so that the
#: verdict follows the host. One timing's spread is a rough number (3 to 7 rounds): on the
#: Zen 4 guest below, the ratio of two kinds' typical spreads over 12 timings each ranged
#: from 1.1 to 3.0 (10th to 90th percentile, resampled), over 24 from 1.3 to 2.6.
WINDOW = 24
#: Timings of each kind needed before the node judges at all (it alternates until then).
MIN_EVIDENCE = 8
#: One timing in this many is of the kind the verdict does not prefer: fresh evidence.
PROBE_EVERY = 6
#: Shared timings may be at most this many times as noisy as quiet ones (typical spreads:
#: geometric means). On a 2-vCPU Zen 4 guest where the work beside a timing barely mattered
#: they were 1.5 to 3 times as noisy over a search's windows (typically 1.8: 3.4% against
#: 1.9%); on the guest of the same type where it mattered, the same C timed in two searches
#: was a median 90% apart beside other work and 3% apart quietly.
NOISE_FACTOR = 5.0
#: Fewer rounds than this say nothing about a timing's spread.
MIN_ROUNDS = 3
#: A spread below this counts as this (``_typical``).
NOISE_FLOOR = 1e-3


@dataclass(frozen=True, slots=True)
class Evidence:
    """What one timing says about the node: how widely its samples spread."""

    quiet: bool
    noise: float


@dataclass(frozen=True, slots=True)
class Verdict:
    """A node's judgement: how much noisier its shared timings are than its quiet ones
    (None until it has evidence), and whether it times quietly for that."""

    noise_factor: float | None
    disturbs: bool | None  # None: not judged yet


def evidence_of(samples: Sequence[float], quiet: bool = True) -> Evidence | None:
    """The evidence of one timing from its samples (seconds a call, one per round); None
    when it has too few rounds."""
    if len(samples) < MIN_ROUNDS or min(samples) <= 0:
        return None
    q1, median, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return Evidence(quiet, (q3 - q1) / median)


class Interference:
    """One node's evidence and the kind of its next timing (``quiet_next``)."""

    def __init__(self) -> None:
        self._quiet: deque[Evidence] = deque(maxlen=WINDOW)
        self._shared: deque[Evidence] = deque(maxlen=WINDOW)
        self._asked = 0
        self._lock = threading.Lock()

    def record(self, evidence: Evidence | None) -> None:
        """Keep what one timing showed (None: it showed nothing)."""
        if evidence is None:
            return
        with self._lock:
            (self._quiet if evidence.quiet else self._shared).append(evidence)

    def quiet_next(self) -> bool:
        """Whether the next timing should pause the node's other work."""
        with self._lock:
            self._asked += 1
            if len(self._quiet) < MIN_EVIDENCE or len(self._shared) < MIN_EVIDENCE:
                # Quiet first, then alternate: a shared timing is only tried beside a quiet one.
                return len(self._quiet) <= len(self._shared)
            disturbs = bool(self._verdict().disturbs)
            probe = self._asked % PROBE_EVERY == 0
            return disturbs != probe

    def verdict(self) -> Verdict:
        """The node's judgement on its latest evidence."""
        with self._lock:
            return self._verdict()

    def _verdict(self) -> Verdict:
        if len(self._quiet) < MIN_EVIDENCE or len(self._shared) < MIN_EVIDENCE:
            return Verdict(None, None)
        factor = _typical(e.noise for e in self._shared) / _typical(e.noise for e in self._quiet)
        return Verdict(factor, factor > NOISE_FACTOR)


def _typical(noises: Iterable[float]) -> float:
    """The typical spread of some timings: their geometric mean, each floored at 0.1% (two
    nearly noiseless kinds of timing are alike whatever the ratio of their spreads)."""
    return math.exp(statistics.fmean(math.log(max(n, NOISE_FLOOR)) for n in noises))


_nodes: dict[Path, Interference] = {}
_nodes_lock = threading.Lock()


def of_node(cache_dir: Path) -> Interference:
    """This process's evidence for the node whose cache directory is ``cache_dir`` (one
    benchmark runner per node times its kernels, so its process holds the node's evidence)."""
    key = Path(cache_dir).resolve()
    with _nodes_lock:
        return _nodes.setdefault(key, Interference())
