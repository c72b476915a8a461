"""Measurement reuse: an earlier search's measurement of the same C, taken instead of measuring.

A candidate is identified by its C (the fingerprint). When an earlier search — any
workload, any size — measured that same C on the same machine fingerprint, with the same
compiler command, flags and target, the same float tolerance, and verified it against the
same unscheduled C (``core.ReuseScope``), the search records that measurement for the
candidate, marked with the source search and candidate, instead of measuring it again.
``ok`` measurements are reused, and so are the verdicts the same C and flags always earn
again (``build_error``, ``wrong_result``; ``core.Status.reusable``); a timeout or a crash
at run time may have been the machine's load, so those are measured again.

The root is never reused: it is the baseline every speedup of this search is relative to,
reused times included. Finalists are re-measured side by side whatever their origin.
``SearchConfig.remeasure`` turns reuse off.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from schedsearch.core import (
    Candidate,
    CandidateRecord,
    EventKind,
    Executor,
    Measurement,
    ReuseScope,
    SearchConfig,
    Store,
)

if TYPE_CHECKING:  # the ledger reads ``origin_text`` from here
    from schedsearch.search.ledger import Ledger


def reused_measurement(source: CandidateRecord) -> Measurement:
    """``source``'s measurement, as this search records it for the same C.

    Build and run seconds are zero: reusing cost this search nothing (the source keeps
    what measuring took).
    """
    return Measurement(
        fingerprint=source.fingerprint,
        status=source.status,
        timing=source.timing,
        error=source.error,
        max_error=source.max_error,
        reused_search_id=source.search_id,
        reused_candidate_id=source.id,
        machine=source.machine,  # where it was taken, as the source row says
        node=source.node,
        built_node=source.built_node,
    )


def split(
    candidates: Sequence[Candidate], found: dict[str, CandidateRecord]
) -> tuple[list[Measurement], list[Candidate]]:
    """Reused measurements (in candidate order) and the candidates still to measure."""
    reused = [reused_measurement(found[c.fingerprint]) for c in candidates if c.fingerprint in found]
    return reused, [c for c in candidates if c.fingerprint not in found]


def reuse_message(reused: Iterable[Measurement]) -> str:
    """One line: how many measurements were reused, and from which searches."""
    by_search = Counter(m.reused_search_id for m in reused)
    total = sum(by_search.values())
    sources = ", ".join(f"{n} from search {sid}" for sid, n in sorted(by_search.items(), key=lambda kv: kv[0] or 0))
    noun = "measurement" if total == 1 else "measurements"
    return f"reused {total} {noun} of the same C on this machine, compiler, flags and target ({sources})"


def origin_text(record: CandidateRecord) -> str:
    """``reused from search 3, candidate 17`` for a reused measurement, else ``""``."""
    if record.reused_candidate_id is None:
        return ""
    return f"reused from search {record.reused_search_id}, candidate {record.reused_candidate_id}"


class EarlierSearches:
    """What earlier searches measured of one run's candidates (one instance per run)."""

    def __init__(self, config: SearchConfig, store: Store, executor: Executor, root: Candidate, ledger: Ledger) -> None:
        self.config, self.store, self.executor, self.root, self.ledger = config, store, executor, root, ledger
        self.scope: ReuseScope | None = None  # built on first use: it leaves this search out

    def lookup(self, candidates: Sequence[Candidate]) -> tuple[list[Measurement], list[Candidate]]:
        """Earlier searches' measurements of the same C, and the candidates still to measure
        (said in a ``reused`` event). Nothing is reused with ``config.remeasure``."""
        assert self.ledger.sid is not None
        if self.config.remeasure or not candidates:
            return [], list(candidates)
        if self.scope is None:
            self.scope = ReuseScope.of(
                self.config, self.executor.machine().fingerprint, self.root.fingerprint, exclude_search=self.ledger.sid
            )
        found = self.store.reusable_measurements([c.fingerprint for c in candidates], self.scope)
        reused, rest = split(candidates, found)
        if reused:
            self.ledger.emit(EventKind.REUSED, message=reuse_message(reused))
        return reused, rest
