"""What machine and toolchain measure: CPU, compiler identity, cache location, sanity check."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import os
import shlex
import socket
import tempfile
from pathlib import Path

from schedsearch.core import BenchConfig, MachineInfo
from schedsearch.errors import ToolchainError
from schedsearch.evaluate.process import run_child

_VERSION_TIMEOUT = 20.0
_CHECK_PROGRAM = "int main(void) { volatile int x = 42; return x == 42 ? 0 : 1; }\n"


def default_cache_dir() -> Path:
    """``$SCHEDSEARCH_CACHE_DIR`` if set, else ``~/.cache/schedsearch``."""
    env = os.environ.get("SCHEDSEARCH_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "schedsearch"


def compiler_argv(config: BenchConfig) -> list[str]:
    """The compiler command as an argument list (``cc`` may be a command with arguments)."""
    argv = shlex.split(config.cc)
    if not argv:
        raise ToolchainError("The compiler command is empty; pass a C compiler such as gcc.")
    return argv


@functools.lru_cache(maxsize=16)
def compiler_version(cc: str) -> str:
    """First line of ``cc --version``; raises ToolchainError if the command cannot run."""
    argv = shlex.split(cc)
    try:
        res = run_child(argv + ["--version"], timeout=_VERSION_TIMEOUT)
    except (OSError, ValueError) as e:
        raise ToolchainError(f"The C compiler {cc!r} cannot be run ({e}).") from e
    lines = (res.stdout or res.stderr).strip().splitlines()
    if res.timed_out:
        raise ToolchainError(f"The C compiler {cc!r} cannot be run (no answer to --version in {_VERSION_TIMEOUT:g} s).")
    if res.returncode != 0 or not lines:
        raise ToolchainError(f"The C compiler {cc!r} does not answer --version (exit {res.returncode}).")
    return lines[0].strip()


def _cpu_model_and_flags() -> tuple[str, list[str]]:
    """(CPU model, sorted CPU flags) from /proc/cpuinfo, empty if unreadable."""
    model, flags = "", ""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "", []
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = value
    return model, sorted(flags.split())


def _cpuinfo() -> tuple[str, str]:
    """(CPU model, sha256 of the sorted CPU flags), empty if unreadable."""
    model, flags = _cpu_model_and_flags()
    text = " ".join(flags)
    return model, hashlib.sha256(text.encode()).hexdigest()[:16] if text else ""


def cpu_flags() -> tuple[str, ...]:
    """This CPU's feature flags (``/proc/cpuinfo``'s ``flags``, or ``Features`` on ARM), sorted."""
    return tuple(_cpu_model_and_flags()[1])


def _exo_version() -> str:
    try:
        return importlib.metadata.version("exo-lang")
    except importlib.metadata.PackageNotFoundError:
        return ""


@functools.lru_cache(maxsize=16)
def _machine_info(cc: str, cflags: tuple[str, ...]) -> MachineInfo:
    model, flags_sha = _cpuinfo()
    return MachineInfo(
        cpu_model=model,
        cpu_flags_sha=flags_sha,
        cores=os.cpu_count() or 0,
        hostname=socket.gethostname(),
        compiler=cc,
        compiler_version=compiler_version(cc),
        cflags=cflags,
        exo_version=_exo_version(),
    )


def machine_info(config: BenchConfig) -> MachineInfo:
    """The measuring setup for ``config`` on this node (memoised per compiler and flags).

    Raises ToolchainError if the compiler cannot be run.
    """
    return _machine_info(config.cc, tuple(config.cflags))


def check_toolchain(config: BenchConfig) -> None:
    """Raise ToolchainError with one sentence unless the compiler can build and run a program."""
    argv = compiler_argv(config)
    compiler_version(config.cc)
    with tempfile.TemporaryDirectory(prefix="schedsearch-cc-") as tmp:
        src, exe = Path(tmp) / "check.c", Path(tmp) / "check"
        src.write_text(_CHECK_PROGRAM)
        try:
            res = run_child(
                argv + list(config.cflags) + [str(src), "-o", str(exe)], timeout=max(config.build_timeout, 10.0)
            )
        except OSError as e:
            raise ToolchainError(f"The C compiler {config.cc!r} cannot be run ({e}).") from e
        if res.timed_out or res.returncode != 0:
            why = " ".join(res.stderr.strip().splitlines()[-2:]) or f"exit status {res.returncode}"
            if res.timed_out:
                why = f"no result within {max(config.build_timeout, 10.0):g} s"
            raise ToolchainError(
                f"The C compiler {config.cc!r} with flags {' '.join(config.cflags)!r} cannot compile a "
                f"trivial program: {why}"
            )
        try:
            run = run_child([str(exe)], timeout=30)
        except OSError as e:
            raise ToolchainError(f"A program built by {config.cc!r} cannot be run ({e}).") from e
        if run.returncode != 0:
            raise ToolchainError(f"A trivial program built by {config.cc!r} fails (exit status {run.returncode}).")
