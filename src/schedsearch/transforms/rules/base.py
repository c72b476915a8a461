"""What every rule is, and what the proposers know about a proc.

A rule implements one rewrite kind (and the older kinds it still replays, its
``aliases``): ``propose(view, options)`` builds plausible steps from typed argument records,
``lower(target, args)`` turns one step's record into Exo calls. Proposals are only
*plausible*; legality is decided by Exo when the calls run.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from exo.API_cursors import AllocCursor

from schedsearch.core import ArgValue, ExpandOptions, Rewrite, RewriteKind
from schedsearch.transforms.calls import ExoCall
from schedsearch.transforms.rules.args import StepArgs, encode, field_names
from schedsearch.transforms.walk import LoopInfo, all_names, fresh_name, loops, statements


@dataclass(frozen=True, slots=True)
class ProcView:
    """What the proposers need to know about a proc, computed once per proposal round."""

    proc: Any  # an Exo Procedure (Exo has no type information)
    loops: tuple[LoopInfo, ...]
    names: frozenset[str]
    arg_tensors: frozenset[str]
    #: Element type of every tensor a nest may compute with: the arguments and the tensors
    #: the proc allocates (a stage's intermediate, such as ``tmp`` between two products).
    tensor_types: Mapping[str, Any]  # Exo types

    @staticmethod
    def of(proc) -> ProcView:
        """The view of ``proc``."""
        tensors = frozenset(a.name() for a in proc.args() if a.is_tensor())
        types = {a.name(): a.type() for a in proc.args() if a.is_tensor()}
        for stmt, _ in statements(proc):
            if isinstance(stmt, AllocCursor) and stmt.is_tensor():
                types.setdefault(stmt.name(), stmt.type())
        return ProcView(proc, tuple(loops(proc)), frozenset(all_names(proc)), tensors, types)

    def loop(self, pattern: str) -> LoopInfo:
        """The loop at ``pattern``."""
        return next(info for info in self.loops if info.pattern == pattern)

    def fresh(self, *bases: str) -> list[str]:
        """One unused name per base, all different (``io``, ``io_1``, ...)."""
        used = set(self.names)
        out = []
        for base in bases:
            name = fresh_name(used, base)
            used.add(name)
            out.append(name)
        return out


class Rule:
    """One rewrite kind: its argument record(s), its proposals and its lowering."""

    kind: ClassVar[RewriteKind]
    #: Kinds of older schedule files this rule replays.
    aliases: ClassVar[tuple[RewriteKind, ...]] = ()
    #: Every argument record the rule's steps may have (one, unless forms differ).
    records: ClassVar[tuple[type[StepArgs], ...]]
    #: Its steps cost Exo far more than most (a second or more, not tens of milliseconds):
    #: an expansion shared out with leading shards gives each of them one (``expand.dealt``).
    heavy: ClassVar[bool] = False
    #: Exo checks its steps' legality over the whole nest: on a large parent (a register
    #: tile, an unrolled nest) each costs 0.3-2 s, against tens of milliseconds for a split.
    #: Such a parent's expansion leaves them for a second part, tried only when the search
    #: asks for the parent again (``core.ExpansionPart``, ``expand.in_part``).
    deferred: ClassVar[bool] = False

    def record_for(self, kind: RewriteKind, raw: Mapping[str, ArgValue]) -> type[StepArgs]:
        """The record a step of ``kind`` with these raw arguments decodes into."""
        return self.records[0]

    def step(self, target: str, args: StepArgs) -> Rewrite:
        """The wire form of a step of this rule's kind."""
        return Rewrite(self.kind, target, encode(args))

    def naming_args(self) -> frozenset[str]:
        """Arguments that only name created loops and buffers, in any of the records."""
        return frozenset().union(*(field_names(r, "naming") for r in self.records))

    def sized_args(self) -> frozenset[str]:
        """Arguments that follow from the problem's sizes, in any of the records: the same
        step at other sizes may need other values (``transforms.expand.Expander.adapt``)."""
        return frozenset().union(*(field_names(r, "sized") for r in self.records))

    def shape_blind_args(self) -> frozenset[str]:
        """Arguments left out of a proposal's shape: names and loop patterns."""
        return self.naming_args() | frozenset().union(*(field_names(r, "loop") for r in self.records))

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        """Plausible steps at ``view``'s proc, in a deterministic order."""
        raise NotImplementedError

    def lower(self, target: str, args: StepArgs) -> list[ExoCall]:
        """The Exo calls that apply a step of this rule."""
        raise NotImplementedError
