"""Smooth ECE and the kernel-smoothed reliability curve (Blasiok & Nakkiran, 2023).

The computation follows relplot (Apple's reference implementation) step by step, so
that the numbers agree with ``relplot.smECE`` and ``relplot.smECE_sigma``:

1. the values ``v_i`` (residuals ``f_i - y_i``, or ones for the density) are spread
   onto a grid of ``E`` points on [0, 1] by linear interpolation;
2. the grid is extended by reflection at 0 and 1 and convolved with a Gaussian of
   standard deviation ``sigma`` (the reflected kernel keeps mass inside [0, 1]);
3. the smoothed residual ``r(t)`` and density ``d(t)`` are interpolated to a mesh
   ``t`` of ``T`` points and ``smECE_sigma = sum_t |r(t)| d(t) / sum_t d(t)``;
4. the bandwidth is the fixed point ``sigma*`` with ``smECE_sigma* = sigma*``, found by
   relplot's bisection on (0, 1] (ten halvings).

``E = max(2000, round(20 / sigma)) // 2 + 1`` and ``T = max(200, round(10 / sigma))``
are relplot's grid sizes; they are static for each bandwidth. The convolution is done
with an FFT.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.curve import CalibrationCurve
from bayescal._src.resampling import as_key, check_level
from bayescal.classification._inputs import binary_inputs

__all__ = [
    "smooth_calibration_error",
    "smooth_reliability_curve",
    "smooth_reliability_band",
]

_DENSITY_EPS = 1e-4  # relplot's BaseKernelMixin.smooth: eps added to the density
_MIN_MESH = 200  # relplot.config.smECE_mesh_pts
_SEARCH_STEPS = 10  # relplot.metrics.search_param(refine=10)
_SEARCH_EPS = 1e-3  # relplot.metrics.smECE(eps=0.001)


def _grid_sizes(sigma: float) -> tuple[int, int]:
    """relplot's grid sizes for a bandwidth: (convolution grid E, mesh T)."""
    grid = max(2000, round(20 / sigma)) // 2 + 1
    mesh = max(round(10 / sigma), _MIN_MESH)
    return grid, mesh


def _to_grid(f: jax.Array, v: jax.Array, grid: int) -> jax.Array:
    """Spread ``v`` at positions ``f`` onto ``linspace(0, 1, grid)`` linearly.

    ``v`` has shape ``[..., N]`` (several value rows share the positions).
    """
    x = f * (grid - 1)
    idx = jnp.clip(jnp.floor(x), 0, grid - 2).astype(jnp.int32)
    frac = x - idx.astype(f.dtype)
    out = jnp.zeros(v.shape[:-1] + (grid,), v.dtype)
    out = out.at[..., idx].add((1 - frac) * v)
    return out.at[..., idx + 1].add(frac * v)


