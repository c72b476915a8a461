"""The rewrite rules: one registered rule per kind, each with a typed argument record.

``RULES`` lists them in proposal order; ``rule_for`` finds a kind's rule (older kinds
included: ``simd_kernel`` and ``micro_kernel`` steps are register tiles). ``decode`` turns
a step's wire arguments into its rule's record and says in one sentence what is wrong with
a malformed step; ``lower`` gives a step's Exo calls; ``propose_all`` every plausible step
at a proc; ``describe`` prints a step without the names it gives new loops and buffers.
"""

from __future__ import annotations

from schedsearch.core import ExpandOptions, Rewrite, RewriteKind
from schedsearch.transforms.calls import ExoCall
from schedsearch.transforms.rules.args import ArgError, StepArgs, check_pattern
from schedsearch.transforms.rules.args import decode as decode_args
from schedsearch.transforms.rules.base import ProcView, Rule
from schedsearch.transforms.rules.buffers import Pack, StageMem
from schedsearch.transforms.rules.compute_at import ComputeAt
from schedsearch.transforms.rules.loops import (
    Fuse,
    Hoist,
    Parallelize,
    Reorder,
    Simplify,
    Sink,
    Split,
    Tile,
    Unroll,
    pair_target,
)
from schedsearch.transforms.rules.normalize import Fission
from schedsearch.transforms.rules.register_tile import RegisterTile
from schedsearch.transforms.rules.vectorize import Vectorize
from schedsearch.transforms.walk import loop_work

#: Loops doing less than this share of the proc's work get no proposals: rewriting them
#: can gain at most that share (the copy-in/out loops of a staged tile, a packing copy).
COLD_SHARE = 0.01

#: One rule per kind, in proposal order.
RULES: tuple[Rule, ...] = (
    Reorder(),
    Tile(),
    RegisterTile(),
    Vectorize(),
    Hoist(),
    Sink(),
    StageMem(),
    Pack(),
    ComputeAt(),
    Unroll(),
    Split(),
    Fuse(),
    Fission(),
    Simplify(),
    Parallelize(),
)


def rule_for(kind: RewriteKind) -> Rule:
    """The rule implementing ``kind`` (or replaying it, for an older kind)."""
    for rule in RULES:
        if rule.kind is kind or kind in rule.aliases:
            return rule
    raise KeyError(f"no rule for rewrite kind {kind!r}")


def decode(step: Rewrite) -> StepArgs:
    """The typed arguments of ``step``; ``ArgError`` names what is wrong with them (or with
    its target, which must be a loop pattern)."""
    check_pattern(step.target, "the target")
    rule = rule_for(step.kind)
    raw = dict(step.args)
    if len(raw) != len(step.args):
        raise ArgError("an argument is given twice")
    return decode_args(rule.record_for(step.kind, raw), raw)


def lower(step: Rewrite) -> list[ExoCall]:
    """The Exo calls that apply ``step``; ``ArgError`` when its arguments are malformed."""
    return rule_for(step.kind).lower(step.target, decode(step))


def naming_args(kind: RewriteKind) -> frozenset[str]:
    """The arguments of ``kind`` that only name the loops and buffers a step creates."""
    return rule_for(kind).naming_args()


def describe(step: Rewrite) -> str:
    """One readable line, e.g. ``split i #0 factor=8 tail=perfect`` (names left out)."""
    return step.describe(hidden=naming_args(step.kind))


def propose_all(proc, options: ExpandOptions) -> list[Rewrite]:
    """Every plausible rewrite of ``proc``, in a deterministic order.

    Loops doing less than ``COLD_SHARE`` of the work get none. Loops that are copies of
    each other (after an unroll, or the copy-in and copy-out loops of staging) would each
    get the same proposals; only the first copy keeps them, since rewriting one copy of many
    rarely pays and the proposals would multiply per copy (one unrolled SGEMM node had 354
    proposals, 241 of them splits of copies).
    """
    view = ProcView.of(proc)
    work, total = loop_work(proc)
    cold = {p for p, w in work.items() if w is not None and total and w < COLD_SHARE * total}
    by_pattern = {info.pattern: info for info in view.loops}
    for info in view.loops:  # reorder targets name a pair of loops: key them by the outer one
        pair = pair_target(view, info) if info.only_child is not None else None
        if pair is not None:
            by_pattern.setdefault(pair, info)
    seen: set[tuple] = set()
    out: list[Rewrite] = []
    for rule in RULES:
        blind = rule.shape_blind_args()
        for rw in rule.propose(view, options):
            target_info = by_pattern.get(rw.target)
            if target_info is not None and target_info.pattern in cold:
                continue
            if target_info is not None:
                # the arguments that shape the result, not the names or loop patterns it uses
                shaping = tuple((k, v) for k, v in rw.args if k not in blind)
                key = (
                    rw.kind,
                    target_info.name,
                    target_info.trip,
                    target_info.statements,
                    target_info.depth,
                    target_info.chain,
                    shaping,
                )
                if key in seen:
                    continue
                seen.add(key)
            out.append(rw)
    return out


__all__ = [
    "COLD_SHARE",
    "RULES",
    "ArgError",
    "ProcView",
    "Rule",
    "StepArgs",
    "decode",
    "describe",
    "lower",
    "naming_args",
    "propose_all",
    "rule_for",
]
