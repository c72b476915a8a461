"""The build cache, compiler configuration, toolchain checks and machine info (real gcc)."""

from __future__ import annotations

import os
import shutil
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from schedsearch.core import KERNEL_SYMBOL, ArgRole, ArgSpec, BenchConfig, DType
from schedsearch.errors import ToolchainError
from schedsearch.evaluate import check_toolchain, default_cache_dir, machine_info
from schedsearch.evaluate.build import build_driver, build_kernel, prepare_builds, settle_fault

C_OK = f"void {KERNEL_SYMBOL}(void *ctxt, float *x) {{ x[0] += 1.0f; }}\n"


@pytest.fixture
def counting_cc(tmp_path: Path) -> tuple[str, Path]:
    """A compiler wrapper that counts its invocations; named by a command with a space."""
    counter = tmp_path / "count"
    script = tmp_path / "cc wrapper.sh"
    # Compilations only: `--version` (asked once for the compiler's identity) is not counted.
    script.write_text(f'#!/bin/sh\n[ "$1" = --version ] || echo x >> "{counter}"\nexec gcc "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return f"sh '{script}'", counter


def invocations(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_cache_hits_on_identical_c_and_misses_on_new_flags(tmp_path: Path, counting_cc) -> None:
    cc, counter = counting_cc
    cfg = BenchConfig(cc=cc)
    first = build_kernel(C_OK, cfg, tmp_path)
    assert first.ok and not first.cached and first.seconds > 0
    assert invocations(counter) == 1
    mtime = first.path.stat().st_mtime_ns
    again = build_kernel(C_OK, cfg, tmp_path)
    assert again.cached and again.path == first.path and again.seconds == 0
    assert again.path.stat().st_mtime_ns == mtime and invocations(counter) == 1
    other = build_kernel(C_OK, BenchConfig(cc=cc, cflags=("-O2",)), tmp_path)
    assert other.ok and not other.cached and other.path != first.path
    assert invocations(counter) == 2
    openmp = build_kernel(C_OK, cfg, tmp_path, openmp=True)
    assert not openmp.cached and openmp.path not in (first.path, other.path)
    changed = build_kernel(C_OK.replace("1.0f", "2.0f"), cfg, tmp_path)
    assert not changed.cached and changed.path != first.path
    # Nothing half-written is left behind next to the artifacts.
    leftovers = [p for p in tmp_path.rglob(".*") if p.is_file()]
    assert leftovers == []


def test_compile_error_keeps_the_message_tail(tmp_path: Path) -> None:
    res = build_kernel("int f(void) { return undefined_name; }\n", BenchConfig(), tmp_path)
    assert not res.ok and "undefined_name" in res.error
    assert not list(tmp_path.rglob("*.so"))


def test_undefined_function_is_caught_at_build_time(tmp_path: Path) -> None:
    c = f"void helper_that_does_not_exist(float *);\nvoid {KERNEL_SYMBOL}(void *ctxt, float *x) {{ helper_that_does_not_exist(x); }}\n"
    res = build_kernel(c, BenchConfig(), tmp_path)
    assert not res.ok and "helper_that_does_not_exist" in res.error


def test_build_timeout_is_a_build_error(tmp_path: Path) -> None:
    slow = tmp_path / "slowcc.sh"
    slow.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "slowcc 1.0"; exit 0; }\nsleep 30\n')
    slow.chmod(0o755)
    res = build_kernel(C_OK, BenchConfig(cc=str(slow), build_timeout=0.5), tmp_path)
    assert not res.ok and "0.5 s" in res.error and res.seconds < 5


def test_a_killed_compilers_temporary_files_are_removed_with_its_build(tmp_path: Path) -> None:
    """gcc writes its intermediate files to TMPDIR: a compiler killed mid-build (a timeout,
    a stopped search) must not leave them in the system's temporary folder."""
    where = tmp_path / "tmpdir-seen"
    cc = tmp_path / "tempcc.sh"
    cc.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "tempcc 1.0"; exit 0; }\n'
                  f'echo "$TMPDIR" > "{where}"\necho x > "$TMPDIR/ccTEMP.s"\nsleep 30\n')
    cc.chmod(0o755)
    cache = tmp_path / "cache"
    res = build_kernel(C_OK, BenchConfig(cc=str(cc), build_timeout=0.5), cache)
    assert not res.ok and "0.5 s" in res.error
    tmpdir = Path(where.read_text().strip())
    assert tmpdir.is_relative_to(cache / "build")  # the build's private folder ...
    assert not tmpdir.exists()  # ... removed with what the compiler left in it
    assert not list(cache.rglob("ccTEMP.s"))


