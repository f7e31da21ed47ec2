"""Anytime-valid monitoring of PIT values (issue "Conformal beyond the split", item 6)."""

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

__all__ = ["MartingaleResult", "pit_martingale"]

_EPSILONS = (-1.0, -0.5, 0.0, 0.5, 1.0)


def pit_martingale(
    pit: ArrayLike,
    *,
    epsilons: Sequence[float] = _EPSILONS,
    jump: float = 0.01,
    level: float = 0.05,
) -> MartingaleResult:
    r"""A test martingale of PIT uniformity over a stream: monitoring, anytime-valid.

    Vovk's Simple Jumper on PIT values as they arrive: accounts bet the factor
    :math:`1 + \epsilon (u_t - 1/2)` on each new value (a density on [0, 1] for
    :math:`|\epsilon| < 2`, so its expectation is 1 when :math:`u_t` is uniform), and
    a fraction ``jump`` of the capital is spread over the accounts after each step.
    Under calibration (independent uniform PIT values, e.g. conformal p-values or the
    PIT of a calibrated model on new data) the total :math:`M_t` is a test martingale
    and :math:`P(\sup_t M_t \ge 1/\text{level}) \le \text{level}` (Ville's
    inequality): the alarm may be checked after every batch, forever, at that error
    rate. It grows where the PIT values drift to one side (a biased model: too many
    observations above or below their predictions).

    Parameters
    ----------
    pit : array_like, shape [T]
        PIT values in [0, 1], in time order (from :func:`pit_normal`, :func:`pit_draws`
        with a key, or a conformal predictive system's ``pit(key=...)``).
    epsilons : sequence of float in (-2, 2), default (-1, -0.5, 0, 0.5, 1)
        The accounts' bets (negative ones win on small PIT values).
    jump : float in (0, 1), default 0.01
        The jumping rate.
    level : float in (0, 1), default 0.05
        The error rate of the alarm.

    Returns
    -------
    MartingaleResult
        ``(values, log_values, alarm)``: :math:`M_t` and :math:`\log M_t` per step and
        the first step where :math:`M_t \ge 1/\text{level}` (``T`` if none).

    See Also
    --------
    bayescal.classification.calibration_martingale : The same for binary probabilities.
    pit_null_test : A fixed-sample test of PIT uniformity.

    References
    ----------
    Vovk, Gammerman & Shafer (2022), "Algorithmic Learning in a Random World", 2nd ed.,
    Alg. 8.1 (Simple Jumper); Vovk, Petej, Nouretdinov, Ahlberg, Carlsson & Gammerman
    (2021), "Retrain or not retrain: conformal test martingales for change-point
    detection", COPA. crepes' ``SimpleJumper`` (the reference of the tests).

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.regression import pit_martingale
    >>> rng = np.random.default_rng(0)
    >>> calibrated = pit_martingale(rng.uniform(size=500))
    >>> int(calibrated.alarm)  # no alarm: T
    500
    >>> drifting = pit_martingale(np.r_[rng.uniform(size=200), rng.uniform(size=300) ** 3])
    >>> 200 < int(drifting.alarm) < 500
    True
    """
    eps = check_epsilons(epsilons, 2.0)
    jump = check_jump(jump)
    level = _v.check_level(level)
    return _pit_martingale(pit, epsilons=eps, jump=jump, level=level)


@_v.validated(fuse=True, bucket={"pit": -1}, per_observation=-1)
def _pit_martingale(pit, *, epsilons, jump, level):
    u = _v.check_pit(pit)
    return simple_jumper(u - 0.5, epsilons, jump, level, _v.observation_count(u))
