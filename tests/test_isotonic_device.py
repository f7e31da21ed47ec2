"""The PAV in XLA (several devices' kernel) equals the host PAV on the same inputs.

``isotonic.device_isotonic`` is what ``isotonic_kernel`` runs when several devices are
present (host callbacks on sharded inputs aborted CPU meshes: issue 22, item 4); here
it is called directly on one CPU device and compared with ``isotonic._host_pav`` (the
one-device kernel, scipy's PAV in float64): to a few ulps in float32 (1e-6
relative), to 1e-12 under x64 (this file is in the Makefile's X64_CORE).
"""

import functools
import math

import jax
import numpy as np
import pytest

from bayescal._src import isotonic

X64 = bool(jax.config.read("jax_enable_x64"))
DTYPE = np.float64 if X64 else np.float32
RTOL, ATOL = (1e-12, 1e-13) if X64 else (1e-6, 1e-7)

_device = jax.jit(isotonic.device_isotonic, static_argnums=2)


def _rows(rng, rows, n):
    """Rows of every kind PAV meets: labels, ties, noise, trends, steps, extremes."""
    p = np.sort(rng.uniform(size=n))
    out = []
    for i in range(rows):
        kind = i % 7
        if kind == 0:  # binary labels drawn from increasing probabilities (CORP)
            y = rng.uniform(size=n) < p
        elif kind == 1:  # few distinct values: ties everywhere, equal block means
            y = rng.integers(0, 3, n)
        elif kind == 2:
            y = rng.normal(size=n)
        elif kind == 3:  # a noisy trend, rounded (ties)
            y = np.round(np.linspace(0, 2, n) + rng.normal(size=n), 1)
        elif kind == 4:  # decreasing: one block
            y = -np.arange(n) + rng.normal(size=n)
        elif kind == 5:  # one huge first value over a ramp: O(n) rounds of a round-based PAV
            y = np.arange(n, dtype=float)
            y[0] = n * n / 4
        else:  # long alternating runs of 0 and 1 over a slow trend: pools of every size
            y = ((np.arange(n) // max(n // 8, 1)) % 2) + np.linspace(0, 0.5, n)
        out.append(y)
    return np.stack(out).astype(DTYPE)


@pytest.mark.parametrize("n", [1, 2, 7, 100, 1000])
def test_device_pav_equals_host_pav(n):
    rng = np.random.default_rng(n)
    y = _rows(rng, 14, n)
    w = np.ones_like(y)
    w[::2] = rng.uniform(0.1, 3.0, size=w[::2].shape)  # weighted and unit rows
    for increasing in (True, False) if n == 100 else (True,):
        got = np.asarray(_device(y, w, increasing))
        ref = isotonic._host_pav(y, w, increasing)
        assert got.dtype == y.dtype
        np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL)


def test_device_pav_of_a_long_corp_row():
    # tie-pooled binary labels with integer weights, as isotonic_fit passes them
    rng = np.random.default_rng(0)
    n = 20_000
    p = np.sort(rng.uniform(size=n))
    y = (rng.uniform(size=n) < p).astype(DTYPE)
    w = rng.integers(1, 5, n).astype(DTYPE)
    got = np.asarray(_device(y, w, True))
    np.testing.assert_allclose(got, isotonic._host_pav(y, w, True), rtol=RTOL, atol=ATOL)
    assert (np.diff(got) >= 0).all()


def test_device_pav_invalid_weights_give_nan():
    y = np.array([[3.0, 1.0, 2.0]], DTYPE)
    assert np.isnan(np.asarray(_device(y, np.array([[1.0, 0.0, 1.0]], DTYPE), True))).all()


@pytest.mark.parametrize(
    ("n", "wide", "solved"),
    [
        pytest.param(n, wide, solved, id=f"{n}-{kind}-solved {solved}")
        for n, solved in ((1000, 0), (1000, 3), (1000, None), (7, None))
        for wide, kind in ((False, "CPU mesh"), (True, "accelerator"))
    ],
)
def test_pav_formulations_equal_host_pav(n, wide, solved):
    # what device_isotonic runs on accelerators (searches of 4 to 32 ways in loops of
    # fixed trip counts) and on CPU meshes (binary searches), after chunks of 2^solved
    # observations solved at once (isotonic.SOLVED[wide] levels by default; 3: a start
    # inside a tier; 0: merges from single observations on): every kind of row above,
    # weighted and not, against scipy's PAV
    row = functools.partial(isotonic._device_pav_row, wide=wide, solved=solved)
    rng = np.random.default_rng(n + 1)
    y = _rows(rng, 14, n)
    w = np.ones_like(y)
    w[::2] = rng.uniform(0.1, 3.0, size=w[::2].shape)
    got = np.asarray(jax.jit(jax.vmap(row))(y, w))
    np.testing.assert_allclose(got, isotonic._host_pav(y, w, True), rtol=RTOL, atol=ATOL)
    assert (np.diff(got, axis=-1) >= 0).all()


@pytest.mark.parametrize("base", [4, 16])
@pytest.mark.parametrize("n", [1, 15, 16, 17, 1000])
def test_compensated_prefix_sums(n, base):
    # hi + lo is the prefix sum to ~n eps^2 of the magnitudes (reference: math.fsum,
    # correctly rounded, of inputs of mixed signs and scales)
    rng = np.random.default_rng(n)
    x = (rng.normal(size=(n, 2)) * 10.0 ** rng.integers(-3, 4, (n, 2))).astype(DTYPE)
    hi, lo = isotonic._dd_prefix(x, base)
    got = np.asarray(hi, np.float64) + np.asarray(lo, np.float64)
    ref = np.array([[math.fsum(x[: i + 1, j]) for j in range(2)] for i in range(n)])
    scale = np.cumsum(np.abs(x.astype(np.float64)), axis=0)
    # (+ one ulp of the float64 sum hi + lo, which rounds under x64)
    tol = 4 * n * np.finfo(DTYPE).eps ** 2 * scale + np.spacing(np.abs(ref))
    assert (np.abs(got - ref) <= tol).all()


def test_chunks_solved_in_groups(monkeypatch):
    # beyond isotonic.SOLVE_GROUP range means the chunks are solved group by group
    # (a loop): the same fits as solved at once, and as scipy's PAV
    rng = np.random.default_rng(3)
    y = _rows(rng, 7, 500)
    w = rng.uniform(0.1, 3.0, size=y.shape).astype(DTYPE)
    ref = isotonic._host_pav(y, w, True)
    for limit in (isotonic.SOLVE_GROUP, 1000):  # one group; 4 chunks of 16 a group
        monkeypatch.setattr(isotonic, "SOLVE_GROUP", limit)
        row = functools.partial(isotonic._device_pav_row, wide=False)
        got = np.asarray(jax.jit(jax.vmap(row))(y, w))
        np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL)
