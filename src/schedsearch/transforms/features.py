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

import ast
import dataclasses
import functools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from schedsearch.core import KERNEL_SYMBOL, FeatureVector, RewriteKind, Schedule, Workload, sha256_text

#: Loop levels (outermost first) of the hot statement whose trip counts are features.
TRIP_LEVELS = 6
#: Innermost loop levels whose working set is compared with the L1 cache.
WS_LEVELS = 4

_FOR = re.compile(r"^for \(int_fast32_t (\w+) = (.+?); \1 < (.+?); \1\+\+\) \{$")
_ACCESS = re.compile(r"\b([A-Za-z_]\w*)\[([^\[\]]+)\]")
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
_INTRINSIC = re.compile(r"\b_mm(512|256)?_(\w+?)\(")
_DECL = re.compile(
    r"^(?:static )?(?:const )?(float|double|int8_t|uint8_t|int16_t|uint16_t|int32_t|_Float16|"
    r"__m512i?|__m512d|__m256i?|__m256d|__m128i?|__m128d)\s*\*?\s*(\w+)\s*(\[[^;=]*\])?\s*(=.*)?;$"
)
_PARAM = re.compile(r"(?:const )?(float|double|int8_t|uint8_t|int16_t|uint16_t|int32_t|_Float16)\*\s*(\w+)")
_ELEMENT_BYTES = {
    "float": 4, "double": 8, "int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "int32_t": 4, "_Float16": 2,
    "__m512": 64, "__m512i": 64, "__m512d": 64, "__m256": 32, "__m256i": 32, "__m256d": 32,
    "__m128": 16, "__m128i": 16, "__m128d": 16,
}
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
    # dynamic operations (``_operations``), those of loops it vectorized over their lanes
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
    # data the code brings into each cache level, in bytes per flop (log2; ``_traffic``)
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


# --------------------------------------------------------------------------- reading the C


@dataclass(slots=True)
class _Loop:
    uid: int
    var: str
    trip: int
    line: int = 0  # in the C source


@dataclass(slots=True)
class _Stmt:
    text: str
    chain: tuple[_Loop, ...]  # enclosing loops, outermost first
    line: int = 0  # in the C source


def _kernel_body(c_source: str) -> list[tuple[int, str]]:
    """The kernel function's non-blank lines, stripped, with their 1-based line numbers in
    ``c_source`` (the machine code's line tables name statements by them)."""
    marker = f"void {KERNEL_SYMBOL}("
    start = c_source.rfind(marker)
    if start < 0:
        return []
    brace = c_source.find("{", start) + 1
    first = c_source.count("\n", 0, brace) + 1
    body = c_source[brace:]
    return [(first + n, line.strip()) for n, line in enumerate(body.splitlines()) if line.strip()]


@functools.lru_cache(maxsize=4096)
def _compile(expr: str) -> ast.Expression | None:
    try:
        return ast.parse(expr.replace("/", "//"), mode="eval")
    except SyntaxError:
        return None


def _eval(node: ast.AST, env: dict[str, int]) -> int:
    """Integer C arithmetic on a parsed index; unknown names are 0. Raises ValueError."""
    if isinstance(node, ast.Expression):
        return _eval(node.body, env)
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id, 0)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, env)
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, env), _eval(node.right, env)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if isinstance(node.op, (ast.FloorDiv, ast.Mod)) and b != 0:
            return a // b if isinstance(node.op, ast.FloorDiv) else a % b
    raise ValueError("not integer arithmetic")


def _value(expr: str, env: dict[str, int] | None = None) -> int | None:
    tree = _compile(expr)
    if tree is None:
        return None
    try:
        return _eval(tree, env or {})
    except (ValueError, RecursionError):
        return None


def _parse(lines: Iterable[tuple[int, str]]) -> tuple[list[_Stmt], int, int]:
    """Statements with their loop chains, the number of loops, the deepest nesting."""
    stack: list[_Loop | None] = []  # None: a brace that is not a loop (if, else)
    stmts: list[_Stmt] = []
    count = deepest = 0
    for number, line in lines:
        m = _FOR.match(line)
        if m:
            lo, hi = _value(m.group(2)), _value(m.group(3))
            trip = max(1, hi - lo) if lo is not None and hi is not None else 16
            count += 1
            stack.append(_Loop(count, m.group(1), trip, number))
            deepest = max(deepest, sum(1 for s in stack if s is not None))
        elif line.endswith("{"):
            stack.append(None)
        elif line.startswith("}"):
            if stack:
                stack.pop()
            if line.endswith("{"):  # "} else {"
                stack.append(None)
        elif line.endswith(";"):
            stmts.append(_Stmt(line, tuple(s for s in stack if s is not None), number))
    return stmts, count, deepest