def _reflected_convolution(values: jax.Array, sigma: jax.Array, grid: int) -> jax.Array:
    """relplot's ``ReflectedGaussianKernel.convolve`` (a ``valid`` convolution)."""
    t = jnp.linspace(0.0, 1.0, grid, dtype=values.dtype)
    ker = jnp.exp(-((t - 0.5) ** 2) / (2 * sigma**2)) / (math.sqrt(2 * math.pi) * sigma)
    ext = jnp.concatenate(
        [jnp.flip(values, -1)[..., :-1], values, jnp.flip(values, -1)[..., 1:]], axis=-1
    )
    n_ext = ext.shape[-1]  # 3 * grid - 2
    size = n_ext + grid - 1
    nfft = 1 << (size - 1).bit_length()
    full = jnp.fft.irfft(
        jnp.fft.rfft(ext, nfft) * jnp.fft.rfft(ker, nfft), nfft
    )[..., :size]
    valid = full[..., grid - 1 : n_ext]  # np.convolve(ext, ker, "valid")
    return valid[..., grid // 2 : grid // 2 + grid]


def _interpolate(t: jax.Array, y: jax.Array) -> jax.Array:
    """relplot's ``interpolate``: the piecewise-linear function ``i/(K-1) -> y[i]``."""
    k = y.shape[-1]
    idx = jnp.clip(jnp.floor(t * (k - 1)), 0, k - 2).astype(jnp.int32)
    bucket = 1.0 / (k - 1)
    resid = (t - idx.astype(t.dtype) * bucket) / bucket  # int / int would be float32
    return y[..., idx] * (1 - resid) + y[..., idx + 1] * resid


def _smooth(f, values, sigma, grid, mesh):
    """Smoothed ``values`` rows and the density (row of ones) on the mesh."""
    t = jnp.linspace(0.0, 1.0, mesh, dtype=f.dtype)
    rows = jnp.concatenate([values, jnp.ones((1, f.shape[-1]), f.dtype)], axis=0)
    smoothed = _interpolate(t, _reflected_convolution(_to_grid(f, rows, grid), sigma, grid))
    return t, smoothed[:-1], smoothed[-1] + _DENSITY_EPS


@functools.partial(jax.jit, static_argnames=("grid", "mesh"))
def _smece_kernel(y, p, sigma, grid, mesh):
    _, num, dens = _smooth(p, (p - y)[None, :], sigma, grid, mesh)
    # relplot: sum(|num / dens| * dens) / sum(dens)
    return jnp.sum(jnp.abs(num[0] / dens) * dens) / jnp.sum(dens)


def _check_bandwidth(bandwidth: Any) -> float | None:
    if bandwidth is None:
        return None
    if isinstance(bandwidth, bool) or not isinstance(bandwidth, int | float | np.floating):
        raise TypeError(
            f"bandwidth must be None (the fixed point) or a float in (0, 1]; got "
            f"{type(bandwidth).__name__} {bandwidth!r}."
        )
    if not 0 < float(bandwidth) <= 1:
        raise ValueError(
            f"bandwidth must be None (the fixed point) or a float in (0, 1]; got "
            f"{bandwidth!r}."
        )
    return float(bandwidth)


def _smece_at(y, p, sigma: float) -> jax.Array:
    grid, mesh = _grid_sizes(sigma)
    return _smece_kernel(y, p, jnp.asarray(sigma, p.dtype), grid, mesh)


def _fixed_point_bandwidth(y, p) -> float:
    """relplot's ``search_param``: bisection on (0, 1] for ``sigma = smECE_sigma``."""
    if not (_v.is_concrete(y) and _v.is_concrete(p)):
        raise TypeError(
            "the fixed-point bandwidth (bandwidth=None) is found by a search on the host "
            "and needs concrete arrays; under jax.jit or jax.vmap pass bandwidth= "
            "explicitly (e.g. the value returned by smooth_calibration_error(..., "
            "return_bandwidth=True) on concrete data)."
        )

    def ok(sigma: float) -> bool:
        return sigma < _SEARCH_EPS or sigma < float(_smece_at(y, p, sigma))

    if ok(1.0):
        return 1.0
    hi, lo = 1.0, 0.0  # relplot: start (predicate false), end (predicate true)
    for _ in range(_SEARCH_STEPS):
        mid = (hi + lo) / 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return hi


def _resolve(y, p, bandwidth):
    sigma = _check_bandwidth(bandwidth)
    return _fixed_point_bandwidth(y, p) if sigma is None else sigma


@_v.validated
def smooth_calibration_error(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    bandwidth: float | None = None,
    return_bandwidth: bool = False,
) -> jax.Array | tuple[jax.Array, float]:
    r"""Smooth ECE of a binary classifier (Blasiok & Nakkiran, 2023).

    The residuals :math:`f_i - y_i` are smoothed with a Gaussian kernel of standard
    deviation :math:`\sigma`, reflected at 0 and 1, and

    .. math:: \mathrm{smECE}_\sigma = \frac{\int |\hat r_\sigma(t)|\,\hat\delta_\sigma(t)\,dt}
        {\int \hat\delta_\sigma(t)\,dt},

    with :math:`\hat r_\sigma` the smoothed residual and :math:`\hat\delta_\sigma` the
    kernel density of the predictions (both on relplot's grids). Without a
    ``bandwidth`` the scale-free fixed point :math:`\sigma^*` with
    :math:`\mathrm{smECE}_{\sigma^*} = \sigma^*` is used, found by relplot's bisection.
    Equal to ``relplot.smECE`` (and ``relplot.smECE_sigma`` for a given bandwidth).

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels 0/1.
    y_prob : array_like, shape [N]
        Predicted probabilities of class 1, in [0, 1].
    bandwidth : float in (0, 1], optional
        Kernel standard deviation. ``None`` (default): the fixed point, found by a
        search on the host (eager only; under ``jax.jit`` pass a bandwidth).
    return_bandwidth : bool, default False
        Also return the bandwidth used.

    Returns
    -------
    Array, scalar
        The smooth ECE, in [0, 1]; with ``return_bandwidth=True`` a tuple
        ``(smece, bandwidth)``.

    See Also
    --------
    smooth_reliability_curve : The smoothed curve behind it.
    expected_calibration_error : The binned ECE.
    bayescal.plot.smooth_reliability_diagram : Draws the smoothed curve.

    References
    ----------
    Blasiok & Nakkiran (2023), "Smooth ECE: Principled Reliability Diagrams via Kernel
    Smoothing", arXiv:2309.12236; relplot (github.com/apple/ml-calibration).

    Examples
    --------
    >>> from bayescal.classification import smooth_calibration_error
    >>> err = smooth_calibration_error([0, 1, 1, 0], [0.2, 0.7, 0.9, 0.4])
    >>> 0.0 < float(err) < 0.5
    True
    """
    y, p = binary_inputs(y_true, y_prob)
    ret = _v.check_bool(return_bandwidth, "return_bandwidth")
    sigma = _resolve(y, p, bandwidth)
    out = _smece_at(y, p, sigma)
    return (out, sigma) if ret else out


@functools.partial(jax.jit, static_argnames=("grid", "mesh"))
def _curve_kernel(y, p, w, sigma, grid, mesh):
    # relplot's KernelSmoother: smooth(f, y)[0] = smoothed y / (density + eps).
    # w (bootstrap multiplicities) weighs each observation in both sums.
    t = jnp.linspace(0.0, 1.0, mesh, dtype=p.dtype)
    rows = jnp.stack([y * w, w])
    sm = _interpolate(t, _reflected_convolution(_to_grid(p, rows, grid), sigma, grid))
    dens = sm[1] + _DENSITY_EPS
    return t, sm[0] / dens, dens


def _mesh_size(num_points: Any, sigma: float) -> int:
    if num_points is None:
        return _grid_sizes(sigma)[1]
    return _v.check_positive_int(num_points, "num_points", minimum=2)


@_v.validated
def smooth_reliability_curve(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    bandwidth: float | None = None,
    num_points: int | None = 200,
) -> CalibrationCurve:
    r"""Kernel-smoothed reliability curve (Blasiok & Nakkiran, 2023).

    The labels are smoothed with the reflected Gaussian kernel at the smooth-ECE
    bandwidth, as relplot's ``KernelSmoother`` does:
    :math:`\hat\mu(t) = \sum_i K_\sigma(t, f_i) y_i / (\sum_i K_\sigma(t, f_i) + \epsilon)`.

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels 0/1.
    y_prob : array_like, shape [N]
        Predicted probabilities of class 1.
    bandwidth : float in (0, 1], optional
        Kernel standard deviation; default the smooth-ECE fixed point
        (see :func:`smooth_calibration_error`).
    num_points : int or None, default 200
        Number of mesh points on [0, 1] (relplot's ``plot_mesh_pts``); ``None`` uses
        the smooth-ECE mesh of that bandwidth.

    Returns
    -------
    CalibrationCurve
        ``expected`` = mesh, ``observed`` = smoothed frequency of positives, ``weight``
        = the (unnormalised) kernel density of the predictions on the mesh.

    See Also
    --------
    smooth_calibration_error : The error of this curve.
    smooth_reliability_band : The same curve with a bootstrap band.
    reliability_curve : The binned twin.

    Examples
    --------
    >>> from bayescal.classification import smooth_reliability_curve
    >>> c = smooth_reliability_curve([0, 1, 1, 0], [0.2, 0.7, 0.9, 0.4], num_points=5)
    >>> c.expected.tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    y, p = binary_inputs(y_true, y_prob)
    sigma = _resolve(y, p, bandwidth)
    mesh = _mesh_size(num_points, sigma)
    grid = _grid_sizes(sigma)[0]
    t, mu, dens = _curve_kernel(y, p, jnp.ones_like(p), jnp.asarray(sigma, p.dtype), grid, mesh)
    return CalibrationCurve(t, mu, dens)


@functools.partial(jax.jit, static_argnames=("grid", "mesh", "num_samples"))
def _band_kernel(key, y, p, sigma, level, grid, mesh, num_samples):
    n = p.shape[-1]

    def one(k):
        idx = jax.random.randint(k, (n,), 0, n)
        w = jnp.zeros((n,), p.dtype).at[idx].add(1)
        return _curve_kernel(y, p, w, sigma, grid, mesh)[1]

    curves = jax.lax.map(one, jax.random.split(key, num_samples), batch_size=16)
    alpha = (1 - level) / 2
    lower = jnp.quantile(curves, alpha, axis=0)
    upper = jnp.quantile(curves, 1 - alpha, axis=0)
    return lower, upper


@_v.validated
def smooth_reliability_band(
    key: Any,
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    bandwidth: float | None = None,
    num_points: int | None = 200,
    num_samples: int = 200,
    level: float = 0.95,
) -> CalibrationCurve:
    """Smoothed reliability curve with a pointwise bootstrap band.

    The curve of :func:`smooth_reliability_curve` with ``lower`` / ``upper`` the
    pointwise ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the curves of
    ``num_samples`` bootstrap resamples, all smoothed at the bandwidth of the full
    data (as relplot's ``prepare_rel_diagram`` does with 200 bagged smoothers).

    Parameters
    ----------
    key : PRNG key or int
        Randomness of the resamples (the result is random: key first).
    y_true, y_prob : array_like, shape [N]
        Binary labels and predicted probabilities of class 1.
    bandwidth : float in (0, 1], optional
        Kernel standard deviation; default the smooth-ECE fixed point.
    num_points : int or None, default 200
        Mesh size (see :func:`smooth_reliability_curve`).
    num_samples : int, default 200
        Number of bootstrap resamples.
    level : float, default 0.95
        Pointwise level of the band.

    Returns
    -------
    CalibrationCurve
        As :func:`smooth_reliability_curve`, with ``lower`` and ``upper`` filled.

    See Also
    --------
    smooth_reliability_curve : Without the band.
    bootstrap_reliability_curve : The binned twin.

    Examples
    --------
    >>> from bayescal.classification import smooth_reliability_band
    >>> c = smooth_reliability_band(0, [0, 1, 1, 0], [0.2, 0.7, 0.9, 0.4],
    ...                             num_points=3, num_samples=20)
    >>> bool((c.lower <= c.upper).all())
    True
    """
    k = as_key(key)
    y, p = binary_inputs(y_true, y_prob)
    num_samples = _v.check_positive_int(num_samples, "num_samples", minimum=2)
    lev = check_level(level)
    sigma = _resolve(y, p, bandwidth)
    mesh = _mesh_size(num_points, sigma)
    grid = _grid_sizes(sigma)[0]
    s = jnp.asarray(sigma, p.dtype)
    t, mu, dens = _curve_kernel(y, p, jnp.ones_like(p), s, grid, mesh)
    lower, upper = _band_kernel(k, y, p, s, lev, grid, mesh, num_samples)
    return CalibrationCurve(t, mu, dens, lower, upper)
