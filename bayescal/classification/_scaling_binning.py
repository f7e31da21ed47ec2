"""Scaling-binning calibration (Kumar, Liang & Ma 2019): Platt scaling, then binning.

A frozen pytree like the other binary calibrators of ``_calibrators.py``: the fit is
one jittable, vmappable program (the shared Newton solver for the Platt step, a sort
and segment sums for the bins), bucketed by ``newton.bucketed_fit`` so that one
compiled program serves every ``N`` of a bucket.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bayescal._src import newton
from bayescal._src import validation as _v
from bayescal._src.host import _device, _floats, _normal, _scalar, _vector
from bayescal._src.host import first as host_first
from bayescal._src.pytree import pytree_dataclass
from bayescal.classification._calibrators import (
    _logistic_fit,
    _logit,
    _no_infinite_logits,
    _platt_map,
    _scores,
    _warn_not_converged,
)
from bayescal.classification._host import (
    _MAX_BINS,
    _binary_logits,
    _eps_ok,
    _logistic_one,
    histogram_map,
)
from bayescal.classification._host import _logit as _host_logit
from bayescal.classification._host import _platt_map as _host_platt_map
from bayescal.classification._inputs import binary_inputs, check_eps

__all__ = ["ScalingBinningCalibrator", "fit_scaling_binning"]


def _scaling_binning_map(a, b, edges, values, p, *, eps):
    """Platt's map ``g(p)``, then the value of the bin ``(e_{k-1}, e_k]`` holding it."""
    g = _platt_map(a, b, p, use_logit=True, eps=eps)
    return histogram_map(edges, values, g, jnp, side="left")


@functools.partial(newton.fast_jit, static_argnames=("eps",))
def _scaling_binning_apply(params, p, *, eps):
    return _scaling_binning_map(*params, p, eps=eps)


# --------------------------------------------------------------------------- host twins
def _twin_fit_scaling_binning(
    y_true: Any,
    y_prob: Any,
    *,
    bins: Any = 10,
    split: Any = 0.5,
    soft_labels: Any = False,
    eps: Any = None,
    weights: Any = None,
) -> Any:
    """:func:`bayescal.classification.fit_scaling_binning` on the host: the Platt step by
    :func:`logistic_rows` (float64), the equal-mass bins of ``_equal_mass_bins``."""
    if type(bins) is not int or not 1 <= bins <= _MAX_BINS:
        return None
    if split is not None and (type(split) is not float or not 0 < split < 1):
        return None
    if not isinstance(soft_labels, bool):
        return None
    if not _eps_ok(eps):
        return None

    data = _binary_logits(y_true, y_prob, weights, eps)
    if data is None:
        return None
    y, p, w, f = data
    dt = p.dtype
    n = p.size
    w = np.ones(n) if w is None else w.astype(np.float64)
    m = n if split is None else int(np.floor(dt.type(split) * dt.type(n)))
    first = np.arange(n) < m if split is not None else np.ones(n, bool)
    w1 = np.where(first, w, 0.0)
    w2 = w if split is None else np.where(first, 0.0, w)
    if (w2 > 0).sum() < bins:
        return None  # the kernel path raises its message
    theta = _logistic_one(f, y, w1, soft_labels)
    if theta is None:
        return None
    a, b = (np.asarray(-v, dt) for v in theta)
    g = _host_platt_map(a, b, f, dt)
    # Kumar et al.'s equal-mass groups of the weighted sample (as _equal_mass_bins)
    order = np.argsort(g, kind="stable")
    gs, cw = g[order], np.cumsum(w2.astype(dt)[order], dtype=dt)
    total = cw[-1]
    q = np.floor(total / dt.type(bins))
    r = total - q * dt.type(bins)
    k = np.arange(1, bins, dtype=dt)
    boundary = k * q + np.minimum(k, r)
    position = np.concatenate([boundary - 1, boundary])
    at = gs[np.minimum(np.searchsorted(cw, position, side="right"), n - 1)]
    inner = ((at[: bins - 1] + at[bins - 1 :]) / dt.type(2)).astype(dt)
    edges = np.concatenate([np.zeros(1, dt), inner, np.ones(1, dt)])
    idx = np.searchsorted(inner, g, side="left")  # the number of inner edges below g
    weight = np.bincount(idx, w2, bins)
    sums = np.bincount(idx, w2 * g.astype(np.float64), bins)
    midpoint = (edges[:-1].astype(np.float64) + edges[1:]) / 2
    values = np.where(weight > 0, sums / np.where(weight > 0, weight, 1), midpoint)
    values = np.clip(np.maximum.accumulate(values.astype(dt)), 0, 1).astype(dt)
    return ScalingBinningCalibrator(
        _device(a), _device(b), _device(edges), _device(values), eps
    )


