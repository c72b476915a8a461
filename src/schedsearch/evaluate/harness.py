"""The C driver that verifies and times kernels, generated from a workload's arguments.

One driver executable serves every candidate of a workload signature (the argument names,
types and shapes): it ``dlopen``s kernel shared objects given on its command line. That way
a candidate's build is a single small ``gcc -shared`` of Exo's C, and finalists can be timed
side by side in one process (``remeasure``) by loading several kernels at once. A *linked*
driver (``driver_source(args, linked=True)``) is compiled together with one kernel instead,
for kernels of another architecture: cross-compiled ``-static`` and run under an emulator,
it verifies them against reference outputs computed on this machine.

The answer key (``reference`` mode, run once per search on the unscheduled proc and cached):
``INPUT_SETS`` input sets, each drawn from a small deterministic PRNG (splitmix64) seeded
from ``BenchConfig.seed`` (the first set from the seed itself), and for each the
reference's outputs and, for float outputs, their error scale. The values exercise the
range a kernel must handle:

* floats of random sign and magnitude (``m * 2**-e``, ``m`` in [0.5, 1), ``e`` in 0..5);
* 8-bit integers over their whole range, wider integer inputs within -128..127 (products of
  two must fit an int32 accumulator); integer inputs are halved while they would bring an
  integer output within a quarter of its type's limit - computed by running the reference
  on the inputs' magnitudes, which for sums of products is the largest it can add - so the
  reference itself never overflows;
* integer outputs that are read before written (``C += ...``) start near their type's
  limits, as far as that headroom allows: a kernel that accumulates in a narrower type or
  through floats is wrong there;
* each float output's magnitude (the reference on ``|inputs|``) sets its tolerance
  (``verification``).

Verification (``run`` mode), outside any timed region, for each kernel: every input set is
copied in and the kernel called once (``verification_rounds`` times for a kernel with a
parallel loop, where a data race may show only sometimes); after each call

* the ``GUARD`` bytes before and after every argument (a known pattern: the arguments are
  allocated separately, each between its own guard zones) must be untouched: a write one
  element before or past any buffer is caught;
* every argument the kernel only reads must be unchanged;
* every output element must be within its tolerance: ``|out - ref| <= atol + rtol * |ref|``
  with ``atol`` from the problem's scale (``verification``), integers exactly, NaN and
  infinities as in the reference.

The first failure is reported (``verify <k> wrong|clobbered|changed ...``) and the kernel
is not timed. The first set's inputs are loaded for timing; each timed call starts from
the first set's outputs again (``memcpy``), because kernels may read their outputs before
writing them (``C += ...``), and because the initial values are random and non-zero, a
kernel that skips its work leaves outputs that differ from the reference. ``ctxt`` is NULL.

Timing uses ``clock_gettime(CLOCK_MONOTONIC)`` around each kernel call only; the output
reset between calls is not timed. The first verification call's duration lets a very slow
kernel stop early (``slow``, after checking one set: it will not be timed; ``cut``, fully
checked); the fastest warm-up call's decides ``inner`` (calls per sample, so a sample lasts
at least ``min_sample_seconds``) and fewer samples so the run fits its time budget. The
fastest, not the last: one warm-up call preempted by the host (milliseconds on a KVM guest)
once gave a 182 ns i8 kernel 2 calls a sample instead of ~27000; its samples, each taken
right after thousands of calls of another kernel, ran cold at 315-641 ns.

``dump`` mode (``run_once``) draws the first input set with the kernel it is given and
writes every argument before and the outputs after one call. The driver prints one line
per fact; ``bench.parse_report`` reads them.
"""

from __future__ import annotations

from collections.abc import Sequence

from schedsearch.core import KERNEL_SYMBOL, ArgSpec, DType
from schedsearch.evaluate.driver_checks import CHECKS
from schedsearch.evaluate.driver_sets import SETS

#: Bumped whenever the driver's behaviour or output format changes: it is part of every
#: build-cache and reference-output key.
HARNESS_VERSION = "13"
#: Input sets every kernel is verified on (each drawn from its own seed).
INPUT_SETS = 2
#: Bytes of the guard zone on either side of every argument: a multiple of 64, so that the
#: arguments stay as aligned as before; wide enough for a row of 1024 floats.
GUARD_BYTES = 4096

#: The driver's type codes (``enum`` in ``driver_sets.SETS``).
_TYPE_CODE = {
    DType.F16: "T_F16",
    DType.F32: "T_F32",
    DType.F64: "T_F64",
    DType.I8: "T_I8",
    DType.UI8: "T_UI8",
    DType.UI16: "T_UI16",
    DType.I16: "T_I16",
    DType.I32: "T_I32",
}


