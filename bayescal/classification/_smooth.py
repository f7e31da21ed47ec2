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
are relplot's grid sizes. For a given bandwidth they are static. The bisection runs
inside the compiled program (one program per bucket of N, for every bandwidth it
tries): there they are traced sizes within static arrays of the largest grids it can
need, the slots past ``E`` and ``T`` left out of every sum. The convolution is done
with an FFT.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from bayescal._src import newton
from bayescal._src import validation as _v
from bayescal._src.bands import cell_draws
from bayescal._src.bucketing import random_prefix_stable
from bayescal._src.curve import CalibrationCurve
from bayescal._src.host import _device, _result
from bayescal._src.host import active as host_active
from bayescal._src.host import first as host_first
from bayescal._src.resampling import as_key, check_level
from bayescal._src.sorting import column_quantiles, gather_all
from bayescal.classification._host import _binary
from bayescal.classification._inputs import binary_inputs, quick_compiler_options

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


# The search's bandwidths are multiples of 1 / _UNIT (ten halvings of [0, 1]). Those
# below _SEARCH_EPS are accepted without an evaluation (relplot's predicate), so the
# smallest one evaluated is _K_MIN / _UNIT (1/512), whose grids bound every search grid.
_UNIT = 1 << _SEARCH_STEPS
_K_MIN = math.ceil(_SEARCH_EPS * _UNIT)
_SEARCH_GRID, _SEARCH_MESH = _grid_sizes(_K_MIN / _UNIT)


def _search_grid_sizes(k: jax.Array) -> tuple[jax.Array, jax.Array]:
    """:func:`_grid_sizes` of the bandwidth ``k / _UNIT`` for a traced int32 ``k``.

    Integer arithmetic: ``round(a / k)`` is ``(2 a + k) // (2 k)`` (``20 _UNIT / k``
    and ``10 _UNIT / k`` are never halfway between integers for ``k <= _UNIT``).
    """

    def rounded(a: int) -> jax.Array:
        return (2 * a + k) // (2 * k)

    grid = jnp.maximum(rounded(20 * _UNIT), 2000) // 2 + 1
    mesh = jnp.maximum(rounded(10 * _UNIT), _MIN_MESH)
    return grid, mesh


# The grid ``E`` and the mesh ``T`` below may be traced int32 scalars (the bandwidth
# found by the search): the arrays then have the static sizes ``grid_size >= E`` and
# ``mesh_size >= T``, and the slots past ``E`` (``T``) are padding that no sum reads.
def _linspace(num: Any, size: int, dtype: Any) -> jax.Array:
    """``jnp.linspace(0, 1, num)`` in the first ``num`` of ``size`` slots (the same
    arithmetic: ``i / (num - 1)``)."""
    return jnp.arange(size, dtype=dtype) / jnp.asarray(num - 1, dtype)


def _to_grid(f: jax.Array, v: jax.Array, grid: Any, size: int) -> jax.Array:
    """Spread ``v`` at positions ``f`` onto ``linspace(0, 1, grid)`` linearly.

    ``v`` has shape ``[..., N]`` (several value rows share the positions).
    """
    x = f * jnp.asarray(grid - 1, f.dtype)
    idx = jnp.clip(jnp.floor(x), 0, grid - 2).astype(jnp.int32)
    frac = x - idx.astype(f.dtype)
    out = jnp.zeros(v.shape[:-1] + (size,), v.dtype)
    out = out.at[..., idx].add((1 - frac) * v)
    return out.at[..., idx + 1].add(frac * v)