def test_private_build_folders_of_killed_builders_are_swept(tmp_path: Path, monkeypatch) -> None:
    from schedsearch.evaluate import build

    monkeypatch.setattr(build, "_swept", set())
    shard = tmp_path / "build" / "ab"
    old, recent = shard / ".build-old", shard / ".build-recent"
    for folder in (old, recent):
        folder.mkdir(parents=True)
        (folder / "k.c").write_text("int x;\n")
    hours_ago = os.stat(old).st_mtime - 2 * build.STALE_BUILD_SECONDS
    os.utime(old, (hours_ago, hours_ago))
    assert build_kernel(C_OK, BenchConfig(), tmp_path).ok
    assert not old.exists()  # left by a builder killed long ago
    assert recent.is_dir()  # may be a live build's


def test_driver_is_built_once_per_signature(tmp_path: Path) -> None:
    args = (ArgSpec("x", ArgRole.TENSOR, DType.F32, (4,), output=True),)
    d1 = build_driver(args, BenchConfig(), tmp_path)
    assert os.access(d1, os.X_OK)
    assert build_driver(args, BenchConfig(), tmp_path) == d1
    d2 = build_driver((ArgSpec("x", ArgRole.TENSOR, DType.F32, (5,), output=True),), BenchConfig(), tmp_path)
    assert d2 != d1


def test_check_toolchain(tmp_path: Path) -> None:
    check_toolchain(BenchConfig())
    with pytest.raises(ToolchainError, match="cannot be run"):
        check_toolchain(BenchConfig(cc=str(tmp_path / "no-such-cc")))
    with pytest.raises(ToolchainError, match="trivial program"):
        check_toolchain(BenchConfig(cflags=("-fno-such-flag-at-all",)))


def test_machine_info_describes_this_node() -> None:
    m = machine_info(BenchConfig())
    assert m.cores == os.cpu_count() and m.hostname
    assert m.compiler == "gcc" and "gcc" in m.compiler_version.lower()
    assert m.cflags == ("-O3", "-march=native") and m.exo_version == "1.0.0"
    assert m.cpu_flags_sha and m.cpu_model
    assert machine_info(BenchConfig(cflags=("-O2",))).fingerprint != m.fingerprint


def test_default_cache_dir(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SCHEDSEARCH_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("SCHEDSEARCH_CACHE_DIR")
    assert default_cache_dir() == Path.home() / ".cache" / "schedsearch"


def test_gcc_is_available() -> None:
    assert shutil.which("gcc")


def test_concurrent_builds_of_the_same_c_agree(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    c = C_OK.replace("1.0f", "3.0f")
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: build_kernel(c, BenchConfig(), tmp_path), range(4)))
    assert all(r.ok for r in results) and len({r.path for r in results}) == 1
    assert [p for p in tmp_path.rglob(".*") if p.is_file()] == []
    assert build_kernel(c, BenchConfig(), tmp_path).cached


def test_two_builds_of_the_same_c_write_the_same_bytes(tmp_path: Path) -> None:
    """Each build runs in a folder of its own; the line tables (``-g1``) must not record
    it, or concurrent builders of one key overwrite each other's checked hashes."""
    a = build_kernel(C_OK, BenchConfig(), tmp_path / "a")
    b = build_kernel(C_OK, BenchConfig(), tmp_path / "b")
    assert a.ok and b.ok and not a.cached and not b.cached
    assert a.path.read_bytes() == b.path.read_bytes()


def simd_c(value: str) -> str:
    return (
        "#include <stdint.h>\n#include <immintrin.h>\n"
        f"void {KERNEL_SYMBOL}(void *ctxt, float *x) {{\n"
        f"  __m256 v = _mm256_loadu_ps(x);\n  _mm256_storeu_ps(x, _mm256_add_ps(v, _mm256_set1_ps({value})));\n}}\n"
    )


