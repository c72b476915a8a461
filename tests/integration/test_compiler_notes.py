"""What gcc made of a kernel, read from its machine code into the cost model's features
(real gcc, real objdump, real Exo)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from schedsearch.core import BenchConfig, ExpandOptions, RewriteKind
from schedsearch.evaluate.build import build_kernel, kernel_notes
from schedsearch.evaluate.expansions import noting
from schedsearch.transforms import Expander, load_workload, root_candidate
from schedsearch.model.features import work_estimate

MATMUL = Path(__file__).resolve().parents[2] / "examples" / "matmul.py"


@pytest.fixture(scope="module")
def i8():
    return load_workload(MATMUL, "matmul_i8", {})


def test_the_notes_come_with_the_build_a_measurement_then_finds_ready(tmp_path: Path, i8) -> None:
    root = root_candidate(i8)
    notes = kernel_notes(root.c_source, BenchConfig(), tmp_path)
    assert notes is not None and _widest(notes) >= 16  # gcc vectorizes the root's j loop
    assert build_kernel(root.c_source, BenchConfig(), tmp_path).cached
    assert kernel_notes(root.c_source, BenchConfig(), tmp_path) == notes  # read back as kept


def _widest(notes: str) -> int:
    """The widest vectors (bytes) of a machine-code summary's rows."""
    return max((int(r.split()[1]) for r in notes.splitlines() if not r.startswith("#")), default=0)


def test_an_expander_that_reads_the_notes_sees_which_children_gcc_leaves_scalar(tmp_path: Path, i8) -> None:
    """The i8 matmul's root is vectorized by gcc; swapping its outer loops leaves it scalar
    (3.3x slower on Zen 4) though it does the same statements. Only the notes tell."""
    root = root_candidate(i8)
    plain = Expander(i8, ExpandOptions())
    noted = noting(Expander(i8, ExpandOptions()), BenchConfig(), tmp_path)
    assert noted.cache_version != plain.cache_version  # kept expansions are kept apart
    by_kind = {}
    for child in noted.expand(root).children:
        by_kind.setdefault(child.schedule.steps[-1].kind, []).append(child)
    reorder = by_kind[RewriteKind.REORDER][0]
    staged = [c for c in by_kind[RewriteKind.STAGE_MEM] if dict(c.schedule.steps[-1].args).get("hoist") == 2]
    assert staged, "the stage of all of C around the nest is proposed"
    assert work_estimate(reorder.features) > 1  # scalar: about 4x the root's vector work
    # 32-byte (AVX2) or 64-byte (AVX-512) vectors where the root has 16: at most half the work
    assert work_estimate(staged[0].features) < -0.5
    plain_reorder = plain.candidate(reorder.schedule, root)
    assert work_estimate(plain_reorder.features) == pytest.approx(0.0)  # the statement count cannot tell
    # The children were built as they were made: their measurements find the builds ready,
    # and each says so (``Candidate.built``); an expander without the notes builds nothing.
    assert reorder.built and staged[0].built and not plain_reorder.built
    assert build_kernel(reorder.c_source, BenchConfig(), tmp_path).cached


def test_a_compiler_that_is_not_gcc_gives_no_notes_and_leaves_the_features_alone(tmp_path: Path, i8) -> None:
    script = tmp_path / "other-cc.sh"
    script.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "clang version 17.0.6"; exit 0; }\nexec gcc "$@"\n')
    script.chmod(0o755)
    other = BenchConfig(cc=f"sh {script}")
    root = root_candidate(i8)
    assert kernel_notes(root.c_source, other, tmp_path) is None
    assert build_kernel(root.c_source, other, tmp_path).ok  # it still builds
    expander = noting(Expander(i8, ExpandOptions()), other, tmp_path)
    assert expander.cache_version == Expander(i8, ExpandOptions()).cache_version


def _slow_gcc(tmp_path: Path, seconds: float) -> BenchConfig:
    """gcc that takes ``seconds`` longer to build a kernel (its other uses as is)."""
    script = tmp_path / "slow-gcc.sh"
    script.write_text(f'#!/bin/sh\ncase "$*" in *-shared*) sleep {seconds:g};; esac\nexec gcc "$@"\n')
    script.chmod(0o755)
    return BenchConfig(cc=f"sh {script}")


