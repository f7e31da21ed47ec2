"""Anytime-valid monitoring: ``pit_martingale`` and ``calibration_martingale``.

References:
- crepes 0.9, ``martingales.SimpleJumper(J, EpsilonBettingFunction(E)).apply(p)`` and
  ``.apply(p, c=...)`` (the first index at or above ``c``): equal martingale values
  and alarm on the same p-values (Vovk, Gammerman & Shafer 2022, Alg. 8.1).
- The same recursion written out in NumPy for the binary residuals ``y - p``.
- Ville's inequality: under the null the alarm at ``1 / level`` fires with
  probability at most ``level`` by every horizon; checked over 1,000 simulated
  streams within 3 binomial standard errors, at several horizons. Detection under a
  drift: the median delay over 200 streams.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from bayescal import classification as clf
from bayescal import regression as reg
from tests.conftest import X64

DT = np.float64 if X64 else np.float32
RTOL = 1e-10 if X64 else 2e-5
#: log M_t is a sum of T logarithms: float32 rounding grows like T * 6e-8
LOG_ATOL = 1e-10 if X64 else 2e-4


def _jumper(z, eps, jump):
    """Simple Jumper in NumPy float64: the total capital after each step."""
    eps = np.asarray(eps, np.float64)
    c = np.full(eps.size, 1 / eps.size)
    out = []
    for zt in np.asarray(z, np.float64):
        c = c * (1 + eps * zt)
        total = c.sum()
        out.append(total)
        c = (1 - jump) * c + jump / eps.size * total
    return np.array(out)


@pytest.mark.parametrize("jump", [0.01, 0.2])
def test_pit_martingale_equals_crepes_simple_jumper(jump):
    from crepes.martingales import EpsilonBettingFunction, SimpleJumper

    r = np.random.default_rng(0)
    p = np.r_[r.uniform(size=300), r.uniform(size=300) ** 2]
    ref = SimpleJumper(J=jump, bf=EpsilonBettingFunction()).apply(p)
    got = reg.pit_martingale(p.astype(DT), jump=jump, level=0.01)
    np.testing.assert_allclose(np.asarray(got.log_values), np.log(ref), atol=LOG_ATOL)
    np.testing.assert_allclose(np.asarray(got.values), ref, rtol=2 * LOG_ATOL)
    index = SimpleJumper(J=jump, bf=EpsilonBettingFunction()).apply(p, c=100)
    assert 300 < index < 600 and int(got.alarm) == index
    custom = reg.pit_martingale(p.astype(DT), epsilons=(-1.5, 1.5), jump=jump)
    ref = SimpleJumper(J=jump, bf=EpsilonBettingFunction(E=[-1.5, 1.5])).apply(p)
    np.testing.assert_allclose(np.asarray(custom.log_values), np.log(ref), atol=LOG_ATOL)


def test_calibration_martingale_equals_the_recursion():
    r = np.random.default_rng(1)
    p = r.uniform(0.05, 0.95, 800)
    y = (r.uniform(size=800) < p ** 0.8).astype(int)
    got = clf.calibration_martingale(y, p.astype(DT), jump=0.05)
    ref = _jumper(y - p, (-1, -0.5, 0.5, 1), 0.05)
    np.testing.assert_allclose(np.asarray(got.log_values), np.log(ref), atol=LOG_ATOL)


def _alarm_rates(alarms, horizons):
    return [float(np.mean(alarms < h)) for h in horizons]


def test_type_one_error_at_every_horizon():
    # 1,000 null streams of 1,000 steps each: by every horizon, the share of streams
    # that alarmed is at most level + 3 binomial standard errors (Ville)
    reps, t, level = 1000, 1000, 0.05
    r = np.random.default_rng(2)
    horizons = (50, 200, 500, 1000)
    bound = level + 3 * math.sqrt(level * (1 - level) / reps)
    u = r.uniform(size=(reps, t)).astype(DT)
    alarms = np.asarray(jax.vmap(lambda x: reg.pit_martingale(x, level=level).alarm)(u))
    assert max(_alarm_rates(alarms, horizons)) <= bound, _alarm_rates(alarms, horizons)
    p = r.uniform(0.05, 0.95, size=(reps, t))
    y = (r.uniform(size=(reps, t)) < p).astype(DT)
    alarms = np.asarray(
        jax.vmap(lambda a, b: clf.calibration_martingale(a, b, level=level).alarm)(
            y, p.astype(DT)
        )
    )
    assert max(_alarm_rates(alarms, horizons)) <= bound, _alarm_rates(alarms, horizons)


def test_detection_delay_under_drift():
    # 200 streams: calibrated for 300 steps, then PIT values u**2 (a model whose
    # predictions drifted above the data; median delay below 150 steps) or labels from
    # 0.6 p (below 300 steps), and few streams alarm before the change
    reps, change, t = 200, 300, 1000
    r = np.random.default_rng(3)
    u = r.uniform(size=(reps, t))
    u[:, change:] **= 2
    alarms = np.asarray(jax.vmap(lambda x: reg.pit_martingale(x).alarm)(u.astype(DT)))
    assert np.mean(alarms < change) <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps)
    late = alarms[alarms >= change] - change
    assert np.median(late) < 150, np.median(late)
    p = r.uniform(0.2, 0.8, size=(reps, t))
    truth = np.where(np.arange(t) < change, p, 0.6 * p)
    y = (r.uniform(size=(reps, t)) < truth).astype(DT)
    alarms = np.asarray(
        jax.vmap(lambda a, b: clf.calibration_martingale(a, b).alarm)(y, p.astype(DT))
    )
    assert np.median(alarms[alarms >= change] - change) < 300


def test_jit_equals_eager_and_vmap_equals_loop():
    r = np.random.default_rng(4)
    u = r.uniform(size=(3, 400)).astype(DT)
    eager = reg.pit_martingale(u[0])
    traced = jax.jit(reg.pit_martingale)(u[0])
    np.testing.assert_allclose(np.asarray(traced.values), np.asarray(eager.values), rtol=RTOL)
    assert int(traced.alarm) == int(eager.alarm)
    batch = jax.vmap(reg.pit_martingale)(u)
    for i in range(3):
        one = reg.pit_martingale(u[i])
        np.testing.assert_allclose(np.asarray(batch.values[i]), np.asarray(one.values), rtol=RTOL)
        assert int(batch.alarm[i]) == int(one.alarm)


def test_bad_input_raises_naming_the_argument():
    u = np.linspace(0.01, 0.99, 50)
    with pytest.raises(ValueError, match="pit"):
        reg.pit_martingale(u + 1)
    with pytest.raises(ValueError, match="epsilons"):
        reg.pit_martingale(u, epsilons=(-2.5, 1))
    with pytest.raises(ValueError, match="epsilons"):
        reg.pit_martingale(u, epsilons=())
    with pytest.raises(ValueError, match="jump"):
        reg.pit_martingale(u, jump=1.0)
    with pytest.raises(ValueError, match="level"):
        reg.pit_martingale(u, level=0.0)
    y = (u > 0.5).astype(int)
    with pytest.raises(ValueError, match="epsilons"):
        clf.calibration_martingale(y, u, epsilons=(1.5,))
    with pytest.raises(ValueError, match="y_true"):
        clf.calibration_martingale(y + 1, u)
    with pytest.raises(ValueError, match="y_prob"):
        clf.calibration_martingale(y, u + 1)
    with pytest.raises(ValueError, match="y_prob"):
        clf.calibration_martingale(y, u[:-1])


# --------------------------------------------------------------------------- exchangeability
def test_conformal_p_values_equal_crepes_semi_online():
    from crepes.martingales import semi_online_p_values

    r = np.random.default_rng(5)
    a = np.round(r.normal(size=1500), 1)  # ties: the equal-score term counts
    ref = semi_online_p_values(a, seed=11)
    tau = np.random.RandomState(11).rand(a.size)  # crepes' draws (np.random.seed)
    got = reg.conformal_p_values(a.astype(DT), tau=tau.astype(DT))
    np.testing.assert_allclose(np.asarray(got), ref, rtol=RTOL, atol=1e-6)
    drawn = reg.conformal_p_values(a.astype(DT), key=3)
    again = reg.conformal_p_values(a.astype(DT), key=jax.random.key(3))
    np.testing.assert_array_equal(np.asarray(drawn), np.asarray(again))


def test_conformal_test_martingale_size_and_power():
    # exchangeable scores: the conformal test martingale alarms in at most
    # level + 3 SE of 400 streams; scores whose scale doubles at t = 200: it alarms
    reps, t, level = 400, 400, 0.05
    r = np.random.default_rng(6)
    keys = jax.random.split(jax.random.key(0), reps)

    def alarm(scores, key):
        return reg.pit_martingale(reg.conformal_p_values(scores, key=key), level=level).alarm

    null = np.abs(r.normal(size=(reps, t))).astype(DT)
    alarms = np.asarray(jax.vmap(alarm)(null, keys))
    assert np.mean(alarms < t) <= level + 3 * math.sqrt(level * (1 - level) / reps)
    shifted = null.copy()
    shifted[:, 200:] *= 2
    alarms = np.asarray(jax.vmap(alarm)(shifted, keys))
    assert np.mean(alarms < t) > 0.8


def test_conformal_p_values_bad_input():
    with pytest.raises(ValueError, match="exactly one of key"):
        reg.conformal_p_values(np.ones(5))
    with pytest.raises(ValueError, match="exactly one of key"):
        reg.conformal_p_values(np.ones(5), key=0, tau=np.ones(5))
    with pytest.raises(ValueError, match="scores"):
        reg.conformal_p_values(np.array([1.0, np.nan]), key=0)
    with pytest.raises(ValueError, match="tau"):
        reg.conformal_p_values(np.ones(5), tau=np.full(5, 2.0))
