"""A resume's compiler and flags are the caller's, made as ``run`` makes them; a search stored
with others is refused in one sentence (``app.resuming``). Nothing here runs a compiler."""

from __future__ import annotations

import dataclasses
import shlex

import pytest

from schedsearch.app.compose import CLI, PYTHON, bench_config
from schedsearch.app.resuming import resumed_bench, shown, toolchain_args
from schedsearch.core import ExpandOptions, FloatMode, SearchConfig, SearchRecord, SearchStatus
from schedsearch.errors import UntrustedConfigError, UntrustedSourceError
from schedsearch.testing.builders import make_machine, make_workload


def stored(cc: str | None = None, cflags: str | None = None, target: str = "avx2",
           float_mode: str = "strict") -> SearchRecord:
    """A search as ``run --cc CC --cflags CFLAGS --target TARGET`` stores it."""
    bench = bench_config(cc, cflags, 3, target, float_mode)
    config = SearchConfig(seed=3, bench=bench, expand=ExpandOptions(target=target))
    return SearchRecord(7, make_workload(), config, SearchStatus.INTERRUPTED, make_machine(), 0.0)


def test_the_same_toolchain_as_run_resumes_and_keeps_the_rest_of_the_stored_bench() -> None:
    search = stored()
    search = dataclasses.replace(search, config=dataclasses.replace(
        search.config, bench=dataclasses.replace(search.config.bench, samples=11)))
    bench = resumed_bench(search, None, None)
    assert (bench.cc, bench.cflags, bench.samples) == ("gcc", search.config.bench.cflags, 11)
    assert "-mavx2" in bench.cflags  # the target's flags, added as run adds them
    assert resumed_bench(stored("clang", "-O2"), "clang", "-O2").cc == "clang"
    relaxed = stored(float_mode=FloatMode.RELAXED.value)
    assert resumed_bench(relaxed, None, None).cflags == relaxed.config.bench.cflags


def test_another_stored_toolchain_is_refused_in_one_sentence_unless_trusted() -> None:
    search = stored('sh -c "touch /tmp/x" sh', "-O3 -march=native -wrapper /bin/sh,-c,touch\\ /tmp/y")
    with pytest.raises(UntrustedConfigError) as info:
        resumed_bench(search, None, None)
    message = str(info.value)
    assert isinstance(info.value, UntrustedSourceError) and "\n" not in message and len(message) < 500
    assert message.startswith("search 7 was built with the compiler 'sh -c \"touch /tmp/x\" sh' (this resume: gcc)")
    assert "-wrapper" in message and "never run" in message
    assert "pass the same --cc and --cflags" in message and "--trust-db-config" in message
    with pytest.raises(UntrustedConfigError, match="pass the same cc= and cflags=.*trust_db_config=True"):
        resumed_bench(search, None, None, spelling=PYTHON)
    trusted = resumed_bench(search, None, None, trust_db_config=True, spelling=CLI)
    assert trusted.cc == "gcc" and "-wrapper" not in trusted.cflags
    with pytest.raises(UntrustedConfigError, match="without this resume's -O1"):
        resumed_bench(stored(), None, "-O1")


def test_stored_text_in_a_message_is_one_short_line() -> None:
    assert shown("gcc") == "gcc" and shown("my cc") == "'my cc'"
    assert shown("a\nb\x1b[31m") == repr("a\nb\x1b[31m")
    assert shown("x" * 500).endswith("...") and len(shown("x" * 500)) < 100


def test_resume_hints_name_a_toolchain_other_than_runs_defaults() -> None:
    assert toolchain_args(stored().config) == ""
    assert toolchain_args(stored("/opt/cc").config) == " --cc /opt/cc"
    flagged = stored(None, "-O2 -DX='a b'")
    option, value = shlex.split(toolchain_args(flagged.config))
    assert option == "--cflags" and tuple(shlex.split(value)) == flagged.config.bench.cflags
    # What the hint says gives the resume the very same flags.
    assert resumed_bench(flagged, None, value).cflags == flagged.config.bench.cflags
    assert toolchain_args(stored("bad\ncc").config) == " --cc 'bad\\ncc'"
