"""Typed rewrite rules: every step's arguments are a checked record (real Exo for replays)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from schedsearch.core import ExpandOptions, Rewrite, RewriteKind, Schedule
from schedsearch.errors import ReplayError, ScheduleFileError
from schedsearch.schedule_file import read_schedule_file
from schedsearch.transforms import build_proc, kernel_c, load_workload, propose, try_apply
from schedsearch.transforms.rules import RULES, ArgError, decode, describe, naming_args, rule_for
from schedsearch.transforms.rules.args import encode

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ROOT / "examples" / "matmul.py"
DATA = ROOT / "tests" / "data" / "workloads"

SPLIT = {"factor": 8, "outer": "io", "inner": "ii", "tail": "perfect"}
TILE = {"inner": "j #0", "fa": 8, "fb": 8, "ao": "io", "ai": "ii", "bo": "jo", "bi": "ji"}
SCALAR_TILE = {
    "inner": "j #0", "red": "k #0", "rows": 8, "cols": 8, "group": 4, "order": "cols",
    "window": "C[8 * io:8 * io + 8, 8 * jo:8 * jo + 8]",
    "ao": "io", "ai": "ii", "bo": "jo", "bi": "ji", "aio": "iio", "aii": "iii", "name": "C_stage",
}
VECTOR_TILE = {
    "isa": "avx2", "inner": "j #0", "red": "k #0", "rows": 6, "cols": 16, "order": "cols", "trip": 20,
    "out": "C", "bcast": "A", "vec": "B", "dtype": "f32",
    "names": "io ii jo ji jv jl C_reg B_vec A_vec", "tail_names": "i_to i_ti j_to j_ti j_tv j_tl C_reg_t B_vec_t A_vec_t",
}


def step(kind: RewriteKind, target: str = "i #0", **args) -> Rewrite:
    return Rewrite.make(kind, target, **args)


@pytest.mark.parametrize(
    "rewrite,message",
    [
        (step(RewriteKind.SPLIT, **{**SPLIT, "factor": "x"}), "factor must be a positive integer, not 'x'"),
        (step(RewriteKind.SPLIT, **{**SPLIT, "factor": -3}), "factor must be a positive integer, not -3"),
        (step(RewriteKind.SPLIT, **{**SPLIT, "factor": True}), "factor must be a positive integer, not True"),
        (step(RewriteKind.SPLIT, **{**SPLIT, "tail": "sideways"}), "tail must be one of perfect, cut, guard, "
                                                                   "cut_and_guard, not 'sideways'"),
        (step(RewriteKind.SPLIT, **{**SPLIT, "fctor": 8}), "unknown argument 'fctor' (it takes factor, inner, "
                                                          "outer, tail)"),
        (step(RewriteKind.SPLIT, outer="io", inner="ii"), "missing argument 'factor'"),
        (step(RewriteKind.UNROLL, factor=2), "unknown argument 'factor' (it takes no arguments)"),
        (step(RewriteKind.TILE, **{**TILE, "ao": 3}), "ao must be a string, not 3"),
        (step(RewriteKind.PACK, buffer="B", window="B[0:8, 0:8]", name="B_pack", interchange="yes"),
         "interchange must be true or false, not 'yes'"),
        (step(RewriteKind.HOIST, "k #0", levels=0), "levels must be a positive integer, not 0"),
        (step(RewriteKind.COMPUTE_AT, "y #1", producer="y #0", buffer="tmp", dim=0, mode="strip", stack=False),
         "missing argument 'rows' (mode strip needs rows, strips, extent, local, names)"),
        (step(RewriteKind.COMPUTE_AT, "y #1", producer="y #0", buffer="tmp", dim=-1, mode="slide", lead=2),
         "dim must be an integer >= 0, not -1"),
        (step(RewriteKind.MICRO_KERNEL, **{**SCALAR_TILE, "group": 3}), "group must divide rows (8), not 3"),
        (step(RewriteKind.REGISTER_TILE, **{**VECTOR_TILE, "cols": 12}), "cols must be a multiple of the 8 f32 "
                                                                         "lanes of avx2"),
        (step(RewriteKind.REGISTER_TILE, **{**VECTOR_TILE, "isa": "avx512", "dtype": "f64"}),
         "isa avx512 has no f64 register-tile instructions"),
        (step(RewriteKind.REGISTER_TILE, **{**VECTOR_TILE, "isa": "sse9"}), "isa must be one of avx512, avx2, "
                                                                           "neon, scalar, not 'sse9'"),
        (step(RewriteKind.REGISTER_TILE, **{**VECTOR_TILE, "names": "io ii"}), "names must be nine names"),
        (step(RewriteKind.VECTORIZE, isa="avx2", lanes=8, trip=64, tail="perfect", names="io ii it im", mode="map",
              dtype="f32", binds="", stages="", body="s", ops="load,teleport"),
         "do not make a vectorize plan"),
    ],
    ids=lambda v: v.describe() if isinstance(v, Rewrite) else None,
)
def test_malformed_arguments_are_refused_with_one_sentence(rewrite: Rewrite, message: str) -> None:
    with pytest.raises(ArgError) as info:
        decode(rewrite)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_an_argument_given_twice_is_refused() -> None:
    twice = Rewrite(RewriteKind.UNROLL, "i #0", (("x", 1), ("x", 2)))
    with pytest.raises(ArgError, match="given twice"):
        decode(twice)


def test_a_malformed_step_is_a_replay_error_naming_the_step() -> None:
    workload = load_workload(MATMUL, "sgemm", {"M": 8, "N": 8, "K": 8})
    good = step(RewriteKind.SPLIT, "k #0", factor=2, outer="ko", inner="ki", tail="perfect")
    bad = step(RewriteKind.SPLIT, **{**SPLIT, "factor": "x"})
    with pytest.raises(ReplayError) as info:
        build_proc(workload, Schedule((good, bad)))
    assert str(info.value) == "step 1 `split i #0`: factor must be a positive integer, not 'x'"
    assert info.value.step == 1


def test_a_schedule_file_with_a_malformed_step_is_refused_when_read(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({
        "format": "schedsearch-schedule", "version": 1,
        "workload": {"file": str(MATMUL), "proc": "sgemm", "sizes": {"M": 8, "N": 8, "K": 8}},
        "steps": [{"kind": "split", "target": "k #0", "args": {**SPLIT, "factor": 2}},
                  {"kind": "tile", "target": "i #0", "args": {**TILE, "fb": -3}}],
    }))
    with pytest.raises(ScheduleFileError) as info:
        read_schedule_file(path)
    assert str(info.value) == f"{path}: step 1 `tile i #0`: fb must be a positive integer, not -3"


def _file(path: Path, **extra: object) -> Path:
    path.write_text(json.dumps({
        "format": "schedsearch-schedule", "version": 1,
        "workload": {"file": str(MATMUL), "proc": "sgemm", "sizes": {"M": 8, "N": 8, "K": 8}},
        "steps": [{"kind": "split", "target": "k #0", "args": {**SPLIT, "factor": 2}}], **extra,
    }))
    return path


def test_a_schedule_files_float_mode_is_read_and_defaults_to_strict(tmp_path: Path) -> None:
    from schedsearch.core import FloatMode
    from schedsearch.schedule_file import write_schedule_file

    assert read_schedule_file(_file(tmp_path / "old.json")).float_mode is FloatMode.STRICT
    relaxed = read_schedule_file(_file(tmp_path / "new.json", float_mode="relaxed"))
    assert relaxed.float_mode is FloatMode.RELAXED
    write_schedule_file(tmp_path / "again.json", relaxed)
    assert json.loads((tmp_path / "again.json").read_text())["float_mode"] == "relaxed"
    assert read_schedule_file(tmp_path / "again.json").float_mode is FloatMode.RELAXED
    with pytest.raises(ScheduleFileError) as info:
        read_schedule_file(_file(tmp_path / "bad.json", float_mode="fast"))
    assert str(info.value) == f"{tmp_path / 'bad.json'} is malformed: its float_mode 'fast' is not one of strict, relaxed"


WORKLOADS = [
    (MATMUL, "sgemm", {"M": 16, "N": 32, "K": 8}, "avx2"),
    (MATMUL, "sgemm", {"M": 16, "N": 32, "K": 8}, "scalar"),
    (ROOT / "examples" / "matvec.py", "matvec", {"M": 16, "N": 32}, "avx512"),
    (ROOT / "examples" / "blur.py", "blur2_local", {"H": 16, "W": 16}, "scalar"),
    (DATA / "fusable.py", None, None, "scalar"),
    (ROOT / "examples" / "kernels.py", "conv2d", {"Co": 8, "Ci": 4, "H": 4, "W": 20}, "avx512"),
]


@pytest.fixture(scope="module")
def proposals() -> list[Rewrite]:
    out = []
    for path, proc, sizes, isa in WORKLOADS:
        root = build_proc(load_workload(path, proc, sizes))
        out += propose(root, ExpandOptions(target=isa, allow_parallel=True))
    return out


def test_every_kinds_record_round_trips_and_is_frozen(proposals) -> None:
    kinds = {rw.kind for rw in proposals}
    current = {rule.kind for rule in RULES}
    assert kinds == current, current - kinds  # every kind is proposed somewhere above
    for rw in proposals:
        args = decode(rw)
        assert rule_for(rw.kind).step(rw.target, args) == rw
        assert encode(args) == rw.args
        assert type(args).__name__ != "dict" and dataclasses.is_dataclass(args)
        if dataclasses.fields(args):
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(args, dataclasses.fields(args)[0].name, None)
        # the wire form survives JSON, as databases and schedule files keep it
        assert Rewrite.from_json(json.loads(json.dumps(rw.to_json()))) == rw


def test_naming_arguments_are_declared_by_the_rules_and_hidden_by_describe() -> None:
    assert naming_args(RewriteKind.SPLIT) == {"outer", "inner"}
    assert naming_args(RewriteKind.TILE) == {"ao", "ai", "bo", "bi"}
    assert {"names", "tail_names", "name"} <= naming_args(RewriteKind.REGISTER_TILE)
    assert naming_args(RewriteKind.MICRO_KERNEL) == naming_args(RewriteKind.REGISTER_TILE)
    split = step(RewriteKind.SPLIT, **SPLIT)
    assert describe(split) == "split i #0 factor=8 tail=perfect"
    assert split.describe() == "split i #0 factor=8 inner=ii outer=io tail=perfect"
    tile = describe(step(RewriteKind.REGISTER_TILE, **VECTOR_TILE))
    assert "names" not in tile and "C_reg" not in tile and "rows=6" in tile


def test_an_old_micro_kernel_step_replays_as_the_scalar_register_tile() -> None:
    workload = load_workload(MATMUL, "sgemm", {"M": 16, "N": 16, "K": 8})
    root = build_proc(workload)
    new = next(r for r in propose(root) if r.kind is RewriteKind.REGISTER_TILE and r.arg("rows") == 8
               and r.arg("group") == 4 and r.arg("order") == "cols")
    assert new.arg("isa") == "scalar"
    old = Rewrite(RewriteKind.MICRO_KERNEL, new.target, tuple((k, v) for k, v in new.args if k != "isa"))
    assert old.to_json()["args"] == [[k, v] for k, v in sorted(SCALAR_TILE.items())]  # an older file's step
    c = kernel_c(try_apply(root, new))
    assert "float C_stage[8 * 8];" in c
    assert kernel_c(try_apply(root, old)) == c
    assert kernel_c(build_proc(workload, Schedule((old,)))) == c


def test_scalar_tiles_are_offered_where_the_target_has_no_instructions() -> None:
    # i8: no vector FMA on any target, so gcc's tile is offered on avx2 too
    root = build_proc(load_workload(DATA / "gemm_i8.py", "gemm_i8", {"M": 16, "N": 16, "K": 8}))
    tiles = [r for r in propose(root, ExpandOptions(target="avx2")) if r.kind is RewriteKind.REGISTER_TILE]
    assert tiles and {r.arg("isa") for r in tiles} == {"scalar"}
    # f32 on avx2: the tile in AVX2 instructions only
    sgemm = build_proc(load_workload(MATMUL, "sgemm", {"M": 16, "N": 32, "K": 8}))
    tiles = [r for r in propose(sgemm, ExpandOptions(target="avx2")) if r.kind is RewriteKind.REGISTER_TILE]
    assert tiles and {r.arg("isa") for r in tiles} == {"avx2"}
