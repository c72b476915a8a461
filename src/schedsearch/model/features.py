"""A candidate's features for the cost model: a fixed-length, named, deterministic vector.

Features are read from the candidate's generated C (the code gcc will actually see, after
every rewrite and vector instruction) and its schedule, plus the workload's sizes and the
machine's cache sizes. The C of an Exo proc is regular enough to read line by line: one
``for (int_fast32_t v = lo; v < hi; v++) {`` per loop, one statement per line ending in
``;``, and array accesses ``name[index]`` with integer index arithmetic. Nothing here calls
Exo, so features cost a few milliseconds per child at most, next to the rewrite itself.

The model predicts time *relative to the root*, and trains across workloads and sizes, so
the features are size-aware and scale-free: logarithms of trip counts, of dynamic
statement counts, of working sets over cache sizes, of the bytes each cache level takes in
per flop; shares rather than counts.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from pathlib import Path

import schedsearch.model.c_text as c_text
from schedsearch.core import FeatureVector, RewriteKind, Schedule, Workload, sha256_text

#: Loop levels (outermost first) of the hot statement whose trip counts are features.
TRIP_LEVELS = 6
#: Innermost loop levels whose working set is compared with the L1 cache.
WS_LEVELS = 4

_DTYPE_BYTES = {"f16": 2, "f32": 4, "f64": 8, "i8": 1, "ui8": 1, "ui16": 2, "i16": 2, "i32": 4}


@dataclass(frozen=True, slots=True)
class CacheSizes:
    """Data cache sizes in bytes (per core for L1 and L2)."""

    l1: int = 32 * 1024
    l2: int = 1024 * 1024
    l3: int = 32 * 1024 * 1024


@functools.cache
def machine_caches(root: str = "/sys/devices/system/cpu/cpu0/cache") -> CacheSizes:
    """This machine's data cache sizes from ``/sys``; the defaults for any level it lacks."""
    found: dict[int, int] = {}
    for index in sorted(Path(root).glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = _parse_size((index / "size").read_text().strip())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and size > 0:
            found.setdefault(level, size)
    default = CacheSizes()
    return CacheSizes(found.get(1, default.l1), found.get(2, default.l2), found.get(3, default.l3))


def _parse_size(text: str) -> int:
    units = {"K": 1024, "M": 1024**2, "G": 1024**3}
    if text and text[-1].upper() in units:
        return int(text[:-1]) * units[text[-1].upper()]
    return int(text)


@dataclass(frozen=True, slots=True)
class CandidateFeatures:
    """The named features of one candidate (see the module docstring). All floats."""

    # the workload's size
    log2_flops: float = 0.0
    log2_data_over_l2: float = 0.0
    # the schedule
    depth: float = 0.0
    steps_reorder: float = 0.0
    steps_split: float = 0.0
    steps_tile: float = 0.0
    steps_hoist: float = 0.0
    steps_unroll: float = 0.0
    steps_fuse: float = 0.0
    steps_simplify: float = 0.0
    steps_stage_mem: float = 0.0
    steps_parallelize: float = 0.0
    steps_micro_kernel: float = 0.0
    steps_pack: float = 0.0
    steps_register_tile: float = 0.0
    steps_compute_at: float = 0.0
    steps_vectorize: float = 0.0
    steps_fission: float = 0.0
    # the loop nest
    loops: float = 0.0
    max_nest_depth: float = 0.0
    hot_nest_depth: float = 0.0
    log2_dynamic_statements: float = 0.0
    log2_dynamic_statements_per_flop: float = 0.0
    # log2 of the dynamic statements over the unscheduled proc's: the analytic estimate of
    # log2(time / root time) that the model starts from (``work_estimate``)
    log2_work_over_root: float = 0.0
    # what the compiler made of the C, read from its machine code (``compiler_notes``; all 0 without)
    compiler_notes: float = 0.0  # 1 when the notes were read
    # dynamic operations (``c_text.operations``), those of loops it vectorized over their lanes
    log2_vector_work: float = 0.0
    # ... over the unscheduled proc's: the analytic estimate with notes (``work_estimate``)
    log2_vector_work_over_root: float = 0.0
    compiler_vectorized_share: float = 0.0  # of the dynamic statements
    compiler_vector_bytes: float = 0.0  # log2 of the widest vectors a statement was compiled to
    compiler_unrolled_share: float = 0.0  # of the loops: none left (unrolled or vectorized away)
    trip_l0: float = 0.0
    trip_l1: float = 0.0
    trip_l2: float = 0.0
    trip_l3: float = 0.0
    trip_l4: float = 0.0
    trip_l5: float = 0.0
    innermost_trip: float = 0.0
    innermost_unit_stride_share: float = 0.0
    innermost_invariant_share: float = 0.0
    innermost_strided_share: float = 0.0
    # vector instructions (static counts, log2(1 + n)) and their share of dynamic work
    vector_bits: float = 0.0
    vec_fma: float = 0.0
    vec_load: float = 0.0
    vec_store: float = 0.0
    vec_broadcast: float = 0.0
    vec_arith: float = 0.0
    vec_other: float = 0.0
    dynamic_vector_share: float = 0.0
    # the register tile
    tile_rows: float = 0.0
    tile_cols: float = 0.0
    vector_accumulators: float = 0.0
    # working set of the hot statement's innermost levels against the caches
    ws_l1_level0: float = 0.0  # log2(bytes / L1) of the innermost loop
    ws_l1_level1: float = 0.0
    ws_l1_level2: float = 0.0
    ws_l1_level3: float = 0.0
    levels_in_l1: float = 0.0  # share of the hot statement's loop levels whose working set fits L1
    levels_in_l2: float = 0.0
    # data the code brings into each cache level, in bytes per flop (log2; ``c_text.traffic``)
    traffic_l1: float = 0.0
    traffic_l2: float = 0.0
    traffic_l3: float = 0.0
    # code size and buffers
    log2_statements: float = 0.0  # static statement lines: grows with unrolling
    local_buffers: float = 0.0
    log2_local_bytes: float = 0.0
    heap_buffers: float = 0.0
    heap_buffers_in_loops: float = 0.0
    openmp: float = 0.0

    def vector(self) -> FeatureVector:
        """The values in field order, tagged with ``FEATURE_VERSION``."""
        return FeatureVector(FEATURE_VERSION, tuple(float(getattr(self, n)) for n in FEATURE_NAMES))


FEATURE_NAMES: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(CandidateFeatures))
#: Vectors are comparable only within one version: it changes whenever the names do
#: (bump the "vN" part when a feature's meaning changes under the same name).
FEATURE_VERSION = "v5-" + sha256_text(",".join(FEATURE_NAMES))[:8]

