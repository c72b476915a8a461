"""The C driver that runs, verifies and times kernels, generated from a workload's arguments.

One driver executable serves every candidate of a workload signature (the argument names,
types and shapes): it ``dlopen``s kernel shared objects given on its command line. That way
a candidate's build is a single small ``gcc -shared`` of Exo's C, and finalists can be timed
side by side in one process (``remeasure``) by loading several kernels at once. A *linked*
driver (``driver_source(args, linked=True)``) is compiled together with one kernel instead,
for kernels of another architecture: cross-compiled ``-static`` and run under an emulator,
it verifies them against reference outputs computed on this machine.

What the driver does:

* allocates every argument 64-byte aligned (scalars are one-element buffers, since Exo passes
  data scalars by pointer) and fills it from a small deterministic PRNG (splitmix64) seeded
  from ``BenchConfig.seed`` and the argument's position: floats uniform in [-1, 1), integers
  small (-3..3 signed, 0..3 unsigned) so that reductions do not overflow;
* keeps a copy of each output's initial contents and restores it (``memcpy``) before every
  call, because kernels may read their outputs before writing them (``C += ...``) -- and
  because the initial values are random and non-zero, a kernel that skips its work leaves
  outputs that differ from the reference;
* passes NULL for ``ctxt``.

Verification (``run`` mode) compares each kernel's outputs after one call with a reference
file produced by ``dump`` mode from the unscheduled proc:

* integer outputs must match exactly;
* float outputs must satisfy ``|cand - ref| <= rtol * max(1, max|ref|)`` element-wise, where
  ``max|ref|`` is taken over the whole output argument. Schedules reorder float reductions
  (splits, unrolls, vectorised partial sums, FMA contraction), which changes rounding by a few
  ulps of the *partial sums*, whose size is bounded by the output's overall magnitude rather
  than by each element's (an element that is a near-cancelling sum would fail a per-element
  relative test). The floor of 1 keeps the test meaningful for outputs close to zero. NaN in
  the candidate always fails.

Timing uses ``clock_gettime(CLOCK_MONOTONIC)`` around each kernel call only; the output
reset between calls is not timed. The verification call's duration lets a very slow
kernel stop early (``slow``, ``cut``); the fastest warm-up call's decides ``inner`` (calls
per sample, so a sample lasts at least ``min_sample_seconds``), fewer samples so the run
fits its time budget, and whether the kernel can contend for the best at all. The fastest,
not the last: one warm-up call preempted by the host (milliseconds on a KVM guest) once
gave a 182 ns i8 kernel 2 calls a sample instead of ~27000; its samples, each taken right
after thousands of calls of another kernel, ran cold at 315-641 ns, and as the yardstick
they made the candidate beside it look 2.6 times faster than it was.

The driver prints one line per fact; ``bench.parse_report`` reads them.
"""

from __future__ import annotations

from collections.abc import Sequence

from schedsearch.core import KERNEL_SYMBOL, ArgSpec, DType

#: Bumped whenever the driver's behaviour or output format changes: it is part of every
#: build-cache and reference-output key.
HARNESS_VERSION = "9"


def _fill_expr(dtype: DType) -> str:
    """C expression turning a 64-bit random ``r`` into a value of ``dtype``."""
    if dtype.is_float:
        # 24 random bits -> [-1, 1): exactly representable in f32/f64, rounded in f16.
        return f"({dtype.c_type})((double)(r >> 40) * (2.0 / 16777216.0) - 1.0)"
    if dtype in (DType.UI8, DType.UI16):
        return f"({dtype.c_type})(r >> 62)"
    return f"({dtype.c_type})((int)(r % 7u) - 3)"