@dataclass(frozen=True, slots=True)
class _Notes:
    """What the compiler made of the kernel, by line of its C (``evaluate.machine_code``)."""

    vectors: dict[int, int]  # line -> the widest vectors (bytes) its instructions use, 0 if scalar
    branching: frozenset[int]  # lines with a conditional branch: loops the compiler kept as loops


def _read_notes(text: str) -> _Notes:
    """The rows ``LINE VECTOR_BYTES BRANCHES INSTRUCTIONS`` of a machine-code summary."""
    vectors: dict[int, int] = {}
    branching: set[int] = set()
    for row in text.splitlines():
        parts = row.split()
        if len(parts) != 4 or not all(p.isdigit() for p in parts):
            continue  # the header, or anything else
        line, width, branches = int(parts[0]), int(parts[1]), int(parts[2])
        vectors[line] = max(vectors.get(line, 0), width)
        if branches:
            branching.add(line)
    return _Notes(vectors, frozenset(branching))


def _loop_vectors(stmts: list[_Stmt], notes: _Notes) -> dict[int | None, int]:
    """The widest vectors of each innermost loop's statements (by the loop's ``uid``; None:
    statements in no loop): a loop the compiler vectorized, or unrolled into straight-line
    vector code."""
    widest: dict[int | None, int] = {}
    for stmt in stmts:
        key = stmt.chain[-1].uid if stmt.chain else None
        widest[key] = max(widest.get(key, 0), notes.vectors.get(stmt.line, 0))
    return widest


