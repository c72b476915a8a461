"""NEON register tiles, run for real: cross-compiled for AArch64 and run under qemu-user.

This machine is x86, so NEON kernels can be checked here but not timed. Each kernel's C
(``register_tile`` with ``target="neon"``, several shapes, most with a row tail) is
compiled ``-static`` together with the harness's linked driver by Debian's
``aarch64-linux-gnu-gcc`` and run under ``qemu-aarch64`` on the same seeded inputs as the
unscheduled proc compiled for this machine. Its outputs must match that reference, and
numpy, to a tight tolerance, and its C and machine code must be NEON vector code.

Without the cross compiler, its C library or qemu these tests fail, naming the Debian
package to install (``bash scripts/setup.sh`` installs them): they never skip.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from schedsearch.core import KERNEL_SYMBOL, BenchConfig, DType, ExpandOptions, Rewrite, RewriteKind, Workload
from schedsearch.evaluate import KernelIO, run_once
from schedsearch.evaluate.bench import parse_report, reference_kernel, run_argv
from schedsearch.evaluate.build import build_driver
from schedsearch.evaluate.harness import driver_source
from schedsearch.evaluate.reference import build_reference
from schedsearch.evaluate.verification import atol_scale
from schedsearch.targets import NEON
from schedsearch.transforms import build_proc, kernel_c, load_workload, propose, root_candidate, try_apply

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = {
    # M=20 rows: 6-, 4- and 3-row tiles leave a tail of 2, 12-row tiles a tail of 8.
    "sgemm": (ROOT / "examples" / "matmul.py", {"M": 20, "N": 32, "K": 8}),
    "dgemm": (ROOT / "tests" / "data" / "workloads" / "dgemm.py", {"M": 20, "N": 16, "K": 8}),
}
#: (workload, rows, columns, order): the register tiles that are run.
CASES = [
    ("sgemm", 6, 16, "cols"),
    ("sgemm", 6, 16, "rows"),
    ("sgemm", 5, 16, "cols"),
    ("sgemm", 4, 16, "cols"),
    ("sgemm", 12, 8, "rows"),
    ("dgemm", 6, 8, "cols"),
    ("dgemm", 3, 8, "rows"),
    ("dgemm", 12, 4, "cols"),
]
#: Allowed |neon - reference| relative to max(1, max |reference|), as the harness measures it.
#: The reference is compiled with FMA contraction and Exo's NEON multiply-add is unfused, so
#: the two may differ in the last bits; an indexing mistake is off by 0.1 or more.
TOLERANCE = {DType.F32: 1e-6, DType.F64: 1e-14}
#: NEON's vector arrangement of each element type, as the disassembler prints it.
ARRANGEMENT = {DType.F32: "4s", DType.F64: "2d"}
INTRINSIC_SUFFIX = {DType.F32: "f32", DType.F64: "f64"}

CROSS_CC = "aarch64-linux-gnu-gcc"
OBJDUMP = "aarch64-linux-gnu-objdump"
QEMU = "qemu-aarch64"
#: The Debian package that provides each tool.
PACKAGE = {CROSS_CC: "gcc-aarch64-linux-gnu", OBJDUMP: "binutils-aarch64-linux-gnu", QEMU: "qemu-user"}
LIBC_PACKAGE = "libc6-dev-arm64-cross"
HOST = BenchConfig(seed=7)
TIMEOUT = 120


def require_cross_toolchain() -> None:
    """Fail (never skip) unless the AArch64 cross compiler, its static libc and qemu are here."""
    missing = [package for tool, package in PACKAGE.items() if shutil.which(tool) is None]
    if not missing:
        found = subprocess.run([CROSS_CC, "-print-file-name=libc.a"], capture_output=True, text=True, timeout=60)
        # gcc echoes the bare name when the file is in none of its directories.
        if found.returncode != 0 or not Path(found.stdout.strip()).is_absolute():
            missing.append(LIBC_PACKAGE)
    if missing:
        pytest.fail(
            f"the NEON tests cross-compile for AArch64 and run under {QEMU}: install the Debian "
            f"package(s) {' '.join(missing)} (apt-get install {' '.join(missing)}, or bash scripts/setup.sh)",
            pytrace=False,
        )


@dataclass(frozen=True)
class Reference:
    """A workload, its unscheduled proc, its NEON register-tile proposals and its host outputs."""

    workload: Workload
    proc: Any  # an Exo Procedure
    tiles: tuple[Rewrite, ...]
    io: KernelIO


@pytest.fixture(scope="module")
def references(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Reference]:
    """Each workload's unscheduled proc, compiled and run once on this machine."""
    cache = tmp_path_factory.mktemp("host-build-cache")
    out = {}
    for name, (path, sizes) in WORKLOADS.items():
        workload = load_workload(path, name, sizes)
        proc = build_proc(workload)
        tiles = tuple(r for r in propose(proc, ExpandOptions(target="neon")) if r.kind is RewriteKind.REGISTER_TILE)
        out[name] = Reference(workload, proc, tiles, run_once(workload, root_candidate(workload), HOST, cache))
    return out


