"""The C text of the benchmark driver, first part: buffers and drawing input sets.

``harness.driver_source`` fills the ``@NAME@`` placeholders (the argument table, the typed
pointers the kernel is called with, the element accessors of the types present) and joins
it with ``driver_checks.CHECKS`` (the answer key and the checks after each call) and the
timing part. What each part guarantees is said in ``harness``.
"""

from __future__ import annotations

#: Buffers, element access, and drawing an input set with its answer key.
SETS = r"""/* schedsearch driver, harness version @VERSION@. Generated; do not edit. */
#define _GNU_SOURCE
@DL_INCLUDE@#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef void (*kernel_fn)(@PARAMS@);

#define NARGS @NARGS@
#define SLOTS (NARGS > 0 ? NARGS : 1)
#define NSETS @NSETS@
#define GUARD @GUARD@
enum { T_F16, T_F32, T_F64, T_I8, T_UI8, T_UI16, T_I16, T_I32 };

typedef struct { const char *name; int type; size_t elems; size_t bytes; int output; } arg_info;
static const arg_info info[SLOTS] = { @INFOS@ };
/* The answer key's first line: a file for another signature or harness is refused. */
static const char key_header[] = "@HEADER@\n";

@DECLS@
static unsigned char *data[SLOTS];   /* each argument, between two guard zones */
static unsigned char pattern[GUARD]; /* the guard zones' bytes */

/* One input set: the arguments before a call, and the reference's outputs after it. */
typedef struct {
  unsigned char *in[SLOTS];  /* every argument's contents before the call */
  unsigned char *ref[SLOTS]; /* outputs: the reference kernel's contents after it */
  double *mag[SLOTS];        /* float outputs: the reference's outputs on |inputs| */
} input_set;
static input_set sets[NSETS];
/* Each float output's tolerance (see prepare_tolerances): elementwise from `atol_per_mag`
   and `rtol`, or the same `flat` value for every element. */
static int elementwise[SLOTS];
static double atol_per_mag[SLOTS], flat[SLOTS], rtol_of[SLOTS];

/* 64-byte aligned; not cleared: every buffer is filled before it is read. */
static void *xalloc(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  void *p = aligned_alloc(64, rounded ? rounded : 64);
  if (!p) { fprintf(stderr, "out of memory allocating %zu bytes\n", bytes); exit(3); }
  return p;
}

static void xwrite(const void *p, size_t bytes, FILE *f) {
  if (fwrite(p, 1, bytes, f) != bytes) { fprintf(stderr, "short write\n"); exit(3); }
}

static uint64_t next_random(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double get(int i, const void *p, size_t e) {
  switch (info[i].type) {
@GET_CASES@
  }
  return 0.0;
}

static void put(int i, void *p, size_t e, double v) {
  switch (info[i].type) {
@PUT_CASES@
  }
}

static int is_float(int i) { return info[i].type == T_F16 || info[i].type == T_F32 || info[i].type == T_F64; }
static int is_signed(int i) { return info[i].type != T_UI8 && info[i].type != T_UI16; }

static double unit_roundoff(int i) {
  return info[i].type == T_F16 ? 0x1p-11 : info[i].type == T_F32 ? 0x1p-24 : 0x1p-53;
}

static double int_limit(int i) {
  switch (info[i].type) {
    case T_I8: return 127.0;
    case T_UI8: return 255.0;
    case T_I16: return 32767.0;
    case T_UI16: return 65535.0;
    default: return 2147483647.0;
  }
}

/* Every argument gets its own allocation with GUARD bytes of a known pattern on either
   side; the data stays 64-byte aligned and ends exactly where the trailing zone starts.
   `own_sets`: room for the input sets too (to draw them; `run` maps them from the key). */
static void setup(int own_sets) {
  uint64_t rng = 0x243F6A8885A308D3ull;
  for (size_t b = 0; b < GUARD; b++) pattern[b] = (unsigned char)(next_random(&rng) >> 56);
  for (int i = 0; i < NARGS; i++) {
    size_t total = (GUARD + info[i].bytes + GUARD + 63) / 64 * 64;
    unsigned char *p = (unsigned char *)aligned_alloc(64, total);
    if (!p) { fprintf(stderr, "out of memory allocating %zu bytes\n", total); exit(3); }
    data[i] = p + GUARD;
    for (int s = 0; s < NSETS && own_sets; s++) {
      sets[s].in[i] = (unsigned char *)xalloc(info[i].bytes);
      if (!info[i].output) continue;
      sets[s].ref[i] = (unsigned char *)xalloc(info[i].bytes);
      if (!is_float(i)) continue;
      sets[s].mag[i] = (double *)xalloc(info[i].elems * sizeof(double));
    }
  }
}

/* The typed pointers the kernel is called with, and the first set's arguments that every
   timed call starts from. */
static void bind(void) {
@BIND@
}

/* Copy an input set into the arguments and lay out the guard zones afresh. */
static void load_set(const input_set *st) {
  for (int i = 0; i < NARGS; i++) {
    memcpy(data[i] - GUARD, pattern, GUARD);
    memcpy(data[i], st->in[i], info[i].bytes);
    memcpy(data[i] + info[i].bytes, pattern, GUARD);
  }
}

static double call(kernel_fn k) {
  double t0 = now();
  k(@CALL_ARGS@);
  return now() - t0;
}

/* A value of argument i's type from 64 random bits. Floats: random sign, magnitude
   m * 2^-e with m in [0.5, 1) (24 random bits, exact in f32) and e in 0..5, so values span
   [1/64, 1) and products several binades. 8-bit integers: their whole range. Wider
   integers: -128..127 (0..255 unsigned), since products of two would overflow an int32
   accumulator at their full range. */
static double draw(int i, uint64_t r) {
  if (is_float(i)) {
    double v = ldexp(0.5 + (double)(r >> 40) * 0x1p-25, -(int)((r >> 8) % 6u));
    return (r & 1u) ? -v : v;
  }
  if (info[i].type == T_I8) return (double)(int8_t)(uint8_t)(r >> 56);
  if (!is_signed(i)) return (double)(r >> 56);
  return (double)((int)(r >> 56) - 128);
}

/* Argument i of an input set from the seed; integers divided by 2^shift (rounding down). */
static void fill_arg(uint64_t seed, input_set *st, int i, int shift) {
  uint64_t rng = seed * 0x9E3779B97F4A7C15ull + (uint64_t)(i + 1) * 0xD1B54A32D192ED03ull;
  for (size_t e = 0; e < info[i].elems; e++) {
    double v = draw(i, next_random(&rng));
    if (shift > 0 && !is_float(i)) v = floor(v / (double)(1 << shift));
    put(i, st->in[i], e, v);
  }
}

/* The magnitude call's arguments: every value by its absolute value (integers saturated),
   integer outputs zero, so that each integer output receives what the kernel adds to it. */
static void load_magnitudes(const input_set *st) {
  load_set(st);
  for (int i = 0; i < NARGS; i++)
    for (size_t e = 0; e < info[i].elems; e++) {
      double v = fabs(get(i, st->in[i], e));
      if (!is_float(i)) v = info[i].output ? 0.0 : (v > int_limit(i) ? int_limit(i) : v);
      put(i, data[i], e, v);
    }
}

static int any_int_input(void) {
  for (int i = 0; i < NARGS; i++)
    if (!info[i].output && !is_float(i)) return 1;
  return 0;
}

static double largest(int i) {
  double h = 0.0;
  for (size_t e = 0; e < info[i].elems; e++) {
    double v = fabs(get(i, data[i], e));
    if (v > h) h = v;
  }
  return h;
}

/* Draw input set st from seed and compute its answer key with k, the reference.
   1. Integer inputs are as wide as the kernel allows: while some integer output's
      headroom (what the kernel adds to it, computed on magnitudes) reaches a quarter of its
      type's range, they are halved (at most 7 times).
   2. The same magnitude call gives each float output's error scale (mag).
   3. Integer outputs start near their type's limits: uniform within
      +-(limit - 2 * headroom), so a kernel that accumulates in a narrower or lossy type
      (int16, float) is caught. Should an output then grow beyond its start plus its
      headroom (the kernel subtracts, so magnitudes did not bound it), it starts small.
   Returns the duration of the reference call. */
static double make_set(kernel_fn k, uint64_t seed, input_set *st) {
  double headroom[SLOTS] = {0};
  int shift = 0;
  for (;;) {
    for (int i = 0; i < NARGS; i++) fill_arg(seed, st, i, shift);
    load_magnitudes(st);
    call(k);
    int fits = 1;
    for (int i = 0; i < NARGS; i++) {
      if (!info[i].output || is_float(i)) continue;
      headroom[i] = largest(i);
      if (!(4.0 * headroom[i] < int_limit(i))) fits = 0;
    }
    if (fits || shift >= 7 || !any_int_input()) break;
    shift++;
  }
  int near[SLOTS] = {0};
  uint64_t rng = seed ^ 0x6A09E667F3BCC909ull;
  for (int i = 0; i < NARGS; i++) {
    if (!info[i].output) continue;
    if (is_float(i)) {
      for (size_t e = 0; e < info[i].elems; e++) st->mag[i][e] = fabs(get(i, data[i], e));
      continue;
    }
    double span = floor(int_limit(i) - 2.0 * headroom[i] - 1.0);
    if (!(4.0 * headroom[i] < int_limit(i)) || span < 1.0) continue;
    near[i] = 1;
    uint64_t m = (uint64_t)span;
    for (size_t e = 0; e < info[i].elems; e++) {
      uint64_t r = next_random(&rng);
      put(i, st->in[i], e, is_signed(i) ? (double)(r % (2 * m + 1)) - (double)m : (double)(r % (m + 1)));
    }
  }
  load_set(st);
  double t = call(k);
  int again = 0;
  for (int i = 0; i < NARGS; i++) {
    if (!near[i]) continue;
    for (size_t e = 0; e < info[i].elems; e++)
      /* 1.1: the magnitude call saturated -128 to 127 */
      if (fabs(get(i, data[i], e)) > fabs(get(i, st->in[i], e)) + 1.1 * headroom[i]) {
        fill_arg(seed, st, i, shift);
        again = 1;
        break;
      }
  }
  if (again) {
    load_set(st);
    t = call(k);
  }
  for (int i = 0; i < NARGS; i++)
    if (info[i].output) memcpy(st->ref[i], data[i], info[i].bytes);
  return t;
}

static uint64_t set_seed(uint64_t seed, int s) { return seed + (uint64_t)s * 0x632BE59BD9B4E019ull; }

@LOADER@
"""
