"""Compile kernels and drivers through a content-addressed build cache.

Every artifact lives at ``cache_dir/build/<k[:2]>/<k>.<ext>`` where ``k`` is the sha256 of
everything that decides the bytes produced: the C text, the compiler command and its
``--version`` line, the flags, the CPU (``-march=native`` makes code CPU-specific, and a
cache directory may be shared between nodes) and the harness version. Artifacts are written
to a temporary name in the same directory and renamed into place, so concurrent processes
(Ray workers, parallel searches) never see a half-written file; whoever finishes last wins
with identical content. Paths change whenever content changes, which also defeats
``dlopen``'s by-path caching. Each artifact's sha256 is recorded beside it and checked
before it is used (``cache``): a planted or damaged file is rebuilt, never loaded.

A compile that may have failed for a reason outside the candidate's code — a full disk, a
killed compiler, a missing assembler or linker, but also a crash of cc1 on this one input
(``faults``) — comes back with its ``fault`` named; ``settle_fault`` decides whose it is by
compiling the unscheduled proc afresh: ``InfrastructureError`` when that fails too, the
candidate's build error otherwise. The driver is our own code: a fault building it raises.

A kernel becomes a shared object (``-shared -fPIC``); ``-Wl,-Bsymbolic`` binds the kernel's
calls to its own helper functions, so that several kernels loaded into one driver (finalists
timed side by side) never call into each other, and ``-Wl,-z,defs`` turns an undefined
function into a build error instead of a failure at load time. The driver is built once per workload
signature (see ``harness``).

gcc builds kernels with line tables (``-g1``: the same instructions, at no measurable cost),
so what the compiler made of a candidate - which statements it vectorized and with what
vectors, which loops it left - can be read from the build it needs anyway
(``kernel_notes``, ``machine_code``); the summary is kept beside the shared object, as
``<k>.notes``.

A compiler's own temporary files (``TMPDIR``) go to the build's private folder, which is
removed however the build ends: a compiler killed mid-build - a timeout, a stopped search -
leaves nothing in the system's temporary folder. A private folder whose builder was killed
with it is removed by the next process that builds into the same cache, once it is
``STALE_BUILD_SECONDS`` old.

Kernels written in x86 intrinsics include ``<immintrin.h>``, whose parsing alone takes gcc
about 0.35 s — most of such a kernel's build. It is precompiled once per compiler, flags and
CPU into the cache and passed with ``-include``; gcc quietly parses the real header instead
whenever the precompiled one does not fit, so the worst case is the plain build. One process
precompiles it while the others that need it wait (a lock beside it): on a 2-core Zen 3 the
first two builds of a search each spent 3.5-3.9 s precompiling the same header side by side.
A search's executor has it made ahead of the first intrinsics kernel (``prepare_builds``),
beside the expansion that proposes that kernel.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock, Timeout

from schedsearch.core import ArgSpec, BenchConfig
from schedsearch.errors import InfrastructureError, ToolchainError
from schedsearch.evaluate.cache import install, keep, verified
from schedsearch.evaluate.faults import machine_fault
from schedsearch.evaluate.harness import HARNESS_VERSION, driver_source
from schedsearch.evaluate.machine import compiler_argv, machine_info
from schedsearch.evaluate.machine_code import machine_notes, objdump_command
from schedsearch.evaluate.process import run_child

#: ``-fno-semantic-interposition``: position-independent code may otherwise not inline the
#: kernel's own global helpers (Exo's ``_select_float`` of ``select``), so a loop that calls
#: one per element is never vectorised; nothing interposes on a kernel's functions.
_PIC_FLAGS = ("-fPIC", "-fno-semantic-interposition")
_SHARED_FLAGS = ("-shared", *_PIC_FLAGS, "-Wl,-Bsymbolic", "-Wl,-z,defs")
#: The header precompiled for intrinsics kernels, and how a kernel's C is seen to need it.
_PCH_HEADER = "immintrin.h"
_PCH_TEXT = f"#include <{_PCH_HEADER}>\n"
_PCH_TRIGGER = f"#include <{_PCH_HEADER}>"
_DRIVER_FLAGS = ("-O2",)
#: Line tables only: each instruction names its line of C (``machine_code``), and the code
#: is the same as without them. The precompiled header is built with them too: gcc takes
#: no header precompiled with other debug settings, and parses ``immintrin.h`` in full.
_LINES_FLAG = "-g1"
#: How long an expansion waits for one child's build to read its notes
#: (``kernel_notes``); beyond it the child goes without notes and its measurement builds it
#: again, under the full build timeout. Why: gcc 12's RTL combiner now and then takes half a
#: minute on a kernel whose rows Exo unrolled (the i8 matmul on Zen 3: 29 s for one child,
#: 96% of it the combiner, where its 403 siblings built in a median 0.3 s and at most 2.8 s),
#: and the whole expansion waited for it. Builds run two to a core beside the expansion,
#: so this is about 4x the slowest ordinary build.
NOTES_WAIT_SECONDS = 12.0
#: A private build folder (``.build-*``) older than this (and than twice the build timeout)
#: belongs to no live build: its builder was killed with it.
STALE_BUILD_SECONDS = 3600.0
#: Build folders (``cache_dir/build``) this process has swept of stale private folders.
_swept: set[Path] = set()
_ERROR_TAIL_LINES = 25
_ERROR_TAIL_CHARS = 3000


@dataclass(frozen=True, slots=True)
class BuildResult:
    """One compiled artifact, or why it could not be built."""

    key: str
    path: Path | None  # None on failure
    error: str = ""  # the tail of the compiler's message on failure
    seconds: float = 0.0  # time spent compiling (0 on a cache hit)
    cached: bool = False  # True when the artifact was already in the cache
    # On failure, why it may be the machine's rather than the code's (``faults``): not yet
    # anyone's build error until ``settle_fault`` has built known-good code.
    fault: str = ""

    @property
    def ok(self) -> bool:
        return self.path is not None


def kernel_flags(config: BenchConfig, openmp: bool) -> tuple[str, ...]:
    """The flags a kernel is compiled with: the configured ones, ``-fopenmp`` if needed."""
    flags = tuple(config.cflags)
    if openmp and "-fopenmp" not in flags:
        flags += ("-fopenmp",)
    return flags


def artifact_key(kind: str, text: str, config: BenchConfig, flags: tuple[str, ...]) -> str:
    """sha256 naming an artifact of ``kind`` built from ``text`` with ``flags``."""
    m = machine_info(config)
    h = hashlib.sha256()
    for part in (
        kind,
        HARNESS_VERSION,
        config.cc,
        m.compiler_version,
        m.cpu_model,
        m.cpu_flags_sha,
        "\0".join(flags),
        text,
    ):
        h.update(part.encode("utf-8"))
        h.update(b"\x00\x01")
    return h.hexdigest()


def _artifact_path(cache_dir: Path, key: str, suffix: str) -> Path:
    return Path(cache_dir) / "build" / key[:2] / f"{key}{suffix}"


def _tail(text: str) -> str:
    lines = text.strip().splitlines()[-_ERROR_TAIL_LINES:]
    return "\n".join(lines)[-_ERROR_TAIL_CHARS:]


def _compile(
    config: BenchConfig,
    source: str,
    target: Path,
    flags: tuple[str, ...],
    extra: tuple[str, ...],
    libs: tuple[str, ...],
    timeout: float | None = None,
) -> tuple[str, float, str]:
    """Compile ``source`` into ``target`` atomically. Returns (error text or "", seconds,
    suspected machine fault or ""). ``timeout`` shortens ``config.build_timeout`` for this
    build."""
    target.parent.mkdir(parents=True, exist_ok=True)
    _sweep_stale(target.parent.parent, max(STALE_BUILD_SECONDS, 2 * config.build_timeout))
    # A private folder per build, the source under a name fixed by the key and compiled from
    # inside it: the file name gcc records in the object is then the same for every build of
    # this key, so concurrent builders write identical bytes (and identical recorded hashes).
    work = Path(tempfile.mkdtemp(dir=target.parent, prefix=".build-"))
    src = work / f"{target.stem}.c"
    tmp_out = work / f"out{target.suffix}"
    # Line tables also record the folder gcc ran in (DW_AT_comp_dir): named the same for
    # every build, or concurrent builders of one key write different bytes and each other's
    # hashes, and the cache entry fails its check.
    fixed = [f"-fdebug-prefix-map={work}=."] if _LINES_FLAG in flags else []
    argv = compiler_argv(config) + list(flags) + fixed + list(extra) + ["-o", str(tmp_out), src.name] + list(libs)
    limit = config.build_timeout if timeout is None else min(timeout, config.build_timeout)
    start = time.perf_counter()
    try:
        src.write_text(source)
        try:
            res = run_child(argv, timeout=limit, cwd=work, background=True, env={**os.environ, "TMPDIR": str(work)})
        except OSError as e:
            raise ToolchainError(f"The C compiler {config.cc!r} cannot be run ({e}).") from e
        seconds = time.perf_counter() - start
        if res.timed_out:
            return f"compiler did not finish within {limit:g} s", seconds, ""
        if res.returncode != 0:
            fault = machine_fault(res.returncode, f"{res.stderr}\n{res.stdout}") or ""
            why = _tail(res.stderr or res.stdout) or fault or f"compiler exited with status {res.returncode}"
            return why, seconds, fault
        os.replace(src, target.with_suffix(".c"))
        install(tmp_out, target)
        return "", seconds, ""
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _sweep_stale(builds: Path, older_than: float) -> None:
    """Remove the private build folders under ``builds`` (``cache_dir/build``) older than
    ``older_than`` seconds, once per process: each was left by a builder killed mid-build.
    Best effort: another process may be sweeping the same ones."""
    if builds in _swept:
        return
    _swept.add(builds)
    cutoff = time.time() - older_than
    for folder in builds.glob("*/.build-*"):
        with contextlib.suppress(OSError):
            if folder.is_dir() and folder.stat().st_mtime < cutoff:
                shutil.rmtree(folder, ignore_errors=True)


def _header_is(path: Path, text: str) -> bool:
    try:
        return path.read_text() == text
    except (OSError, UnicodeDecodeError):
        return False


def precompiled_immintrin(config: BenchConfig, flags: tuple[str, ...], cache_dir: Path) -> Path | None:
    """A header including ``<immintrin.h>`` with its precompiled ``.gch`` next to it, built
    with ``flags`` on first use; None when gcc cannot precompile it (then kernels simply
    include the header themselves)."""
    key = artifact_key("pch", _PCH_TEXT, config, flags + _PIC_FLAGS)  # gcc restores a PCH's options
    header = _artifact_path(cache_dir, key, ".h")
    gch = header.with_name(header.name + ".gch")
    if verified(gch) and _header_is(header, _PCH_TEXT):
        return header
    header.parent.mkdir(parents=True, exist_ok=True)
    # One builder precompiles; the others wait for it rather than spend a core each on the
    # same header (the lock is the kernel's: it goes with a builder that is killed).
    lock = FileLock(str(header.with_name(header.name + ".lock")))
    try:
        lock.acquire(timeout=config.build_timeout)
    except Timeout:
        return None  # a builder stuck beyond the build timeout: build with the plain header
    except OSError:  # a file system without locks: precompile unshared
        return _precompile(config, flags, header, gch)
    try:
        if verified(gch) and _header_is(header, _PCH_TEXT):
            return header
        return _precompile(config, flags, header, gch)
    finally:
        lock.release()


def _precompile(config: BenchConfig, flags: tuple[str, ...], header: Path, gch: Path) -> Path | None:
    """Write ``_PCH_TEXT`` to ``header`` and precompile it into ``gch`` (under its lock,
    where the file system has locks)."""
    token = f"{os.getpid()}-{secrets.token_hex(8)}"
    tmp_header = header.with_name(f".pch-{token}.h")
    tmp_gch = header.with_name(f".pch-{token}.gch")
    try:
        tmp_header.write_text(_PCH_TEXT)
        os.replace(tmp_header, header)
        argv = compiler_argv(config) + list(flags) + [*_PIC_FLAGS, "-x", "c-header", str(header), "-o", str(tmp_gch)]
        try:
            res = run_child(argv, timeout=config.build_timeout, background=True)
        except OSError:
            return None
        if res.timed_out or res.returncode != 0:
            return None
        install(tmp_gch, gch)
        return header
    finally:
        tmp_header.unlink(missing_ok=True)
        tmp_gch.unlink(missing_ok=True)


def prepare_builds(config: BenchConfig, cache_dir: Path, header: str | None) -> bool:
    """Make ready what every kernel including ``header`` (a target's instructions header,
    ``targets.Target.header``) shares, ahead of the first: its precompiled form, when it is
    one worth precompiling. Returns whether something was made ready (or already was)."""
    if header != _PCH_HEADER:
        return False
    return precompiled_immintrin(config, kernel_flags(config, False) + _lines(config), cache_dir) is not None


def build_kernel(
    c_source: str,
    config: BenchConfig,
    cache_dir: Path,
    openmp: bool = False,
    timeout: float | None = None,
    fresh: bool = False,
) -> BuildResult:
    """Compile a candidate's C into a shared object, or return the cached one (``fresh``:
    compile it even so).

    Compiler errors and build timeouts come back as a failed BuildResult (never cached: a
    later build tries again), a failure that may be the machine's with its ``fault`` named
    (``settle_fault``); only a compiler that cannot be started at all raises
    ToolchainError. ``timeout`` shortens ``config.build_timeout`` for this build.
    """
    flags = kernel_flags(config, openmp) + _lines(config)
    extra: tuple[str, ...] = _SHARED_FLAGS
    key = artifact_key("kernel", c_source, config, flags + extra)
    path = _artifact_path(cache_dir, key, ".so")
    if not fresh and verified(path):
        return BuildResult(key, path, cached=True)
    if _PCH_TRIGGER in c_source:
        header = precompiled_immintrin(config, flags, cache_dir)
        if header is not None:
            extra += ("-include", str(header))
    error, seconds, fault = _compile(config, c_source, path, flags, extra, ("-lm",), timeout)
    if error:
        return BuildResult(key, None, error=error, seconds=seconds, fault=fault)
    return BuildResult(key, path, seconds=seconds)


def settle_fault(
    result: BuildResult, known_good: str, config: BenchConfig, cache_dir: Path, openmp: bool = False
) -> BuildResult:
    """``result`` with a suspected machine fault (``BuildResult.fault``) settled.

    The C ``known_good`` (the unscheduled proc's) is compiled afresh with the same compiler,
    flags and ``openmp``: if that fails too, the machine cannot build kernels and
    InfrastructureError is raised; if it builds, the failure was the candidate's own, and
    ``result`` comes back as its build error, the compiler's message kept. A result without
    a fault is returned as it is, at no cost.
    """
    if not result.fault:
        return result
    probe = build_kernel(known_good, config, cache_dir, openmp, fresh=True)
    if not probe.ok:
        raise machine_error(config, result.fault)
    return BuildResult(
        result.key,
        None,
        f"{result.error}\n(the compiler fails on this candidate's C alone: the unscheduled proc builds)",
        result.seconds,
    )


def machine_error(config: BenchConfig, fault: str) -> InfrastructureError:
    """The error that stops a search whose compiler cannot build kernels on this machine."""
    return InfrastructureError(f"the C compiler {config.cc!r} cannot build kernels on this machine: {fault}")


def _lines(config: BenchConfig) -> tuple[str, ...]:
    """The flags that give a kernel's machine code its lines of C, where they can be read."""
    return (_LINES_FLAG,) if writes_notes(config) else ()


def writes_notes(config: BenchConfig) -> bool:
    """Whether the kernels' machine code can be read line by line: the compiler is gcc
    (it writes the line tables ``-g1`` asks for) and an objdump for its code is at hand."""
    return "gcc" in machine_info(config).compiler_version.lower() and objdump_command(config.cc) is not None


def kernel_notes(
    c_source: str, config: BenchConfig, cache_dir: Path, openmp: bool = False, wait: float | None = None
) -> str | None:
    """What the compiler made of the kernel ``c_source``, read from its machine code
    (``machine_code.summarize``: by line of C, the widest vectors and the branches), built
    now if the cache has no build of it: the build a measurement then finds ready. None
    when the compiler is not gcc, the kernel does not build, its build takes longer than
    ``wait`` seconds (None: the build timeout; the build is then stopped and not kept; an
    expansion waits ``NOTES_WAIT_SECONDS``), or its machine code cannot be read."""
    if not writes_notes(config):
        return None
    result = build_kernel(c_source, config, cache_dir, openmp, timeout=wait)
    if result.path is None:
        return None
    notes = result.path.with_suffix(".notes")
    if verified(notes):
        with contextlib.suppress(OSError, UnicodeDecodeError):
            return notes.read_text()
    objdump = objdump_command(config.cc)
    summary = machine_notes(result.path, objdump) if objdump is not None else None
    if summary is None:
        return None
    keep(notes, summary.encode("utf-8"))
    return summary


def build_driver(args: tuple[ArgSpec, ...], config: BenchConfig, cache_dir: Path) -> Path:
    """The driver executable for kernels taking ``args``, built once per signature.

    The driver is our own code: failing to build it is a toolchain problem (ToolchainError),
    never a candidate's.
    """
    source = driver_source(args)
    key = artifact_key("driver", source, config, _DRIVER_FLAGS)
    path = _artifact_path(cache_dir, key, ".exe")
    if verified(path):
        return path
    error, _, fault = _compile(config, source, path, _DRIVER_FLAGS, (), ("-ldl", "-lm"))
    if fault:
        raise machine_error(config, fault)
    if error:
        raise ToolchainError(f"The C compiler {config.cc!r} cannot build the benchmark driver: {error}")
    return path