def _reflected_convolution(
    values: jax.Array, sigma: jax.Array, grid: Any, size: int
) -> jax.Array:
    """relplot's ``ReflectedGaussianKernel.convolve`` (a ``valid`` convolution)."""
    slot = jnp.arange(size)
    t = _linspace(grid, size, values.dtype)
    ker = jnp.exp(-((t - 0.5) ** 2) / (2 * sigma**2)) / (math.sqrt(2 * math.pi) * sigma)
    ker = jnp.where(slot < grid, ker, 0)
    # The output slots read ext[j] for j < E - 1 + E // 2 + size only: a cyclic
    # convolution of that many points equals the linear one there.
    nfft = 1 << (2 * size + size // 2 - 1).bit_length()
    # The grid reflected at both ends: values[E-1], ..., values[1], values[0], ...,
    # values[E-1], values[E-2], ..., values[0] (3 E - 2 entries, then zeros).
    i = jnp.arange(min(3 * size - 2, nfft))
    src = jnp.where(
        i < grid - 1,
        grid - 1 - i,
        jnp.where(i < 2 * grid - 1, i - grid + 1, 3 * grid - 3 - i),
    )
    ext = jnp.take(values, jnp.clip(src, 0, size - 1), axis=-1)
    ext = jnp.where(i < 3 * grid - 2, ext, 0)
    full = jnp.fft.irfft(jnp.fft.rfft(ext, nfft) * jnp.fft.rfft(ker, nfft), nfft)
    # np.convolve(ext, ker, "valid")[E // 2 : E // 2 + E]
    return jax.lax.dynamic_slice_in_dim(full, grid - 1 + grid // 2, size, axis=-1)


def _interpolate(t: jax.Array, y: jax.Array, k: Any) -> jax.Array:
    """relplot's ``interpolate``: the piecewise-linear function ``i/(k-1) -> y[i]``."""
    idx = jnp.clip(jnp.floor(t * jnp.asarray(k - 1, t.dtype)), 0, k - 2).astype(jnp.int32)
    bucket = 1 / jnp.asarray(k - 1, t.dtype)
    resid = (t - idx.astype(t.dtype) * bucket) / bucket
    return y[..., idx] * (1 - resid) + y[..., idx + 1] * resid


# The grid of every bandwidth >= 0.01 (most fixed points): a traced grid of this size
# can take the convolution of this static size, 8x smaller than the search's largest.
_COMMON_GRID = _grid_sizes(0.01)[0]


def _smooth(f, rows, sigma, grid, mesh, grid_size, mesh_size, *, common=False):
    """The mesh ``t`` and the smoothed ``rows`` on it (``[R, mesh_size]``)."""
    spread = _to_grid(f, rows, grid, grid_size)
    return _smooth_spread(spread, sigma, grid, mesh, grid_size, mesh_size, common=common)


def _smooth_spread(spread, sigma, grid, mesh, grid_size, mesh_size, *, common=False):
    """:func:`_smooth` of values already spread onto the grid (``[..., grid_size]``).

    ``common``: with a traced ``grid``, convolve at the static size
    :data:`_COMMON_GRID` when ``grid`` is that (a second compiled convolution, for
    loops that smooth many times).
    """
    t = _linspace(mesh, mesh_size, spread.dtype)

    def smoothed(e, size):
        def run(v):
            conv = _reflected_convolution(v[..., :size], sigma, e, size)
            return _interpolate(t, conv, e)

        return run

    if common and grid_size > _COMMON_GRID and not isinstance(grid, int):
        common_grid = smoothed(_COMMON_GRID, _COMMON_GRID)
        out = jax.lax.cond(
            grid == _COMMON_GRID, common_grid, smoothed(grid, grid_size), spread
        )
        return t, out
    return t, smoothed(grid, grid_size)(spread)


def _smece(p, rows, sigma, grid, mesh, grid_size, mesh_size):
    """smECE_sigma of ``rows = [weighted residuals, weights]`` (relplot:
    ``sum(|num / dens| * dens) / sum(dens)`` over the mesh)."""
    _, sm = _smooth(p, rows, sigma, grid, mesh, grid_size, mesh_size)
    num, dens = sm[0], sm[1] + _DENSITY_EPS
    valid = jnp.arange(mesh_size) < mesh
    total = jnp.sum(jnp.where(valid, jnp.abs(num / dens) * dens, 0))
    return total / jnp.sum(jnp.where(valid, dens, 0))


def _residual_rows(y, p, w):
    """``[(p - y) w, w]``: ``w`` 0 in a bucket's padding (None: ones)."""
    w = jnp.ones_like(p) if w is None else w
    return jnp.stack([(p - y) * w, w])


@functools.partial(jax.jit, static_argnames=("grid_size", "mesh_size"))
def _smece_kernel(y, p, w, sigma, grid, mesh, *, grid_size, mesh_size):
    return _smece(p, _residual_rows(y, p, w), sigma, grid, mesh, grid_size, mesh_size)


# --------------------------------------------------------------------------- host twins
def _relplot_smooth(
    f: np.ndarray, rows: np.ndarray, sigma: float, grid: int, mesh: int, dtype: Any
) -> tuple[np.ndarray, np.ndarray]:
    """``classification._smooth._smooth`` (relplot's spreading, reflected Gaussian
    convolution and interpolation) in float64: the mesh ``t`` in ``dtype`` and the
    smoothed ``rows [R, N]`` on it ``[R, mesh]`` (float64)."""
    x = f.astype(np.float64) * (grid - 1)
    idx = np.clip(np.floor(x), 0, grid - 2).astype(np.intp)
    frac = x - idx
    spread = np.stack(
        [
            np.bincount(idx, (1 - frac) * r, grid) + np.bincount(idx + 1, frac * r, grid)
            for r in rows
        ]
    )
    tg = np.arange(grid) / (grid - 1)
    ker = np.exp(-((tg - 0.5) ** 2) / (2 * sigma**2)) / (math.sqrt(2 * math.pi) * sigma)
    # the grid reflected at both ends: v[E-1] ... v[1], v[0] ... v[E-1], v[E-2] ... v[0]
    ext = np.concatenate([spread[:, :0:-1], spread, spread[:, -2::-1]], axis=1)
    nfft = 1 << (ext.shape[1] + grid - 2).bit_length()  # >= the linear length
    full = np.fft.irfft(np.fft.rfft(ext, nfft) * np.fft.rfft(ker, nfft), nfft)
    conv = full[:, grid - 1 + grid // 2 : grid - 1 + grid // 2 + grid]
    # the kernel's mesh: XLA divides by a constant as a product with its reciprocal
    t = np.arange(mesh, dtype=dtype) * (np.asarray(1, dtype) / np.asarray(mesh - 1, dtype))
    tt = t.astype(np.float64)
    j = np.clip(np.floor(tt * (grid - 1)), 0, grid - 2).astype(np.intp)
    bucket = 1 / (grid - 1)
    resid = (tt - j * bucket) / bucket
    return t, conv[:, j] * (1 - resid) + conv[:, j + 1] * resid


def _relplot_smece(
    p: np.ndarray, rows: np.ndarray, sigma: float, grid: int, mesh: int
) -> float:
    """smECE_sigma (relplot): ``sum |num / dens| dens / sum dens`` on its mesh."""

    _, sm = _relplot_smooth(p, rows, sigma, grid, mesh, np.float64)
    num, dens = sm[0], sm[1] + _DENSITY_EPS
    return float(np.sum(np.abs(num / dens) * dens) / np.sum(dens))


def _smooth_bandwidth(p: np.ndarray, rows: np.ndarray) -> tuple[int, float]:
    """``classification._smooth._fixed_point_kernel``: relplot's bisection for
    ``sigma = smECE_sigma``; ``(k, smece)`` with the bandwidth ``k / 1024``."""

    lo, hi, value = 0, _UNIT, math.nan
    for i in range(_SEARCH_STEPS + 1):
        k = _UNIT if i == 0 else (lo + hi) // 2
        sigma = k / _UNIT
        if sigma < _SEARCH_EPS:  # accepted without an evaluation (relplot's predicate)
            lo = k
            continue
        err = _relplot_smece(p, rows, sigma, *_twin_search_grid_sizes(k))
        ok = sigma < err
        if i == 0 or not ok:
            hi, value = k, err
        else:
            lo = k
        if i == 0 and ok:
            break
    return hi, value


def _smooth_inputs(y_true: Any, y_prob: Any, bandwidth: Any) -> Any:
    """Labels, probabilities and the bandwidth option (None or a float in (0, 1]), or
    None for anything the kernel path decides."""
    if bandwidth is not None and not (
        type(bandwidth) in (float, int) and 0 < bandwidth <= 1
    ):
        return None
    data = _binary(y_true, y_prob, None, True)
    if data is None:
        return None
    return data[0], data[1], None if bandwidth is None else float(bandwidth)


def _twin_search_grid_sizes(k: int) -> tuple[int, int]:
    """``classification._smooth._search_grid_sizes`` (integer arithmetic)."""

    k = max(k, _K_MIN)
    grid = max((2 * 20 * _UNIT + k) // (2 * k), 2000) // 2 + 1
    return grid, max((2 * 10 * _UNIT + k) // (2 * k), _MIN_MESH)


def _twin_smooth_fixed_point(y_true: Any, y_prob: Any) -> tuple[float, jax.Array] | None:
    """``(smece, bandwidth)`` of the fixed point on the host, or None; the bandwidth
    as the kernel gives it (an array of the probabilities' dtype: traced, not static,
    in the program it is passed to)."""
    data = _smooth_inputs(y_true, y_prob, None)
    if data is None:
        return None
    y, p, _ = data
    rows = np.stack([p.astype(np.float64) - y, np.ones(p.size)])
    k, err = _smooth_bandwidth(p, rows)
    return err, _result(k / 1024, p.dtype)


def _twin_smooth_calibration_error(
    y_true: Any, y_prob: Any, *, bandwidth: Any = None, return_bandwidth: Any = False
) -> Any:
    """:func:`bayescal.classification.smooth_calibration_error` on the host (float64;
    the bisection's decisions are the kernel's but for an error within float32
    rounding of a bandwidth tried)."""
    data = _smooth_inputs(y_true, y_prob, bandwidth)
    if data is None or not isinstance(return_bandwidth, bool):
        return None

    y, p, sigma = data
    rows = np.stack([p.astype(np.float64) - y, np.ones(p.size)])
    if sigma is None:
        k, err = _smooth_bandwidth(p, rows)
        sigma = k / 1024
    else:
        err = _relplot_smece(p, rows, sigma, *_grid_sizes(sigma))
    out = _result(err, p.dtype)
    # the kernel's bandwidth leaves its program as an array of the dtype
    return (out, float(np.asarray(sigma, p.dtype))) if return_bandwidth else out


def _twin_smooth_reliability_curve(
    y_true: Any, y_prob: Any, *, bandwidth: Any = None, num_points: Any = 200
) -> Any:
    """:func:`bayescal.classification.smooth_reliability_curve` on the host."""
    from bayescal._src.curve import CalibrationCurve

    data = _smooth_inputs(y_true, y_prob, bandwidth)
    ok_points = num_points is None or (type(num_points) is int and 2 <= num_points <= 10**6)
    if data is None or not ok_points:
        return None
    y, p, sigma = data
    if sigma is None:
        rows = np.stack([p.astype(np.float64) - y, np.ones(p.size)])
        k, _ = _smooth_bandwidth(p, rows)
        sigma = k / 1024
        grid = _twin_search_grid_sizes(k)[0]
    else:
        grid = _grid_sizes(sigma)[0]
    mesh = _grid_sizes(sigma)[1] if num_points is None else num_points
    t, sm = _relplot_smooth(
        p, np.stack([y.astype(np.float64), np.ones(p.size)]), sigma, grid, mesh, p.dtype
    )
    dens = sm[1] + _DENSITY_EPS
    mu = sm[0] / dens
    return CalibrationCurve(_device(t), _result(mu, p.dtype), _result(dens, p.dtype))


# unoptimised code: threefry's hash compiles ~10x faster so (bayescal._src.folds)
@functools.partial(newton.fast_jit, static_argnums=1)
def _split_words(key: jax.Array, count: int) -> jax.Array:
    """``jax.random.key_data(jax.random.split(key, count))``: the kernel's keys of the
    resamples, in one small program (eager, each of the two compiled one)."""
    return jax.random.key_data(jax.random.split(key, count))


def _twin_smooth_reliability_band(
    key: Any,
    y_true: Any,
    y_prob: Any,
    *,
    bandwidth: Any = None,
    num_points: Any = 200,
    num_samples: Any = 200,
    level: Any = 0.95,
) -> Any:
    """:func:`bayescal.classification.smooth_reliability_band` on the host: the same
    resamples (the kernel's split keys, :func:`_split_words`, seed NumPy's generator as
    ``bands.cell_draws`` does), smoothed in float64."""
    from bayescal._src.bands import _host_cell_draws, use_xla_draws
    from bayescal._src.curve import CalibrationCurve

    if use_xla_draws():  # several devices: the kernel draws with jax.random there
        return None
    data = _smooth_inputs(y_true, y_prob, bandwidth)
    ok_points = num_points is None or (type(num_points) is int and 2 <= num_points <= 10**6)
    ok_samples = type(num_samples) is int and 2 <= num_samples <= 10**5
    if key is None or data is None or not ok_points or not ok_samples:
        return None
    if type(level) not in (float, int) or not 0 < level < 1:
        return None
    y, p, sigma = data
    if sigma is None:
        rows = np.stack([p.astype(np.float64) - y, np.ones(p.size)])
        sigma = _smooth_bandwidth(p, rows)[0] / 1024
    grid, mesh = _grid_sizes(sigma)
    mesh = mesh if num_points is None else num_points
    n = p.size
    # the kernel's jobs: 0 the data, j >= 1 resample j with the (j - 1)-th split key
    weights = np.empty((num_samples + 1, n), np.float64)
    weights[0] = 1.0
    weights[1:] = _host_cell_draws(
        np.asarray(_split_words(as_key(key), num_samples)), np.float64(n), np.ones(n),
        kind="resample",
    )
    y64 = y.astype(np.float64)
    t, sm = _relplot_smooth(
        p, np.concatenate([y64 * weights, weights]), sigma, grid, mesh, p.dtype
    )
    dens = sm[num_samples + 1 :] + _DENSITY_EPS
    mu = sm[: num_samples + 1] / dens
    alpha = (1 - float(np.asarray(level, p.dtype))) / 2
    lower, upper = np.quantile(mu[1:], [alpha, 1 - alpha], axis=0)
    return CalibrationCurve(
        _device(t),
        _result(mu[0], p.dtype),
        _result(dens[0], p.dtype),
        _result(lower, p.dtype),
        _result(upper, p.dtype),
    )


@jax.jit
def _fixed_point_kernel(y, p, w):
    """relplot's ``search_param``: bisection on (0, 1] for ``sigma = smECE_sigma``.

    One compiled loop (the grids of each bandwidth are traced sizes within the
    largest ones). Returns the numerator ``k`` of the bandwidth ``k / _UNIT`` and the
    smooth ECE at it.
    """
    rows = _residual_rows(y, p, w)
    dtype = p.dtype

    def cond(state):
        i, _, _, _, done = state
        return (i <= _SEARCH_STEPS) & ~done

    def body(state):
        i, lo, hi, value, _ = state
        first = i == 0  # relplot: return 1 when the predicate holds at 1
        k = jnp.where(first, _UNIT, (lo + hi) // 2)
        grid, mesh = _search_grid_sizes(jnp.maximum(k, _K_MIN))
        sigma = k.astype(dtype) / _UNIT  # exact
        err = _smece(p, rows, sigma, grid, mesh, _SEARCH_GRID, _SEARCH_MESH)
        ok = (sigma < _SEARCH_EPS) | (sigma < err)
        up = first | ~ok  # hi moves to k (at the first step: stays at 1)
        return (
            i + 1,
            jnp.where(up, lo, k),
            jnp.where(up, k, hi),
            jnp.where(up, err, value),
            first & ok,
        )

    int32 = functools.partial(jnp.asarray, dtype=jnp.int32)
    nan, false = jnp.asarray(jnp.nan, dtype), jnp.asarray(False)
    start = (int32(0), int32(0), int32(_UNIT), nan, false)
    _, _, hi, value, _ = jax.lax.while_loop(cond, body, start)
    return hi, value


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


class _Bandwidth(NamedTuple):
    """The kernel's bandwidth and its convolution grid ``E`` (a traced size when the
    bandwidth was found by the search, with the static array size ``grid_size``)."""

    sigma: Any  # float, or a traced scalar in the data's dtype
    grid: Any  # int, or traced int32
    grid_size: int


def _resolve(y, p, w, bandwidth) -> tuple[_Bandwidth, jax.Array | None]:
    """The bandwidth (given, or relplot's fixed point) and, when searched, the smooth
    ECE at it."""
    sigma = _check_bandwidth(bandwidth)
    if sigma is not None:
        grid = _grid_sizes(sigma)[0]
        return _Bandwidth(sigma, grid, grid), None
    k, err = _fixed_point_kernel(y, p, w)
    grid, _ = _search_grid_sizes(k)
    return _Bandwidth(k.astype(p.dtype) / _UNIT, grid, _SEARCH_GRID), err


# The arguments with an observation axis (padded to a bucket in eager calls).
_BUCKET = {"y_true": 0, "y_prob": 0}


@host_first(_twin_smooth_calibration_error)
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
        Kernel standard deviation. ``None`` (default): the fixed point, found by
        relplot's bisection inside the compiled program (so ``jax.jit`` and
        ``jax.vmap`` work too).
    return_bandwidth : bool, default False
        Also return the bandwidth used (a float; a traced scalar under ``jax.jit``).

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
    ret = _v.check_bool(return_bandwidth, "return_bandwidth")
    out, sigma = _smooth_calibration_error(y_true, y_prob, bandwidth=bandwidth)
    if not ret:
        return out
    return out, (float(sigma) if _v.is_concrete(sigma) else sigma)


@_v.validated(fuse=True, bucket=_BUCKET, compiler_options=quick_compiler_options)
def _smooth_calibration_error(y_true, y_prob, *, bandwidth):
    """``(smece, bandwidth)``; one compiled program per bucket of N, search included."""
    # On a mesh: the whole data on every device, in ONE collective (sorting.gather_all)
    y_true, y_prob = gather_all((y_true, y_prob), "The smooth calibration error")
    y, p = binary_inputs(y_true, y_prob)
    w = _v.mask_weights(None, p.shape, p.dtype)
    bw, err = _resolve(y, p, w, bandwidth)
    if err is None:
        grid, mesh = _grid_sizes(bw.sigma)
        sigma = jnp.asarray(bw.sigma, p.dtype)
        err = _smece_kernel(y, p, w, sigma, grid, mesh, grid_size=grid, mesh_size=mesh)
    return err, bw.sigma


def _curve(y, p, w, sigma, grid, grid_size, mesh, *, common=False):
    # relplot's KernelSmoother: smooth(f, y)[0] = smoothed y / (density + eps).
    # w weighs each observation in both sums (bootstrap multiplicities; 0 in a
    # bucket's padding).
    rows = jnp.stack([y * w, w])
    t, sm = _smooth(p, rows, sigma, grid, mesh, grid_size, mesh, common=common)
    dens = sm[1] + _DENSITY_EPS
    return t, sm[0] / dens, dens


@functools.partial(jax.jit, static_argnames=("grid_size", "mesh"))
def _curve_kernel(y, p, w, sigma, grid, *, grid_size, mesh):
    return _curve(y, p, jnp.ones_like(p) if w is None else w, sigma, grid, grid_size, mesh)


def _mesh_size(num_points: Any, sigma: Any) -> int:
    if num_points is not None:
        return _v.check_positive_int(num_points, "num_points", minimum=2)
    if not _v.is_concrete(sigma):
        raise TypeError(
            "num_points=None takes the mesh of the smooth-ECE bandwidth, whose size must "
            "be known before compiling; with bandwidth=None under jax.jit or jax.vmap "
            "pass num_points (e.g. 200)."
        )
    return _grid_sizes(float(sigma))[1]


@host_first(_twin_smooth_reliability_curve)
@_v.validated(fuse=True, bucket=_BUCKET, compiler_options=quick_compiler_options)
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
    # On a mesh: the whole data on every device, in ONE collective (sorting.gather_all)
    y_true, y_prob = gather_all((y_true, y_prob), "The smooth reliability curve")
    y, p = binary_inputs(y_true, y_prob)
    w = _v.mask_weights(None, p.shape, p.dtype)
    bw, _ = _resolve(y, p, w, bandwidth)
    mesh = _mesh_size(num_points, bw.sigma)
    sigma = jnp.asarray(bw.sigma, p.dtype)
    t, mu, dens = _curve_kernel(y, p, w, sigma, bw.grid, grid_size=bw.grid_size, mesh=mesh)
    return CalibrationCurve(t, mu, dens)


_BAND_BATCH = 4  # curves smoothed at once (vmapped) in the band's loop: 16 compiled
# ~20% slower, and ran slower from N = 1e5 on (measured on the 2-core CPU machines)


def _band_compiler_options(size: int) -> dict[str, Any]:
    """:func:`quick_compiler_options` less the unoptimised code generation.

    Up to xla_options' quick size, the older emitters only: at N = 1e4 ~1/3 less
    compile time for a ~10% longer run, where unoptimised code made the resampling
    loop ~10x slower. Beyond it XLA's defaults (the older emitters ran it 1.5x slower
    from N = 1e5 on). Measured on the 2-core CPU machines.
    """
    options = quick_compiler_options(size)
    options.pop("xla_backend_optimization_level", None)
    return options


@functools.partial(jax.jit, static_argnames=("grid_size", "mesh", "num_samples"))
def _band_kernel(key, y, p, w, n, sigma, level, grid, *, grid_size, mesh, num_samples):
    """The curve of the data (weights ``w``) and the pointwise ``level`` band of the
    curves of ``num_samples`` bootstrap resamples: ``(t, mu, dens, lower, upper)``.

    ``n``: the number of real observations (the first ``n`` of a padded bucket). The
    resamples draw ``n`` indices below ``n`` (:func:`~bayescal._src.bands.cell_draws`,
    kind ``"resample"``): the same for a padded bucket as for an unpadded call.
    """
    base = jnp.ones_like(p) if w is None else w

    def one(job):
        index, k = job
        # a resample's multiplicities of the first n observations (NumPy's draws on one
        # device: JAX's threefry for N indices was ~2/3 of this program's compile time)
        counts = cell_draws(k, n, base, kind="resample")
        # job 0 is the data itself: one compiled loop serves the data and the band
        weights = jnp.where(index == 0, base, counts)
        return _to_grid(p, jnp.stack([y * weights, weights]), grid, grid_size)

    # Whole batches only (a remainder would compile the loop body a second time): the
    # extra curves are computed and dropped. The loop only spreads each resample onto
    # the grid; the convolutions of all of them run once after it, batched (a third
    # less compile time than a convolution in the loop body).
    jobs = -(-(num_samples + 1) // _BAND_BATCH) * _BAND_BATCH
    keys = jax.random.split(key, jobs - 1)
    keys = jnp.concatenate([keys[:1], keys])  # job 0's key is not used
    spread = jax.lax.map(one, (jnp.arange(jobs), keys), batch_size=_BAND_BATCH)
    t, sm = _smooth_spread(spread, sigma, grid, mesh, grid_size, mesh, common=True)
    dens = sm[:, 1] + _DENSITY_EPS
    mu = sm[:, 0] / dens  # relplot's KernelSmoother (as _curve)
    lower, upper = _pointwise_quantiles(mu[1 : num_samples + 1], level)
    return t, mu[0], dens[0], lower, upper


def _pointwise_quantiles(
    curves: jax.Array, level: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """``jnp.quantile(curves, [(1 - level) / 2, (1 + level) / 2], axis=0)`` (NumPy's
    ``linear`` method) by the core's per-column quantiles (jnp.quantile's general
    code took ~1/5 of the band program's compile time)."""
    alpha = (1 - level) / 2
    out = column_quantiles(curves, jnp.stack([alpha, 1 - alpha]))
    return out[0], out[1]


@host_first(_twin_smooth_reliability_band)
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
    # Padded to a bucket only where the resampling draws of the padded length begin
    # with the unpadded ones (the result must not depend on the bucket).
    band = _band_bucketed if random_prefix_stable(key) else _band_unpadded
    options = dict(num_samples=num_samples, level=level)
    if bandwidth is None and not any(
        isinstance(a, jax.core.Tracer) for a in jax.tree.leaves((key, y_true, y_prob))
    ):
        # Eagerly, two programs: the smooth-ECE bandwidth search (the program of
        # smooth_calibration_error, shared with it and with smooth_reliability_curve),
        # then the band at that bandwidth with its grid known before compiling: one
        # convolution size and no search in the resampling program (0.87 s -> see
        # docs/benchmarks.md for the first call; equal to float precision).
        found = _twin_smooth_fixed_point(y_true, y_prob) if host_active() else None
        if found is None:  # (on the host: no program for the search)
            found = _smooth_calibration_error(y_true, y_prob, bandwidth=None)
        found = found[1]
        grid, mesh = _grid_sizes(float(found))
        points = mesh if num_points is None else num_points
        return band(
            key, y_true, y_prob, bandwidth=found, grid=grid, num_points=points, **options
        )
    return band(
        key,
        y_true,
        y_prob,
        bandwidth=bandwidth,
        grid=None,
        num_points=num_points,
        **options,
    )


def _band(key, y_true, y_prob, *, bandwidth, grid, num_points, num_samples, level):
    """``grid``: None, or the static convolution grid of a ``bandwidth`` found by the
    search (then an array, the search's exact multiple of 1 / 1024)."""
    k = as_key(key)
    # On a mesh: the whole data on every device, in ONE collective (sorting.gather_all)
    y_true, y_prob = gather_all((y_true, y_prob), "The smooth reliability band")
    y, p = binary_inputs(y_true, y_prob)
    num_samples = _v.check_positive_int(num_samples, "num_samples", minimum=2)
    lev = check_level(level)
    w = _v.mask_weights(None, p.shape, p.dtype)
    if grid is None:
        bw, _ = _resolve(y, p, w, bandwidth)
    else:
        bw = _Bandwidth(jnp.asarray(bandwidth, p.dtype), grid, grid)
    mesh = _mesh_size(num_points, bw.sigma)
    s = jnp.asarray(bw.sigma, p.dtype)
    n = _v.observation_count(p, 0)
    level = jnp.asarray(lev, p.dtype)
    sizes = dict(grid_size=bw.grid_size, mesh=mesh, num_samples=num_samples)
    return CalibrationCurve(*_band_kernel(k, y, p, w, n, s, level, bw.grid, **sizes))


_band_bucketed = _v.validated(
    fuse=True, bucket=_BUCKET, compiler_options=_band_compiler_options
)(_band)
_band_unpadded = _v.validated(fuse=True, compiler_options=_band_compiler_options)(_band)
