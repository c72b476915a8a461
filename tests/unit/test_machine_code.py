"""Reading what the compiler made of a kernel from its disassembly (``machine_code``)."""

from __future__ import annotations

import pytest

from schedsearch.evaluate.machine_code import HEADER, objdump_command, summarize, vector_bytes

# ``objdump -d -l --no-show-raw-insn`` of a kernel built with -g1 (gcc 12, Zen 4), cut down.
X86_LISTING = """
k.so:     file format elf64-x86-64

Disassembly of section .text:

0000000000001040 <deregister_tm_clones>:
    1040:\tlea    0x2fc9(%rip),%rdi
    1051:\tje     1068 <deregister_tm_clones+0x28>

0000000000001100 <schedsearch_kernel>:
schedsearch_kernel():
/tmp/build/ab/abcd.c:47
    1100:\tvmovdqu32 (%rcx),%zmm17
/tmp/build/ab/abcd.c:44
    110d:\tmov    %rsi,%rax
/tmp/build/ab/abcd.c:70
    1180:\tvpmovsxbd (%rcx),%zmm1
/tmp/build/ab/abcd.c:69 (discriminator 2)
    1195:\tmovsbl -0x2(%rax),%edx
    1199:\tvmovd  %edx,%xmm3
/tmp/build/ab/abcd.c:71
    119e:\tvpbroadcastd %edx,%ymm2
    11a4:\tvfmadd231ss %xmm1,%xmm2,%xmm0
/tmp/build/ab/abcd.c:64
    148e:\tcmp    %rdi,%rcx
    1492:\tjne    1180 <schedsearch_kernel+0x80>
/usr/lib/gcc/x86_64-linux-gnu/12/include/avx512fintrin.h:120
    1498:\tvaddps %zmm1,%zmm2,%zmm3
    14a0:\tret
"""


def test_each_line_of_c_gets_its_widest_vectors_and_its_branches() -> None:
    rows = summarize(X86_LISTING).splitlines()
    assert rows[0] == HEADER
    table = {int(r.split()[0]): tuple(map(int, r.split()[1:])) for r in rows[1:]}
    # the runtime's own code before the kernel names no line; headers' lines are not the kernel's
    assert set(table) == {44, 47, 64, 69, 70, 71}
    assert table[47] == (64, 0, 1)
    assert table[70] == (64, 0, 1)
    assert table[69] == (0, 0, 2)  # a byte load and a one-element move: scalar
    assert table[71] == (32, 0, 2)  # a ymm broadcast beside a scalar fma on xmm
    assert table[64] == (0, 1, 2)  # the loop the compiler kept


@pytest.mark.parametrize(("mnemonic", "operands", "expected"), [
    ("vaddps", "%zmm1,%zmm2,%zmm3", 64),
    ("vpaddd", "%ymm1,%ymm2,%ymm3", 32),
    ("vpmulld", "%xmm1,%xmm2,%xmm3", 16),
    ("vaddss", "%xmm1,%xmm2,%xmm3", 0),
    ("vfmadd231sd", "%xmm1,%xmm2,%xmm3", 0),
    ("vmovq", "%xmm0,%rax", 0),
    ("vpextrd", "$0x1,%xmm0,%eax", 0),
    ("add", "$0x20,%rcx", 0),
    ("mla", "v0.4s, v1.4s, v2.4s", 16),
    ("add", "v0.2s, v1.2s, v2.2s", 8),
    ("fmadd", "s0, s1, s2, s3", 0),
])
def test_vector_bytes_tell_packed_from_scalar_work(mnemonic: str, operands: str, expected: int) -> None:
    assert vector_bytes(mnemonic, operands) == expected


def test_aarch64_branches_count_too() -> None:
    listing = "0000000000000600 <schedsearch_kernel>:\nk.c:12\n 600:\tld1\t{v0.4s}, [x1]\n 604:\tb.ne\t600\n" \
              " 608:\tcbnz\tx2, 600\nk.c:13\n 60c:\tb\t600\n"
    assert summarize(listing).splitlines()[1:] == ["12 16 2 3", "13 0 0 1"]


def test_the_objdump_is_the_cross_compilers_own_when_there_is_one(monkeypatch) -> None:
    found = {"/usr/bin/objdump", "/usr/bin/aarch64-linux-gnu-objdump"}
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}" if f"/usr/bin/{name}" in found else None)
    objdump_command.cache_clear()
    try:
        assert objdump_command("aarch64-linux-gnu-gcc -static") == "/usr/bin/aarch64-linux-gnu-objdump"
        assert objdump_command("riscv64-linux-gnu-gcc-12") == "/usr/bin/objdump"  # none of its own
        assert objdump_command("gcc-12") == "/usr/bin/objdump"
        found.clear()
        assert objdump_command("gcc") is None
    finally:
        objdump_command.cache_clear()