#: Kinds counted as other kinds' steps: an older name, or a composite counted as the plain
#: steps it is made of (a new composite then keeps the feature names, and with them every
#: measurement stored under ``FEATURE_VERSION``, usable for training).
_COUNTED_AS: dict[RewriteKind, tuple[RewriteKind, ...]] = {
    RewriteKind.SIMD_KERNEL: (RewriteKind.REGISTER_TILE,),
    RewriteKind.SINK: (RewriteKind.SPLIT, RewriteKind.REORDER),
}


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else 0.0


def _tile_shape(schedule: Schedule) -> tuple[int, int]:
    rows = cols = 0
    for step in schedule.steps:
        if step.kind in (RewriteKind.REGISTER_TILE, RewriteKind.MICRO_KERNEL, RewriteKind.SIMD_KERNEL):
            r, c = step.arg("rows", 0), step.arg("cols", 0)
            rows = int(r) if isinstance(r, int) and not isinstance(r, bool) else rows
            cols = int(c) if isinstance(c, int) and not isinstance(c, bool) else cols
    return rows, cols


def _intrinsic_kind(name: str) -> str:
    if "fmadd" in name or "fmsub" in name:
        return "fma"
    if "load" in name:
        return "load"
    if "store" in name:
        return "store"
    if "set1" in name or "broadcast" in name:
        return "broadcast"
    if name.split("_")[0] in ("add", "sub", "mul", "div", "max", "min", "mask"):
        return "arith"
    return "other"