def _arrays(workload: Workload, raw: dict[str, bytes]) -> dict[str, np.ndarray]:
    shapes = {a.name: (a.shape, a.dtype.numpy_name) for a in workload.args}
    return {name: np.frombuffer(data, dtype=shapes[name][1]).reshape(shapes[name][0]) for name, data in raw.items()}


def _run(argv: list[str], what: str) -> subprocess.CompletedProcess[str]:
    res = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT)
    assert res.returncode == 0, f"{what} failed ({res.returncode}): {res.stderr[-2000:]}"
    return res


def host_answer_key(workload: Workload, where: Path) -> Path:
    """The answer key a search would check the kernel against: the unscheduled proc, built
    and run on this machine on every input set."""
    driver = build_driver(workload.args, HOST, where / "cache")
    built = build_reference(root_candidate(workload), HOST, where / "cache")
    assert built.path is not None, built.error
    key = where / "answer-key"
    res = reference_kernel(driver, built.path, key, HOST)
    assert res.returncode == 0, res.stderr
    return key


def cross_build(workload: Workload, c_source: str, where: Path) -> Path:
    """The kernel linked with the harness's driver into a static AArch64 executable."""
    (where / "driver.c").write_text(driver_source(workload.args, linked=True))
    (where / "kernel.c").write_text(c_source)
    exe = where / "kernel.aarch64"
    argv = [CROSS_CC, "-O2", "-static", str(where / "driver.c"), str(where / "kernel.c"), "-o", str(exe), "-lm"]
    _run(argv, "the cross compile")
    return exe


def kernel_disassembly(exe: Path) -> str:
    """objdump's listing of the kernel function alone."""
    return _run([OBJDUMP, "-d", f"--disassemble={KERNEL_SYMBOL}", str(exe)], "objdump").stdout


def neon_tile(ref: Reference, rows: int, cols: int, order: str) -> tuple[Rewrite, str]:
    """The proposed NEON register tile of this shape and the C of the proc it makes."""
    step = next((r for r in ref.tiles if (r.arg("rows"), r.arg("cols"), r.arg("order")) == (rows, cols, order)), None)
    assert step is not None, f"no {rows}x{cols} {order} NEON tile among {[r.describe() for r in ref.tiles]}"
    assert step.arg("isa") == "neon"
    proc = try_apply(ref.proc, step)
    assert proc is not None, step.describe()
    return step, kernel_c(proc)


def assert_neon_intrinsics(c: str, dtype: DType, accumulators: int, vector_loads: int) -> None:
    """NEON intrinsics, not scalar code: one multiply-add per accumulator per reduction step."""
    sfx = INTRINSIC_SUFFIX[dtype]
    assert "#include <arm_neon.h>" in c
    # Exo's C also quotes each instruction's template once in a comment, hence the "] = ".
    assert c.count(f"] = vmlaq_{sfx}(") == accumulators
    assert c.count(f"= vld1q_{sfx}(&B[") == vector_loads
    assert f"= vld1q_dup_{sfx}(&A[" in c and f"vst1q_{sfx}(&C[" in c
    assert not re.search(r"\bC\[[^\]]*\] \+=", c), "a scalar update of C is left"