def driver_source(args: Sequence[ArgSpec], linked: bool = False) -> str:
    """C source of the driver for kernels taking ``args`` (after ``ctxt``), in C order.

    By default the driver ``dlopen``s the kernel shared objects named on its command line.
    With ``linked`` it calls the kernel it is linked with instead (compile it together with
    one kernel's C) and ignores the kernel paths: that driver can be linked ``-static``, which
    a cross-compiled kernel run under a user-mode emulator needs, since the emulator then
    needs no target sysroot and no dynamic loader.
    """
    n = len(args)
    params = ", ".join(["void *"] + [f"{a.dtype.c_type} *" for a in args])
    decls: list[str] = []
    setup: list[str] = []
    reset: list[str] = []
    dump_in: list[str] = []
    dump_out: list[str] = []
    check: list[str] = []
    call_args = ", ".join(["NULL"] + [f"a{i}" for i in range(n)])
    for i, a in enumerate(args):
        t = a.dtype.c_type
        elems = max(1, a.elements)
        decls.append(f"static {t} *a{i}; static {t} *init{i};")
        setup.append(
            f"  a{i} = ({t} *)xalloc({elems}ul * sizeof({t}));\n"
            f"  init{i} = ({t} *)xalloc({elems}ul * sizeof({t}));\n"
            f"  rng = seed * 0x9E3779B97F4A7C15ull + {i + 1}ull * 0xD1B54A32D192ED03ull;\n"
            f"  for (size_t e = 0; e < {elems}ul; e++) {{ uint64_t r = next_random(&rng);"
            f" a{i}[e] = {_fill_expr(a.dtype)}; }}\n"
            f"  memcpy(init{i}, a{i}, {elems}ul * sizeof({t}));"
        )
        dump_in.append(f"  xwrite(a{i}, {elems}ul * sizeof({t}), f);")
        if a.output:
            reset.append(f"  memcpy(a{i}, init{i}, {elems}ul * sizeof({t}));")
            dump_out.append(f"  xwrite(a{i}, {elems}ul * sizeof({t}), f);")
            if a.dtype.is_float:
                check.append(
                    f"  {{ const {t} *ref = (const {t} *)(refdata + off); double mx = 0.0;\n"
                    f"    for (size_t e = 0; e < {elems}ul; e++) {{ double v = fabs((double)ref[e]);"
                    f" if (v > mx) mx = v; }}\n"
                    f"    double tol = rtol * (mx > 1.0 ? mx : 1.0);\n"
                    f"    for (size_t e = 0; e < {elems}ul; e++) {{\n"
                    f"      double d = fabs((double)a{i}[e] - (double)ref[e]);\n"
                    f"      if (d != d) d = INFINITY;\n"
                    f"      if (d > maxerr) maxerr = d;\n"
                    f"      if (!(d <= tol) && bad_arg < 0) {{ bad_arg = {i}; bad_idx = e;"
                    f" bad_c = (double)a{i}[e]; bad_r = (double)ref[e]; }}\n"
                    f"    }}\n"
                    f"    off += {elems}ul * sizeof({t}); }}"
                )
            else:
                check.append(
                    f"  {{ const {t} *ref = (const {t} *)(refdata + off);\n"
                    f"    for (size_t e = 0; e < {elems}ul; e++) {{\n"
                    f"      double d = fabs((double)a{i}[e] - (double)ref[e]);\n"
                    f"      if (d > maxerr) maxerr = d;\n"
                    f"      if (d != 0.0 && bad_arg < 0) {{ bad_arg = {i}; bad_idx = e;"
                    f" bad_c = (double)a{i}[e]; bad_r = (double)ref[e]; }}\n"
                    f"    }}\n"
                    f"    off += {elems}ul * sizeof({t}); }}"
                )
    out_bytes = " + ".join([f"{max(1, a.elements)}ul * sizeof({a.dtype.c_type})" for a in args if a.output] or ["0ul"])
    names = ", ".join(f'"{a.name}"' for a in args) or '""'
    return _TEMPLATE.format(
        harness_version=HARNESS_VERSION,
        params=params,
        decls="\n".join(decls),
        setup="\n".join(setup),
        reset="\n".join(reset),
        dump_in="\n".join(dump_in),
        dump_out="\n".join(dump_out),
        check="\n".join(check),
        call_args=call_args,
        out_bytes=out_bytes,
        names=names,
        dl_include="" if linked else "#include <dlfcn.h>\n",
        loader=_loader(linked, params),
    )


def _loader(linked: bool, params: str) -> str:
    """The driver's ``load(path)``: C text free of str.format braces, so not in the template."""
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


