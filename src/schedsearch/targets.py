"""Instruction sets as data: what a vector target offers the rewrite rules.

A ``Target`` says how wide its registers are, how many there are, which Exo memory class
holds a vector, and which of Exo's own instruction procs (``exo.platforms.x86``,
``exo.platforms.neon``) play which role for each element type. The rules read these
tables; a new instruction set is a new table, not a new code path. Instructions are named
by string and resolved against the target's Exo module only when a schedule is applied,
so this module imports nothing from Exo and can be read (and tested) anywhere.

``detect(flags)`` picks the widest target whose CPU flags are all present.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from schedsearch.core import FloatMode, RewriteKind, Schedule
from schedsearch.errors import WorkloadError


class TargetName(StrEnum):
    """The instruction sets schedsearch knows, narrowest last."""

    AVX512 = "avx512"
    AVX2 = "avx2"
    NEON = "neon"
    SCALAR = "scalar"


class Role(StrEnum):
    """What an instruction does to a vector of ``lanes`` elements."""

    LOAD = "load"  # vector <- contiguous memory
    STORE = "store"  # contiguous memory <- vector
    BROADCAST = "broadcast"  # every lane <- one element in memory
    FMA = "fma"  # acc += x * y, lane by lane
    ADD = "add"  # out = x + y
    SUB = "sub"  # out = x - y
    MUL = "mul"  # out = x * y
    DIV = "div"  # out = x / y
    ACC = "acc"  # acc += x, lane by lane
    REDUCE = "reduce"  # scalar += the sum of all lanes
    ZERO = "zero"  # vector <- 0
    MASKED_LOAD = "masked_load"  # the first n lanes <- memory, the rest 0
    MASKED_STORE = "masked_store"  # memory <- the first n lanes
    MASKED_FMA = "masked_fma"  # acc += x * y in the first n lanes
    MASKED_BROADCAST = "masked_broadcast"  # the first n lanes <- one element in memory
    MASKED_ADD = "masked_add"  # out = x + y in the first n lanes
    MASKED_SUB = "masked_sub"
    MASKED_MUL = "masked_mul"
    MASKED_DIV = "masked_div"


@dataclass(frozen=True, slots=True)
class VectorOps:
    """One element type's vector instructions on a target: role -> Exo instruction name."""

    dtype: str  # Exo's spelling: "f32", "f64", "ui16", ...
    lanes: int
    instructions: tuple[tuple[Role, str], ...]

    def get(self, role: Role) -> str | None:
        """The instruction playing ``role``, or None when the target has none."""
        return next((name for r, name in self.instructions if r is role), None)

    def has(self, *roles: Role) -> bool:
        return all(self.get(r) is not None for r in roles)


@dataclass(frozen=True, slots=True)
class Target:
    """One instruction set: its registers, memory class, instructions, header and flags."""

    name: TargetName
    cpu_flags: tuple[str, ...]  # all must be in /proc/cpuinfo's flags (or the ISA's hwcaps)
    vector_bits: int
    registers: int  # architectural vector registers a register tile may fill
    memory: str | None  # Exo memory class of a vector register ("AVX512"), None for scalar
    module: str | None  # the Exo module defining the instructions
    ops: tuple[VectorOps, ...] = ()
    header: str | None = None  # C header the instructions need
    cflags: tuple[str, ...] = ()  # compiler flags that enable the instructions
    arch: str = "x86_64"  # the machine architecture it runs on
    memory_module: str = "exo.libs.memories"  # the Exo module defining ``memory``
    #: Narrower targets every CPU of this one also runs: their instructions fill the element
    #: types this one lacks (AVX-512 CPUs run AVX2's f64 instructions).
    implies: tuple[TargetName, ...] = ()

    def vector(self, dtype: str) -> VectorOps | None:
        """The vector instructions for ``dtype`` (None: the target cannot vectorize it)."""
        return next((o for o in self.ops if o.dtype == dtype), None)

    def lanes(self, dtype: str) -> int:
        """Elements of ``dtype`` in one register (1 when the target has no vectors for it)."""
        ops = self.vector(dtype)
        return ops.lanes if ops else 1

    @property
    def is_vector(self) -> bool:
        return bool(self.ops)

    def supported_by(self, flags: Iterable[str]) -> bool:
        """True when a CPU with these flags runs this target's instructions."""
        have = set(flags)
        return all(f in have for f in self.cpu_flags)


def _ops(dtype: str, lanes: int, **names: str) -> VectorOps:
    return VectorOps(dtype, lanes, tuple((Role(role), name) for role, name in names.items()))


