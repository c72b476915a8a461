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

from schedsearch.core import ExpandOptions, Rewrite, RewriteKind
from schedsearch.targets import Role, target
from schedsearch.transforms.calls import ExoCall, Instr, Loop, Memory, Nest, Stmt, Within
from schedsearch.transforms.vector_plan import Plan, buffers_of, plan_loop
from schedsearch.transforms.walk import fresh_name

#: Where a constant lives before it is broadcast: on the stack, not malloc'd per iteration.
STACK = Memory("DRAM_STACK")
#: Vectors of partial sums a reduction may keep: one FMA's latency spans several issues,
#: so independent accumulators keep the FMA units busy (4 cycles x 2 units on recent x86).
ACCUMULATORS = (1, 2, 4, 8)


class Vectorize:
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

    def propose(self, view, options: ExpandOptions) -> list[Rewrite]:
        t = target(options.target)
        if not t.is_vector:
            return []
        out = []
        buffers = buffers_of(view.proc)
        for info in view.loops:
            if info.trip is None or info.lo != 0:
                continue
            # outer, lanes, masked tail's outer and lanes; a reduction's accumulators and lanes
            o, i, mo, mi, k, l = _fresh(set(view.names), *(info.name + s for s in "oitmkl"))
            used = set(view.names) | {o, i, mo, mi, k, l}
            plan = plan_loop(view.proc, info.pattern, t, False, used, buffers)
            if plan is None:
                continue
            lanes = t.lanes(plan.dtype)
            common = dict(isa=t.name.value, lanes=lanes, trip=info.trip, **plan.args())
            if plan.mode == "reduce":
                acc = plan.stages[0][1]
                sums = _fresh(used | _plan_names(plan), *(f"{acc}_{s}" for s in ("sum", "lanes", "part")))
                for accs in ACCUMULATORS:
                    if info.trip >= lanes * accs and (options.allow_tails or info.trip % (lanes * accs) == 0):
                        tail = "cut" if info.trip % (lanes * accs) else "perfect"
                        names = " ".join((o, i, k, l, *sums))
                        out.append(Rewrite.make(self.kind, info.pattern, **common, accs=accs, tail=tail, names=names))
                continue
            if info.trip < lanes or (info.trip % lanes and not options.allow_tails):
                continue
            variants = [("perfect", plan)] if info.trip % lanes == 0 else [("cut", plan)]
            if info.trip % lanes:
                masked = plan_loop(view.proc, info.pattern, t, True, used, buffers)
                variants += [("masked", masked)] if masked is not None else []
            for tail, p in variants:
                args = dict(common, **p.args(), tail=tail, names=" ".join((o, i, mo, mi)))
                out.append(Rewrite.make(self.kind, info.pattern, **args))
        return out

    def lower(self, rewrite: Rewrite) -> list[ExoCall]:
        plan = Plan.from_args(rewrite.arg)
        t = target(str(rewrite.arg("isa")))
        ops = t.vector(plan.dtype)
        if ops is None or t.memory is None or t.module is None:
            raise ValueError(f"target {t.name} has no {plan.dtype} vector instructions")
        lanes, tail = int(rewrite.arg("lanes")), str(rewrite.arg("tail"))
        accs = int(rewrite.arg("accs", 1))
        vector = Memory(t.memory, t.memory_module)
        names = str(rewrite.arg("names")).split()
        loop, vo, vi = rewrite.target, names[0], names[1]
        calls = _binds(loop, plan)
        if plan.mode == "map":
            calls += [ExoCall("stage_mem", (Stmt(loop, ("body",)), window, name)) for window, name in plan.stages]
        width = lanes * accs
        if tail == "perfect":
            calls.append(ExoCall("divide_loop", (loop, width, (vo, vi)), (("perfect", True),)))
        else:
            # simplify folds the "n / f * f" a cut leaves in indices (see rewrites.Split)
            calls += [ExoCall("divide_loop", (loop, width, (vo, vi)), (("tail", "cut"),)), ExoCall("simplify")]
        if plan.mode == "reduce":
            calls += _partial_sums(plan, names, lanes, accs, vector, ops)
            calls += _lane_loop(plan, names[3], 1, lanes, vector, guarded=False, shared=1)
            roles = plan.roles + ((Role.ACC,) if accs > 1 and Role.REDUCE in plan.roles and ops.has(Role.ACC) else ())
            calls.append(ExoCall("replace_all", (tuple(Instr(str(ops.get(r)), t.module) for r in dict.fromkeys(roles)),)))
            # straight-line code: one independent chain of FMAs per accumulator
            return calls + [ExoCall("unroll_loop", (f"{names[2]} #{n}",)) for n in (2, 1, 0)] + [ExoCall("simplify")]
        else:
            if tail == "masked":
                calls += _masked_tail(f"{vi} #1", lanes, names[2], names[3])
            calls += _lane_loop(plan, vi, 0, lanes, vector, guarded=False)
            if tail == "masked":
                calls += _lane_loop(plan, names[3], 0, lanes, vector, guarded=True)
        instructions = tuple(Instr(str(ops.get(r)), t.module) for r in plan.roles)
        return calls + [ExoCall("replace_all", (instructions,)), ExoCall("simplify")]


