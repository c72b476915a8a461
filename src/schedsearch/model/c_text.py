"""What an Exo kernel's C says, read line by line: its loops and their trip counts, its
statements and the loops around each, its buffers and memory accesses, the bytes they
move through caches of given sizes, and what the compiler's notes say it made of each line.

The C of an Exo proc is regular enough to read this way: one ``for (int_fast32_t v = lo; v <
hi; v++) {`` per loop, one statement per line ending in ``;``, and array accesses
``name[index]`` with integer index arithmetic. Standard library and ``core`` only; nothing
here calls Exo or a compiler. ``features`` turns what is read into a candidate's features.
"""

from __future__ import annotations

import ast
import functools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from schedsearch.core import KERNEL_SYMBOL

_FOR = re.compile(r"^for \(int_fast32_t (\w+) = (.+?); \1 < (.+?); \1\+\+\) \{$")
ACCESS = re.compile(r"\b([A-Za-z_]\w*)\[([^\[\]]+)\]")
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
INTRINSIC = re.compile(r"\b_mm(512|256)?_(\w+?)\(")
DECL = re.compile(
    r"^(?:static )?(?:const )?(float|double|int8_t|uint8_t|int16_t|uint16_t|int32_t|_Float16|"
    r"__m512i?|__m512d|__m256i?|__m256d|__m128i?|__m128d)\s*\*?\s*(\w+)\s*(\[[^;=]*\])?\s*(=.*)?;$"
)
_PARAM = re.compile(r"(?:const )?(float|double|int8_t|uint8_t|int16_t|uint16_t|int32_t|_Float16)\*\s*(\w+)")
_ELEMENT_BYTES = {
    "float": 4,
    "double": 8,
    "int8_t": 1,
    "uint8_t": 1,
    "int16_t": 2,
    "uint16_t": 2,
    "int32_t": 4,
    "_Float16": 2,
    "__m512": 64,
    "__m512i": 64,
    "__m512d": 64,
    "__m256": 32,
    "__m256i": 32,
    "__m256d": 32,
    "__m128": 16,
    "__m128i": 16,
    "__m128d": 16,
}


@dataclass(slots=True)
class Loop:
    """A ``for`` loop of the kernel: its variable, its trip count (16 when its bounds are not
    constants) and its line."""

    uid: int
    var: str
    trip: int
    line: int = 0  # in the C source


@dataclass(slots=True)
class Stmt:
    """A statement line of the kernel and the loops around it."""

    text: str
    chain: tuple[Loop, ...]  # enclosing loops, outermost first
    line: int = 0  # in the C source


def kernel_body(c_source: str) -> list[tuple[int, str]]:
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


def parse(lines: Iterable[tuple[int, str]]) -> tuple[list[Stmt], int, int]:
    """Statements with their loop chains, the number of loops, the deepest nesting."""
    stack: list[Loop | None] = []  # None: a brace that is not a loop (if, else)
    stmts: list[Stmt] = []
    count = deepest = 0
    for number, line in lines:
        m = _FOR.match(line)
        if m:
            lo, hi = _value(m.group(2)), _value(m.group(3))
            trip = max(1, hi - lo) if lo is not None and hi is not None else 16
            count += 1
            stack.append(Loop(count, m.group(1), trip, number))
            deepest = max(deepest, sum(1 for s in stack if s is not None))
        elif line.endswith("{"):
            stack.append(None)
        elif line.startswith("}"):
            if stack:
                stack.pop()
            if line.endswith("{"):  # "} else {"
                stack.append(None)
        elif line.endswith(";"):
            stmts.append(Stmt(line, tuple(s for s in stack if s is not None), number))
    return stmts, count, deepest


@dataclass(frozen=True, slots=True)
class Notes:
    """What the compiler made of the kernel, by line of its C (``evaluate.machine_code``)."""

    vectors: dict[int, int]  # line -> the widest vectors (bytes) its instructions use, 0 if scalar
    branching: frozenset[int]  # lines with a conditional branch: loops the compiler kept as loops


def read_notes(text: str) -> Notes:
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
    return Notes(vectors, frozenset(branching))


def loop_vectors(stmts: list[Stmt], notes: Notes) -> dict[int | None, int]:
    """The widest vectors of each innermost loop's statements (by the loop's ``uid``; None:
    statements in no loop): a loop the compiler vectorized, or unrolled into straight-line
    vector code."""
    widest: dict[int | None, int] = {}
    for stmt in stmts:
        key = stmt.chain[-1].uid if stmt.chain else None
        widest[key] = max(widest.get(key, 0), notes.vectors.get(stmt.line, 0))
    return widest