def _twin_scaling_binning_apply(calibrator: Any, y_prob: Any) -> jax.Array | None:
    """``ScalingBinningCalibrator.__call__`` on the host."""
    p = _floats(y_prob)
    a, b = _scalar(calibrator.a), _scalar(calibrator.b)
    edges, values = _vector(calibrator.edges), _vector(calibrator.values)
    if p is None or a is None or b is None or edges is None or values is None:
        return None
    if p.size == 0 or not _normal(p.reshape(-1), 0, 1):
        return None
    f = _host_logit(p, calibrator.eps)
    if f is None or not _normal(f):
        return None
    g = _host_platt_map(a, b, f, p.dtype)
    return _device(histogram_map(edges, values, g, side="left"))


@pytree_dataclass(data=("a", "b", "edges", "values"), meta=("eps",))
class ScalingBinningCalibrator:
    r"""Scaling-binning: Platt scaling :math:`g`, then the mean of :math:`g` per bin.

    Create it with :func:`fit_scaling_binning`. Calling it on probabilities ``p`` gives
    ``values[k]`` for the bin ``k`` with :math:`e_k < g(p) \le e_{k+1}` (the first bin
    also holds :math:`g(p) = 0`).

    Attributes
    ----------
    a, b : Array, scalar
        Platt's parameters of :math:`g(p) = 1 / (1 + \exp(A\,\mathrm{logit}(p) + B))`
        (as in :class:`PlattCalibrator` with ``input="prob"``).
    edges : Array [B + 1]
        Bin edges on the scale of :math:`g`: 0, the ``B - 1`` equal-mass edges, 1
        (nondecreasing; a repeated edge is an empty bin that no value reaches).
    values : Array [B]
        Calibrated probability per bin, nondecreasing: the mean of :math:`g` over the
        binning observations in the bin (an empty bin: the midpoint of its edges).
    eps : float or None
        Probabilities are clipped to ``[eps, 1 - eps]`` before the logit when set.
    """

    a: jax.Array
    b: jax.Array
    edges: jax.Array
    values: jax.Array
    eps: float | None = None

    def _map(self, p: jax.Array) -> jax.Array:  # validated p
        return _scaling_binning_map(
            self.a, self.b, self.edges, self.values, p, eps=self.eps
        )

    @_v.validated  # checks fold into NaN under jit/vmap
    @host_first(_twin_scaling_binning_apply)
    def __call__(self, y_prob: Any) -> jax.Array:
        """Calibrated probabilities: one of the ``B`` bin values per input."""
        p = _scores(y_prob, "y_prob", probabilities=True)
        _no_infinite_logits(p, "y_prob", self.eps, "scaling-binning (Platt on log-odds)")
        params = (self.a, self.b, self.edges, self.values)
        return newton.apply_bucketed(_scaling_binning_apply, params, p, eps=self.eps)

    def calibration_error(
        self, y_true: Any, y_prob: Any, *, debias: bool = True
    ) -> jax.Array:
        r"""Kumar et al.'s estimate of this calibrator's L2 calibration error.

        Bins held-out ``(y_true, y_prob)`` by the calibrated value (one bin per value,
        :math:`B` at most) and returns
        ``expected_calibration_error(y_true, self(y_prob), bins=..., norm="l2",
        debias=debias)``: with ``debias=True`` the debiased estimate of Kumar, Liang &
        Ma (2019, Def. 5.2), whose error is :math:`O(\sqrt{B/n})` smaller than the
        plug-in's for a binned model. Use data not used to fit the calibrator.

        Parameters
        ----------
        y_true : array_like, shape [N]
            Binary labels, 0 or 1, of an evaluation set.
        y_prob : array_like, shape [N]
            The uncalibrated probabilities of that set (the calibrator is applied here).
        debias : bool, default True
            The debiased estimator; False gives the plug-in :math:`\mathrm{ECE}_2`.

        Returns
        -------
        Array, scalar

        Examples
        --------
        >>> import numpy as np
        >>> from bayescal.classification import fit_scaling_binning
        >>> r = np.random.default_rng(0)
        >>> p = r.uniform(0.05, 0.95, 400)
        >>> y = (r.uniform(size=400) < p).astype(int)
        >>> cal = fit_scaling_binning(y[:200], p[:200], bins=5)
        >>> float(cal.calibration_error(y[200:], p[200:])) < 0.1
        True
        """
        from bayescal.classification._metrics import expected_calibration_error

        if not isinstance(debias, bool):
            raise TypeError(f"debias must be a bool; got {debias!r}.")
        q = self(y_prob)
        # bin k = [v_k, v_{k+1}) holds exactly the outputs equal to v_k (the values are
        # nondecreasing; a repeated value is an empty bin): binning by output value
        values = self.values.astype(q.dtype)
        edges = jnp.concatenate([values, jnp.maximum(values[-1:], jnp.ones((1,), q.dtype))])
        return expected_calibration_error(y_true, q, bins=edges, norm="l2", debias=debias)