def test_notes_from_a_build_that_outlasts_the_wait_are_not_waited_for(tmp_path: Path, i8) -> None:
    """A build slower than the wait is stopped and gives no notes; nothing of it is kept, and
    the child's measurement then builds it in full."""
    import time

    slow = _slow_gcc(tmp_path, 4)
    root = root_candidate(i8)
    started = time.perf_counter()
    assert kernel_notes(root.c_source, slow, tmp_path / "cache", wait=0.5) is None
    assert time.perf_counter() - started < 3.0
    built = build_kernel(root.c_source, slow, tmp_path / "cache")
    assert built.ok and not built.cached  # the stopped build left nothing behind
    assert _widest(kernel_notes(root.c_source, slow, tmp_path / "cache", wait=0.5) or "") >= 16


def test_an_expansion_goes_on_without_the_notes_of_a_slow_build(tmp_path: Path, i8, monkeypatch) -> None:
    """Every child's build outlasts the wait: the expansion comes back in about the wait, its
    children without notes (as an expander without them would give)."""
    import time

    from schedsearch.evaluate import build
    from schedsearch.model.features import FEATURE_NAMES

    monkeypatch.setattr(build, "NOTES_WAIT_SECONDS", 0.5)
    slow = _slow_gcc(tmp_path, 30)
    root = root_candidate(i8)
    noted = noting(Expander(i8, ExpandOptions()), slow, tmp_path / "cache")
    started = time.perf_counter()
    children = noted.expand(root).children
    assert time.perf_counter() - started < 20.0  # 30 s a build otherwise, children two at a time
    notes_at = FEATURE_NAMES.index("compiler_notes")
    assert children and all(c.features.values[notes_at] == 0.0 and not c.built for c in children)
    plain = {c.fingerprint: c.features for c in Expander(i8, ExpandOptions()).expand(root).children}
    assert all(plain[c.fingerprint] == c.features for c in children)


def test_compiler_notes_through_the_cli(tmp_path: Path) -> None:
    """``--compiler-notes`` is stored with the search, makes the model lead it, and every
    child's features carry the notes; without it none does."""
    import json

    from schedsearch.store import open_store
    from schedsearch.model.features import FEATURE_NAMES
    from tests.conftest import run_cli

    notes_at = FEATURE_NAMES.index("compiler_notes")
    for flag, expected in (("--compiler-notes", 1.0), ("--no-compiler-notes", 0.0)):
        db = tmp_path / f"{flag}.db"
        r = run_cli("run", str(MATMUL), "--proc", "matmul_i8", "--workers", "0", "--max-candidates", "6",
                    "--budget", "120", "--no-warm-start", "--db", str(db), "--json", flag, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        sid = json.loads(r.stdout)["search_id"]
        store = open_store(str(db), create=False, read_only=True)
        try:
            config = store.get_search(sid).config
            children = [c for c in store.candidates(sid) if c.depth > 0]
        finally:
            store.close()
        assert config.expand.compiler_notes is (expected == 1.0)
        assert config.model_leads is (expected == 1.0)  # with the notes the model leads the search
        assert children and all(c.features.values[notes_at] == expected for c in children)


def test_notes_taken_up_late_still_name_the_kept_expansions(tmp_path: Path, i8) -> None:
    expander = Expander(i8, ExpandOptions())
    before = expander.cache_version
    assert expander.root_vector_work is None
    noting(expander, BenchConfig(), tmp_path)
    assert expander.cache_version != before and expander.root_vector_work is not None


def test_the_notes_are_on_by_default_and_off_where_they_cannot_be_read(monkeypatch) -> None:
    """A search reads the compiler's notes unless told not to; the model then leads. Not
    with the model off (nothing reads them), nor where no objdump reads the machine code:
    a model without the notes must not lead (it ranks the i8 matmul's first round backwards)."""
    from schedsearch.app.settings import SearchSettings
    from schedsearch.evaluate import machine_code

    config = SearchSettings(target="scalar").config()
    assert config.expand.compiler_notes and config.model_leads
    for settings in (SearchSettings(target="scalar", compiler_notes=False),
                     SearchSettings(target="scalar", cost_model="off")):
        config = settings.config()
        assert not config.expand.compiler_notes and not config.model_leads
    machine_code.objdump_command.cache_clear()
    monkeypatch.setenv("PATH", "/nonexistent")
    try:
        with_gcc = SearchSettings(target="scalar", cc=shutil.which("gcc", path=os.defpath) or "/usr/bin/gcc")
        config = with_gcc.config()
        assert not config.expand.compiler_notes and not config.model_leads
    finally:
        machine_code.objdump_command.cache_clear()
