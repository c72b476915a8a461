"""What the compiler made of a kernel, read from its machine code: the cost model's notes.

A kernel is built with line tables (``-g1``: they change no instruction, and cost gcc 12
nothing measurable), so each instruction of the shared object names the line of the C it
came from. ``objdump -d -l`` lists them; ``summarize`` reduces the listing to one row per
line of the kernel's C: the widest vector register its instructions use (packed ones:
``xmm`` 16 bytes, ``ymm`` 32, ``zmm`` 64; AArch64's ``vN.4s`` 16, ``vN.2s`` 8) and how
many conditional branches it has - a loop whose line keeps none was unrolled or vectorized
away. ``features`` reads the rows.

Why not gcc's own notes (``-fopt-info-vec-loop-optimized``): asking for them turns on the
vectorizer's dumps, and a build then took 2.4x as long (i8 matmul children on Zen 4: 0.65 s
against 0.27 s, all of the added time in the vectorizers). The machine code says the same and more: it
names the statement, not only the loop, and it is what runs.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
from pathlib import Path

from schedsearch.evaluate.process import run_child

#: The header of a summary; its rows are ``LINE VECTOR_BYTES BRANCHES INSTRUCTIONS``.
HEADER = "# machine code by line of C: line vector-bytes branches instructions"
#: The longest objdump may take on one kernel (a few milliseconds is usual).
OBJDUMP_TIMEOUT = 20.0

# ``/path/k.c:71`` or ``k.c:71 (discriminator 3)``: the instructions after it come from
# line 71 of that file - the kernel's when it is C; a header's inlined code is not counted.
_SOURCE_LINE = re.compile(r"^\S+?(\.c)?:(\d+)(?: \(discriminator \d+\))?$")
# ``    1180:\tvpmovsxbd (%rcx),%zmm1``: an address, a tab, the mnemonic and its operands.
_INSTRUCTION = re.compile(r"^\s*[0-9a-f]+:\t(?:[0-9a-f]{2} )*\s*([a-z][\w.]*)\s*(.*)$")
_X86_VECTOR = (("zmm", 64), ("ymm", 32), ("xmm", 16))
_ARM_VECTOR = re.compile(r"\bv\d+\.(\d+)([bhsd])\b")
_ARM_BYTES = {"b": 1, "h": 2, "s": 4, "d": 8}
# x86 instructions on xmm registers that are scalar: ``vaddss``, ``vfmadd231sd``, moves of
# one element, inserts and extracts of one element.
_X86_SCALAR = re.compile(r"(?:s[sdh]|^v?movd|^v?movq|^v?p(?:insr|extr)\w*|^v?(?:insert|extract)ps|^v?cvt\w*2s[sd])$")
# Conditional branches: x86 ``jne``/``jb``/... (not ``jmp``), AArch64 ``b.ne``, ``cbz``, ``tbnz``.
_BRANCH = re.compile(r"^(?:j(?!mp)[a-z]+|b\.[a-z]+|c?bn?z|tbn?z)$")
# A cross compiler's name: its target's prefix, then the compiler (``aarch64-linux-gnu-gcc-12``).
_CROSS = re.compile(r"^(.+-)(?:gcc|cc|clang)(?:-[\d.]+)?$")


def vector_bytes(mnemonic: str, operands: str) -> int:
    """The widest packed vector register ``mnemonic operands`` works on, in bytes; 0 for
    scalar work (general registers, or one element of a vector register)."""
    for name, size in _X86_VECTOR:
        if f"%{name}" in operands:
            return 0 if size == 16 and _X86_SCALAR.search(mnemonic) else size
    return max((int(n) * _ARM_BYTES[kind] for n, kind in _ARM_VECTOR.findall(operands)), default=0)


def summarize(listing: str) -> str:
    """``objdump -d -l`` output reduced to one row per line of C: the widest vector bytes,
    the conditional branches and the instructions that line compiled to."""
    rows: dict[int, list[int]] = {}
    line: int | None = None
    for text in listing.splitlines():
        source = _SOURCE_LINE.match(text.strip())
        if source:
            line = int(source.group(2)) if source.group(1) else None
            continue
        if text.endswith(">:") or text.endswith("():"):  # a new symbol: no line until one is named
            line = None
            continue
        ins = _INSTRUCTION.match(text)
        if ins is None or line is None:
            continue
        mnemonic, operands = ins.group(1), ins.group(2)
        row = rows.setdefault(line, [0, 0, 0])
        row[0] = max(row[0], vector_bytes(mnemonic, operands))
        row[1] += 1 if _BRANCH.match(mnemonic) else 0
        row[2] += 1
    return "\n".join([HEADER, *(f"{n} {b} {j} {i}" for n, (b, j, i) in sorted(rows.items()))]) + "\n"


@functools.lru_cache(maxsize=16)
def objdump_command(cc: str) -> str | None:
    """The objdump that reads what the compiler ``cc`` makes: a cross compiler's own
    (``aarch64-linux-gnu-gcc`` -> ``aarch64-linux-gnu-objdump``), else the system's; None
    when there is none."""
    argv = shlex.split(cc)
    cross = _CROSS.match(os.path.basename(argv[0])) if argv else None
    for candidate in ([f"{cross.group(1)}objdump"] if cross else []) + ["objdump"]:
        found = shutil.which(candidate)
        if found:
            return found
    return None


def machine_notes(shared_object: Path, objdump: str, timeout: float = OBJDUMP_TIMEOUT) -> str | None:
    """The summary of ``shared_object``'s machine code (``summarize``); None when objdump
    cannot read it (no line tables, a foreign format, a timeout)."""
    try:
        res = run_child(
            [objdump, "-d", "-l", "--no-show-raw-insn", str(shared_object)], timeout=timeout, background=True
        )
    except OSError:
        return None
    if res.timed_out or res.returncode != 0:
        return None
    summary = summarize(res.stdout)
    return summary if summary.count("\n") > 1 else None
