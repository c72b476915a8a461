"""Loading workloads: proc choice, sizes, assertions, ArgSpecs, FLOPs and every bad input."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from schedsearch.core import ArgRole, ArgSpec, DType, Workload
from schedsearch.errors import WorkloadError
from schedsearch.transforms import build_proc, list_procs, load_workload

ROOT = Path(__file__).resolve().parents[2]
MATMUL = ROOT / "examples" / "matmul.py"
DATA = ROOT / "tests" / "data" / "workloads"


def test_sgemm_args_sizes_and_flops():
    w = load_workload(MATMUL, "sgemm", {"M": 32, "N": 48, "K": 16})
    assert w.proc == "sgemm"
    assert w.sizes == (("M", 32), ("N", 48), ("K", 16))
    assert w.args == (
        ArgSpec("A", ArgRole.TENSOR, DType.F32, (32, 16), output=False),
        ArgSpec("B", ArgRole.TENSOR, DType.F32, (16, 48), output=False),
        ArgSpec("C", ArgRole.TENSOR, DType.F32, (32, 48), output=True),
    )
    assert w.flops == 2 * 32 * 48 * 16
    assert w.path == str(MATMUL)
    assert w.source == MATMUL.read_text()


def test_matmul_i8_args_and_flops():
    w = load_workload(MATMUL, "matmul_i8")
    assert w.sizes == ()
    assert [(a.name, a.dtype, a.shape, a.output) for a in w.args] == [
        ("A", DType.I8, (16, 16), False),
        ("B", DType.I8, (16, 16), False),
        ("C", DType.I32, (16, 16), True),
    ]
    assert w.flops == 2 * 16**3


def test_default_sizes_come_from_the_module_and_can_be_overridden():
    w = load_workload(MATMUL, "sgemm")
    assert w.sizes_dict == {"M": 256, "N": 256, "K": 256}
    assert load_workload(ROOT / "examples" / "imatmul.py").sizes_dict == {"M": 32, "N": 32, "K": 32}
    w = load_workload(MATMUL, "sgemm", {"N": 64})
    assert w.sizes_dict == {"M": 256, "N": 64, "K": 256}


def test_workload_round_trips_through_json_and_rebuilds():
    w = load_workload(MATMUL, "sgemm", {"M": 8, "N": 8, "K": 8})
    again = Workload.from_json(w.to_json())
    assert again == w
    assert "for k in seq(0, 8)" in str(build_proc(again))


def test_scalar_argument_is_a_scalar_spec():
    w = load_workload(DATA / "scalar_arg.py", sizes={"N": 16})
    assert [(a.name, a.role, a.shape, a.output) for a in w.args] == [
        ("a", ArgRole.SCALAR, (), False),
        ("x", ArgRole.TENSOR, (16,), False),
        ("y", ArgRole.TENSOR, (16,), True),
    ]
    assert w.flops == 2 * 16


def test_list_procs():
    assert list_procs(MATMUL) == ["sgemm", "matmul_i8"]
    assert list_procs(DATA / "two_procs.py") == ["scale", "add"]


def test_same_file_name_in_two_directories_does_not_clash():
    a = load_workload(DATA / "same_a" / "kern.py")
    b = load_workload(DATA / "same_b" / "kern.py")
    assert (a.proc, b.proc) == ("first", "second")
    assert "for i in seq(0, 8)" in str(build_proc(a))
    assert "for i in seq(0, 4)" in str(build_proc(b))
    assert not any(name.startswith("schedsearch_workload_") for name in sys.modules)


def test_assertion_holds_with_defaults():
    w = load_workload(DATA / "asserts.py")
    assert w.sizes_dict == {"N": 64}
    assert w.flops == 3 * 64


BAD = [
    (DATA / "missing.py", None, None, "does not exist"),
    (DATA / "syntax_error.py", None, None, "syntax_error.py:8: syntax error"),
    (DATA / "import_error.py", None, None, "RuntimeError: this workload refuses to load"),
    (DATA / "no_procs.py", None, None, "defines no @proc"),
    (DATA / "two_procs.py", None, None, "several procs (scale, add)"),
    (DATA / "two_procs.py", "mul", None, "no proc named mul; available: scale, add"),
    (MATMUL, "sgemm", {"M": 8, "N": 8, "K": 8, "Q": 2}, "no size argument Q"),
    (DATA / "two_procs.py", "scale", None, "needs values for its size arguments: N"),
    (MATMUL, "sgemm", {"M": 0}, "size M of sgemm must be positive"),
    (MATMUL, "sgemm", {"M": -4}, "must be positive"),
    (MATMUL, "sgemm", {"M": 2.5}, "size M of sgemm must be an integer"),
    (MATMUL, "sgemm", {"M": True}, "must be an integer"),
    (DATA / "asserts.py", None, {"N": 12}, "violate the assertion `N % 8 == 0`"),
    (DATA / "window_arg.py", None, {"N": 8}, "argument x of windowed is a window"),
    (DATA / "index_arg.py", None, {"N": 8}, "argument j of indexed has type `index`"),
    (DATA / "stride_arg.py", None, {"N": 8}, "argument s of strided has type `stride`"),
    (DATA / "avx_memory.py", None, None, "lives in memory AVX2"),
]


@pytest.mark.parametrize(("path", "proc", "sizes", "message"), BAD, ids=[f"{b[0].name}-{b[3][:20]}" for b in BAD])
def test_bad_inputs_raise_one_clear_workload_error(path, proc, sizes, message):
    with pytest.raises(WorkloadError) as info:
        load_workload(path, proc, sizes)
    text = str(info.value)
    assert message in text
    assert "\n" not in text


def test_file_may_name_its_default_proc(tmp_path) -> None:
    from schedsearch.transforms import load_workload as load

    src = (Path(__file__).resolve().parents[2] / "examples" / "matmul.py").read_text()
    f = tmp_path / "mm.py"
    f.write_text(src)
    assert load(f).proc == "sgemm"  # SCHEDSEARCH_PROC picks it among several procs
    f.write_text(src.replace('SCHEDSEARCH_PROC = "sgemm"', 'SCHEDSEARCH_PROC = "gemm"'))
    with pytest.raises(WorkloadError, match="SCHEDSEARCH_PROC"):
        load(f)


def test_shapes_and_bounds_that_are_sums_of_sizes_are_folded() -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    conv = load_workload(examples / "conv1d.py", sizes={"N": 1024, "R": 8})
    assert [a.shape for a in conv.args] == [(1032,), (8,), (1024,)]
    blur = load_workload(examples / "blur.py", sizes={"H": 8, "W": 8})
    assert blur.flops is not None and blur.flops > 0  # the (H + 2)-trip loop has a known trip count
