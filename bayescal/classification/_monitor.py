"""Anytime-valid monitoring of binary probabilities (issue "Conformal beyond the split", item 6)."""

from __future__ import annotations

from collections.abc import Sequence

from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.martingale import (
    MartingaleResult,
    check_epsilons,
    check_jump,
    simple_jumper,
)

__all__ = ["calibration_martingale"]

_EPSILONS = (-1.0, -0.5, 0.5, 1.0)


def calibration_martingale(
    y_true: ArrayLike,
    y_prob: ArrayLike,
    *,
    epsilons: Sequence[float] = _EPSILONS,
    jump: float = 0.01,
    level: float = 0.05,
) -> MartingaleResult:
    r"""A test martingale of calibration over a stream of binary predictions.

    Vovk's Simple Jumper on the residuals :math:`y_t - p_t`: accounts bet the factor
    :math:`1 + \epsilon (y_t - p_t)` (nonnegative for :math:`|\epsilon| \le 1`), whose
    expectation given :math:`p_t` is 1 when :math:`P(y_t = 1 \mid p_t) = p_t`. Under
    calibration the total :math:`M_t` is a test martingale, so
    :math:`P(\sup_t M_t \ge 1/\text{level}) \le \text{level}` at every horizon
    (Ville's inequality): monitor a deployed classifier batch by batch. It grows where
    the labels run above (``epsilon > 0``) or below (``epsilon < 0``) the predicted
    probabilities.

    Parameters
    ----------
    y_true : array_like, shape [T]
        Binary labels (0 or 1), in time order.
    y_prob : array_like, shape [T]
        The predicted probabilities of class 1 made before each label was seen.
    epsilons : sequence of float in [-1, 1], default (-1, -0.5, 0.5, 1)
        The accounts' bets.
    jump : float in (0, 1), default 0.01
        The jumping rate.
    level : float in (0, 1), default 0.05
        The error rate of the alarm.

    Returns
    -------
    MartingaleResult
        ``(values, log_values, alarm)``.

    See Also
    --------
    bayescal.regression.pit_martingale : The same for PIT values.
    cumulative_calibration_test : A fixed-sample test on the same residuals.

    References
    ----------
    Vovk, Gammerman & Shafer (2022), "Algorithmic Learning in a Random World", 2nd ed.,
    Alg. 8.1; Shafer & Vovk (2019), "Game-Theoretic Foundations for Probability and
    Finance" (testing forecasts by betting).

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.classification import calibration_martingale
    >>> rng = np.random.default_rng(0)
    >>> p = rng.uniform(0.1, 0.9, size=2000)
    >>> y = (rng.uniform(size=2000) < p).astype(int)
    >>> int(calibration_martingale(y, p).alarm)  # calibrated: no alarm
    2000
    >>> int(calibration_martingale(y, 0.7 * p).alarm) < 2000  # under-predicting
    True
    """
    eps = check_epsilons(epsilons, 1.0 + 1e-12)
    jump = check_jump(jump)
    level = _v.check_level(level)
    return _calibration_martingale(y_true, y_prob, epsilons=eps, jump=jump, level=level)


@_v.validated(fuse=True, bucket={"y_true": -1, "y_prob": -1}, per_observation=-1)
def _calibration_martingale(y_true, y_prob, *, epsilons, jump, level):
    p = _v.as_float_array(y_prob, "y_prob")
    _v.check_ndim(p, "y_prob", 1)
    _v.check_nonempty(p, "y_prob")
    _v.check_in_unit_interval(p, "y_prob", "probabilities")
    y = _v.as_float_array(y_true, "y_true")
    _v.check_same_shape(y_true=y, y_prob=p)
    _v.check_binary_labels(y, "y_true")
    return simple_jumper(y.astype(p.dtype) - p, epsilons, jump, level, _v.observation_count(p))
