"""Vectorise a loop with the target's instructions, as one rewrite.

gcc vectorises simple loops by itself, but not a reduction it may not reassociate (matvec's
``y[i] += A[i, j] * x[j]`` over ``j``), nor a loop whose lanes must stay in registers across
an inner loop (conv1d's output vector across ``r``). ``Vectorize`` writes such loops in the
target's own instructions (``targets.Target``): the loop is divided by the number of lanes,
every operand becomes a vector (a contiguous load, or a broadcast of an element the loop
does not move), every output a register stored once, every operation one instruction.
Which loops qualify and what becomes what is the plan (``vector_plan.py``); the steps here
are Exo's own scheduling operations, so an exported schedule shows every one.

Tails: a trip count that is not a multiple of the lanes leaves a scalar remainder loop
(``tail=cut``) or, where the target has masked instructions for every operation, one
masked vector step (``tail=masked``: AVX-512 masks, AVX2 prefix loads and stores).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from schedsearch.core import DType, ExpandOptions, Rewrite, RewriteKind
from schedsearch.targets import Role, TargetName, chain, target
from schedsearch.transforms.calls import ExoCall, Instr, Memory, Stmt
from schedsearch.transforms.rules.args import ArgError, StepArgs, count, naming
from schedsearch.transforms.rules.base import ProcView, Rule
from schedsearch.transforms.vector_plan import buffers_of, plan_loop
from schedsearch.transforms.vector_steps import (
    Plan,
    binds,
    lane_loops,
    masked_tail,
    partial_sums,
    vector_groups,
    vector_statements,
)
from schedsearch.transforms.walk import fresh_name

#: Vectors of partial sums a reduction may keep: one FMA's latency spans several issues,
#: so independent accumulators keep the FMA units busy (4 cycles x 2 units on recent x86).
ACCUMULATORS = (1, 2, 4, 8)
#: Output vectors a loop with an inner loop may compute side by side (conv1d: several
#: output vectors per tap share its broadcast and overlap their FMA chains), while they fit
#: in a quarter of the registers.
VECTORS = (2, 4, 8)


class VectorTail(StrEnum):
    """What happens to iterations past the last whole vector."""

    PERFECT = "perfect"  # none: the lanes divide the trip count
    CUT = "cut"  # a scalar remainder loop
    MASKED = "masked"  # one masked vector step


class VectorMode(StrEnum):
    MAP = "map"  # each iteration writes its own outputs
    REDUCE = "reduce"  # every iteration adds into one output


# ignore[misc] below: mypy takes args.count()/loop()/naming(), which are dataclasses.field()
# without a default, for defaults
@dataclass(frozen=True, slots=True)
class VectorizeArgs(StepArgs):
    """A vectorized loop: the target, the width, the tail, and the plan (``Plan.args``)."""

    isa: TargetName
    lanes: int = count()
    trip: int = count()
    tail: VectorTail  # type: ignore[misc]
    names: str = naming()  # the loops the step creates (and a reduction's buffers)
    mode: VectorMode  # type: ignore[misc]
    dtype: DType  # type: ignore[misc]
    binds: str  # type: ignore[misc]  # the plan: binds, staged windows, body shape, instructions, folds
    stages: str  # type: ignore[misc]
    body: str  # type: ignore[misc]
    ops: str  # type: ignore[misc]
    folds: str | None = None
    accs: int | None = count(default=None)  # vectors of partial sums (a reduction)
    vecs: int | None = count(default=None)  # output vectors side by side (a loop with an inner loop)

    def check(self) -> None:
        try:
            plan = self.plan()
        except (ValueError, IndexError) as exc:
            raise ArgError(f"binds, stages, ops and folds do not make a vectorize plan: {exc}") from None
        ops = target(self.isa).vector(plan.dtype)
        if ops is None or target(self.isa).memory is None:
            raise ArgError(f"isa {self.isa.value} has no {self.dtype.value} vector instructions")
        if len(self.names.split()) < 4:
            raise ArgError("names must be at least four names separated by spaces")

    def plan(self) -> Plan:
        """The plan these arguments carry."""
        return Plan.from_args(
            lambda name, default=None: getattr(self, name) if getattr(self, name) is not None else default
        )


class Vectorize(Rule):
    """Turn a loop into vector instructions of the search's target.

    ``vectorize i #0 isa=avx512 mode=map lanes=16 tail=perfect ...`` on conv1d::

        for i in seq(0, 64):                      for io in seq(0, 4):
            y[i] = 0.0                                y_vec: f32[16] @ AVX512
            for r in seq(0, 5):             ->        (mm512_setzero_ps y_vec)
                y[i] += w[r] * x[i + r]               for r in seq(0, 5):
                                                          mm512_set1_ps(w_vec, w[r:r + 1])
                                                          mm512_loadu_ps(x_vec, x[r + 16 * io:...])
                                                          mm512_fmadd_ps(w_vec, x_vec, y_vec)
                                                      mm512_storeu_ps(y[16 * io:16 * io + 16], y_vec)

    ``vectorize j #0 isa=avx2 mode=reduce accs=2 lanes=8 ...`` on matvec::

        for i in seq(0, 64):                      for i in seq(0, 64):
            for j in seq(0, 64):                      y_acc: f32[2, 8] @ AVX2
                y[i] += A[i, j] * x[j]      ->        (mm256_setzero_ps both accumulators)
                                                      for jo in seq(0, 4):
                                                          (load A[i, 16*jo:...], x[16*jo:...])
                                                          mm256_fmadd_ps(y_acc[0, 0:8], A_vec, x_vec)
                                                          (load the next 8 of each)
                                                          mm256_fmadd_ps(y_acc[1, 0:8], A_vec, x_vec)
                                                      y_acc_sum = y[i]
                                                      (avx2_reduce_add_wide_ps: y_acc_part = y_acc[0] + y_acc[1])
                                                      avx2_assoc_reduce_add_ps(y_acc_part, y_acc_sum)
                                                      y[i] = y_acc_sum
    """

    kind = RewriteKind.VECTORIZE
    records = (VectorizeArgs,)

    def propose(self, view: ProcView, options: ExpandOptions) -> list[Rewrite]:
        t = target(options.target)
        if not t.is_vector:
            return []
        out = []
        buffers = buffers_of(view.proc)
        for info in view.loops:
            if info.trip is None or info.lo != 0:
                continue
            # outer, lanes, masked tail's outer and lanes; groups of vectors and their lanes
            o, i, mo, mi, k, gl = _fresh(set(view.names), *(info.name + s for s in "oitmkl"))
            used = set(view.names) | {o, i, mo, mi, k, gl}
            # the widest target of the chain whose instructions cover the body: f64 on an
            # AVX-512 CPU is AVX2's (Exo 1.0.0 has no AVX-512 f64 instructions)
            home, plan = next(
                (
                    (c, pl)
                    for c in chain(t)
                    if (pl := plan_loop(view.proc, info.pattern, c, False, used, buffers)) is not None
                ),
                (t, None),
            )
            if plan is None:
                continue
            lanes = home.lanes(plan.dtype)

            # this loop's values bound as defaults: the helpers are only called in this iteration
            def make(
                tail: str,
                p: Plan,
                names: tuple[str, ...],
                *,
                isa: str = home.name,
                lanes: int = lanes,
                trip: int = info.trip,
                pattern: str = info.pattern,
                **extra: int,
            ) -> Rewrite:
                args: dict[str, Any] = dict(
                    isa=isa, lanes=lanes, trip=trip, tail=tail, names=" ".join(names), **extra, **p.args()
                )
                return self.step(pattern, VectorizeArgs(**args))

            def tail_of(width: int, trip: int = info.trip) -> str | None:
                if trip < width or (trip % width and not options.allow_tails):
                    return None
                return "cut" if trip % width else "perfect"

            if plan.mode == "reduce":
                acc = plan.stages[0][1]
                sums = _fresh(used | _plan_names(plan), *(f"{acc}_{s}" for s in ("sum", "lanes", "part")))
                for accs in ACCUMULATORS:
                    if tail := tail_of(lanes * accs):
                        out.append(make(tail, plan, (o, i, k, gl, *sums), accs=accs))
                continue
            if tail := tail_of(lanes):
                out.append(make(tail, plan, (o, i, mo, mi)))
                masked = plan_loop(view.proc, info.pattern, home, True, used, buffers) if tail == "cut" else None
                if masked is not None:
                    out.append(make("masked", masked, (o, i, mo, mi)))
            if "(" in plan.body:  # an inner loop: outputs stay in registers across it
                for vecs in VECTORS:
                    if vecs <= home.registers // 4 and (tail := tail_of(lanes * vecs)):
                        out.append(make(tail, plan, (o, i, k, gl), vecs=vecs))
        return out

    def lower(self, target_loop: str, args: VectorizeArgs) -> list[ExoCall]:  # type: ignore[override]  # each rule lowers its own record
        plan = args.plan()
        t = target(args.isa)
        ops = t.vector(plan.dtype)
        assert ops is not None and t.memory is not None and t.module is not None  # VectorizeArgs.check
        lanes, tail = args.lanes, args.tail.value
        accs, vecs = args.accs or 1, args.vecs or 1
        vector = Memory(t.memory, t.memory_module)
        names = args.names.split()
        loop, vo, vi = target_loop, names[0], names[1]
        calls = binds(loop, plan)
        if plan.mode == "map":
            calls += [ExoCall("stage_mem", (Stmt(loop, ("body",)), window, name)) for window, name in plan.stages]
        width = lanes * accs * vecs
        if tail == "perfect":
            calls.append(ExoCall("divide_loop", (loop, width, (vo, vi)), (("perfect", True),)))
        else:
            # simplify folds the "n / f * f" a cut leaves in indices (see rules.loops.Split)
            calls += [ExoCall("divide_loop", (loop, width, (vo, vi)), (("tail", "cut"),)), ExoCall("simplify")]
        roles = plan.roles
        groups = 0  # loops of several vectors side by side, unrolled at the end
        if plan.mode == "reduce":
            calls += partial_sums(plan, names, lanes, accs, vector, ops)
            calls += lane_loops(plan, names[3], 1, lanes, vector, shared=1)
            if accs > 1 and Role.REDUCE in roles and ops.has(Role.ACC):
                roles += (Role.ACC,)  # the accumulators are added lane by lane first
            groups = 3
        elif vecs > 1:
            calls += lane_loops(plan, vi, 0, lanes * vecs, vector)
            calls += vector_groups(plan, vi, (names[2], names[3]), lanes)
            groups = vector_statements(plan)
        else:
            if tail == "masked":
                calls += masked_tail(f"{vi} #1", lanes, names[2], names[3])
            calls += lane_loops(plan, vi, 0, lanes, vector)
            if tail == "masked":
                calls += lane_loops(plan, names[3], 0, lanes, vector, guarded=True)
        # every lane loop is one of the loops this step named: only they are tried
        instrs = tuple(Instr(str(ops.get(r)), t.module) for r in dict.fromkeys(roles))
        calls.append(ExoCall("replace_in", (tuple(names), instrs)))
        # straight-line code: the vectors of a group (a reduction's accumulators) one after another
        calls += [ExoCall("unroll_loop", (f"{names[2]} #{n}",)) for n in reversed(range(groups))]
        return calls + [ExoCall("simplify")]


def _fresh(used: set[str], *bases: str) -> list[str]:
    out: list[str] = []
    for base in bases:
        out.append(fresh_name(used | set(out), base))
    return out


def _plan_names(plan: Plan) -> set[str]:
    return {b.name for b in plan.binds} | {name for _, name in plan.stages}