def _lanes(stmt: _Stmt, loops: dict[int | None, int], sizes: dict[str, int]) -> int:
    """How many of ``stmt``'s iterations one vector instruction does after the compiler
    vectorized its loop (1 if it left it scalar, or the statement is already an intrinsic):
    the widest vectors of the loop's statements (``_loop_vectors``) over the widest element
    the statement names. The loop's, not the statement's own: a vectorized loop still loads
    a loop-invariant value with a scalar instruction, once, and its statement then costs
    no more than its vectorized neighbours."""
    width = loops.get(stmt.chain[-1].uid if stmt.chain else None, 0)
    if not width or _INTRINSIC.search(stmt.text):
        return 1
    element = max((sizes[name] for name in _IDENT.findall(stmt.text) if name in sizes), default=4)
    return max(1, width // element)


_INDEX = re.compile(r"\[[^\[\]]*\]")
_COMPOUND = re.compile(r"[-+*/]=")
_ARITH = re.compile(r"[-+*/]")


def _operations(stmt: _Stmt, registers: frozenset[str]) -> int:
    """Machine operations one run of ``stmt`` takes, roughly: one per intrinsic call; for
    plain C, one per memory access (arrays of vector registers are not memory), two for a
    compound assignment (its add and its store), one per arithmetic operator of the value.
    ``C[..] += A[..] * B[..]`` is 6: loads of C, A and B, the multiply, the add, the store;
    a register tile's ``C_reg[0][0] = _mm512_fmadd_ps(A_vec, B_vec[0], C_reg[0][0])`` is 1."""
    calls = len(_INTRINSIC.findall(stmt.text))
    if calls:
        return calls
    memory = sum(1 for m in _ACCESS.finditer(stmt.text) if m.group(1) not in registers)
    compound = _COMPOUND.search(stmt.text)
    value = _INDEX.sub("", stmt.text.split("=", 1)[1] if "=" in stmt.text else "")
    arith = len(_ARITH.findall(value.split(")", 1)[1] if value.lstrip().startswith("(") and ")" in value else value))
    return max(1, memory + (2 if compound else 0) + arith)


def _dynamic(stmt: _Stmt) -> int:
    return math.prod(loop.trip for loop in stmt.chain)


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else 0.0


@dataclass(frozen=True, slots=True)
class _Buffer:
    name: str
    elements: int
    bytes: int
    heap: bool  # malloc'ed (Exo's DRAM) rather than on the stack
    in_loop: bool
    vector: bool  # of vector registers (__m512, __m256, ...)


def _element_bytes(lines: list[str], c_source: str) -> tuple[dict[str, int], list[_Buffer]]:
    """Bytes per element of every array, and the kernel's local buffers."""
    sizes: dict[str, int] = {}
    header = c_source[c_source.rfind(f"void {KERNEL_SYMBOL}(") :].split("{", 1)[0]
    for ctype, name in _PARAM.findall(header):
        sizes[name] = _ELEMENT_BYTES[ctype]
    buffers = []
    depth = 0
    for line in lines:
        if _FOR.match(line):
            depth += 1
        elif line.startswith("}"):
            depth = max(0, depth - 1) if not line.endswith("{") else depth
        elif line.endswith("{"):
            depth += 1
        m = _DECL.match(line)
        if not m:
            continue
        ctype, name, dims, init = m.groups()
        sizes[name] = _ELEMENT_BYTES[ctype]
        heap = bool(init and "malloc" in init)
        if dims:
            n = math.prod(_value(d) or 1 for d in re.findall(r"\[([^\]]*)\]", dims))
        elif heap:
            n = _value(init.split("malloc(", 1)[1].split("sizeof", 1)[0].rstrip(" *")) or 1
        else:
            continue
        buffers.append(_Buffer(name, n, n * _ELEMENT_BYTES[ctype], heap, depth > 0, ctype.startswith("__m")))
    return sizes, buffers


def _stride(index: str, var: str, names: Iterable[str]) -> int | None:
    env = dict.fromkeys(names, 0)
    zero = _value(index, env)
    env[var] = 1
    one = _value(index, env)
    return None if zero is None or one is None else one - zero


@dataclass(frozen=True, slots=True)
class _Access:
    name: str
    names: frozenset[str]  # the identifiers of its index
    offset: int | None  # its index with every loop variable at 0
    bytes: int  # per access: the element, or every lane a vector instruction takes from it
    chain: tuple[_Loop, ...]


def _accesses(stmts: list[_Stmt], sizes: dict[str, int], registers: frozenset[str]) -> list[_Access]:
    """Every memory access of the statements (not arrays of vector registers), once each."""
    found: dict[tuple, _Access] = {}
    for stmt in stmts:
        widths = [int(w) if w else 128 for w, _ in _INTRINSIC.findall(stmt.text)]
        for m in _ACCESS.finditer(stmt.text):
            name, index = m.groups()
            if name in registers:
                continue
            names = frozenset(_IDENT.findall(index))
            element = sizes.get(name, 4)
            by_address = bool(widths) and m.start() > 0 and stmt.text[m.start() - 1] == "&"
            lanes = max(1, max(widths) // 8 // element) if by_address else 1
            offset = _value(index, dict.fromkeys(names, 0))
            access = _Access(name, names, offset, element * lanes, stmt.chain)
            found.setdefault((name, names, offset, tuple(lp.uid for lp in stmt.chain)), access)
    return list(found.values())


def _footprint(accesses: list[_Access], loop: _Loop, depth: int, inside: int) -> int:
    """Bytes touched under ``loop`` (at ``depth`` of its accesses' chains) over the loops
    from ``depth + inside`` in: ``inside=0`` one run of the loop, ``1`` one iteration. Each
    access counts its bytes times the trips of those loops its index uses (an upper bound:
    overlaps are not removed, but rows apart are, ``A[i * n + k]`` and ``A[(1 + i) * n + k]``)."""
    footprint: dict[tuple, int] = {}
    for a in accesses:
        if len(a.chain) > depth and a.chain[depth].uid == loop.uid:
            inner = {lp.var: lp.trip for lp in a.chain[depth + inside :]}
            used = frozenset(v for v in a.names if v in inner)
            footprint[(a.name, used, a.offset)] = a.bytes * math.prod(inner[v] for v in used)
    return sum(footprint.values())


def _traffic(accesses: list[_Access], caches: Iterable[int]) -> list[int]:
    """Bytes the code brings into a cache of each size: an access's data is brought in
    afresh by every iteration of a loop its index uses, and by every iteration of a loop it
    does not use unless one iteration's data fits the cache (then it stays there, reused)."""
    iteration: dict[tuple[int, int], int] = {}
    out = []
    for cache in caches:
        total = 0
        for a in accesses:
            moved = a.bytes
            for depth in range(len(a.chain) - 1, -1, -1):
                loop = a.chain[depth]
                if loop.var not in a.names:
                    key = (loop.uid, depth)
                    if key not in iteration:
                        iteration[key] = _footprint(accesses, loop, depth, inside=1)
                    if iteration[key] <= cache:
                        continue
                moved *= loop.trip
            total += moved
        out.append(total)
    return out


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


def _hot_index(stmts: list[_Stmt], dynamic: list[int]) -> int:
    """The hot statement: the most executed one of the loop nest that does the most work.

    The nest first: unrolling spreads a computation over many copies of its body, each run
    no more often than a copy loop beside it (a staged buffer's), so the most executed
    statement alone may be the copy's. Work is the nest's dynamic statement count; ties
    go to the first nest, and within the nest to the first statement, in the code."""
    nest_of = [s.chain[0].uid if s.chain else 0 for s in stmts]
    work: dict[int, int] = {}  # in order of first appearance: max() keeps the first of equals
    for nest, dyn in zip(nest_of, dynamic, strict=True):
        work[nest] = work.get(nest, 0) + dyn
    top = max(work, key=work.__getitem__)
    return max((i for i in range(len(stmts)) if nest_of[i] == top), key=lambda i: (dynamic[i], -i))


def candidate_features(
    c_source: str, schedule: Schedule, workload: Workload, caches: CacheSizes | None = None,
    root_work: float | None = None, notes: str | None = None, root_vector_work: float | None = None,
) -> CandidateFeatures:
    """The features of the candidate whose kernel C is ``c_source``. Deterministic.
    ``root_work``: the unscheduled proc's ``log2_dynamic_statements`` (None: this is it).
    ``notes``: what the compiler made of this C, read from its machine code
    (``evaluate.kernel_notes``), and
    ``root_vector_work`` the unscheduled proc's ``log2_vector_work`` from its own notes."""
    caches = caches or CacheSizes()
    numbered = _kernel_body(c_source)
    lines = [line for _, line in numbered]
    stmts, n_loops, deepest = _parse(numbered)
    sizes, buffers = _element_bytes(lines, c_source)
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
        s for s in stmts
        if not s.text.startswith(("free(", "return")) and not ((m := _DECL.match(s.text)) and not m.group(4))
    ]
    dynamic = [_dynamic(s) for s in real]
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
        read = _read_notes(notes)
        loops = _loop_vectors(real, read)
        lanes = [_lanes(s, loops, sizes) for s in real]
        registers = frozenset(b.name for b in buffers if b.vector)
        vector_work = sum(d * _operations(s, registers) / n for s, d, n in zip(real, dynamic, lanes, strict=True))
        f["compiler_notes"] = 1.0
        f["log2_vector_work"] = _log2(vector_work)
        if root_vector_work is not None:
            f["log2_vector_work_over_root"] = f["log2_vector_work"] - root_vector_work
        f["compiler_vectorized_share"] = sum(d for d, n in zip(dynamic, lanes, strict=True) if n > 1) / total \
            if total else 0.0
        f["compiler_vector_bytes"] = _log2(max((read.vectors.get(s.line, 0) for s in real), default=0))
        # a loop whose line compiled to no conditional branch: unrolled, or vectorized, away
        lines_of_loops = {loop.line for s in stmts for loop in s.chain}
        f["compiler_unrolled_share"] = len(lines_of_loops - read.branching) / n_loops if n_loops else 0.0

    kinds = {"fma": 0, "load": 0, "store": 0, "broadcast": 0, "arith": 0, "other": 0}
    bits = 0
    vector_dynamic = 0
    for stmt, dyn in zip(real, dynamic, strict=True):
        found = _INTRINSIC.findall(stmt.text)
        for width, name in found:
            kinds[_intrinsic_kind(name)] += 1
            bits = max(bits, int(width) if width else 128)
        if found:
            vector_dynamic += dyn
    for kind, n in kinds.items():
        f[f"vec_{kind}"] = _log2(1 + n)
    f["vector_bits"] = bits
    f["dynamic_vector_share"] = vector_dynamic / total if total else 0.0

    rows, cols = _tile_shape(schedule)
    f["tile_rows"], f["tile_cols"] = rows, cols
    # The largest array of vector registers is the register tile's accumulators.
    f["vector_accumulators"] = max((b.elements for b in buffers if b.vector), default=0)

    # Arrays of vector registers are not memory: they neither fill caches nor miss.
    accesses = _accesses(real, sizes, frozenset(b.name for b in buffers if b.vector))
    if real:
        hot = real[_hot_index(real, dynamic)]
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
            strides = [_stride(index, inner.var, names) for text in body for _, index in _ACCESS.findall(text)]
            known = [s for s in strides if s is not None]
            if known:
                f["innermost_unit_stride_share"] = sum(abs(s) == 1 for s in known) / len(known)
                f["innermost_invariant_share"] = sum(s == 0 for s in known) / len(known)
                f["innermost_strided_share"] = sum(abs(s) > 1 for s in known) / len(known)
            ws = [_footprint(accesses, loop, level, inside=0) for level, loop in enumerate(hot.chain)]
            for k, bytes_ in enumerate(reversed(ws[-WS_LEVELS:])):
                f[f"ws_l1_level{k}"] = _log2(bytes_ / caches.l1) if bytes_ else 0.0
            f["levels_in_l1"] = sum(b <= caches.l1 for b in ws) / len(ws)
            f["levels_in_l2"] = sum(b <= caches.l2 for b in ws) / len(ws)

    moved = _traffic(accesses, (caches.l1, caches.l2, caches.l3))
    for level, bytes_ in zip(("l1", "l2", "l3"), moved, strict=True):
        f[f"traffic_{level}"] = _log2(bytes_ / flops) if bytes_ and flops else 0.0

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
    c_source: str, schedule: Schedule, workload: Workload, caches: CacheSizes | None = None,
    root_work: float | None = None, notes: str | None = None, root_vector_work: float | None = None,
) -> FeatureVector:
    """``candidate_features(...)`` as the plain vector a ``Candidate`` carries."""
    return candidate_features(c_source, schedule, workload, caches, root_work, notes, root_vector_work).vector()
