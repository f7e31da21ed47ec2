"""The PAV in XLA (several devices' kernel) equals the host PAV on the same inputs.

``isotonic.device_isotonic`` is what ``isotonic_kernel`` runs when several devices are
present (host callbacks on sharded inputs aborted CPU meshes: issue 22, item 4); here
it is called directly on one CPU device and compared with ``isotonic._host_pav`` (the
one-device kernel, scipy's PAV in float64): to a few ulps in float32 (1e-6
relative), to 1e-12 under x64 (this file is in the Makefile's X64_CORE).
"""

import functools

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


@pytest.mark.parametrize("parallel", [False, True], ids=["scans", "parallel prefix"])
@pytest.mark.parametrize("n", [7, 1000])
def test_accelerator_formulation_equals_host_pav(n, parallel):
    # what device_isotonic runs off the CPU (searches of 2 to 32 ways; a parallel prefix
    # sum from PARALLEL_PREFIX values on): every kind of row above, weighted and not,
    # against scipy's PAV
    prefix = isotonic._dd_prefix_parallel if parallel else None
    row = functools.partial(isotonic._device_pav_row, wide=True, prefix=prefix)
    rng = np.random.default_rng(n + 1)
    y = _rows(rng, 14, n)
    w = np.ones_like(y)
    w[::2] = rng.uniform(0.1, 3.0, size=w[::2].shape)
    got = np.asarray(jax.jit(jax.vmap(row))(y, w))
    np.testing.assert_allclose(got, isotonic._host_pav(y, w, True), rtol=RTOL, atol=ATOL)
    assert (np.diff(got, axis=-1) >= 0).all()