def driver_source(args: Sequence[ArgSpec], linked: bool = False) -> str:
    """C source of the driver for kernels taking ``args`` (after ``ctxt``), in C order.

    By default the driver ``dlopen``s the kernel shared objects named on its command line.
    With ``linked`` it calls the kernel it is linked with instead (compile it together with
    one kernel's C) and ignores the kernel paths: that driver can be linked ``-static``, which
    a cross-compiled kernel run under a user-mode emulator needs, since the emulator then
    needs no target sysroot and no dynamic loader.
    """
    params = ", ".join(["void *"] + [f"{a.dtype.c_type} *" for a in args])
    infos = [
        f'{{"{a.name}", {_TYPE_CODE[a.dtype]}, {max(1, a.elements)}ul, {a.nbytes}ul, {int(a.output)}}}' for a in args
    ]
    bind = [
        f"  a{i} = ({a.dtype.c_type} *)data[{i}]; init{i} = ({a.dtype.c_type} *)sets[0].in[{i}];"
        for i, a in enumerate(args)
    ]
    reset = [
        f"  memcpy(a{i}, init{i}, {max(1, a.elements)}ul * sizeof({a.dtype.c_type}));"
        for i, a in enumerate(args)
        if a.output
    ]
    types = sorted({a.dtype for a in args}, key=list(DType).index)
    header = f"schedsearch reference, harness {HARNESS_VERSION}, {INPUT_SETS} sets: " + (
        ", ".join(f"{a.dtype.value}[{max(1, a.elements)}]{' out' if a.output else ''}" for a in args) or "no arguments"
    )
    fills = {
        "VERSION": HARNESS_VERSION,
        "DL_INCLUDE": "" if linked else "#include <dlfcn.h>\n",
        "PARAMS": params,
        "NARGS": str(len(args)),
        "NSETS": str(INPUT_SETS),
        "GUARD": str(GUARD_BYTES),
        "INFOS": ", ".join(infos) or '{"", T_F32, 1ul, 1ul, 0}',
        "HEADER": header,
        "DECLS": "\n".join(f"static {a.dtype.c_type} *a{i}, *init{i};" for i, a in enumerate(args)),
        "GET_CASES": "\n".join(f"    case {_TYPE_CODE[t]}: return (double)((const {t.c_type} *)p)[e];" for t in types),
        "PUT_CASES": "\n".join(
            f"    case {_TYPE_CODE[t]}: (({t.c_type} *)p)[e] = ({t.c_type})v; break;" for t in types
        ),
        "BIND": "\n".join(bind),
        "CALL_ARGS": ", ".join(["NULL"] + [f"a{i}" for i in range(len(args))]),
        "LOADER": _loader(linked, params),
        "RESET": "\n".join(reset),
    }
    text = SETS + CHECKS + _TIMING
    for name, value in fills.items():
        text = text.replace(f"@{name}@", value)
    return text


def _loader(linked: bool, params: str) -> str:
    """The driver's ``load(path)``."""
    text = _LINKED_LOADER if linked else _DLOPEN_LOADER
    return text.replace("@SYMBOL@", KERNEL_SYMBOL).replace("@PARAMS@", params)


#: The kernel from a shared object named on the command line (the default driver).
_DLOPEN_LOADER = r"""static kernel_fn load(const char *path) {
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) { fprintf(stderr, "cannot load %s: %s\n", path, dlerror()); exit(4); }
  kernel_fn k = (kernel_fn)dlsym(h, "@SYMBOL@");
  if (!k) { fprintf(stderr, "no symbol @SYMBOL@ in %s\n", path); exit(4); }
  return k;
}
"""

#: The one kernel compiled into the driver; the path argument is only a placeholder.
_LINKED_LOADER = r"""void @SYMBOL@(@PARAMS@);

static kernel_fn load(const char *path) {
  (void)path;
  return @SYMBOL@;
}
"""