AVX512 = Target(
    name=TargetName.AVX512,
    cpu_flags=("avx512f", "fma"),
    vector_bits=512,
    registers=32,
    memory="AVX512",
    module="exo.platforms.x86",
    ops=(
        # Exo 1.0.0 has AVX-512 instructions for f32 only; there is no mm512_mul_ps, no
        # subtraction or division and no horizontal sum. mm512_mask_set1_ps emits an unmasked
        # set1, harmless for a broadcast into a register.
        _ops(
            "f32",
            16,
            load="mm512_loadu_ps",
            store="mm512_storeu_ps",
            broadcast="mm512_set1_ps",
            fma="mm512_fmadd_ps",
            add="mm512_add_ps",
            zero="mm512_setzero_ps",
            masked_load="mm512_maskz_loadu_ps",
            masked_store="mm512_mask_storeu_ps",
            masked_fma="mm512_mask_fmadd_ps",
            masked_broadcast="mm512_mask_set1_ps",
            masked_add="mm512_mask_add_ps",
        ),
    ),
    header="immintrin.h",
    # gcc tuned for Zen 3/4 (and for Intel) prefers 256-bit vectors when it vectorizes loops
    # itself; on an AVX-512 target the code around the instructions should use the full width
    # too (the unscheduled 512x512 blur: 66 us with 256-bit, 57 us with 512-bit vectors).
    cflags=("-mavx512f", "-mfma", "-mprefer-vector-width=512"),
    implies=(TargetName.AVX2,),
)

AVX2 = Target(
    name=TargetName.AVX2,
    cpu_flags=("avx2", "fma"),
    vector_bits=256,
    registers=16,
    memory="AVX2",
    module="exo.platforms.x86",
    ops=(
        # The "prefix" instructions are AVX2's masked tails: the first n lanes, n < 8.
        _ops(
            "f32",
            8,
            load="mm256_loadu_ps",
            store="mm256_storeu_ps",
            broadcast="mm256_broadcast_ss",
            fma="mm256_fmadd_ps",
            add="mm256_add_ps",
            sub="mm256_sub_ps",
            mul="mm256_mul_ps",
            div="mm256_div_ps",
            acc="avx2_reduce_add_wide_ps",
            reduce="avx2_assoc_reduce_add_ps",
            zero="mm256_setzero_ps",
            masked_load="mm256_prefix_load_ps",
            masked_store="mm256_prefix_store_ps",
            masked_broadcast="mm256_prefix_broadcast_ss",
            masked_add="mm256_prefix_add_ps",
            masked_sub="mm256_prefix_sub_ps",
            masked_mul="mm256_prefix_mul_ps",
            masked_div="mm256_prefix_div_ps",
        ),
        _ops(
            "f64",
            4,
            load="mm256_loadu_pd",
            store="mm256_storeu_pd",
            broadcast="mm256_broadcast_sd",
            fma="mm256_fmadd_pd",
            add="mm256_add_pd",
            sub="mm256_sub_pd",
            mul="mm256_mul_pd",
            div="mm256_div_pd",
            acc="avx2_reduce_add_wide_pd",
            reduce="avx2_assoc_reduce_add_pd",
            zero="mm256_setzero_pd",
        ),
        # Exo's "mm256_add_epi16" is a saturating add of unsigned 16-bit lanes: only loads and
        # stores are plain enough to offer for ui16.
        _ops("ui16", 16, load="mm256_loadu_si256", store="mm256_storeu_si256"),
    ),
    header="immintrin.h",
    # An AVX2 search on an AVX-512 CPU measures what an AVX2 CPU could do: without
    # -mno-avx512f gcc would use AVX-512VL's masks and 32 vector registers in the code
    # it vectorizes itself.
    cflags=("-mavx2", "-mfma", "-mno-avx512f"),
)

NEON = Target(
    name=TargetName.NEON,
    cpu_flags=("asimd",),
    vector_bits=128,
    registers=32,
    memory="Neon",
    module="exo.platforms.neon",
    ops=(
        # Exo 1.0.0's only lane-by-lane "acc += x * y" for f32 and f64 is neon_vfmadd_*, which
        # emits vmlaq_f32/vmlaq_f64, the unfused multiply-accumulate: AArch64 gcc compiles it
        # to an fmul and an fadd. Exo's fused form, neon_vfmla_4xf32_4xf32 (vfmaq_laneq_f32),
        # multiplies by one lane of a register, which is not this role.
        _ops(
            "f32",
            4,
            load="neon_vld_4xf32",
            store="neon_vst_4xf32",
            broadcast="neon_broadcast_4xf32",
            fma="neon_vfmadd_4xf32_4xf32",
            add="neon_vadd_4xf32",
            mul="neon_vmul_4xf32",
            acc="neon_reduce_vadd_4xf32",
            reduce="neon_assoc_reduce_add_instr_4xf32",
            zero="neon_zero_4xf32",
        ),
        _ops(
            "f64",
            2,
            load="neon_vld_2xf64",
            store="neon_vst_2xf64",
            broadcast="neon_broadcast_2xf64",
            fma="neon_vfmadd_2xf64_2xf64",
            add="neon_vadd_2xf64",
            mul="neon_vmul_2xf64",
            acc="neon_reduce_vadd_2xf64",
            reduce="neon_assoc_reduce_add_instr_2xf64",
            zero="neon_zero_2xf64",
        ),
        # f16 arithmetic (vfmaq_f16, vaddq_f16, vmulq_f16) is ARMv8.2-A FP16 ("asimdhp", gcc
        # -march=armv8.2-a+fp16), not baseline asimd: gcc refuses it otherwise. Only the
        # moves are offered, as for AVX2's ui16.
        _ops(
            "f16",
            8,
            load="neon_vld_8xf16",
            store="neon_vst_8xf16",
            broadcast="neon_broadcast_8xf16",
            zero="neon_zero_8xf16",
        ),
    ),
    header="arm_neon.h",  # NEON is part of every AArch64 CPU: no flags needed to enable it
    arch="aarch64",
    memory_module="exo.platforms.neon",
)