@pytest.mark.parametrize("name,rows,cols,order", CASES, ids=[f"{w}-{r}x{c}-{o}" for w, r, c, o in CASES])
def test_a_neon_register_tile_runs_under_qemu_and_matches_the_reference(references, tmp_path, name, rows, cols, order):
    require_cross_toolchain()
    ref = references[name]
    workload, dtype = ref.workload, ref.workload.args[0].dtype
    step, c = neon_tile(ref, rows, cols, order)
    vectors, tail = cols // NEON.lanes(dtype.value), int(step.arg("trip")) % rows
    # the main kernel and, with a row tail, the tail kernel
    assert_neon_intrinsics(c, dtype, (rows + tail) * vectors, vectors * (2 if tail else 1))

    exe = cross_build(workload, c, tmp_path)
    # ... and vector machine code: multiplies on whole NEON registers (fmla if ever fused)
    vector_ops = re.findall(rf"\b(?:fmul|fmla)\s+v\d+\.{ARRANGEMENT[dtype]}", kernel_disassembly(exe))
    assert len(vector_ops) >= (rows + tail) * vectors

    # The same seeded inputs as on the host; the outputs after one call.
    _run([QEMU, str(exe), "dump", str(HOST.seed), "linked", str(tmp_path / "in"), str(tmp_path / "out")], "qemu")
    assert (tmp_path / "in").read_bytes() == b"".join(ref.io.inputs[a.name] for a in workload.args)
    inputs = _arrays(workload, ref.io.inputs)
    got = _arrays(workload, {"C": (tmp_path / "out").read_bytes()})["C"]
    want = _arrays(workload, ref.io.outputs)["C"]
    tol = TOLERANCE[dtype] * max(1.0, float(np.abs(want).max()))
    assert np.abs(got - want).max() <= tol, f"max error {np.abs(got - want).max():.3g} > {tol:.3g}"
    by_numpy = inputs["C"].astype(np.float64) + inputs["A"].astype(np.float64) @ inputs["B"].astype(np.float64)
    assert np.abs(got - by_numpy).max() <= tol
    assert np.abs(got - inputs["C"]).max() > 0.1  # the kernel did its work

    # The driver's own verification, as a search runs it (every input set, guard zones,
    # inputs unchanged), against the host's answer key; one sample, no warm-up.
    config = BenchConfig(seed=HOST.seed, rtol=TOLERANCE[dtype], warmup_seconds=0.0, min_sample_seconds=0.0,
                         samples=1, settle=0.0, run_timeout=60.0)
    argv = run_argv(exe, host_answer_key(workload, tmp_path), [Path("linked")], config, pin=False,
                    scale=atol_scale(workload))
    res = _run([QEMU, *argv], "qemu")
    verdict = parse_report(res.stdout, 1)[0].verdict
    assert verdict is not None and verdict.ok, res.stdout
    assert "tolerance C elementwise" in res.stdout


def test_a_missing_cross_tool_fails_naming_its_package(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match="gcc-aarch64-linux-gnu.*qemu-user"):
        require_cross_toolchain()


KERNELS = ROOT / "examples" / "kernels.py"
#: Kernels written the plain way, at sizes that leave row and column tails on NEON.
NORMALIZED = [
    ("matmul_init", {"M": 13, "N": 22, "K": 3}),  # 16 + 4 columns in vectors, 2 plain
    ("matmul_aat", {"M": 14, "K": 3}),  # the second operand copied into a panel first
    ("conv2d", {"Co": 7, "Ci": 2, "H": 2, "W": 18}),  # a loop swap, two reduction loops
]


@pytest.mark.parametrize("name,sizes", NORMALIZED, ids=[n for n, _ in NORMALIZED])
def test_normalized_neon_tiles_with_tails_match_the_reference_under_qemu(tmp_path, name, sizes):
    require_cross_toolchain()
    workload = load_workload(KERNELS, name, sizes)
    proc = build_proc(workload)
    tiles = [r for r in propose(proc, ExpandOptions(target="neon")) if r.kind is RewriteKind.REGISTER_TILE]
    assert tiles, f"no NEON register tile for {name}"
    step = next((r for r in tiles if r.arg("ctrip")), tiles[0])  # a column tail where there is one
    scheduled = try_apply(proc, step)
    assert scheduled is not None, step.describe()
    c = kernel_c(scheduled)
    assert "vmlaq_f32(" in c
    exe = cross_build(workload, c, tmp_path)
    host = run_once(workload, root_candidate(workload), HOST, tmp_path / "host")
    _run([QEMU, str(exe), "dump", str(HOST.seed), "linked", str(tmp_path / "in"), str(tmp_path / "out")], "qemu")
    outputs = [a for a in workload.args if a.output]
    got = np.frombuffer((tmp_path / "out").read_bytes(), dtype=np.float32)
    want = np.frombuffer(b"".join(host.outputs[a.name] for a in outputs), dtype=np.float32)
    tol = TOLERANCE[DType.F32] * max(1.0, float(np.abs(want).max()))
    assert got.shape == want.shape and np.abs(got - want).max() <= tol, f"{step.describe()}: off by {np.abs(got - want).max():.3g}"