def candidate_features(
    c_source: str,
    schedule: Schedule,
    workload: Workload,
    caches: CacheSizes | None = None,
    root_work: float | None = None,
    notes: str | None = None,
    root_vector_work: float | None = None,
) -> CandidateFeatures:
    """The features of the candidate whose kernel C is ``c_source``. Deterministic.
    ``root_work``: the unscheduled proc's ``log2_dynamic_statements`` (None: this is it).
    ``notes``: what the compiler made of this C, read from its machine code
    (``evaluate.kernel_notes``), and
    ``root_vector_work`` the unscheduled proc's ``log2_vector_work`` from its own notes."""
    caches = caches or CacheSizes()
    numbered = c_text.kernel_body(c_source)
    lines = [line for _, line in numbered]
    stmts, n_loops, deepest = c_text.parse(numbered)
    sizes, buffers = c_text.element_bytes(lines, c_source)
    f: dict[str, float] = {}

    flops = workload.flops or 0
    data = sum(a.elements * _DTYPE_BYTES.get(a.dtype.value, 4) for a in workload.args)
    f["log2_flops"] = _log2(flops)
    f["log2_data_over_l2"] = _log2(data / caches.l2) if data else 0.0

    f["depth"] = len(schedule)
    for step in schedule.steps:
        for kind in _COUNTED_AS.get(step.kind, (step.kind,)):
            f[f"steps_{kind.value}"] = f.get(f"steps_{kind.value}", 0.0) + 1

    # Work only: no frees, and no declarations without a value (they emit no instruction).
    real = [
        s
        for s in stmts
        if not s.text.startswith(("free(", "return")) and not ((m := c_text.DECL.match(s.text)) and not m.group(4))
    ]
    dynamic = [c_text.dynamic(s) for s in real]
    total = sum(dynamic)
    f["loops"] = n_loops
    f["max_nest_depth"] = deepest
    f["log2_dynamic_statements"] = _log2(total)
    f["log2_dynamic_statements_per_flop"] = _log2(total / flops) if total and flops else 0.0
    f["log2_work_over_root"] = f["log2_dynamic_statements"] - root_work if root_work is not None else 0.0
    f["log2_statements"] = _log2(len(real))
    if notes is not None:
        # The compiler decides what runs: gcc vectorizes and unrolls plain loops by itself,
        # or leaves them scalar after a harmless-looking reorder (the i8 matmul's root is
        # vectorized 4 wide; swapping its outer loops makes it scalar and 3.3x slower).
        read = c_text.read_notes(notes)
        loops = c_text.loop_vectors(real, read)
        lanes = [c_text.lanes(s, loops, sizes) for s in real]
        registers = frozenset(b.name for b in buffers if b.vector)
        vector_work = sum(d * c_text.operations(s, registers) / n for s, d, n in zip(real, dynamic, lanes, strict=True))
        f["compiler_notes"] = 1.0
        f["log2_vector_work"] = _log2(vector_work)
        if root_vector_work is not None:
            f["log2_vector_work_over_root"] = f["log2_vector_work"] - root_vector_work
        f["compiler_vectorized_share"] = (
            sum(d for d, n in zip(dynamic, lanes, strict=True) if n > 1) / total if total else 0.0
        )
        f["compiler_vector_bytes"] = _log2(max((read.vectors.get(s.line, 0) for s in real), default=0))
        # a loop whose line compiled to no conditional branch: unrolled, or vectorized, away
        lines_of_loops = {loop.line for s in stmts for loop in s.chain}
        f["compiler_unrolled_share"] = len(lines_of_loops - read.branching) / n_loops if n_loops else 0.0

    kinds = {"fma": 0, "load": 0, "store": 0, "broadcast": 0, "arith": 0, "other": 0}
    bits = 0
    vector_dynamic = 0
    for stmt, dyn in zip(real, dynamic, strict=True):
        found = c_text.INTRINSIC.findall(stmt.text)
        for width, name in found:
            kinds[_intrinsic_kind(name)] += 1
            bits = max(bits, int(width) if width else 128)
        if found:
            vector_dynamic += dyn
    for vec_kind, n in kinds.items():
        f[f"vec_{vec_kind}"] = _log2(1 + n)
    f["vector_bits"] = bits
    f["dynamic_vector_share"] = vector_dynamic / total if total else 0.0

    rows, cols = _tile_shape(schedule)
    f["tile_rows"], f["tile_cols"] = rows, cols
    # The largest array of vector registers is the register tile's accumulators.
    f["vector_accumulators"] = max((b.elements for b in buffers if b.vector), default=0)

    # Arrays of vector registers are not memory: they neither fill caches nor miss.
    accesses = c_text.accesses(real, sizes, frozenset(b.name for b in buffers if b.vector))
    if real:
        hot = real[c_text.hot_index(real, dynamic)]
        f["hot_nest_depth"] = len(hot.chain)
        for level, loop in enumerate(hot.chain[:TRIP_LEVELS]):
            f[f"trip_l{level}"] = _log2(loop.trip)
        if hot.chain:
            inner = hot.chain[-1]
            f["innermost_trip"] = _log2(inner.trip)
            names = [lp.var for lp in hot.chain]
            # Every access of the innermost loop's body (the hot statement's siblings load
            # and store too: ``a = A[..]; C[..] += a * b`` is one computation).
            body = [s.text for s in real if s.chain and s.chain[-1].uid == inner.uid]
            strides = [
                c_text.stride(index, inner.var, names) for text in body for _, index in c_text.ACCESS.findall(text)
            ]
            known = [s for s in strides if s is not None]
            if known:
                f["innermost_unit_stride_share"] = sum(abs(s) == 1 for s in known) / len(known)
                f["innermost_invariant_share"] = sum(s == 0 for s in known) / len(known)
                f["innermost_strided_share"] = sum(abs(s) > 1 for s in known) / len(known)
            ws = [c_text.footprint(accesses, loop, level, inside=0) for level, loop in enumerate(hot.chain)]
            for k, bytes_ in enumerate(reversed(ws[-WS_LEVELS:])):
                f[f"ws_l1_level{k}"] = _log2(bytes_ / caches.l1) if bytes_ else 0.0
            f["levels_in_l1"] = sum(b <= caches.l1 for b in ws) / len(ws)
            f["levels_in_l2"] = sum(b <= caches.l2 for b in ws) / len(ws)

    moved = c_text.traffic(accesses, (caches.l1, caches.l2, caches.l3))
    for cache, bytes_ in zip(("l1", "l2", "l3"), moved, strict=True):
        f[f"traffic_{cache}"] = _log2(bytes_ / flops) if bytes_ and flops else 0.0

    f["local_buffers"] = sum(not b.vector for b in buffers)
    f["log2_local_bytes"] = _log2(sum(b.bytes for b in buffers if not b.vector))
    f["heap_buffers"] = sum(b.heap for b in buffers)
    f["heap_buffers_in_loops"] = sum(b.heap and b.in_loop for b in buffers)
    f["openmp"] = float("#pragma omp" in c_source)
    return CandidateFeatures(**{k: float(v) for k, v in f.items()})