def logging_cc(tmp_path: Path, header_seconds: float = 0.0, trace: bool = False) -> tuple[BenchConfig, Path]:
    """A compiler that logs each compile's arguments (and takes ``header_seconds`` longer to
    precompile a header; with ``trace``, logs gcc's -H header trace too), and the log."""
    log = tmp_path / "log"
    script = tmp_path / "cc.sh"
    run = f'exec gcc -H "$@" 2>> "{log}"' if trace else 'exec gcc "$@"'
    script.write_text(f'#!/bin/sh\n[ "$1" = --version ] && exec gcc "$@"\necho "ARGS $*" >> "{log}"\n'
                      f'case "$*" in *c-header*) sleep {header_seconds};; esac\n{run}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return BenchConfig(cc=f"sh {script}"), log


def test_intrinsics_kernels_share_one_precompiled_immintrin(tmp_path: Path) -> None:
    # gcc's -H header trace: "! file.gch" when a precompiled header is used, "x file.gch"
    # when it does not fit.
    cfg, log = logging_cc(tmp_path, trace=True)
    assert build_kernel(simd_c("1.0f"), cfg, tmp_path / "cache").ok
    assert build_kernel(simd_c("2.0f"), cfg, tmp_path / "cache").ok
    assert build_kernel(C_OK, cfg, tmp_path / "cache").ok
    calls = [line for line in log.read_text().splitlines() if line.startswith("ARGS")]
    assert len(calls) == 4  # the header once, then the three kernels
    assert "c-header" in calls[0]
    assert all("-include" in c for c in calls[1:3]) and "-include" not in calls[3]
    trace = log.read_text()
    assert trace.count(".h.gch") == 2 and "\n! " in trace and "\nx " not in trace


def compiles(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if line.startswith("ARGS")] if log.exists() else []


def test_builders_that_need_the_header_at_once_precompile_it_once(tmp_path: Path) -> None:
    # A search's first two builds ask for the header together: one precompiles it while the
    # other waits for it (not a second compile of the same header), and both use it.
    cfg, log = logging_cc(tmp_path, header_seconds=1.0)
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda v: build_kernel(simd_c(v), cfg, tmp_path / "cache"), ["1.0f", "2.0f"]))
    assert all(r.ok for r in results)
    calls = compiles(log)
    assert sum("c-header" in c for c in calls) == 1
    assert sum("-include" in c for c in calls) == 2


def test_a_targets_header_is_precompiled_ahead_of_its_kernels(tmp_path: Path) -> None:
    cfg, log = logging_cc(tmp_path)
    cache = tmp_path / "cache"
    # Nothing to make ready for a target without a header, or with one not worth precompiling.
    assert not prepare_builds(cfg, cache, None)
    assert not prepare_builds(cfg, cache, "arm_neon.h")
    assert compiles(log) == []
    assert prepare_builds(cfg, cache, "immintrin.h")
    assert prepare_builds(cfg, cache, "immintrin.h")  # ready: nothing more is compiled
    assert build_kernel(simd_c("1.0f"), cfg, cache).ok
    calls = compiles(log)
    assert len(calls) == 2 and "c-header" in calls[0] and "-include" in calls[1]


# --------------------------------------------------------------------------- a safe cache


def test_a_planted_artifact_is_rebuilt_never_loaded(tmp_path: Path) -> None:
    from schedsearch.core import Candidate, Schedule, Status, Workload, sha256_text
    from schedsearch.evaluate import evaluate_candidate
    from schedsearch.evaluate.cache import verified

    cache, marker = tmp_path / "cache", tmp_path / "MARKER"
    args = (ArgSpec("x", ArgRole.TENSOR, DType.F32, (1,), output=True),)
    workload = Workload("w.py", "w", sha256_text("w"), "w", (), args)
    root = Candidate(Schedule(), C_OK, sha256_text(C_OK), "root")
    fast = BenchConfig(warmup_seconds=0.001, min_sample_seconds=0.001, samples=3)
    assert evaluate_candidate(workload, root, root, fast, cache).status is Status.OK
    first = build_kernel(C_OK, fast, cache)
    assert first.cached and first.path is not None
    planted_text = str(marker).encode()
    # Someone writes a different shared object at the kernel's cache key.
    evil = tmp_path / "evil.c"
    evil.write_text(f'#include <stdio.h>\n__attribute__((constructor)) static void grab(void) {{ fopen("{marker}", "w"); }}\n'
                    + C_OK)
    assert os.system(f"gcc -shared -fPIC -o {first.path} {evil}") == 0
    assert planted_text in first.path.read_bytes() and not verified(first.path)
    again = build_kernel(C_OK, fast, cache)
    assert again.ok and not again.cached and again.path == first.path
    assert planted_text not in first.path.read_bytes() and verified(first.path)
    first.path.write_bytes(b"garbage")  # a damaged artifact is rebuilt too
    assert evaluate_candidate(workload, root, root, fast, cache).status is Status.OK
    assert not marker.exists() and verified(first.path)


