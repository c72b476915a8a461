"""Target detection from CPU flags: tables and flag lists only (no Exo, no compiler)."""

from __future__ import annotations

import pytest

from schedsearch.targets import NEON, Role, TargetName, detect, resolve, target

#: ``Features`` lines of /proc/cpuinfo on AArch64 machines.
ARM_FEATURES = {
    # Cortex-A72 (Raspberry Pi 4): ARMv8.0, no half-precision arithmetic
    "cortex-a72": "fp asimd evtstrm crc32 cpuid",
    # Neoverse N1 (AWS Graviton2): ARMv8.2 with FP16 ("asimdhp") and dot products
    "neoverse-n1": "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc "
    "dcpop asimddp ssbs",
    # Neoverse V1 (AWS Graviton3): SVE as well; NEON is still the target schedsearch knows
    "neoverse-v1": "fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt "
    "fcma lrcpc dcpop sha3 sm3 sm4 asimddp sha512 sve asimdfhm dit uscat ilrcpc flagm ssbs paca pacg dcpodp "
    "svei8mm svebf16 i8mm bf16 dgh rng",
}


@pytest.mark.parametrize("cpu", sorted(ARM_FEATURES))
def test_an_arm_cpu_with_asimd_gets_neon(cpu):
    flags = ARM_FEATURES[cpu].split()
    assert detect(flags) is NEON
    assert resolve("auto", flags) is NEON
    assert NEON.supported_by(flags)


def test_without_asimd_an_arm_cpu_gets_scalar_code():
    assert detect(["fp", "evtstrm", "crc32", "cpuid"]).name is TargetName.SCALAR


def test_an_x86_cpu_never_gets_neon():
    zen4 = "fpu sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma avx512f avx512bw avx512vl".split()
    assert detect(zen4).name is TargetName.AVX512
    assert not NEON.supported_by(zen4)
    # an explicit choice is taken whatever the CPU (its kernels then fail to build or run)
    assert resolve("neon", zen4) is NEON


def test_the_neon_table():
    assert target("neon") is NEON
    assert (NEON.arch, NEON.registers, NEON.vector_bits, NEON.memory) == ("aarch64", 32, 128, "Neon")
    assert NEON.memory_module == NEON.module == "exo.platforms.neon"
    assert NEON.lanes("f32") == 4 and NEON.lanes("f64") == 2
    tile_roles = (Role.LOAD, Role.STORE, Role.BROADCAST, Role.FMA)
    assert NEON.vector("f32").has(*tile_roles) and NEON.vector("f64").has(*tile_roles)
    # f16 arithmetic is not in baseline asimd: moves only, so no f16 register tiles
    f16 = NEON.vector("f16")
    assert f16 is not None and f16.has(Role.LOAD, Role.STORE) and not f16.has(Role.FMA)


def test_a_schedule_names_the_target_its_steps_emit() -> None:
    from schedsearch.core import Rewrite, RewriteKind, Schedule
    from schedsearch.targets import schedule_target

    split = Rewrite.make(RewriteKind.SPLIT, "i #0", factor=8)
    assert schedule_target(Schedule()) == "scalar"
    assert schedule_target(Schedule((split,))) == "scalar"
    assert schedule_target(Schedule((split, Rewrite.make(RewriteKind.REGISTER_TILE, "i #0", isa="avx512")))) == "avx512"
    # older schedule files: simd_kernel steps were AVX2 tiles and name no isa
    assert schedule_target(Schedule((Rewrite.make(RewriteKind.SIMD_KERNEL, "i #0", rows=6),))) == "avx2"
    # a target this version does not know is named, so regress can say so
    assert schedule_target(Schedule((Rewrite.make(RewriteKind.REGISTER_TILE, "i #0", isa="sve2"),))) == "sve2"


def test_an_avx512_target_borrows_avx2_instructions_for_types_it_lacks() -> None:
    from schedsearch.targets import AVX2, AVX512, NEON, SCALAR, chain, for_dtype

    assert chain(AVX512) == (AVX512, AVX2) and chain(AVX2) == (AVX2,)
    assert for_dtype(AVX512, "f32") is AVX512  # its own first
    assert for_dtype(AVX512, "f64") is AVX2  # Exo 1.0.0 has no AVX-512 f64 instructions
    assert for_dtype(AVX2, "f16") is None and for_dtype(SCALAR, "f32") is None
    assert for_dtype(NEON, "f64") is NEON


def test_build_flags_append_the_targets_own_flags_after_the_users() -> None:
    from schedsearch.targets import AVX2, AVX512, SCALAR, build_flags

    base = ("-O3", "-march=native")
    assert build_flags(base, SCALAR) == base
    wide = build_flags(base, AVX512)
    assert wide[:2] == base and "-mprefer-vector-width=512" in wide
    # an AVX2 search on an AVX-512 CPU must not let gcc use AVX-512 in code it vectorizes
    narrow = build_flags(base, AVX2)
    assert narrow[-1] == "-mno-avx512f" and "-mprefer-vector-width=512" not in narrow
    # flags the user already gave are not repeated
    assert build_flags(("-O2", "-mfma"), AVX2).count("-mfma") == 1


def test_a_relaxed_float_mode_adds_its_flags_to_candidates_but_never_to_the_reference() -> None:
    from schedsearch.core import FloatMode
    from schedsearch.targets import AVX512, FLOAT_MODE_FLAGS, SCALAR, build_flags, reference_flags, switch_float_mode

    base = ("-O3", "-march=native")
    assert build_flags(base, AVX512, FloatMode.STRICT) == build_flags(base, AVX512)
    relaxed = build_flags(base, AVX512, FloatMode.RELAXED)
    assert "-freciprocal-math" in relaxed and relaxed[:2] == base
    assert reference_flags(relaxed, FloatMode.RELAXED) == build_flags(base, AVX512)
    # a user's own flag survives a strict reference build: only the mode's flags are removed
    mine = ("-O3", "-freciprocal-math")
    assert reference_flags(build_flags(mine, SCALAR, FloatMode.STRICT), FloatMode.STRICT) == mine
    assert switch_float_mode(build_flags(base, SCALAR), FloatMode.STRICT, FloatMode.RELAXED) == \
        base + FLOAT_MODE_FLAGS[FloatMode.RELAXED]
    assert switch_float_mode(relaxed, FloatMode.RELAXED, FloatMode.STRICT) == build_flags(base, AVX512)