# Braces that belong to C are doubled for str.format.
_TEMPLATE = r"""/* schedsearch driver, harness version {harness_version}. Generated; do not edit. */
#define _GNU_SOURCE
{dl_include}#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void (*kernel_fn)({params});

static const char *arg_names[] = {{ {names} }};
{decls}

static void *xalloc(size_t bytes) {{
  size_t rounded = (bytes + 63) / 64 * 64;
  void *p = aligned_alloc(64, rounded ? rounded : 64);
  if (!p) {{ fprintf(stderr, "out of memory allocating %zu bytes\n", bytes); exit(3); }}
  memset(p, 0, rounded ? rounded : 64);
  return p;
}}

static void xwrite(const void *p, size_t bytes, FILE *f) {{
  if (fwrite(p, 1, bytes, f) != bytes) {{ fprintf(stderr, "short write\n"); exit(3); }}
}}

static uint64_t next_random(uint64_t *state) {{
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}}

static double now(void) {{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}}

static void setup(uint64_t seed) {{
  uint64_t rng;
{setup}
}}

static void reset_outputs(void) {{
{reset}
}}

static double timed_call(kernel_fn k) {{
  reset_outputs();
  double t0 = now();
  k({call_args});
  return now() - t0;
}}

{loader}
/* Returns 1 when the outputs match the reference; prints the verdict either way. */
static int verify(int idx, const unsigned char *refdata, double rtol) {{
  size_t off = 0;
  double maxerr = 0.0, bad_c = 0.0, bad_r = 0.0;
  int bad_arg = -1;
  size_t bad_idx = 0;
{check}
  (void)off; (void)bad_c; (void)bad_r; (void)rtol; (void)refdata;
  if (bad_arg >= 0) {{
    printf("verify %d wrong %.9g %s %zu %.9g %.9g\n", idx, maxerr, arg_names[bad_arg],
           bad_idx, bad_c, bad_r);
    return 0;
  }}
  printf("verify %d ok %.9g\n", idx, maxerr);
  return 1;
}}

static unsigned char *read_reference(const char *path) {{
  size_t want = {out_bytes};
  unsigned char *buf = (unsigned char *)xalloc(want);
  FILE *f = fopen(path, "rb");
  if (!f) {{ fprintf(stderr, "cannot open reference %s\n", path); exit(3); }}
  size_t got = fread(buf, 1, want, f);
  fclose(f);
  if (got != want) {{ fprintf(stderr, "reference %s has %zu bytes, expected %zu\n", path, got, want); exit(3); }}
  return buf;
}}

/* dump <seed> <kernel.so> <inputs-file> <outputs-file>: one call; write the initial contents of
   every argument and then the outputs after the call. */
static int do_dump(int argc, char **argv) {{
  if (argc != 6) {{ fprintf(stderr, "usage: dump seed so inputs outputs\n"); return 2; }}
  setup(strtoull(argv[2], NULL, 10));
  kernel_fn k = load(argv[3]);
  FILE *f = fopen(argv[4], "wb");
  if (!f) {{ fprintf(stderr, "cannot write %s\n", argv[4]); return 3; }}
{dump_in}
  fclose(f);
  double t = timed_call(k);
  f = fopen(argv[5], "wb");
  if (!f) {{ fprintf(stderr, "cannot write %s\n", argv[5]); return 3; }}
{dump_out}
  fclose(f);
  printf("first 0 %.9g\n", t);
  return 0;
}}

/* run <seed> <reference-file> <cpu> <rtol> <warmup-s> <min-sample-s> <samples> <budget-s> <cutoff-s> <contend-s> <settle> <gate> <pair> <so>...
   Verify every kernel, then time the good ones in interleaved rounds.
   pair = 1 (two kernels): the second is a yardstick timed beside the first, the subject.
   The subject alone decides what the budget allows (the yardstick is the search's fast
   kernel) and, like a lone kernel, may be timed with fewer samples (contend, settle: then
   on its ratio to the yardstick); when the subject is not timed, neither is the yardstick.
   gate = 1: before the first warm-up, print "ready" and wait for a line on stdin (the
   caller pauses the node's other work for the timing only; verification and kernels
   timed by one call do not need it).
   cutoff-s > 0: a kernel whose verification call takes longer is timed by that call alone
   ("cut"): it cannot be among the fastest, and timing it properly would cost many calls.
   contend-s > 0 (one kernel only): a kernel whose warm call takes longer cannot be the new
   best; it gets MIN_SAMPLES samples, enough to rank it among the slower ones. Paired, its
   yardstick is then spared (not loaded, verified nor timed: "spared 1").
   settle > 0 (one kernel only): stop sampling once the last MIN_SAMPLES samples lie within
   that relative spread ((max - min) / min) of each other. */
#define MIN_SAMPLES 3
static int do_run(int argc, char **argv) {{
  if (argc < 16) {{ fprintf(stderr, "usage: run seed ref cpu rtol warmup min_sample samples budget cutoff contend settle gate pair so...\n"); return 2; }}
  double start = now();
  uint64_t seed = strtoull(argv[2], NULL, 10);
  const char *ref_path = argv[3];
  int cpu = atoi(argv[4]);
  double rtol = atof(argv[5]), warmup = atof(argv[6]), min_sample = atof(argv[7]);
  int samples = atoi(argv[8]);
  double budget = atof(argv[9]);
  double cutoff = atof(argv[10]), contend = atof(argv[11]), settle = atof(argv[12]);
  int gate = atoi(argv[13]);
  int n = argc - 15;
  int pair = atoi(argv[14]) && n == 2;
  int alone = n == 1 || pair; /* one subject: contend and settle apply to it */
  int few = 0; /* the kernel cannot be the new best: MIN_SAMPLES samples */
  if (cpu >= 0) {{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof(set), &set); /* best effort: noise, not correctness */
  }}
  setup(seed);
  unsigned char *refdata = read_reference(ref_path);
  kernel_fn *k = (kernel_fn *)calloc(n, sizeof(kernel_fn));
  double *first = (double *)calloc(n, sizeof(double));
  int *inner = (int *)calloc(n, sizeof(int));
  int *good = (int *)calloc(n, sizeof(int));
  int live = 0;
  double per_round = 0.0;
  for (int c = 0; c < n; c++) {{
    if (pair && c == 1 && !good[0]) continue; /* no subject timed: no yardstick either */
    if (pair && c == 1 && few) {{
      /* The subject cannot be the new best: its few samples need no yardstick beside them
         (the caller scales them by the median factor of its latest pairings). */
      printf("spared 1 %.9g\n", contend);
      fflush(stdout);
      continue;
    }}
    k[c] = load(argv[15 + c]);
    first[c] = timed_call(k[c]);
    printf("first %d %.9g\n", c, first[c]);
    fflush(stdout);
    good[c] = verify(c, refdata, rtol);
    if (good[c] && (!pair || c == 0) && first[c] * 2.0 > budget / (pair ? 1 : n)) {{
      printf("slow %d %.9g\n", c, first[c]);
      good[c] = 0;
    }}
    if (good[c] && (!pair || c == 0) && cutoff > 0.0 && first[c] > cutoff) {{
      printf("cut %d %.9g\n", c, first[c]);
      printf("sample %d %.9g\n", c, first[c]);
      good[c] = 0;
    }}
    fflush(stdout);
    if (!good[c]) continue;
    live++;
    if (gate) {{
      gate = 0;
      printf("ready\n");
      fflush(stdout);
      int ch;
      do {{ ch = getchar(); }} while (ch != '\n' && ch != EOF);
    }}
    /* The fastest warm-up call estimates a call: the verification call ran on cold caches,
       and any one call may be preempted by the host. */
    double w0 = now(), t = 0.0;
    do {{
      double u = timed_call(k[c]);
      if (t <= 0.0 || u < t) t = u;
    }} while (now() - w0 < warmup);
    if (t <= 0.0) t = 1e-9;
    if (contend > 0.0 && alone && c == 0 && t > contend) few = 1;
    double want = min_sample / t;
    inner[c] = want < 1.0 ? 1 : (want > 1e9 ? 1000000000 : (int)ceil(want));
    per_round += inner[c] * t;
    printf("inner %d %d\n", c, inner[c]);
  }}
  if (live > 0) {{
    double left = budget - (now() - start);
    int fit = per_round > 0.0 ? (int)(left / per_round) : samples;
    if (fit < samples) samples = fit < 1 ? 1 : fit;
    if (few && samples > MIN_SAMPLES) samples = MIN_SAMPLES;
  }}
  double *acc = (double *)calloc((size_t)n * (size_t)samples, sizeof(double));
  int taken = 0;
  for (int s = 0; s < samples && live > 0; s++) {{
    for (int c = 0; c < n; c++) {{
      if (!good[c]) continue;
      double total = 0.0;
      for (int r = 0; r < inner[c]; r++) total += timed_call(k[c]);
      acc[(size_t)c * samples + s] = total / inner[c];
    }}
    taken = s + 1;
    if (settle > 0.0 && alone && taken >= MIN_SAMPLES) {{
      /* The subject's own times, or (paired, both timed) its times over the yardstick's. */
      int ratio = pair && good[1];
      double lo = 0.0, hi = 0.0;
      for (int i = taken - MIN_SAMPLES; i < taken; i++) {{
        double x = acc[i];
        if (ratio) x = acc[(size_t)samples + i] > 0.0 ? x / acc[(size_t)samples + i] : 0.0;
        if (i == taken - MIN_SAMPLES || x < lo) lo = x;
        if (i == taken - MIN_SAMPLES || x > hi) hi = x;
      }}
      if (lo > 0.0 && (hi - lo) / lo <= settle) break;
    }}
  }}
  for (int c = 0; c < n; c++) {{
    if (!good[c]) continue;
    for (int s = 0; s < taken; s++) printf("sample %d %.9g\n", c, acc[(size_t)c * samples + s]);
  }}
  printf("done\n");
  return 0;
}}

int main(int argc, char **argv) {{
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (argc >= 2 && strcmp(argv[1], "dump") == 0) return do_dump(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "run") == 0) return do_run(argc, argv);
  fprintf(stderr, "usage: driver dump|run ...\n");
  return 2;
}}
"""