def work_estimate(vector: FeatureVector) -> float | None:
    """log2 of the work the candidate's C does over the unscheduled proc's, counting
    dynamic statements from the loop nests (``log2_work_over_root``): an analytic estimate
    of log2(time / root time). None for a vector of another feature version. With the
    compiler's notes (``compiler_notes``) the statements of the loops it vectorized count
    once per vector (``log2_vector_work_over_root``).

    The cost model starts from it (its trees learn the difference) and predicts with it
    alone before it has trained: vectorizing and register tiling cut the work by the
    vector width and by the loads they keep in registers; reordering and splitting leave
    it alone. On the root's children of SGEMM 512 and a multi-channel conv1d (Zen 4) it
    ranks what was then measured with a rank correlation of about 0.7, and its first or
    second pick is within 5% of the fastest kernel any search found.
    """
    if not _current(vector):
        return None
    if vector.values[_NOTES_INDEX]:
        return vector.values[_VECTOR_WORK_INDEX]
    return vector.values[_WORK_INDEX]


def noted(vector: FeatureVector | None) -> bool:
    """Whether ``vector`` holds the compiler's notes on its kernel: the kernel was built for them."""
    return vector is not None and _current(vector) and bool(vector.values[_NOTES_INDEX])


def _current(vector: FeatureVector) -> bool:
    """Whether ``vector`` is of this feature version (its values can be read by name)."""
    return vector.version == FEATURE_VERSION and len(vector.values) == len(FEATURE_NAMES)


_WORK_INDEX = FEATURE_NAMES.index("log2_work_over_root")
_NOTES_INDEX = FEATURE_NAMES.index("compiler_notes")
_VECTOR_WORK_INDEX = FEATURE_NAMES.index("log2_vector_work_over_root")


def feature_vector(
    c_source: str,
    schedule: Schedule,
    workload: Workload,
    caches: CacheSizes | None = None,
    root_work: float | None = None,
    notes: str | None = None,
    root_vector_work: float | None = None,
) -> FeatureVector:
    """``candidate_features(...)`` as the plain vector a ``Candidate`` carries."""
    return candidate_features(c_source, schedule, workload, caches, root_work, notes, root_vector_work).vector()