def _fresh(used: set[str], *bases: str) -> list[str]:
    out = []
    for base in bases:
        out.append(fresh_name(used | set(out), base))
    return out


def _plan_names(plan: Plan) -> set[str]:
    return {b.name for b in plan.binds} | {name for _, name in plan.stages}


def _binds(loop: str, plan: Plan) -> list[ExoCall]:
    """Fold ``s = s + e`` into ``s += e``, then bind every operand (and inner operation) to
    a buffer of its own, still scalar."""
    calls = []
    for leaf, commuted in plan.folds:
        if commuted:
            calls.append(ExoCall("commute_expr", ((Stmt(loop, leaf + ("rhs",)),),)))
        calls.append(ExoCall("fold_into_reduce", (Stmt(loop, leaf),)))
    for b in plan.binds:
        steps = b.leaf + ("rhs",) + tuple("lhs" if c == "l" else "rhs" for c in b.expr)
        calls.append(ExoCall("bind_expr", (Stmt(loop, steps), b.name)))
        if b.kind != "v":  # an expression with a literal in it has Exo's generic type R
            calls.append(ExoCall("set_precision", (b.name, plan.dtype)))
    return calls


def _masked_tail(cut: str, lanes: int, outer: str, inner: str) -> list[ExoCall]:
    """The cut remainder loop as one full-width step whose lanes past the end are guarded:
    ``for vm in seq(0, lanes): if vm < rem: ...``, the form of Exo's masked instructions."""
    return [
        ExoCall("divide_loop", (cut, lanes, (outer, inner)), (("tail", "guard"),)),
        ExoCall("simplify"),
        ExoCall("unroll_loop", (outer,)),  # one iteration
        ExoCall("simplify"),
    ]


def _sum_lanes(outer: str, lane: str, n: int, window: str, buf: str, lanes: int, memory: Memory) -> list[ExoCall]:
    """Reassociate a sum into one partial sum per lane (Exo's stdlib ``parallelize_reduction``,
    step by step): the lane loop is ``lane #n``, the only child of ``outer``.

    ``for a: for b: T += e``  ->  ``buf[b] = 0 (each b); for a: for b: buf[b] += e; T += buf[b] (each b)``
    """
    return [
        ExoCall("reorder_loops", (Loop(outer),)),  # for b: for a: T += e
        ExoCall("stage_mem", (Loop(outer), window, buf), (("accum", True),)),
        ExoCall("expand_dim", (buf, lanes, lane)),
        ExoCall("set_memory", (buf, memory)),
        ExoCall("lift_alloc", (buf,)),
        ExoCall("fission", (Stmt(f"{lane} #{n}", (0, "after")),)),  # the zeroing ...
        ExoCall("fission", (Stmt(f"{lane} #{n + 1}", (0, "after")),)),  # ... the sums, and the final add
        ExoCall("reorder_loops", (Loop(f"{lane} #{n + 1}"),)),
    ]