#: Plain C: gcc's own vectoriser decides. 16 is what gcc can keep in registers on x86-64.
SCALAR = Target(name=TargetName.SCALAR, cpu_flags=(), vector_bits=0, registers=16, memory=None, module=None)

#: Every known target, widest first: ``detect`` takes the first one the CPU supports.
TARGETS: tuple[Target, ...] = (AVX512, AVX2, NEON, SCALAR)


def target(name: str | TargetName) -> Target:
    """The target called ``name``; an unknown name is bad input (one line, what to do)."""
    for t in TARGETS:
        if t.name == name:
            return t
    known = ", ".join(t.name.value for t in TARGETS)
    raise WorkloadError(f"unknown target {name!r}; choose one of {known} (or auto)")


def chain(t: Target) -> tuple[Target, ...]:
    """``t`` and the narrower targets it implies, widest first: where a rule looks, in order,
    for the instructions of an element type."""
    return (t, *(target(name) for name in t.implies))


def for_dtype(t: Target, dtype: str) -> Target | None:
    """The first target of ``chain(t)`` with vector instructions for ``dtype``."""
    return next((c for c in chain(t) if c.vector(dtype) is not None), None)


def detect(flags: Iterable[str]) -> Target:
    """The widest target a CPU with these ``/proc/cpuinfo`` flags runs (scalar at least)."""
    have = frozenset(flags)
    return next(t for t in TARGETS if t.supported_by(have))


def resolve(name: str, flags: Iterable[str]) -> Target:
    """``auto`` -> ``detect(flags)``; any other name -> that target, whatever the CPU."""
    return detect(flags) if name == "auto" else target(name)


#: The compiler flags each float mode adds to candidate builds (never to the reference's).
FLOAT_MODE_FLAGS: dict[FloatMode, tuple[str, ...]] = {
    FloatMode.STRICT: (),
    FloatMode.RELAXED: ("-freciprocal-math",),
}


def build_flags(base: Sequence[str], tgt: Target, float_mode: FloatMode = FloatMode.STRICT) -> tuple[str, ...]:
    """The compiler flags for building candidates for ``tgt``: ``base`` (the user's, or the
    defaults), then the target's own flags and the float mode's that ``base`` does not
    already give. The target's come after ``base`` so that they win over ``-march=native``
    where the two disagree."""
    flags = tuple(base)
    for f in tgt.cflags + FLOAT_MODE_FLAGS[FloatMode(float_mode)]:
        if f not in flags:
            flags += (f,)
    return flags


def reference_flags(cflags: Sequence[str], float_mode: FloatMode) -> tuple[str, ...]:
    """The flags the reference (the unscheduled proc, whose outputs every candidate is
    checked against) is built with: ``cflags`` without the float mode's own flags, so a
    relaxed search is verified against the arithmetic as written."""
    added = FLOAT_MODE_FLAGS[FloatMode(float_mode)]
    return tuple(f for f in cflags if f not in added)


def switch_float_mode(cflags: Sequence[str], old: FloatMode, new: FloatMode) -> tuple[str, ...]:
    """``cflags`` built for float mode ``old`` as they would be for ``new``."""
    flags = reference_flags(cflags, old)
    return flags + tuple(f for f in FLOAT_MODE_FLAGS[FloatMode(new)] if f not in flags)


def schedule_target(schedule: Schedule) -> str:
    """The instruction set a schedule's steps emit: the widest ``isa`` any step names, else
    ``scalar``. Steps written before targets existed (``simd_kernel``) emit AVX2."""
    names = {str(s.arg("isa")) for s in schedule.steps if s.arg("isa") is not None}
    names |= {TargetName.AVX2.value for s in schedule.steps if s.kind is RewriteKind.SIMD_KERNEL}
    order = [t.name.value for t in TARGETS]  # widest first
    known = [n for n in order if n in names]
    unknown = sorted(names - set(order))
    return (unknown or known or [TargetName.SCALAR.value])[0]