def lanes(stmt: Stmt, loops: dict[int | None, int], sizes: dict[str, int]) -> int:
    """How many of ``stmt``'s iterations one vector instruction does after the compiler
    vectorized its loop (1 if it left it scalar, or the statement is already an intrinsic):
    the widest vectors of the loop's statements (``loop_vectors``) over the widest element
    the statement names. The loop's, not the statement's own: a vectorized loop still loads
    a loop-invariant value with a scalar instruction, once, and its statement then costs
    no more than its vectorized neighbours."""
    width = loops.get(stmt.chain[-1].uid if stmt.chain else None, 0)
    if not width or INTRINSIC.search(stmt.text):
        return 1
    element = max((sizes[name] for name in _IDENT.findall(stmt.text) if name in sizes), default=4)
    return max(1, width // element)


_INDEX = re.compile(r"\[[^\[\]]*\]")
_COMPOUND = re.compile(r"[-+*/]=")
_ARITH = re.compile(r"[-+*/]")


def operations(stmt: Stmt, registers: frozenset[str]) -> int:
    """Machine operations one run of ``stmt`` takes, roughly: one per intrinsic call; for
    plain C, one per memory access (arrays of vector registers are not memory), two for a
    compound assignment (its add and its store), one per arithmetic operator of the value.
    ``C[..] += A[..] * B[..]`` is 6: loads of C, A and B, the multiply, the add, the store;
    a register tile's ``C_reg[0][0] = _mm512_fmadd_ps(A_vec, B_vec[0], C_reg[0][0])`` is 1."""
    calls = len(INTRINSIC.findall(stmt.text))
    if calls:
        return calls
    memory = sum(1 for m in ACCESS.finditer(stmt.text) if m.group(1) not in registers)
    compound = _COMPOUND.search(stmt.text)
    value = _INDEX.sub("", stmt.text.split("=", 1)[1] if "=" in stmt.text else "")
    arith = len(_ARITH.findall(value.split(")", 1)[1] if value.lstrip().startswith("(") and ")" in value else value))
    return max(1, memory + (2 if compound else 0) + arith)


def dynamic(stmt: Stmt) -> int:
    """How many times ``stmt`` runs: the product of its loops' trip counts."""
    return math.prod(loop.trip for loop in stmt.chain)


@dataclass(frozen=True, slots=True)
class Buffer:
    """A buffer the kernel declares: on the stack, on the heap, or of vector registers."""

    name: str
    elements: int
    bytes: int
    heap: bool  # malloc'ed (Exo's DRAM) rather than on the stack
    in_loop: bool
    vector: bool  # of vector registers (__m512, __m256, ...)


def element_bytes(lines: list[str], c_source: str) -> tuple[dict[str, int], list[Buffer]]:
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
        m = DECL.match(line)
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
        buffers.append(Buffer(name, n, n * _ELEMENT_BYTES[ctype], heap, depth > 0, ctype.startswith("__m")))
    return sizes, buffers


def stride(index: str, var: str, names: Iterable[str]) -> int | None:
    """How far ``index`` moves when ``var`` steps by one (None when it is not integer arithmetic)."""
    env = dict.fromkeys(names, 0)
    zero = _value(index, env)
    env[var] = 1
    one = _value(index, env)
    return None if zero is None or one is None else one - zero


@dataclass(frozen=True, slots=True)
class Access:
    """One memory access ``name[index]`` of a statement, in its loops."""

    name: str
    names: frozenset[str]  # the identifiers of its index
    offset: int | None  # its index with every loop variable at 0
    bytes: int  # per access: the element, or every lane a vector instruction takes from it
    chain: tuple[Loop, ...]


def accesses(stmts: list[Stmt], sizes: dict[str, int], registers: frozenset[str]) -> list[Access]:
    """Every memory access of the statements (not arrays of vector registers), once each."""
    found: dict[tuple, Access] = {}
    for stmt in stmts:
        widths = [int(w) if w else 128 for w, _ in INTRINSIC.findall(stmt.text)]
        for m in ACCESS.finditer(stmt.text):
            name, index = m.groups()
            if name in registers:
                continue
            names = frozenset(_IDENT.findall(index))
            element = sizes.get(name, 4)
            by_address = bool(widths) and m.start() > 0 and stmt.text[m.start() - 1] == "&"
            lanes = max(1, max(widths) // 8 // element) if by_address else 1
            offset = _value(index, dict.fromkeys(names, 0))
            access = Access(name, names, offset, element * lanes, stmt.chain)
            found.setdefault((name, names, offset, tuple(lp.uid for lp in stmt.chain)), access)
    return list(found.values())


def footprint(accesses: list[Access], loop: Loop, depth: int, inside: int) -> int:
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


def traffic(accesses: list[Access], caches: Iterable[int]) -> list[int]:
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
                        iteration[key] = footprint(accesses, loop, depth, inside=1)
                    if iteration[key] <= cache:
                        continue
                moved *= loop.trip
            total += moved
        out.append(total)
    return out


def hot_index(stmts: list[Stmt], dynamic: list[int]) -> int:
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