def _partial_sums(plan: Plan, names: list[str], lanes: int, accs: int, vector: Memory, ops) -> list[ExoCall]:
    """Accumulate the reduction in ``accs`` vectors of partial sums and add them into the
    target once. Several accumulators let consecutive FMAs overlap instead of each waiting
    for the previous one's result; at the end they are added lane by lane (``acc`` adds when
    the target has them, else in C after storing them), then across the lanes (one
    horizontal-add instruction, else in C).

    ``for vo: for vi: y += e``  ->  ``acc = 0; for vo: for vk: for vl: acc[vk, vl] += e; y += sum of acc``
    """
    vo, vi, vk, vl, total, spilled, part = names
    window, acc = plan.stages[0]
    calls = _sum_lanes(vo, vi, 0, window, acc, lanes * accs, vector)
    # each of the three vi loops -> accumulator vk, lane vl (the first vi left each time)
    calls += [ExoCall("divide_loop", (vi, lanes, (vk, vl)), (("perfect", True),))] * 3
    calls += [ExoCall("divide_dim", (acc, 0, lanes)), ExoCall("simplify")]
    # the total is a scalar: a horizontal add's result is a scalar parameter (it takes no
    # y[i]), and a local lets gcc keep the running total in a register
    calls.append(ExoCall("stage_mem", (Loop(f"{vk} #2"), window, total)))
    if Role.REDUCE in plan.roles:
        if accs > 1 and ops.has(Role.ACC):
            calls += _sum_lanes(f"{vk} #2", vl, 2, total, part, lanes, vector)
        return calls
    # no horizontal add: store the accumulators on the stack and add them up in C, lane by
    # lane first (gcc vectorises that), so only the last vector's lanes form a serial chain
    calls += [
        ExoCall("bind_expr", (Within(f"{vk} #2", f"{acc}[_]"), spilled)),
        ExoCall("expand_dim", (spilled, lanes, vl)),
        ExoCall("expand_dim", (spilled, accs, vk)),
        ExoCall("set_memory", (spilled, STACK)),
        ExoCall("lift_alloc", (spilled,), (("n_lifts", 2),)),
        ExoCall("fission", (Stmt(f"{vk} #2", (0, 0, "after")),), (("n_lifts", 2),)),
    ]
    return calls + (_sum_lanes(f"{vk} #3", vl, 3, total, part, lanes, STACK) if accs > 1 else [])


def _lane_loop(
    plan: Plan, name: str, k: int, lanes: int, vector: Memory, guarded: bool, shared: int = 0
) -> list[ExoCall]:
    """Make lane loop ``name #k`` (its body inside an ``if`` when ``guarded``) vector code:
    each bound scalar becomes a vector lifted out of it (and out of ``shared`` more loops),
    then every statement gets a lane loop of its own, innermost: one instruction each."""
    loop = f"{name} #{k}"
    allocs = [(n, 1, False) for _, n in plan.stages] if plan.mode == "map" else []
    allocs += [(b.name, len(b.leaf), b.const) for b in plan.binds]
    calls = []
    for buffer, depth, const in allocs:
        alloc = Within(loop, f"{buffer} : _")
        if const and not guarded:
            # one element, broadcast; a guarded tail cannot share it (Exo's fission check
            # rejects a shared scalar written under a lane-dependent guard), so it keeps a
            # copy per lane and loads it with a masked load instead
            calls += [ExoCall("expand_dim", (alloc, 1, "0")), ExoCall("set_memory", (alloc, STACK))]
        else:
            calls += [ExoCall("expand_dim", (alloc, lanes, name)),
                      ExoCall("set_memory", (alloc, STACK if const else vector))]
        calls.append(ExoCall("lift_alloc", (alloc,), (("n_lifts", depth + guarded + shared),)))
    return calls + _split(name, k, _parse(plan.body), guarded)


def _parse(shape: str) -> list:
    """``"s(ss)s"`` -> ``["s", ["s", "s"], "s"]``."""
    stack: list[list] = [[]]
    for ch in shape:
        if ch == "(":
            stack.append([])
        elif ch == ")":
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(ch)
    return stack[0]


def _split(name: str, k: int, nodes: list, guarded: bool) -> list[ExoCall]:
    """Give each statement of lane loop ``name #k`` its own lane loop, moved inside inner
    loops. Statements are split off one at a time from the front: Exo accepts splitting off
    a write of a shared constant only when it is alone (it does not depend on the lane).
    Inner loops are then handled from the last one back, so the lane loops still to be
    handled keep their numbers (``name #k``, ``#k+1``, ... in Exo's pre-order)."""
    inside = (0,) if guarded else ()
    calls = [
        ExoCall("fission", (Stmt(f"{name} #{k + j}", inside + (0, "after")),), (("n_lifts", 1 + guarded),))
        for j in range(len(nodes) - 1)
    ]
    for j in reversed(range(len(nodes))):
        if nodes[j] == "c" and not guarded:
            # the constant is the same in every lane: set it once (a tail sets it per lane)
            calls.append(ExoCall("remove_loop", (Loop(f"{name} #{k + j}"),)))
        elif isinstance(nodes[j], list):
            here = f"{name} #{k + j}"
            if guarded:  # the inner loop goes above the guard first: for r: if vm < n: ...
                calls.append(ExoCall("lift_scope", (Stmt(here, (0, 0)),)))
            calls.append(ExoCall("reorder_loops", (Loop(here),)))
            calls += _split(name, k + j, nodes[j], guarded)
    return calls
