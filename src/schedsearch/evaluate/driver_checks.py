"""The C text of the benchmark driver, second part: the answer key and the checks after
each verification call (see ``harness`` and ``verification``)."""

from __future__ import annotations

#: Writing and reading the answer key, the tolerances, and the checks after each call.
CHECKS = r"""
static size_t padded(size_t bytes) { return (bytes + 63) / 64 * 64; }

static void xwrite_padded(const void *p, size_t bytes, FILE *f) {
  static const unsigned char zeros[64];
  xwrite(p, bytes, f);
  xwrite(zeros, padded(bytes) - bytes, f);
}

/* reference <seed> <kernel.so> <file>: draw every input set, compute its answer key with the
   kernel (the unscheduled proc) and write it: the header line, then for each set every
   argument's contents, the outputs after the call, and the float outputs' magnitudes,
   each padded to 64 bytes (the driver maps the file and uses the arrays in place). */
static int do_reference(int argc, char **argv) {
  if (argc != 5) { fprintf(stderr, "usage: reference seed so file\n"); return 2; }
  uint64_t seed = strtoull(argv[2], NULL, 10);
  setup(1);
  bind();
  kernel_fn k = load(argv[3]);
  for (int s = 0; s < NSETS; s++) {
    double t = make_set(k, set_seed(seed, s), &sets[s]);
    if (s == 0) printf("first 0 %.9g\n", t);
  }
  FILE *f = fopen(argv[4], "wb");
  if (!f) { fprintf(stderr, "cannot write %s\n", argv[4]); return 3; }
  xwrite_padded(key_header, sizeof key_header - 1, f);
  for (int s = 0; s < NSETS; s++)
    for (int i = 0; i < NARGS; i++) {
      xwrite_padded(sets[s].in[i], info[i].bytes, f);
      if (info[i].output) xwrite_padded(sets[s].ref[i], info[i].bytes, f);
      if (info[i].output && is_float(i)) xwrite_padded(sets[s].mag[i], info[i].elems * sizeof(double), f);
    }
  if (fclose(f) != 0) { fprintf(stderr, "cannot write %s\n", argv[4]); return 3; }
  return 0;
}

/* dump <seed> <kernel.so> <inputs-file> <outputs-file>: the first input set drawn with this
   kernel, one call; write every argument's contents before it and the outputs after it. */
static int do_dump(int argc, char **argv) {
  if (argc != 6) { fprintf(stderr, "usage: dump seed so inputs outputs\n"); return 2; }
  setup(1);
  bind();
  kernel_fn k = load(argv[3]);
  double t = make_set(k, set_seed(strtoull(argv[2], NULL, 10), 0), &sets[0]);
  FILE *f = fopen(argv[4], "wb");
  if (!f) { fprintf(stderr, "cannot write %s\n", argv[4]); return 3; }
  for (int i = 0; i < NARGS; i++) xwrite(sets[0].in[i], info[i].bytes, f);
  fclose(f);
  f = fopen(argv[5], "wb");
  if (!f) { fprintf(stderr, "cannot write %s\n", argv[5]); return 3; }
  for (int i = 0; i < NARGS; i++)
    if (info[i].output) xwrite(sets[0].ref[i], info[i].bytes, f);
  fclose(f);
  printf("first 0 %.9g\n", t);
  return 0;
}

/* Map the answer key (read-only: the sets point into it) after checking it was written by
   this driver, for these arguments, in full. */
static void read_reference(const char *path) {
  int fd = open(path, O_RDONLY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) { fprintf(stderr, "cannot open reference %s\n", path); exit(3); }
  size_t want = padded(sizeof key_header - 1);
  for (int s = 0; s < NSETS; s++)
    for (int i = 0; i < NARGS; i++) {
      want += padded(info[i].bytes);
      if (info[i].output) want += padded(info[i].bytes);
      if (info[i].output && is_float(i)) want += padded(info[i].elems * sizeof(double));
    }
  if ((size_t)st.st_size != want) {
    fprintf(stderr, "reference %s has %zu bytes, expected %zu\n", path, (size_t)st.st_size, want);
    exit(3);
  }
  unsigned char *m = (unsigned char *)mmap(NULL, want, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  close(fd);
  if (m == MAP_FAILED) { fprintf(stderr, "cannot map reference %s\n", path); exit(3); }
  if (memcmp(m, key_header, sizeof key_header - 1) != 0) {
    fprintf(stderr, "reference %s was not written for this driver\n", path);
    exit(3);
  }
  size_t off = padded(sizeof key_header - 1);
  for (int s = 0; s < NSETS; s++)
    for (int i = 0; i < NARGS; i++) {
      sets[s].in[i] = m + off;
      off += padded(info[i].bytes);
      if (!info[i].output) continue;
      sets[s].ref[i] = m + off;
      off += padded(info[i].bytes);
      if (!is_float(i)) continue;
      sets[s].mag[i] = (double *)(m + off);
      off += padded(info[i].elems * sizeof(double));
    }
}

/* Each float output's allowed error per element (see evaluate.verification): elementwise,
   scale * u * mag + rtol * |ref|, when mag bounds |ref| everywhere (sums of products);
   otherwise, for the whole output, max(rtol, scale * u) * max(1, its largest magnitude). */
static void prepare_tolerances(double rtol, double scale) {
  for (int i = 0; i < NARGS; i++) {
    if (!info[i].output || !is_float(i)) continue;
    double u = unit_roundoff(i), top = 0.0;
    int elementwise_ok = 1;
    for (int s = 0; s < NSETS; s++)
      for (size_t e = 0; e < info[i].elems; e++) {
        double m = sets[s].mag[i][e], r = fabs(get(i, sets[s].ref[i], e));
        if (isfinite(m) && m > top) top = m;
        if (!isfinite(r)) continue;
        if (r > top) top = r;
        if (!isfinite(m) || r > m * (1.0 + scale * u)) elementwise_ok = 0;
      }
    elementwise[i] = elementwise_ok;
    atol_per_mag[i] = scale * u;
    rtol_of[i] = rtol;
    flat[i] = (rtol > scale * u ? rtol : scale * u) * (top > 1.0 ? top : 1.0);
    printf("tolerance %s %s\n", info[i].name, elementwise_ok ? "elementwise" : "global");
  }
}

/* The guard zones around every argument are as laid out. */
static int check_guards(int c, int s, double maxerr) {
  for (int i = 0; i < NARGS; i++) {
    const unsigned char *lo = data[i] - GUARD, *hi = data[i] + info[i].bytes;
    if (memcmp(lo, pattern, GUARD) != 0) {
      size_t b = GUARD;
      while (lo[b - 1] == pattern[b - 1]) b--;
      printf("verify %d clobbered %.9g %s before %zu %d\n", c, maxerr, info[i].name, GUARD - b + 1, s);
      return 0;
    }
    if (memcmp(hi, pattern, GUARD) != 0) {
      size_t b = 0;
      while (hi[b] == pattern[b]) b++;
      printf("verify %d clobbered %.9g %s after %zu %d\n", c, maxerr, info[i].name, b, s);
      return 0;
    }
  }
  return 1;
}

/* Every argument the kernel only reads is as it was given. */
static int check_inputs(int c, int s, double maxerr) {
  for (int i = 0; i < NARGS; i++) {
    if (info[i].output || memcmp(data[i], sets[s].in[i], info[i].bytes) == 0) continue;
    size_t b = 0;
    while (data[i][b] == sets[s].in[i][b]) b++;
    printf("verify %d changed %.9g %s %zu %d\n", c, maxerr, info[i].name, b / (info[i].bytes / info[i].elems), s);
    return 0;
  }
  return 1;
}

/* Every output element is within its tolerance of the reference's (integers: equal; a NaN
   or infinite reference: the same). `worst`: the largest share of its tolerance an element
   used so far. */
static int check_outputs(int c, int s, int round, double *maxerr, double *worst) {
  int bad = -1;
  size_t bad_idx = 0;
  double bad_c = 0.0, bad_r = 0.0, bad_t = 0.0;
  for (int i = 0; i < NARGS; i++) {
    if (!info[i].output) continue;
    int fl = is_float(i);
    for (size_t e = 0; e < info[i].elems; e++) {
      double x = get(i, data[i], e), r = get(i, sets[s].ref[i], e), d, lim = 0.0;
      if (fl && r != r) d = x != x ? 0.0 : INFINITY;
      else if (fl && isinf(r)) d = x == r ? 0.0 : INFINITY;
      else {
        d = fabs(x - r);
        if (d != d) d = INFINITY;
        if (fl) lim = elementwise[i] ? atol_per_mag[i] * sets[s].mag[i][e] + rtol_of[i] * fabs(r) : flat[i];
      }
      if (d > *maxerr) *maxerr = d;
      if (lim > 0.0 && d / lim > *worst) *worst = d / lim;
      if (!(d <= lim) && bad < 0) { bad = i; bad_idx = e; bad_c = x; bad_r = r; bad_t = lim; }
    }
  }
  if (bad < 0) return 1;
  printf("verify %d wrong %.9g %s %zu %.9g %.9g %.9g %d %d\n", c, *maxerr, info[bad].name, bad_idx, bad_c, bad_r,
         bad_t, s, round);
  return 0;
}

/* Verify kernel c: each input set `rounds` times, each call followed by every check. After
   the first call, a kernel slower than `slow` seconds (> 0) stops there: it will not be
   timed, so its answer on one set is all that matters. Prints "first" after the first
   call and the verdict; returns 1 when the kernel is right. The first set is loaded
   afterwards, for the timed calls. */
static int verify(int c, kernel_fn k, int rounds, double slow, double *first) {
  double maxerr = 0.0, worst = 0.0;
  int ok = 1, enough = 0;
  for (int r = 0; r < rounds && ok && !enough; r++)
    for (int s = 0; s < NSETS && ok && !enough; s++) {
      load_set(&sets[s]);
      double t = call(k);
      if (r == 0 && s == 0) {
        *first = t;
        printf("first %d %.9g\n", c, t);
        fflush(stdout);
      }
      ok = check_guards(c, s, maxerr) && check_inputs(c, s, maxerr) && check_outputs(c, s, r, &maxerr, &worst);
      if (ok && r == 0 && s == 0 && slow > 0.0 && t > slow) enough = 1;
    }
  load_set(&sets[0]);
  if (ok) printf("verify %d ok %.9g %.4g\n", c, maxerr, worst);
  return ok;
}
"""
