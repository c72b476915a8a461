"""Peer reference: Halide's autoschedulers on the two-stage blur of ``examples/blur.py``.

Run: ``.venv/bin/python benchmarks/halide_blur.py`` (needs ``pip install halide``, v21).

The pipeline is the same f32 blur as ``blur2_local`` (H=W=512 by default)::

    tmp[y, x] = (inp[y, x] + inp[y, x+1] + inp[y, x+2]) / 3.0    y in 0..H+2, x in 0..W
    out[y, x] = (tmp[y, x] + tmp[y+1, x] + tmp[y+2, x]) / 3.0    y in 0..H,   x in 0..W

It is JIT-compiled for the host CPU, single-threaded (``HL_NUM_THREADS=1`` and each
autoscheduler told ``parallelism=1``), scheduled by Adams2019 (its built-in weights),
Mullapudi2016 or Li2018, or by hand as plain ``compute_root`` of ``tmp`` / all-inline.
Each variant is called through ``compile_to_callable`` on preallocated buffers; the time
is the median over samples of the mean time per call, each sample repeating the call for
at least ``MIN_SAMPLE_SECONDS`` after a warm-up. ``main`` also checks every variant's
output against numpy.
"""

from __future__ import annotations

import os

os.environ["HL_NUM_THREADS"] = "1"  # read by Halide's runtime when its thread pool starts
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy would otherwise start an idle BLAS thread

import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import halide as hl  # noqa: E402
import numpy as np  # noqa: E402

MIN_SAMPLE_SECONDS = 0.02
AUTOSCHEDULERS = ("Adams2019", "Mullapudi2016", "Li2018")
MANUAL = ("compute_root", "inline")

_loaded_plugins: set[str] = set()


def _load_plugin(name: str) -> None:
    """Load an autoscheduler plugin once, by full path.

    The pip package keeps the plugins in ``halide/lib64`` (``libautoschedule_<name>.so``),
    which is not on the loader's search path, so a bare name would not be found.
    """
    if name in _loaded_plugins:
        return
    lib = Path(hl.install_dir()) / "lib64" / f"libautoschedule_{name.lower()}.so"
    hl.load_plugin(str(lib))
    _loaded_plugins.add(name)


def _build(h: int, w: int, schedule: str, target: hl.Target) -> hl.Callable:
    """Define the blur, schedule it with ``schedule`` and JIT-compile it to a callable.

    Halide coordinates are (x, y) with x innermost, the reverse of the numpy/Exo [y, x].
    """
    x, y = hl.Var("x"), hl.Var("y")
    inp = hl.ImageParam(hl.Float(32), 2, "inp")
    tmp, out = hl.Func("tmp"), hl.Func("out")
    tmp[x, y] = (inp[x, y] + inp[x + 1, y] + inp[x + 2, y]) / 3.0
    out[x, y] = (tmp[x, y] + tmp[x, y + 1] + tmp[x, y + 2]) / 3.0

    pipeline = hl.Pipeline(out)
    if schedule in AUTOSCHEDULERS:
        # The autoschedulers size their tiles from these extents.
        inp.set_estimates([hl.Range(0, w + 2), hl.Range(0, h + 2)])
        out.set_estimates([hl.Range(0, w), hl.Range(0, h)])
        _load_plugin(schedule)
        pipeline.apply_autoscheduler(target, hl.AutoschedulerParams(schedule, {"parallelism": 1}))
    elif schedule == "compute_root":
        tmp.compute_root()
    elif schedule != "inline":  # Halide's default schedule inlines tmp into out
        raise ValueError(f"unknown schedule {schedule!r}")
    return pipeline.compile_to_callable([inp], target)


def _measure(h: int, w: int, schedule: str, samples: int, cpu: int | None,
             strict: bool = False) -> tuple[float, np.ndarray]:
    """Median seconds per call of the scheduled blur, and its output on a random input.

    ``strict`` compiles with Halide's ``StrictFloat`` feature: IEEE semantics, so ``/ 3.0``
    stays a division (by default Halide may turn a float division by a constant into a
    multiplication by its reciprocal, which rounds differently; an Exo schedule must keep
    the proc's arithmetic as written)."""
    old_affinity = os.sched_getaffinity(0)
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})
    try:
        target = hl.get_host_target()
        if strict:
            target = target.with_feature(hl.TargetFeature.StrictFloat)
        blur = _build(h, w, schedule, target)
        inp_arr = np.random.default_rng(0).random((h + 2, w + 2), dtype=np.float32)
        out_arr = np.empty((h, w), dtype=np.float32)
        # The buffers wrap the numpy arrays, so the timed loop allocates nothing.
        inp_buf, out_buf = hl.Buffer(inp_arr), hl.Buffer(out_arr)

        # Warm up, and size a sample so it lasts at least MIN_SAMPLE_SECONDS.
        reps = 1
        while True:
            start = time.perf_counter()
            for _ in range(reps):
                blur(inp_buf, out_buf)
            elapsed = time.perf_counter() - start
            if elapsed >= MIN_SAMPLE_SECONDS:
                break
            reps *= 2

        times = []
        for _ in range(samples):
            start = time.perf_counter()
            for _ in range(reps):
                blur(inp_buf, out_buf)
            times.append((time.perf_counter() - start) / reps)
        return statistics.median(times), out_arr
    finally:
        if cpu is not None:
            os.sched_setaffinity(0, old_affinity)


def halide_blur_seconds(
    h: int = 512, w: int = 512, autoscheduler: str = "Adams2019", samples: int = 9, cpu: int | None = None,
    strict: bool = False,
) -> float:
    """Median seconds per call of the blur scheduled by ``autoscheduler``, one thread.

    ``autoscheduler`` is one of ``AUTOSCHEDULERS``, or ``"compute_root"`` / ``"inline"``
    for the hand schedules. ``cpu`` pins the process to that CPU while measuring.
    """
    return _measure(h, w, autoscheduler, samples, cpu, strict)[0]


def numpy_blur(inp: np.ndarray) -> np.ndarray:
    """The same blur in numpy, f32 throughout."""
    w = inp.shape[1] - 2
    three = np.float32(3.0)
    tmp = (inp[:, 0:w] + inp[:, 1 : w + 1] + inp[:, 2 : w + 2]) / three
    return (tmp[:-2] + tmp[1:-1] + tmp[2:]) / three


def main() -> None:
    h = w = 512
    cpu = min(os.sched_getaffinity(0))
    expected = numpy_blur(np.random.default_rng(0).random((h + 2, w + 2), dtype=np.float32))
    print(f"halide blur {h}x{w} f32, 1 thread, cpu {cpu}, target {hl.get_host_target()}")
    for schedule in AUTOSCHEDULERS + MANUAL:
        seconds, out = _measure(h, w, schedule, samples=9, cpu=cpu)
        err = float(np.max(np.abs(out - expected)))
        print(f"  {schedule:14s} {seconds * 1e6:9.1f} us/call   max abs err vs numpy {err:.2e}")


if __name__ == "__main__":
    main()