def test_an_artifact_is_hashed_once_per_version(tmp_path: Path, monkeypatch) -> None:
    """A process remembers that a file it hashed is still the file it hashed while its stat
    is the same; a file written over in place (same size) is hashed again and refused."""
    from schedsearch.evaluate import cache as cache_module

    hashed = []
    real = cache_module.file_sha256
    monkeypatch.setattr(cache_module, "file_sha256", lambda p: hashed.append(p) or real(p))
    artifact, tmp = tmp_path / "a.bin", tmp_path / "tmp.bin"
    tmp.write_bytes(b"x" * 4096)
    cache_module.install(tmp, artifact)
    assert len(hashed) == 1  # the record
    assert cache_module.verified(artifact) and cache_module.verified(artifact)
    assert len(hashed) == 2  # one hash for both checks
    with open(artifact, "r+b") as fh:  # same size, same inode, other bytes
        fh.write(b"y")
    assert not cache_module.verified(artifact)
    assert len(hashed) == 3


def test_the_cache_is_private(tmp_path: Path) -> None:
    from schedsearch.errors import InfrastructureError
    from schedsearch.evaluate import private_cache_dir

    new = private_cache_dir(tmp_path / "a" / "cache")
    assert stat.S_IMODE(new.stat().st_mode) == 0o700
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(InfrastructureError, match="writable by other users.*chmod go-w"):
        private_cache_dir(shared)
    if os.geteuid() == 0:  # only root can give a folder away
        theirs = tmp_path / "theirs"
        theirs.mkdir(mode=0o700)
        os.chown(theirs, 65534, 65534)
        with pytest.raises(InfrastructureError, match="belongs to user id 65534"):
            private_cache_dir(theirs)


def test_machine_faults_raise_and_code_faults_are_build_errors(tmp_path: Path) -> None:
    from schedsearch.errors import InfrastructureError

    killer = tmp_path / "killer.sh"
    killer.write_text('#!/bin/sh\n[ "$1" = --version ] && exec gcc --version\nkill -9 $$\n')
    killer.chmod(0o755)
    config = BenchConfig(cc=str(killer))
    suspect = build_kernel(C_OK, config, tmp_path / "c1")
    assert not suspect.ok and "killed by signal 9" in suspect.fault  # a suspect, not yet anyone's error
    # Known-good code fails the same way: the machine's.
    with pytest.raises(InfrastructureError, match="killed by signal 9"):
        settle_fault(suspect, C_OK, config, tmp_path / "c1")
    res = build_kernel("this is not C\n", BenchConfig(), tmp_path / "c2")
    assert not res.ok and "error" in res.error and not res.fault
    assert settle_fault(res, C_OK, BenchConfig(), tmp_path / "c2") is res  # nothing to settle, nothing built


# A global helper, as Exo emits for ``select``, called per element of a loop; with the
# precompiled intrinsics header included too, as every vector kernel's build has it.
C_HELPER = (
    "#include <immintrin.h>\n"
    "float _select_float(float x, float v, float y, float z) { if (x < v) return y; else return z; }\n"
    f"void {KERNEL_SYMBOL}(void *ctxt, float *x) {{\n"
    "  for (int i = 0; i < 4096; i++) x[i] = _select_float(0.0f, x[i], x[i], 0.0f);\n}\n"
)


def test_a_kernels_own_helpers_are_inlined_and_its_loops_vectorised(tmp_path: Path) -> None:
    """Position-independent code must not keep a call per element to a helper the kernel
    defines (gcc's semantic interposition), with or without the precompiled header."""
    import subprocess

    for c in (C_HELPER, C_HELPER.replace("#include <immintrin.h>\n", "")):
        built = build_kernel(c, BenchConfig(), tmp_path)
        assert built.ok, built.error
        listing = subprocess.run(["objdump", "-d", f"--disassemble={KERNEL_SYMBOL}", str(built.path)],
                                 capture_output=True, text=True, check=True).stdout
        assert "_select_float" not in listing  # no call left
        assert "ymm" in listing or "zmm" in listing  # the loop in vectors
