"""How strictly a candidate's outputs are checked: the float tolerance and how often.

The driver (``harness``) compares every element of every float output with the reference
(the unscheduled proc, built strictly) and accepts it when

    |out - ref| <= atol + rtol * |ref|,     atol = scale * u * mag

element by element, where

* ``u`` is the unit roundoff of the output's type (2**-24 for f32, 2**-53 for f64,
  2**-11 for f16);
* ``mag`` is the reference's own output when every input (and every float output's
  initial value) is replaced by its absolute value. For the arithmetic Exo kernels are
  made of - sums of products, divisions by constants, selects such as a ReLU - that is
  the element's sum of the magnitudes of its terms, ``|A| @ |B|`` for a matmul: the
  quantity the error analysis of summation is written in (Higham, *Accuracy and
  Stability of Numerical Algorithms*, 2nd ed., section 3.1);
* ``scale = KAPPA * sqrt(n)``, ``n`` the number of terms an output element sums
  (``terms_per_element``: K for a matmul, the taps for a convolution).

Why that bound: a schedule may add an element's terms in any order and contract any
multiply-add (splits, unrolls, vector partial sums, FMA). Any order rounds each partial
sum once, by at most ``u`` of its size, and no partial sum exceeds ``mag``; so a sum of
``n`` terms is off by at most ``n * u * mag`` in the worst case, and - the rounding errors
of random data being independent and of mean zero - by about ``sqrt(n) * u * mag``
(Higham and Mary, "A new approach to probabilistic rounding error analysis", SIAM J. Sci.
Comput. 41(5), 2019: the bound ``lambda * sqrt(n) * u * mag`` fails with probability
below ``2 * exp(-lambda**2 / 2)``). The candidate and the reference each have such an
error; ``KAPPA`` covers both with a wide margin (measured on a Zen 5: over some 1300
candidates of every example kernel, the first steps of each, and the committed schedules,
no element used more than 0.04 of its tolerance; ``tests/integration/test_verification``).

What that catches, on the 64**3 SGEMM of ``examples/matmul.py`` (inputs of magnitude up
to 1): ``mag`` is about 4, the absolute part of the tolerance 3e-5 and the whole of it
about 8e-4 at a typical element of 0.7, where the reference's own rounding error is 1e-7
(at most 1e-6). Summing in another order passes; moving an element by 0.2% of itself,
dropping a term (at least 2**-12 here) or adding an error just beyond the bound fails. The
old test, ``rtol * max(1, max|ref|)`` over the whole output, allowed 4e-3 everywhere.
The price of never rejecting a right kernel: a relative change ``d`` of an element is
caught only where ``d * |ref| > scale * u * mag + rtol * |ref|``, so the longer the sum
(``scale * u * mag`` grows as ``n ** 1.5``, a random-signed result as ``n ** 0.5``), the
larger the change must be: about 0.2% at 1024 terms for an element among the largest.

When ``mag`` is not a bound - a kernel that subtracts (``|a| - |b|`` may be smaller than
``|a - b|``), a select whose branch depends on signs - the driver sees it (an element
with ``|ref| > mag``) and checks that output as before, against its largest magnitude:
``max(rtol, scale * u) * max(1, max(mag, |ref|))`` for every element. The driver prints
which test each output got (``tolerance <arg> elementwise|global``).

Integer outputs must match exactly.
"""

from __future__ import annotations

import math

from schedsearch.core import Workload

#: The tolerance in units of ``sqrt(n) * u * mag``: ``lambda = 8`` for each of the two
#: computations compared (candidate and reference), where the probabilistic bound fails with
#: probability below ``2 * exp(-32)``, about 3e-14 per element; 25 times the largest error
#: measured (0.65 of ``sqrt(n) * u * mag``, a matmul of A by its own transpose).
KAPPA = 16.0
#: The fewest terms ``n`` is taken to have: an element made by a few operations (a blur's
#: sums of three divided by three, a ReLU after a sum) still rounds several times.
MIN_TERMS = 8
#: Times a candidate with a parallel loop (OpenMP) is verified on each input set: a data race
#: (a reduction shared between threads) loses updates only when threads collide. Measured
#: on a 2-core Zen 5, a 64**3 matmul parallel over its reduction loop: caught in 8 of 10
#: runs of the driver with one round, in 20 of 20 with four. Collide they must: with a core
#: kept busy by another user's process (Linux's autogroups share the cores between users
#: whatever their niceness), a small kernel's threads rarely run at once, and the same race
#: was caught in 1 to 5 runs of 10, whether the rounds were 4 or spread over 0.1 s.
PARALLEL_CHECKS = 4


def terms_per_element(workload: Workload) -> int:
    """``n``: how many terms one output element sums, at most about.

    The workload's arithmetic operations (``Workload.flops``, each ``+=`` counting a
    multiply and an add) over twice the elements of its smallest output: K for a matmul,
    R for a one-dimensional convolution, ``Ci * 9`` for a 3x3 convolution layer, K + N
    for a chain of two matmuls. The smallest output, because a kernel with several
    outputs may spend all its work on one (a dot product beside an elementwise one).
    Without a FLOP count (a proc with guards or calls), every input element is taken to
    feed every output element: safe, and loose.
    """
    outputs = [max(1, a.elements) for a in workload.args if a.output]
    if not outputs:
        return MIN_TERMS
    if workload.flops is not None:
        n = math.ceil(workload.flops / (2 * min(outputs)))
    else:
        n = sum(max(1, a.elements) for a in workload.args if not a.output)
    return max(MIN_TERMS, n)


def atol_scale(workload: Workload) -> float:
    """``KAPPA * sqrt(n)``: the driver's ``scale``, which times ``u * mag`` is an element's
    absolute tolerance."""
    return KAPPA * math.sqrt(terms_per_element(workload))


def verification_rounds(parallel: bool) -> int:
    """How many times each input set is run and checked: ``PARALLEL_CHECKS`` for a
    candidate with a parallel loop, once otherwise (a serial kernel's results do not vary
    from call to call: Exo's control flow never depends on data)."""
    return PARALLEL_CHECKS if parallel else 1