@host_first(_twin_fit_scaling_binning)
def fit_scaling_binning(
    y_true: Any,
    y_prob: Any,
    *,
    bins: int = 10,
    split: float | None = 0.5,
    soft_labels: bool = False,
    eps: float | None = None,
    weights: Any = None,
) -> ScalingBinningCalibrator:
    r"""Fit the scaling-binning calibrator of Kumar, Liang & Ma (2019).

    Parameters
    ----------
    y_true : array_like, shape [N]
        Binary labels, 0 or 1.
    y_prob : array_like, shape [N]
        Predicted probabilities, in [0, 1].
    bins : int, default 10
        Number :math:`B` of equal-mass bins.
    split : float in (0, 1) or None, default 0.5
        Fraction of the observations, the first :math:`m = \lfloor \text{split}
        \cdot N \rfloor` in the order given, that fit the scaling function; the other
        :math:`N - m` build the bins and their values (the paper's two data sets;
        shuffle first if the order means something). ``None`` uses all observations
        for every step, as ``PlattBinnerCalibrator`` of the authors' package
        ``uncertainty-calibration`` does.
    soft_labels : bool, default False
        Platt's target smoothing for the scaling step (see :func:`fit_platt`); the
        default fits the 0/1 labels, as the authors' package does.
    eps : float in (0, 0.5), optional
        Clip probabilities to ``[eps, 1 - eps]`` before the logit (at fit and call
        time). Without it, probabilities of exactly 0 or 1 raise an error.
    weights : array_like, shape [N], optional
        Observation weights (scikit-learn's ``sample_weight``): they multiply the
        Platt log-likelihood terms, the bins hold equal weight and a bin's value is
        the weighted mean, so an integer weight equals repeating the row and a weight
        of 0 removes it (``split`` counts rows, not weight). Finite, ``>= 0``.

    Returns
    -------
    ScalingBinningCalibrator
        Parameters in ``y_prob``'s dtype; its :meth:`~ScalingBinningCalibrator.calibration_error`
        gives the paper's debiased estimate of the calibration error on held-out data.

    Notes
    -----
    The three steps of Kumar et al. (2019, Sec. 4):

    1. *Function fitting*: Platt scaling :math:`g(p) = \sigma(\beta\,\mathrm{logit}(p)
       + c)` on the first part (the shared Newton solver, as :func:`fit_platt`).
    2. *Binning*: sort :math:`g` over the second part, split it into :math:`B`
       consecutive groups of (nearly) equal size as ``np.array_split`` does (the first
       :math:`N_2 \bmod B` one larger), and put edge :math:`e_k` halfway between the
       last value of group :math:`k` and the first of group :math:`k + 1`;
       :math:`e_0 = 0`, :math:`e_B = 1`. With weights, group boundaries fall at
       cumulative weights :math:`k q + \min(k, r)`, :math:`W = qB + r`.
    3. *Discretisation*: the value of bin :math:`k` is the mean of :math:`g` over the
       second part's observations in :math:`(e_{k-1}, e_k]`.

    The output takes at most :math:`B` values, so its calibration error can be
    estimated (and verified) from held-out data with the debiased estimator, unlike a
    scaling method's; and it keeps much of the scaling method's sample efficiency
    (Kumar et al., Thm. 4.1). Against ``uncertainty-calibration`` 0.1.4 (``split=None``,
    ``PlattBinnerCalibrator``): the same edges, values and outputs to float64
    rounding on the data of ``tests/test_scaling_binning.py``. Needs at least
    :math:`B` binning observations of positive weight, and both classes among the
    scaling ones. ``jax.jit`` and ``jax.vmap`` work; there invalid values give NaN
    parameters.

    References
    ----------
    Kumar, A., Liang, P. and Ma, T. (2019). Verified uncertainty calibration.
    *NeurIPS 32*.

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.classification import fit_scaling_binning
    >>> r = np.random.default_rng(0)
    >>> p = r.uniform(0.05, 0.95, 200)
    >>> y = (r.uniform(size=200) < p ** 2).astype(int)
    >>> cal = fit_scaling_binning(y, p, bins=4)
    >>> cal.values.shape, len(set(np.asarray(cal(p)).tolist())) <= 4
    ((4,), True)
    """
    num_bins = _v.check_num_bins(bins, "bins")
    if split is not None:
        if isinstance(split, bool) or not isinstance(split, int | float):
            raise TypeError(f"split must be a float in (0, 1) or None; got {split!r}.")
        if not (0 < split < 1) or not math.isfinite(split):
            raise ValueError(
                f"split must lie in (0, 1) (the fraction of observations that fit the "
                f"scaling function) or be None (all of them for every step); got {split!r}."
            )
        split = float(split)
    if not isinstance(soft_labels, bool):
        raise TypeError(f"soft_labels must be a bool; got {soft_labels!r}.")
    eps = check_eps(eps)
    cal, converged = newton.bucketed_fit(
        _fit_scaling_binning,
        (y_true, y_prob, weights),
        dict(num_bins=num_bins, split=split, soft_labels=soft_labels, eps=eps),
    )
    if _v.is_concrete(converged) and not bool(converged):
        _warn_not_converged("fit_scaling_binning")
    return cal


