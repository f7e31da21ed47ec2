"""Anytime-valid monitoring of PIT values (issue "Conformal beyond the split", item 6)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from bayescal._src import validation as _v
from bayescal._src.martingale import (
    MartingaleResult,
    check_epsilons,
    check_jump,
    simple_jumper,
)
from bayescal._src.resampling import check_key

__all__ = ["MartingaleResult", "conformal_p_values", "pit_martingale"]

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


#: Rows of the comparison matrix per block of :func:`conformal_p_values` (memory
#: ``_BLOCK * T`` booleans).
_BLOCK = 512


def conformal_p_values(
    scores: ArrayLike, *, key: Any = None, tau: ArrayLike | None = None
) -> jax.Array:
    r"""Semi-online conformal p-values of a stream of nonconformity scores.

    Each score is ranked among those before it (Vovk, Gammerman & Shafer 2022,
    2nd ed., p. 111):

    .. math:: p_t = \frac{\#\{s < t: a_s > a_t\} + \tau_t\,(1 + \#\{s < t: a_s = a_t\})}{t},
              \qquad t = 1, 2, \dots

    On exchangeable data the smoothed p-values (:math:`\tau_t` uniform) are
    independent and uniform on [0, 1], so :func:`pit_martingale` on them is a
    conformal test martingale: its alarm tests exchangeability itself (a change
    point, a drift), anytime-valid.

    Parameters
    ----------
    scores : array_like, shape [T]
        Nonconformity scores in time order (e.g. absolute residuals ``|y - loc|``).
    key : jax.random.PRNGKey or int, optional
        Draws the :math:`\tau_t` (``jax.random.uniform``).
    tau : array_like, shape [T], optional
        Or the :math:`\tau_t` themselves, in [0, 1] (e.g. to reproduce another
        library's draws; ``tau=1`` everywhere gives the conservative p-values). Give
        exactly one of ``key`` and ``tau``.

    Returns
    -------
    Array, shape [T]

    See Also
    --------
    pit_martingale : The test martingale on these p-values.

    References
    ----------
    Vovk, Gammerman & Shafer (2022), "Algorithmic Learning in a Random World", 2nd ed.
    crepes' ``semi_online_p_values`` (the reference of the tests).

    Examples
    --------
    >>> import numpy as np
    >>> from bayescal.regression import conformal_p_values
    >>> p = conformal_p_values(np.array([3.0, 1.0, 2.0, 5.0]), tau=np.ones(4))
    >>> [round(v, 4) for v in p.tolist()]  # (#{earlier larger} + 1) / t
    [1.0, 1.0, 0.6667, 0.25]
    """
    if (key is None) == (tau is None):
        raise ValueError(
            "give exactly one of key (the randomized p-values, drawn in JAX) and tau "
            "(your own uniform draws, shape [T])."
        )
    return _conformal_p_values(scores, key=None if key is None else check_key(key), tau=tau)


@_v.validated(fuse=True, bucket={"scores": -1, "tau": -1}, per_observation=-1)
def _conformal_p_values(scores, *, key=None, tau=None):
    a = _v.as_float_array(scores, "scores")
    _v.check_ndim(a, "scores", 1)
    _v.check_nonempty(a, "scores")
    _v.check_finite(a, "scores")
    n = a.shape[-1]
    if tau is None:
        theta = jax.random.uniform(key, (n,), dtype=a.dtype)
    else:
        theta = _v.as_float_array(tau, "tau").astype(a.dtype)
        _v.check_same_shape(scores=a, tau=theta)
        _v.check_in_unit_interval(theta, "tau", "draws")
    block = min(_BLOCK, n)
    pad = -n % block
    rows = jnp.pad(a, (0, pad)).reshape(-1, block)
    index = jnp.arange(n + pad).reshape(-1, block)
    earlier = jnp.arange(n)

    def counts(args):
        values, at = args
        before = earlier[None, :] < at[:, None]  # [block, T]: s < t
        greater = jnp.sum(before & (a[None, :] > values[:, None]), axis=-1)
        equal = jnp.sum(before & (a[None, :] == values[:, None]), axis=-1)
        return greater, equal

    greater, equal = jax.lax.map(counts, (rows, index))
    greater, equal = greater.reshape(-1)[:n], equal.reshape(-1)[:n]
    t = jnp.arange(1, n + 1, dtype=a.dtype)
    return (greater.astype(a.dtype) + theta * (1 + equal.astype(a.dtype))) / t