#: The timed part: unchanged by the checks, which all run before it.
_TIMING = r"""
static void reset_outputs(void) {
@RESET@
}

static double timed_call(kernel_fn k) {
  reset_outputs();
  double t0 = now();
  k(@CALL_ARGS@);
  return now() - t0;
}

/* run <reference-file> <cpu> <rtol> <scale> <rounds> <warmup-s> <min-sample-s> <samples> <budget-s> <cutoff-s> <settle> <gate> <so>...
   Verify every kernel (verify: each input set of the reference file `rounds` times, with
   the tolerances `rtol` and `scale` give), then time the good ones in interleaved
   rounds.
   gate = 1: before the first warm-up, print "ready" and wait for a line on stdin (the
   caller pauses the node's other work for the timing only; verification and kernels
   timed by one call do not need it).
   cutoff-s > 0: a kernel whose verification call takes longer is timed by that call alone
   ("cut"): it cannot be among the fastest, and timing it properly would cost many calls.
   settle > 0 (one kernel only): stop sampling once the last MIN_SAMPLES samples lie within
   that relative spread ((max - min) / min) of each other. */
#define MIN_SAMPLES 3
static int do_run(int argc, char **argv) {
  if (argc < 15) { fprintf(stderr, "usage: run ref cpu rtol scale rounds warmup min_sample samples budget cutoff settle gate so...\n"); return 2; }
  double start = now();
  const char *ref_path = argv[2];
  int cpu = atoi(argv[3]);
  double rtol = atof(argv[4]), scale = atof(argv[5]);
  int rounds = atoi(argv[6]);
  double warmup = atof(argv[7]), min_sample = atof(argv[8]);
  int samples = atoi(argv[9]);
  double budget = atof(argv[10]);
  double cutoff = atof(argv[11]), settle = atof(argv[12]);
  int gate = atoi(argv[13]);
  int n = argc - 14;
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof(set), &set); /* best effort: noise, not correctness */
  }
  setup(0);
  read_reference(ref_path);
  bind();
  prepare_tolerances(rtol, scale);
  kernel_fn *k = (kernel_fn *)calloc(n, sizeof(kernel_fn));
  double *first = (double *)calloc(n, sizeof(double));
  int *inner = (int *)calloc(n, sizeof(int));
  int *good = (int *)calloc(n, sizeof(int));
  int live = 0;
  double per_round = 0.0;
  for (int c = 0; c < n; c++) {
    k[c] = load(argv[14 + c]);
    good[c] = verify(c, k[c], rounds < 1 ? 1 : rounds, budget / n / 2.0, &first[c]);
    if (good[c] && first[c] * 2.0 > budget / n) {
      printf("slow %d %.9g\n", c, first[c]);
      good[c] = 0;
    }
    if (good[c] && cutoff > 0.0 && first[c] > cutoff) {
      printf("cut %d %.9g\n", c, first[c]);
      printf("sample %d %.9g\n", c, first[c]);
      good[c] = 0;
    }
    fflush(stdout);
    if (!good[c]) continue;
    live++;
    if (gate) {
      gate = 0;
      printf("ready\n");
      fflush(stdout);
      int ch;
      do { ch = getchar(); } while (ch != '\n' && ch != EOF);
    }
    /* The fastest warm-up call estimates a call: the verification call ran on cold caches,
       and any one call may be preempted by the host. */
    double w0 = now(), t = 0.0;
    do {
      double u = timed_call(k[c]);
      if (t <= 0.0 || u < t) t = u;
    } while (now() - w0 < warmup);
    if (t <= 0.0) t = 1e-9;
    double want = min_sample / t;
    inner[c] = want < 1.0 ? 1 : (want > 1e9 ? 1000000000 : (int)ceil(want));
    per_round += inner[c] * t;
    printf("inner %d %d\n", c, inner[c]);
  }
  if (live > 0) {
    double left = budget - (now() - start);
    int fit = per_round > 0.0 ? (int)(left / per_round) : samples;
    if (fit < samples) samples = fit < 1 ? 1 : fit;
  }
  double *acc = (double *)calloc((size_t)n * (size_t)samples, sizeof(double));
  int taken = 0;
  for (int s = 0; s < samples && live > 0; s++) {
    for (int c = 0; c < n; c++) {
      if (!good[c]) continue;
      double total = 0.0;
      for (int r = 0; r < inner[c]; r++) total += timed_call(k[c]);
      acc[(size_t)c * samples + s] = total / inner[c];
    }
    taken = s + 1;
    if (settle > 0.0 && n == 1 && taken >= MIN_SAMPLES) {
      double lo = 0.0, hi = 0.0;
      for (int i = taken - MIN_SAMPLES; i < taken; i++) {
        double x = acc[i];
        if (i == taken - MIN_SAMPLES || x < lo) lo = x;
        if (i == taken - MIN_SAMPLES || x > hi) hi = x;
      }
      if (lo > 0.0 && (hi - lo) / lo <= settle) break;
    }
  }
  for (int c = 0; c < n; c++) {
    if (!good[c]) continue;
    for (int s = 0; s < taken; s++) printf("sample %d %.9g\n", c, acc[(size_t)c * samples + s]);
  }
  printf("done\n");
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc >= 2 && strcmp(argv[1], "reference") == 0) return do_reference(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "dump") == 0) return do_dump(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "run") == 0) return do_run(argc, argv);
  fprintf(stderr, "usage: driver reference|dump|run ...\n");
  return 2;
}
"""