def _fit_scaling_binning(y_true, y_prob, weights, n, *, num_bins, split, soft_labels, eps):
    y, p = binary_inputs(y_true, y_prob)
    _no_infinite_logits(p, "y_prob", eps, "scaling-binning (Platt on log-odds)")
    dtype = p.dtype
    size = p.shape[0]
    w = newton.observation_weights(weights, n, size, dtype)
    if w is None:
        w = jnp.ones((size,), dtype)
    count = size if n is None else n
    if split is None:
        w1 = w2 = w
    else:
        m = jnp.floor(split * jnp.asarray(count, dtype)).astype(jnp.int32)
        first = jnp.arange(size) < m
        zero = jnp.zeros((), dtype)
        w1, w2 = jnp.where(first, w, zero), jnp.where(first, zero, w)
    positive = y > 0.5
    n_pos = jnp.sum(jnp.where(positive, w1, 0))
    n_neg = jnp.sum(jnp.where(positive, 0, w1))
    part = "the scaling part (the first split * N observations)" if split else "y_true"
    _v.record(
        "less_equal",
        "y_true",
        (n_pos <= 0) | (n_neg <= 0),
        False,
        what=(
            f"must hold both classes (with positive weight) in {part}; Platt scaling "
            "needs examples of each. Use more data, or shuffle it before the split"
        ),
    )
    _v.record(
        "less_equal",
        "bins",
        jnp.sum(w2 > 0) < num_bins,
        False,
        what=(
            f"({num_bins}) must not exceed the number of binning observations of "
            "positive weight in y_true and y_prob (the last N - floor(split * N), or "
            "all N with split=None); use fewer bins or more data"
        ),
    )
    f = _logit(p, eps)
    theta, converged = _logistic_fit((f,), y, w1, None, None, soft_labels=soft_labels)
    a, b = -theta[0], -theta[1]
    g = _platt_map(a, b, p, use_logit=True, eps=eps)
    edges, values = _equal_mass_bins(g, w2, num_bins)
    return ScalingBinningCalibrator(a, b, edges, values, eps), converged


def _equal_mass_bins(g: jax.Array, w: jax.Array, num_bins: int):
    """Kumar et al.'s equal-mass edges of ``g`` (weights ``w``) and the bin means.

    Written with comparisons and sums over ``[N, B]`` (no gather, search or scatter):
    one small fusion each, which compiles several times faster on CPU.
    """
    dtype = g.dtype
    gs, ws = jax.lax.sort((g, w), num_keys=1)
    cw = jnp.cumsum(ws)
    total = cw[-1]
    q = jnp.floor(total / num_bins)
    r = total - q * num_bins
    k = jnp.arange(1, num_bins, dtype=dtype)
    boundary = k * q + jnp.minimum(k, r)  # group k ends before this cumulative weight
    big = jnp.asarray(jnp.inf, dtype)

    # the sorted values at (0-based) positions boundary - 1 and boundary of the weighted
    # sample: the first gs whose cumulative weight exceeds the position (one reduction)
    position = jnp.concatenate([boundary - 1, boundary])
    at = jnp.min(jnp.where(cw[None, :] > position[:, None], gs[None, :], big), axis=1)
    inner = (at[: num_bins - 1] + at[num_bins - 1 :]) / 2
    edges = jnp.concatenate([jnp.zeros((1,), dtype), inner, jnp.ones((1,), dtype)])
    # bin of g: the number of inner edges below it (Kumar et al.'s bisect_left)
    idx = jnp.sum(g[:, None] > inner[None, :], axis=1)
    onehot = idx[:, None] == jnp.arange(num_bins)  # [N, B]
    both = jnp.sum(jnp.where(onehot[None], jnp.stack([w * g, w])[:, :, None], 0), axis=1)
    sums, weight = both[0], both[1]
    midpoint = (edges[:-1] + edges[1:]) / 2
    values = jnp.where(weight > 0, sums / jnp.where(weight > 0, weight, 1), midpoint)
    # means lie in their bins, so they are nondecreasing up to rounding: keep them so
    values = jnp.clip(jax.lax.cummax(values), 0, 1).astype(dtype)
    return edges, values
